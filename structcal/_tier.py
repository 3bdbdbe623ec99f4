"""Which implementation runs a computation: NumPy for small work, Numba kernels for the rest.

A kernel costs time before its first result in a process: importing Numba, setting up
its compiler and loading the compiled kernel from the on-disk cache take about 1 s even
when the cache is warm, and a first run after install compiles it (seconds per kernel).
A small job (tens of sentences, a few hundred events) is done by NumPy in milliseconds
(``benchmarks/bench_numpy_tier.py``). The chain inference
functions, the k-NN region maps and the shift test's permutation statistics therefore
run in NumPy when their work, counted in elementary steps, is at most
:data:`SMALL_WORK`, and in the kernels otherwise. Both give the same results: labels,
neighbours and test statistics identical, probabilities equal up to rounding.

Chain inference, lexicon lookups and isotonic fits between
:data:`SMALL_WORK` and :data:`LARGE_WORK` follow a rent-or-buy rule: they run in the
kernels when these are already compiled on this machine (their
entry in the on-disk cache), and otherwise in NumPy, billing the estimated NumPy time to
a file in the cache folder of this install, until the bill, summed over processes,
reaches :data:`RENT_SECONDS` (about half of what compiling the chain kernels costs);
then the kernels are compiled, and every later process finds them cached. A first run
therefore never pays a compilation that more than about doubles its time, and a machine
that keeps doing such work buys the kernels once NumPy has cost about as much.

Small work of these paths runs in NumPy until the process has spent :data:`LOAD_SECONDS`
(estimated) in NumPy on it, about what importing Numba and loading cached kernels costs;
from then on it runs in the kernels if they are cached, or if the install's bill (to which
such processes add their NumPy seconds) has reached :data:`RENT_SECONDS`. A one-off job
(a CLI call, a script) never loads Numba for small work; a service or a loop that keeps
calling does, after its first second or so of NumPy work. Where the process has
imported Numba already (for other work), what remains to pay is less: loading the first
kernel from the cache (:data:`FIRST_LOAD_SECONDS`), or, once a kernel is loaded, one more
(:data:`KERNEL_LOAD_SECONDS`).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

__all__ = ["SMALL_WORK", "LARGE_WORK", "TINY_WORK", "LOAD_SECONDS", "shared_seconds_per_step",
           "kbest_seconds_per_step", "numpy_tier", "current", "bill", "kernel_compiled",
           "forced_tier", "LazyModule"]

#: Largest work (elementary steps) done in NumPy; past it the kernels run. Near it NumPy
#: takes about a tenth of a second (chain inference at 1.35e6 steps: 0.06-0.09 s in
#: ``benchmarks/bench_numpy_tier.py``).
SMALL_WORK = 2_000_000
#: Past this work (chain inference: about 0.4 s in NumPy) the kernels always run.
LARGE_WORK = 10_000_000
#: NumPy seconds per step of chain inference (``benchmarks/bench_numpy_tier.py``), used
#: to bill work between SMALL_WORK and LARGE_WORK
SECONDS_PER_STEP = 4e-8


def shared_seconds_per_step(K: int) -> float:
    """NumPy seconds per step (token x K x K) of chain inference on a batch sharing one
    pairwise matrix, whose sum-product pass is one matrix product per position: a cost per
    token plus one per step, fit to ``benchmarks/bench_numpy_tier.py`` (20,000 tokens:
    0.025-0.033 s at K = 5, 0.050-0.069 s at K = 13, 0.096-0.097 s at K = 26 in two runs;
    the rate errs on the high side, by up to 30%). SMALL_WORK and LARGE_WORK scale with the
    rate: the thresholds are NumPy seconds."""
    return 7e-9 + 1.5e-6 / max(K, 1) ** 2


def kbest_seconds_per_step(K: int, k: int) -> float:
    """NumPy seconds per step (token x K x K x k) of k-best lists, for k <= 8 (rounds of
    argmax over each state's candidates): a constant plus a term in ``1 / K**2``, fit to
    timings of batches of 25,000 tokens (k = 2, 3 and 8, shared and
    per-edge matrices; per step 2.1-3.4e-8 at K = 5, 1.1-1.5e-8 at K = 13, 0.7-1.2e-8 at
    K = 26; the rate errs on the high side). Past k = 8 the NumPy path sorts the
    candidates: the default rate."""
    if k > 8:
        return SECONDS_PER_STEP
    return 1.2e-8 + 6e-7 / max(K, 1) ** 2


#: NumPy seconds (summed over the processes of an install) spent on such work before the
#: kernels are compiled instead (compiling the chain inference kernels takes 15-20 s on
#: a 2-CPU machine, ``benchmarks/bench_startup.py --cold``)
RENT_SECONDS = 10.0
_ready = set()

#: NumPy seconds (estimated with the paths' step rates, summed over this process) spent on
#: small work of paths with a kernel, after which their small work runs in the kernels
#: (if cached, or once the install's bill has paid for compiling them): importing Numba
#: and loading a first cached kernel takes 0.39 s on a 2-CPU machine
#: (``benchmarks/bench_kernel_load.py``) and 0.55-0.62 s on a slower one
#: (``benchmarks/bench_startup.py``), another kernel milliseconds more
LOAD_SECONDS = 1.0
#: The same, in a process that has imported Numba but loaded no kernel yet: loading the
#: first cached kernel sets up Numba's code generation (0.25 s on a 2-CPU machine,
#: ``benchmarks/bench_kernel_load.py``)
FIRST_LOAD_SECONDS = 0.3
#: The same, once this process has loaded or compiled a kernel: loading another cached
#: kernel takes milliseconds (4 ms)
KERNEL_LOAD_SECONDS = 0.03
# whether this process has loaded or compiled a kernel (set by structcal._numba)
_kernel_loaded = [False]
#: Below this work (under a millisecond in NumPy) a path stays in NumPy whatever the
#: process has spent: loading one more cached kernel would cost more
TINY_WORK = 20_000
# this process's NumPy seconds on such work, the part of them billed to the install, and
# the install's bill as last read
_process_bill = [0.0, 0.0, 0.0]

_TIERS = ("auto", "numpy", "kernels")
_forced = [os.environ.get("STRUCTCAL_TIER", "auto")]


def numpy_tier(work, kernel: str | None = None, seconds_per_step: float = SECONDS_PER_STEP,
               large_work: float | None = None) -> bool:
    """Whether work of this size runs in NumPy (rather than in the Numba kernels).

    ``kernel`` (e.g. ``"inference/_chain.infer_batch"``, a kernel's module path under the
    package and its name) opts into the rent-or-buy rule between :data:`SMALL_WORK` and
    :data:`LARGE_WORK` (module notes); without it the kernels run past SMALL_WORK.
    ``seconds_per_step`` is NumPy's time per step on this path: work is counted in steps
    of :data:`SECONDS_PER_STEP`, so a path that NumPy does faster stays in NumPy longer.
    ``large_work`` replaces :data:`LARGE_WORK` for a path whose kernels cost more to
    compile than the chain kernels' share of :data:`RENT_SECONDS`. Small work of a path
    with a ``kernel`` runs in NumPy until this process has spent :data:`LOAD_SECONDS` on
    such work, then in the kernel if it is cached (module notes).
    """
    work = work * (seconds_per_step / SECONDS_PER_STEP)
    tier = current()
    if tier != "auto":
        return tier == "numpy"
    if work <= SMALL_WORK:
        return (kernel is None or work < TINY_WORK
                or _rent_small(work * SECONDS_PER_STEP, kernel))
    if kernel is None or work > (LARGE_WORK if large_work is None else large_work) or (
            kernel_compiled(kernel)):
        return False
    return bill(work * SECONDS_PER_STEP) < RENT_SECONDS


def _rent_small(seconds: float, kernel: str) -> bool:
    """Whether small work of a path with a kernel runs in NumPy (:func:`numpy_tier`).

    In NumPy until this process has spent :data:`LOAD_SECONDS` on such work (less where
    Numba is imported already: :func:`_load_seconds`); then in the kernel if it is cached,
    or if this install's bill has paid for compiling it. The process's NumPy seconds are
    added to the install's bill each time they pass another :data:`LOAD_SECONDS` (one file
    write per second or so of NumPy work, none in a short job).
    """
    spent, billed, install = _process_bill
    if spent >= _load_seconds() and (install >= RENT_SECONDS or kernel_compiled(kernel)):
        return False
    spent += seconds
    if spent - billed >= LOAD_SECONDS:
        install = bill(spent - billed) + spent - billed
        billed = spent
    _process_bill[:] = spent, billed, install
    return True


def _numba_imported() -> bool:
    return "numba" in sys.modules


def _load_seconds() -> float:
    """What running small work in a cached kernel still costs this process, in seconds:
    :data:`LOAD_SECONDS` before Numba is imported, :data:`FIRST_LOAD_SECONDS` before a
    kernel is loaded, :data:`KERNEL_LOAD_SECONDS` after."""
    if not _numba_imported():
        return LOAD_SECONDS
    return KERNEL_LOAD_SECONDS if _kernel_loaded[0] else FIRST_LOAD_SECONDS


def current() -> str:
    """The tier in force: ``'auto'``, or the one forced (:func:`forced_tier`, or the
    ``STRUCTCAL_TIER`` environment variable)."""
    tier = _forced[-1]
    if tier not in _TIERS:  # only the environment can put an unknown name here
        from .exceptions import ParameterError

        raise ParameterError(f"STRUCTCAL_TIER must be one of {list(_TIERS)}; got {tier!r}")
    return tier


def bill(seconds: float, name: str = "numpy_rent_seconds") -> float:
    """Add ``seconds`` to this install's bill ``name`` (a file in its cache folder) and
    return the bill before them; a bill that cannot be read counts from 0, and 0 seconds
    only read it."""
    from ._cache import cache_dir

    path = cache_dir() / "bills" / name
    try:
        total = float(path.read_text())
    except (OSError, ValueError):
        total = 0.0
    if seconds:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(repr(total + seconds))
        except OSError:
            pass
    return total


def kernel_compiled(kernel: str) -> bool:
    """Whether the on-disk cache of this install holds ``kernel`` (``"<module path>.<name>"``
    relative to the package, e.g. ``"inference/_chain.infer_batch"``), read from the file
    names only: Numba is not imported."""
    if kernel in _ready:
        return True
    from ._cache import cache_dir

    folder, _, name = kernel.rpartition("/")
    try:
        found = any((cache_dir() / folder).glob(f"{name}-*.nbi"))
    except OSError:
        found = False
    if found:
        _ready.add(kernel)
    return found


@contextmanager
def forced_tier(tier: str):
    """Run the block with every computation in one tier: ``'numpy'``, ``'kernels'`` or
    ``'auto'`` (used by the tests that compare the tiers, and by warm-up)."""
    if tier not in _TIERS:
        from .exceptions import ParameterError

        raise ParameterError(f"`tier` must be one of {list(_TIERS)}; got {tier!r}")
    _forced.append(tier)
    try:
        yield
    finally:
        _forced.pop()


class LazyModule:
    """A module imported on its first attribute access.

    The kernel modules import Numba; the modules that call them hold them this way, so
    that a run which stays in NumPy never imports Numba.
    """

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            from importlib import import_module

            self._module = import_module(self._name)
        return getattr(self._module, attr)
