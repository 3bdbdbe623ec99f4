"""Checks of fitted state read from a file (private; used by :mod:`structcal._state`).

A saved model's JSON manifest is not covered by the ``.npz`` checksum, and neither can
be trusted: a file may be edited, truncated or written by a buggy program. Every class
that the generic codec rebuilds is checked after it is built, before anyone uses it:
the shapes, types, ranges, finiteness and consistency of what it read. A class says what
must hold in a ``_check_loaded(self)`` method that calls the helpers here; the codec
turns the :class:`LoadCheckError` they raise into a
:class:`~structcal.exceptions.ParameterError` naming the file.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["LoadCheckError", "array", "integer", "number", "probability_array", "one_of"]


class LoadCheckError(ValueError):
    """Loaded state breaks an invariant (the message says which)."""


def _fail(msg):
    raise LoadCheckError(msg)


def array(obj, name, *, ndim=None, shape=None, kind="f", finite=True, low=None, high=None):
    """``getattr(obj, name)`` as an array checked for ndim/shape/dtype kind/range."""
    if not hasattr(obj, name):
        _fail(f"{type(obj).__name__} lacks {name}")
    a = getattr(obj, name)
    if not isinstance(a, np.ndarray):
        _fail(f"{type(obj).__name__}.{name} must be an array; got {type(a).__name__}")
    if ndim is not None and a.ndim != ndim:
        _fail(f"{type(obj).__name__}.{name} must be {ndim}-d; got shape {a.shape}")
    if shape is not None:
        want = tuple(shape)
        if len(want) != a.ndim or any(w is not None and w != g for w, g in zip(want, a.shape)):
            _fail(f"{type(obj).__name__}.{name} must have shape {want}; got {a.shape}")
    if kind is not None and a.dtype.kind not in kind:
        _fail(f"{type(obj).__name__}.{name} must have dtype kind {kind!r}; got {a.dtype}")
    if a.size and a.dtype.kind in "fiub":
        if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
            _fail(f"{type(obj).__name__}.{name} holds NaN or infinite values")
        if low is not None and np.nanmin(a) < low:
            _fail(f"{type(obj).__name__}.{name} holds values below {low}")
        if high is not None and np.nanmax(a) > high:
            _fail(f"{type(obj).__name__}.{name} holds values above {high}")
    return a


def probability_array(obj, name, **kw):
    """An array of probabilities (finite, in [0, 1])."""
    return array(obj, name, low=0.0, high=1.0, **kw)


def integer(obj, name, *, low=None, high=None):
    """``getattr(obj, name)`` as a Python int within ``[low, high]``."""
    if not hasattr(obj, name):
        _fail(f"{type(obj).__name__} lacks {name}")
    v = getattr(obj, name)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        _fail(f"{type(obj).__name__}.{name} must be an integer; got {v!r}")
    v = int(v)
    if (low is not None and v < low) or (high is not None and v > high):
        _fail(f"{type(obj).__name__}.{name} = {v} is outside [{low}, {high}]")
    return v


def number(obj, name, *, low=None, high=None, optional=False):
    """``getattr(obj, name)`` as a finite float within ``[low, high]`` (None if optional)."""
    if not hasattr(obj, name):
        _fail(f"{type(obj).__name__} lacks {name}")
    v = getattr(obj, name)
    if v is None and optional:
        return None
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not np.isfinite(v):
        _fail(f"{type(obj).__name__}.{name} must be a finite number; got {v!r}")
    v = float(v)
    if (low is not None and v < low) or (high is not None and v > high):
        _fail(f"{type(obj).__name__}.{name} = {v} is outside [{low}, {high}]")
    return v


def one_of(obj, name, options):
    """``getattr(obj, name)``, which must be one of ``options``."""
    v = getattr(obj, name, None)
    if v not in options:
        _fail(f"{type(obj).__name__}.{name} must be one of {list(options)}; got {v!r}")
    return v
