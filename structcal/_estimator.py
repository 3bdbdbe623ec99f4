"""A scikit-learn style parameter protocol without importing scikit-learn.

Importing :mod:`sklearn.base` costs about 0.6 s (it pulls in scipy.stats), which
``from structcal import StructuredRecalibrator`` should not pay before anything is
fitted. :class:`ParamsMixin` gives the part of ``sklearn.base.BaseEstimator`` that
structcal's structured estimators use: ``get_params``/``set_params`` following the same
conventions (constructor arguments, nested ``component__param`` names), so
``sklearn.base.clone`` and grid searches accept them, and a repr that lists the
parameters that differ from their defaults.
"""

from __future__ import annotations

import inspect

from .exceptions import ParameterError

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``/``set_params``/``__repr__`` as in scikit-learn's ``BaseEstimator``."""

    @classmethod
    def _get_param_names(cls):
        signature = inspect.signature(cls.__init__)
        return sorted(
            name for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep=True):
        """Get the parameters of this estimator.

        Parameters
        ----------
        deep : bool, default=True
            Also return the parameters of contained estimators (``name__param``).

        Returns
        -------
        dict
            Parameter names mapped to their values.
        """
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set the parameters of this estimator (``name__param`` for nested ones).

        Parameters
        ----------
        **params : dict
            Parameter names mapped to new values.

        Returns
        -------
        self
        """
        valid = self.get_params(deep=True)
        nested = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ParameterError(
                    f"invalid parameter {name!r} for {type(self).__name__}; "
                    f"valid parameters: {self._get_param_names()}"
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
                valid[name] = value
        for name, sub_params in nested.items():
            valid[name].set_params(**sub_params)
        return self

    def __repr__(self):
        signature = inspect.signature(type(self).__init__)
        changed = []
        for name in self._get_param_names():
            default = signature.parameters[name].default
            value = getattr(self, name)
            if value is default:
                continue
            try:
                same = bool(value == default)
            except Exception:  # arrays and other values without a plain truth value
                same = False
            if not same:
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"
