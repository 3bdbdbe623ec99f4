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

from numba import njit, prange

__all__ = ["kernel", "parallel_kernel", "prange"]


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
