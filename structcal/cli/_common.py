"""Options every ``structcal`` command shares."""

from __future__ import annotations

import argparse

__all__ = ["add_common_options"]


def add_common_options(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """Add ``-q/--quiet`` (no progress messages on stderr; results still on stdout).

    On the top-level parser it has a default; on a command's parser it has none, so that
    ``structcal --quiet demo ocr`` and ``structcal demo ocr --quiet`` both work.
    """
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="print no progress messages on stderr (results still go to stdout)",
    )
