"""Boundary checks shared by every public function.

Each checker converts its argument once (C-contiguous ``float64`` or ``int64``) and raises
:class:`~structcal.exceptions.ParameterError` (a ``ValueError``) or
:class:`~structcal.exceptions.ParameterTypeError` (a ``TypeError``) with a message that
names the argument, says what was expected and what was received. Kernels trust what
these return.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = [
    "as_float_array",
    "as_int_array",
    "as_bool_array",
    "check_offsets",
    "check_int",
    "check_float",
    "check_option",
    "check_random_state",
    "as_ids",
    "as_numeric",
    "as_probabilities",
    "describe",
]


def issparse(x) -> bool:
    """``scipy.sparse.issparse(x)``, without importing SciPy's sparse module: nothing can
    be a sparse matrix before that module is imported."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and module.issparse(x)


def describe(value) -> str:
    """Short description of ``value`` for error messages."""
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of length {len(value)}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _to_array(x, name):
    if isinstance(x, np.ndarray):
        return x
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists and the like
        raise ParameterTypeError(
            f"`{name}` must be array-like of numbers; got {describe(x)} ({exc})"
        ) from None
    return arr


def _check_ndim_shape(arr, name, ndim, shape):
    if ndim is not None and arr.ndim != ndim:
        raise ParameterError(
            f"`{name}` must be a {ndim}-d array; got {arr.ndim}-d array of shape {arr.shape}"
        )
    if shape is not None:
        if arr.ndim != len(shape):
            raise ParameterError(
                f"`{name}` must be a {len(shape)}-d array; got {arr.ndim}-d array of shape "
                f"{arr.shape}"
            )
        for axis, (want, got) in enumerate(zip(shape, arr.shape)):
            if want is not None and want != got:
                parts = ["?" if s is None else str(s) for s in shape]
                expected = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
                raise ParameterError(
                    f"`{name}` must have shape {expected}; got {arr.shape} "
                    f"(mismatch on axis {axis})"
                )


#: Largest magnitude of a finite log-potential (2**1000, about 1.07e301). Inference keeps
#: every message within a few times the potentials' magnitude, so below this bound no sum
#: it forms can overflow float64 (largest 1.8e308) unless a single chain has millions of
#: tokens; above it, the potentials are rejected with a clear error.
MAX_LOG_POTENTIAL = 2.0**1000


def as_float_array(
    x,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple | None = None,
    allow_neginf: bool = False,
    allow_empty: bool = True,
    max_abs: float | None = None,
) -> np.ndarray:
    """Return ``x`` as a C-contiguous ``float64`` array after checking it.

    Parameters
    ----------
    x : array-like
        The value to check.
    name : str
        Argument name used in error messages.
    ndim : int, optional
        Required number of dimensions.
    shape : tuple of int or None, optional
        Required shape; ``None`` entries are free.
    allow_neginf : bool, default=False
        Whether ``-inf`` entries are allowed (log-potentials use ``-inf`` for
        "forbidden"). NaN and ``+inf`` are always rejected.
    allow_empty : bool, default=True
        Whether an array with no elements is allowed.
    max_abs : float, optional
        Largest magnitude allowed for a finite entry (log-potentials:
        :data:`MAX_LOG_POTENTIAL`).

    Returns
    -------
    ndarray of float64
    """
    arr = _to_array(x, name)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or arr.dtype == np.bool_
    ):
        raise ParameterTypeError(
            f"`{name}` must hold real numbers; got {describe(arr)}"
        )
    _check_ndim_shape(arr, name, ndim, shape)
    if not allow_empty and arr.size == 0:
        raise ParameterError(f"`{name}` must not be empty; got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.size:
        hi, lo = arr.max(), arr.min()  # NaN propagates into both
        if np.isnan(hi) or np.isnan(lo):
            where = np.argwhere(np.isnan(arr))[0]
            raise ParameterError(
                f"`{name}` must not contain NaN; found NaN at index {tuple(int(i) for i in where)}"
            )
        if hi == np.inf:
            where = np.argwhere(np.isposinf(arr))[0]
            raise ParameterError(
                f"`{name}` must not contain +inf; found +inf at index "
                f"{tuple(int(i) for i in where)}"
            )
        if lo == -np.inf and not allow_neginf:
            where = np.argwhere(np.isneginf(arr))[0]
            raise ParameterError(
                f"`{name}` must be finite; found -inf at index {tuple(int(i) for i in where)}"
            )
        if max_abs is not None and (hi > max_abs or lo < -max_abs):
            big = (np.abs(arr) > max_abs) & np.isfinite(arr)
            if big.any():
                where = np.argwhere(big)[0]
                raise ParameterError(
                    f"`{name}` has an entry of magnitude {float(arr[tuple(where)]):.3g} at index "
                    f"{tuple(int(i) for i in where)}; finite log-potentials must be at most "
                    f"{max_abs:.3g} in magnitude (use -inf for a forbidden label, and rescale "
                    "scores this large)"
                )
    return arr


def as_int_array(
    x,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple | None = None,
    low: int | None = None,
    high: int | None = None,
    allow_empty: bool = True,
) -> np.ndarray:
    """Return ``x`` as a C-contiguous ``int64`` array after checking it.

    Float arrays are rejected (even with integral values): labels and indices must be
    integers, nothing is rounded.

    Parameters
    ----------
    x : array-like
        The value to check.
    name : str
        Argument name used in error messages.
    ndim : int, optional
        Required number of dimensions.
    shape : tuple of int or None, optional
        Required shape; ``None`` entries are free.
    low, high : int, optional
        Inclusive lower bound and exclusive upper bound on every entry.
    allow_empty : bool, default=True
        Whether an array with no elements is allowed.

    Returns
    -------
    ndarray of int64
    """
    arr = _to_array(x, name)
    if arr.size == 0 and arr.dtype == np.float64 and not isinstance(x, np.ndarray):
        arr = arr.astype(np.int64)  # np.asarray([]) is float64; an empty list is fine
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        hint = ""
        if arr.dtype.kind in "USO":
            hint = (" (strings such as tag names must first be turned into label indices, "
                    "e.g. with TagScheme(tag_names).encode(tags))")
        elif arr.dtype.kind == "f":
            hint = (" (floats are not rounded: convert integral values explicitly, e.g. "
                    "with .astype(np.int64))")
        raise ParameterTypeError(f"`{name}` must be an integer array; got {describe(arr)}{hint}")
    _check_ndim_shape(arr, name, ndim, shape)
    if not allow_empty and arr.size == 0:
        raise ParameterError(f"`{name}` must not be empty; got shape {arr.shape}")
    if arr.size:
        if low is not None and arr.min() < low:
            idx = tuple(int(i) for i in np.argwhere(arr < low)[0])
            raise ParameterError(
                f"`{name}` entries must be >= {low}; got {arr[idx]} at index {idx}"
            )
        if high is not None and arr.max() >= high:
            idx = tuple(int(i) for i in np.argwhere(arr >= high)[0])
            raise ParameterError(
                f"`{name}` entries must be < {high}; got {arr[idx]} at index {idx}"
            )
    return np.ascontiguousarray(arr, dtype=np.int64)


def as_bool_array(x, name: str, *, ndim: int | None = None, shape: tuple | None = None):
    """Return ``x`` as a C-contiguous boolean array (``bool`` or 0/1 integers accepted)."""
    arr = _to_array(x, name)
    if arr.dtype != np.bool_:
        if np.issubdtype(arr.dtype, np.integer) and arr.size and not np.isin(arr, (0, 1)).all():
            raise ParameterError(f"`{name}` must hold booleans or 0/1; got other integers")
        if not (np.issubdtype(arr.dtype, np.integer) or (arr.size == 0)):
            raise ParameterTypeError(f"`{name}` must be a boolean array; got {describe(arr)}")
    _check_ndim_shape(arr, name, ndim, shape)
    return np.ascontiguousarray(arr, dtype=np.bool_)


def check_offsets(offsets, name: str, n_rows: int) -> np.ndarray:
    """Check CSR-style offsets: 1-d int, starts at 0, non-decreasing, ends at ``n_rows``."""
    arr = as_int_array(offsets, name, ndim=1)
    if arr.shape[0] < 1:
        raise ParameterError(f"`{name}` must have at least one entry (0); got an empty array")
    if arr[0] != 0:
        raise ParameterError(f"`{name}` must start at 0; got {arr[0]}")
    steps = np.diff(arr)
    if (steps < 0).any():
        i = int(np.argmax(steps < 0))
        raise ParameterError(
            f"`{name}` must be non-decreasing; got {name}[{i}]={arr[i]} > "
            f"{name}[{i + 1}]={arr[i + 1]}"
        )
    if arr[-1] != n_rows:
        raise ParameterError(
            f"`{name}` must end at the number of rows ({n_rows}); got {arr[-1]}"
        )
    return arr


def check_csr_graph(indptr, indices, n_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Check CSR neighbour lists: ``indptr`` (n_nodes + 1 offsets into ``indices``) and
    ``indices`` (node ids in ``0..n_nodes - 1``). ``n_nodes`` defaults to ``len(indptr) - 1``.
    Kernels index with these arrays unchecked, so a bad graph must stop here."""
    indices = as_int_array(indices, "indices", ndim=1)
    indptr = check_offsets(indptr, "indptr", indices.shape[0])
    n = indptr.shape[0] - 1 if n_nodes is None else int(n_nodes)
    if indptr.shape[0] != n + 1:
        raise ParameterError(f"`indptr` must have one entry per node plus one ({n + 1}); got "
                             f"{indptr.shape[0]}")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        bad = int(np.argmax((indices < 0) | (indices >= n)))
        raise ParameterError(f"`indices` must hold node ids in 0..{n - 1}; got "
                             f"indices[{bad}]={indices[bad]}")
    return indptr, indices


def nodes_outside_items(nodes, items, item_offsets) -> np.ndarray:
    """Mask of the ``nodes`` that are not nodes of their ``items`` (item ``i`` owns the
    global nodes ``item_offsets[i]:item_offsets[i + 1]``)."""
    return (nodes < item_offsets[items]) | (nodes >= item_offsets[items + 1])


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Check an integer scalar in ``[low, high]`` (inclusive) and return it as ``int``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"`{name}` must be an integer; got {describe(value)}")
    value = int(value)
    if low is not None and value < low:
        raise ParameterError(f"`{name}` must be >= {low}; got {value}")
    if high is not None and value > high:
        raise ParameterError(f"`{name}` must be <= {high}; got {value}")
    return value


def check_float(
    value,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Check a finite real scalar within bounds and return it as ``float``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"`{name}` must be a real number; got {describe(value)}")
    value = float(value)
    if not np.isfinite(value):
        raise ParameterError(f"`{name}` must be finite; got {value}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ParameterError(f"`{name}` must be {op} {low}; got {value}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ParameterError(f"`{name}` must be {op} {high}; got {value}")
    return value


def check_option(value, name: str, options) -> str:
    """Check that ``value`` is one of ``options`` (strings)."""
    if not isinstance(value, str) or value not in options:
        raise ParameterError(
            f"`{name}` must be one of {sorted(options)}; got {describe(value)}"
        )
    return value


def check_random_state(seed) -> np.random.Generator:
    """Turn ``None``, an int or a Generator into a :class:`numpy.random.Generator`."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.RandomState):
        return np.random.default_rng(seed.randint(0, 2**31 - 1))
    raise ParameterTypeError(
        f"`random_state` must be None, an int or a numpy Generator; got {describe(seed)}"
    )


def as_ids(ids, name: str, n: int, what: str = "one per row", *, unique: bool = False):
    """Check an array of ids (group, document, image ids) of shape ``(n,)``.

    Ids are any numbers or strings but NaN; ``unique=True`` also refuses repeated ids
    (ids that index something). Returns the array (not recoded).
    """
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise ParameterTypeError(f"`{name}` must be a sequence of ids ({what}); got "
                                 f"{describe(ids)}")
    g = _to_array(ids, name)
    if g.shape != (n,):
        raise ParameterError(f"`{name}` must have shape ({n},) ({what}); got shape {g.shape}")
    if g.dtype.kind == "f" and not np.isfinite(g).all():
        raise ParameterError(f"`{name}` holds NaN or infinite ids")
    if g.dtype == object:
        vals = g.tolist()
        if any(isinstance(v, float) and v != v for v in vals):
            raise ParameterError(f"`{name}` holds NaN ids")
        if not all(isinstance(v, (str, numbers.Number, np.generic)) for v in vals):
            raise ParameterTypeError(f"`{name}` must hold numbers or strings")
    if g.dtype.kind not in "biufUSO":
        raise ParameterTypeError(f"`{name}` must hold numbers or strings; got dtype {g.dtype}")
    if unique and g.size:
        uniq, counts = np.unique(g.astype(str) if g.dtype == object else g, return_counts=True)
        if (counts > 1).any():
            raise ParameterError(f"`{name}` repeats ids (e.g. {uniq[counts > 1][:3].tolist()}): "
                                 "each id must appear once")
    return g


def as_probabilities(x, name: str, *, ndim: int | None = 1, shape: tuple | None = None):
    """Check an array of probabilities: finite ``float64`` values in [0, 1]."""
    a = as_float_array(x, name, ndim=ndim, shape=shape)
    if a.size and (a.min() < 0.0 or a.max() > 1.0):
        raise ParameterError(f"`{name}` must hold probabilities in [0, 1]; got values in "
                             f"[{a.min():.4g}, {a.max():.4g}]")
    return a


def as_numeric(x, name: str) -> np.ndarray:
    """``x`` as a ``float64`` array of numbers (bool, int or float; NaN and infinities kept
    for the caller to judge). Strings, even numeric ones, and objects are refused."""
    arr = _to_array(x, name)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating)
                                   or np.issubdtype(arr.dtype, np.integer)
                                   or arr.dtype == np.bool_):
        raise ParameterTypeError(f"`{name}` must hold numbers; got {describe(x)}")
    return np.asarray(arr, dtype=np.float64)
