"""What every ``structcal`` command shares: its parser's frame, ``--quiet`` and progress."""

from __future__ import annotations

import argparse
import functools
import textwrap

__all__ = ["add_common_options", "command_parser", "finish_parser", "is_verbose", "say",
           "reported"]

#: Said in the description of every data command.
PROGRESS = ("Progress (loading, inference, a first run's JIT compilation, fitting, writing) "
            "goes to stderr, silenced by -q/--quiet; results go to stdout or the output file.")


def add_common_options(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """Add ``-q/--quiet`` (no progress messages on stderr; results still on stdout).

    On the top-level parser it has a default; on a command's parser it has none, so that
    ``structcal --quiet demo ocr`` and ``structcal demo ocr --quiet`` both work.
    """
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="print no progress messages or notes on stderr (results still go to stdout; "
             "warnings that concern the results, one line each, and errors still appear)",
    )


def command_parser(sub, name, *, help, description, epilog, data_help, model=False):
    """The parser of a command on a data file (``fit``; ``apply``/``evaluate`` with ``model``).

    The description ends with :data:`PROGRESS`. Positional arguments: ``model`` (a
    recalibrator saved by ``structcal fit``) when ``model``, then ``data``. The command
    adds its own options, then calls :func:`finish_parser`.
    """
    p = sub.add_parser(name, help=help, description=textwrap.fill(f"{description} {PROGRESS}", 88),
                       epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    if model:
        p.add_argument("model", help="recalibrator saved by `structcal fit` "
                                     "(MODEL, MODEL.npz or MODEL.json)")
    p.add_argument("data", help=data_help)
    return p


def finish_parser(p, run) -> None:
    """The options every data command takes after its own (input, inference, ``--quiet``)."""
    from ._options import add_inference_options

    add_inference_options(p)
    add_common_options(p)
    p.set_defaults(run=run)


def is_verbose(args) -> bool:
    """Whether to report progress on stderr (no ``--quiet``)."""
    return not getattr(args, "quiet", False)


def say(args, text) -> None:
    """One progress line on stderr (``structcal: text``) unless ``--quiet``."""
    from .._progress import message

    message(text, is_verbose(args))


def reported(run):
    """Decorate a command's ``run(args)``: its steps run under the Numba compile monitor.

    Unless ``--quiet``, a first run says on stderr when kernels start compiling, and at
    the end how long it took. Nothing is added when the command fails: the error stays
    the last line.
    """
    from .._progress import compile_monitor

    @functools.wraps(run)
    def wrapper(args):
        with compile_monitor(is_verbose(args)) as jit:
            code = run(args)
        if jit.compiled:
            say(args, f"JIT compilation took {jit.seconds:.1f} s ({jit.n_compiled} kernel "
                      "signatures, now in the on-disk cache)")
        return code

    return wrapper
