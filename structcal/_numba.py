"""JIT policy for every Numba kernel in structcal, in one place.

``kernel``
    ``njit(cache=True, error_model="numpy", nogil=True)``. Serial kernels are cached on
    disk so a new process does not recompile them. ``error_model="numpy"`` makes division
    by zero give ``inf``/``nan`` like NumPy instead of raising. No ``fastmath``: kernels
    meet ``-inf`` (forbidden labels) and fastmath assumes finite values.
``parallel_kernel``
    ``njit(parallel=True, cache=False, error_model="numpy")``. Drivers that ``prange``
    over independent problems. They are *not* cached: cached parallel code has crashed
    when the thread count changes between processes (numba#7518, pynndescent#175,
    numba#4807 is still open). They stay small and call cached serial kernels, so
    compiling them is quick.

Rules for kernels (see STYLE.md §9.5): no ``njit`` inside functions, no closures over
runtime values, no jitted callables passed as arguments, configuration through arguments
rather than module globals, nothing compiled at import time. After editing a kernel that
another module calls, clear the cache (``NUMBA_CACHE_DIR`` or ``__pycache__``): Numba's
cache invalidation does not see changes in other files.
"""

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

__all__ = ["kernel", "parallel_kernel", "batch_kernel", "BatchKernel", "prange", "exp_nonpositive"]

#: Below this many units of work (e.g. tokens) a batch runs on the calling thread: waking
#: the thread pool costs more than it saves, and on a busy machine it can cost much more.
PARALLEL_MIN_WORK = 4096


def kernel(func=None, **overrides):
    """Compile ``func`` as a cached, serial, nopython kernel.

    Parameters
    ----------
    func : callable, optional
        The Python function to compile. When omitted, returns a decorator.
    **overrides
        Options passed to :func:`numba.njit` in place of the defaults.
    """
    options = {"cache": True, "error_model": "numpy", "nogil": True}
    options.update(overrides)
    if func is None:
        return njit(**options)
    return njit(**options)(func)


def parallel_kernel(func=None, **overrides):
    """Compile ``func`` as an uncached parallel driver (``prange`` over problems).

    Parameters
    ----------
    func : callable, optional
        The Python function to compile. When omitted, returns a decorator.
    **overrides
        Options passed to :func:`numba.njit` in place of the defaults.
    """
    options = {"parallel": True, "cache": False, "error_model": "numpy", "nogil": True}
    options.update(overrides)
    if func is None:
        return njit(**options)
    return njit(**options)(func)


class BatchKernel:
    """A batch driver compiled twice from one Python function: ``prange`` in parallel
    (uncached, see the module notes) and as a plain serial loop (cached).

    Call it with the kernel's arguments plus ``work=`` (a size such as the number of
    tokens): batches smaller than :data:`PARALLEL_MIN_WORK` run serially.
    """

    def __init__(self, func):
        self.py_func = func
        self.parallel = parallel_kernel(func)
        self.serial = kernel(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__

    def __call__(self, *args, work):
        if work >= PARALLEL_MIN_WORK:
            return self.parallel(*args)
        return self.serial(*args)


def batch_kernel(func):
    """Decorate a batch driver that loops with ``prange``: see :class:`BatchKernel`."""
    return BatchKernel(func)


@intrinsic
def _int64_bits_as_float64(typingctx, bits):
    """Reinterpret the bits of an int64 as a float64 (an LLVM bitcast)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@kernel
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` (including ``-inf``), in a form LLVM can vectorise.

    Kernels only ever exponentiate shifted log-potentials (``x - max``), so the argument
    is never positive. ``math.exp`` compiles to a scalar libm call (about 3 ns); this
    version (Cody-Waite range reduction, degree-12 Taylor polynomial, exponent built by
    bit manipulation) vectorises inside loops and runs at about 0.8 ns per value, with a
    relative error below 5e-16. Results below ``exp(-708)`` (about 3e-308) are returned as
    exactly 0, so ``exp_nonpositive(-inf) == 0``.
    """
    xc = max(x, -708.0)
    n = math.floor(xc * 1.4426950408889634 + 0.5)
    r = (xc - n * 0.693145751953125) - n * 1.42860682030941723212e-6
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.6666666666666666e-01 + r * (
        4.1666666666666664e-02 + r * (8.3333333333333332e-03 + r * (
            1.3888888888888889e-03 + r * (1.9841269841269841e-04 + r * (
                2.4801587301587302e-05 + r * (2.7557319223985893e-06 + r * (
                    2.7557319223985888e-07 + r * (2.5052108385441720e-08 + r * (
                        2.0876756987868100e-09))))))))))))
    y = p * _int64_bits_as_float64((np.int64(n) + 1023) << 52)
    return y if x >= -708.0 else 0.0
