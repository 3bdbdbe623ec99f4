"""Command-line interface: ``structcal <command> ...``.

One module per command (``fit.py``, ``apply.py``, ``evaluate.py``, ``demo.py``); each
defines ``add_parser(subparsers)`` and ``run(args) -> int``. :func:`main` builds the
parser from them. Every command reports progress and notes on stderr (``-q/--quiet``:
none) and its results on stdout or the output file; warnings (the data look unlike the
recalibration data, probabilities of limited precision) are one line each on stderr,
even with ``-q``. Bad input (an unreadable or inconsistent file, a model from a newer
format version, an unknown option value) prints one line naming the file and the
problem on stderr and exits with code 2, having written nothing.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from . import apply, demo, evaluate, fit, warmup
from ._common import add_common_options
from ._files import InputError
from .demo import demo_ocr

__all__ = ["main", "demo_ocr"]

_COMMANDS = (fit, apply, evaluate, demo, warmup)


EPILOG = """\
typical use (see each command's --help for the input format and options):
  structcal fit recal.npz -o rec              fit a recalibrator (predictions + gold labels)
  structcal apply rec new.npz -o events.csv   calibrated probability of every event
  structcal evaluate rec test.npz -o report.html
  structcal demo ocr                          the shipped OCR example
  structcal warmup                            compile the kernels ahead of use (after install)
"""


def build_parser() -> argparse.ArgumentParser:
    """Build the ``structcal`` argument parser with every command's sub-parser."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="structcal",
        description="structcal: calibrated confidence for structured predictions.",
        epilog=EPILOG,
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
    from ..exceptions import StructcalError

    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message, category, filename, lineno, file=None, line=None):
        # one line per warning, without the library's source line; the shift warning's
        # advice in the terms of the command line
        text = getattr(message, "cli_text", None) or str(message)
        print(f"structcal {args.command}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        # a command prints the library's warnings (all UserWarnings), it does not raise them
        warnings.filterwarnings("default", category=UserWarning)
        warnings.showwarning = show
        try:
            return args.run(args)
        except (InputError, StructcalError) as exc:
            print(f"structcal {args.command}: error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
