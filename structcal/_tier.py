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
"""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["SMALL_WORK", "numpy_tier", "forced_tier", "LazyModule"]

#: Largest work (elementary steps) done in NumPy; past it the kernels run. Near it NumPy
#: takes about a tenth of a second (chain inference at 1.35e6 steps: 0.06-0.09 s in
#: ``benchmarks/bench_numpy_tier.py``).
SMALL_WORK = 2_000_000

_TIERS = ("auto", "numpy", "kernels")
_forced = [os.environ.get("STRUCTCAL_TIER", "auto")]


def numpy_tier(work) -> bool:
    """Whether work of this size runs in NumPy (rather than in the Numba kernels)."""
    tier = _forced[-1]
    if tier not in _TIERS:  # only the environment can put an unknown name here
        from .exceptions import ParameterError

        raise ParameterError(f"STRUCTCAL_TIER must be one of {list(_TIERS)}; got {tier!r}")
    if tier == "auto":
        return work <= SMALL_WORK
    return tier == "numpy"


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
