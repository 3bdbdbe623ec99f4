"""Progress messages on stderr for long steps, and detection of JIT compilation.

``tqdm`` draws the bars when it is installed (the optional ``progress`` extra: one small
pure-Python package with no dependencies of its own, the progress bar most of the
ecosystem already uses); without it the same steps print one plain line each. Nothing
is printed when ``verbose`` is false.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

__all__ = ["progress", "message", "compile_monitor"]


def message(text, verbose=True):
    """Print ``text`` on stderr (prefixed with ``structcal:``) when ``verbose``."""
    if verbose:
        print(f"structcal: {text}", file=sys.stderr, flush=True)


def progress(iterable, *, desc, total=None, verbose=True):
    """Iterate over ``iterable``, reporting progress on stderr when ``verbose``.

    Parameters
    ----------
    iterable : iterable
        The steps.
    desc : str
        What is being done (shown before the bar or the lines).
    total : int, optional
        Number of steps, when ``len(iterable)`` is not available.
    verbose : bool, default=True
        Whether to report anything.

    Yields
    ------
    object
        The items of ``iterable``, unchanged.
    """
    if not verbose:
        yield from iterable
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        yield from tqdm(iterable, desc=f"structcal: {desc}", total=total, file=sys.stderr,
                        leave=False, dynamic_ncols=True)
        return
    items = list(iterable)
    n = len(items)
    t0 = time.perf_counter()
    for i, item in enumerate(items):
        label = getattr(item, "name", None) or str(item)
        message(f"{desc} [{i + 1}/{n}] {label}")
        yield item
    message(f"{desc}: done in {time.perf_counter() - t0:.1f} s")


class CompileStats:
    """What :func:`compile_monitor` saw: ``n_compiled`` signatures in ``seconds``."""

    def __init__(self):
        self.n_compiled = 0
        self.seconds = 0.0

    @property
    def compiled(self):
        """Whether any kernel was compiled (rather than loaded from the cache)."""
        return self.n_compiled > 0


@contextmanager
def compile_monitor(verbose=True):
    """Watch Numba compile kernels inside the block; say so on stderr the first time.

    Kernels loaded from Numba's on-disk cache are not compilations and are not counted.

    Parameters
    ----------
    verbose : bool, default=True
        Print a line on stderr when the first compilation starts.

    Yields
    ------
    CompileStats
        Filled in as the block runs.
    """
    stats = CompileStats()
    entry = {"stats": stats, "verbose": verbose, "listener": None}
    _ACTIVE.append(entry)
    if "structcal._numba" in sys.modules:  # else attached when the kernels are imported
        _attach(entry)
    try:
        yield stats
    finally:
        _ACTIVE.remove(entry)
        if entry["listener"] is not None:
            from numba.core import event

            event.unregister("numba:compile", entry["listener"])


#: Monitors open in this process. Importing Numba costs about 0.3 s, which a run that
#: needs no kernel (a small job, see :mod:`structcal._tier`) should not pay for being
#: watched: a monitor attaches its listener when :mod:`structcal._numba` is imported
#: (:func:`attach_monitors`), or at once if it already is.
_ACTIVE: list = []


def attach_monitors():
    """Attach every open monitor to Numba's compile events (called by ``structcal._numba``)."""
    for entry in _ACTIVE:
        if entry["listener"] is None:
            _attach(entry)


def _attach(entry):
    from numba.core import event

    stats, verbose = entry["stats"], entry["verbose"]
    state = {"depth": 0, "t0": 0.0}

    class _Listener(event.Listener):
        def on_start(self, ev):
            if stats.n_compiled == 0:
                message("compiling Numba kernels (once per install: they are kept in an on-disk "
                        "cache) ...", verbose)
            stats.n_compiled += 1
            state["depth"] += 1
            if state["depth"] == 1:
                state["t0"] = time.perf_counter()

        def on_end(self, ev):
            state["depth"] -= 1
            if state["depth"] == 0:
                stats.seconds += time.perf_counter() - state["t0"]

    entry["listener"] = _Listener()
    event.register("numba:compile", entry["listener"])
