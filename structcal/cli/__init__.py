"""Command-line interface: ``structcal <command> ...``.

One module per command (``demo.py``, ...); each defines ``add_parser(subparsers)`` and
``run(args) -> int``. :func:`main` builds the parser from them.
"""

from __future__ import annotations

import argparse
import sys

from . import demo
from ._common import add_common_options
from .demo import demo_ocr

__all__ = ["main", "demo_ocr"]

_COMMANDS = (demo,)


def build_parser() -> argparse.ArgumentParser:
    """The ``structcal`` argument parser with every command's sub-parser."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="structcal",
        description="structcal: calibrated confidence for structured predictions.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"structcal {__version__}")
    add_common_options(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``structcal`` command."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
