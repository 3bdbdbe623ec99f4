"""Kernels run as plain Python, for work too small to be worth compiling (private).

A kernel's Python source is valid Python: :func:`interpreted` returns a copy of a kernel's
function whose calls to other kernels run their copies too, and whose calls to the scalar
intrinsics of :mod:`structcal._simd` and to :mod:`math` run Python stand-ins with the
compiled code's semantics:

- ``fma(a, b, c)``: ``a * b + c`` rounded once (exact integer arithmetic), as the
  fused instruction the kernels compile to on CPUs with FMA;
- ``pow2_rounded``, ``where_ge``: the same bit operations and selection;
- ``data_pointer(a)``: the flat view of the C-contiguous array ``a`` (indexed as the
  pointer is);
- ``math.log``/``math.exp``: the C library's functions, as in compiled code, with IEEE
  results where Python raises (``log(0) = -inf``, ``log(-1) = nan``, ``exp(1000) = inf``).

Array elements are NumPy scalars, so arithmetic on them follows NumPy (``x / 0`` is
``inf``); the copies run with NumPy's floating-point warnings off. The operations are the
kernels' own, in their order, so the results are the compiled kernels' bit for bit where
the CPU fuses ``fma`` (``tests/test_graph_interpreted.py`` compares every graph driver).
An iteration of mean field on a 6 x 6 grid with 3 labels takes about 4-9 ms this way
(:data:`structcal._numba.INTERPRET_SECONDS_PER_STEP`); compiling a graph driver takes
seconds (:class:`structcal._numba.BatchKernel` chooses, by a rent-or-buy
rule).

Kernels that use the vector intrinsics of :mod:`structcal._simd` (``vload``, ``f64x4``
arithmetic) cannot run this way; only drivers declared ``interpret=True`` are.
"""

from __future__ import annotations

import math
import struct
import types

import numpy as np

__all__ = ["interpreted"]


def _fma(a, b, c):
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    # exactly, as integers over a power of 2; Python rounds an int / int once
    na, da = a.as_integer_ratio()
    nb, db = b.as_integer_ratio()
    nc, dc = c.as_integer_ratio()
    d = max(da * db, dc)
    n = na * nb * (d // (da * db)) + nc * (d // dc)
    if n == 0:
        return a * b + c  # the sign of an exact zero, as IEEE gives it
    return n / d


def _pow2_rounded(t):
    bits = struct.unpack("<q", struct.pack("<d", float(t)))[0]
    return struct.unpack("<d", struct.pack("<Q", ((bits + 1023) << 52) & 0xFFFFFFFFFFFFFFFF))[0]


def _where_ge(x, threshold, a, b):
    return a if x >= threshold else b


def _flat(a):
    return a.reshape(-1)


def _log(x):
    x = float(x)
    if x > 0.0 or x != x:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


_MATH = types.SimpleNamespace(**{**{k: getattr(math, k) for k in dir(math)
                                    if not k.startswith("_")}, "log": _log, "exp": _exp})


def _stand_ins():
    from . import _simd

    return {id(_simd.fma): _fma, id(_simd.pow2_rounded): _pow2_rounded,
            id(_simd.where_ge): _where_ge, id(_simd.data_pointer): _flat, id(math): _MATH}


_copies = {}  # kernel function -> its copy
_names = {}  # id of a module's globals -> the globals its copies run with


def interpreted(kernel):
    """The plain-Python copy of ``kernel`` (a kernel, a batch kernel or its function)."""
    from numba.core.registry import CPUDispatcher

    from ._numba import BatchKernel

    func = kernel.py_func if isinstance(kernel, (CPUDispatcher, BatchKernel)) else kernel
    copy = _copies.get(func)
    if copy is None:
        copy = _copies[func] = types.FunctionType(
            func.__code__, _module_names(func.__globals__), func.__name__, func.__defaults__,
            func.__closure__)
    return copy


def _module_names(module):
    """The globals of the copies of a module's kernels: the module's own, with each kernel
    replaced by its copy and each intrinsic by its stand-in (one dict per module, made
    once; registered before it is filled, so kernels that call each other resolve)."""
    from numba.core.registry import CPUDispatcher

    from ._numba import BatchKernel

    names = _names.get(id(module))
    if names is None:
        names = _names[id(module)] = dict(module)
        stand_ins = _stand_ins()
        for name, value in module.items():
            if isinstance(value, (CPUDispatcher, BatchKernel)):
                names[name] = interpreted(value)
            elif id(value) in stand_ins:
                names[name] = stand_ins[id(value)]
    return names


def run(kernel, args):
    """Call the copy of ``kernel`` with ``args``, NumPy's warnings off."""
    with np.errstate(all="ignore"):
        return interpreted(kernel)(*args)
