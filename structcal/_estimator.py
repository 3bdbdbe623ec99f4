"""scikit-learn's estimator protocol without importing scikit-learn.

Importing :mod:`sklearn.base` costs about a second (it pulls in scipy.stats), which
loading a saved model and predicting, or fitting a k-NN forecaster, should not pay.
:class:`ParamsMixin` gives the part of ``sklearn.base.BaseEstimator`` that structcal's
estimators use: ``get_params``/``set_params`` following the same conventions
(constructor arguments, nested ``component__param`` names), so ``sklearn.base.clone``
and grid searches accept them; cloning; estimator tags for scikit-learn's checks (built
when scikit-learn asks for them, so it is imported by then); and a repr that lists the
parameters that differ from their defaults. :func:`check_fitted` raises scikit-learn's
``NotFittedError`` as ``check_is_fitted`` does.
"""

from __future__ import annotations

import copy
import inspect

from .exceptions import ParameterError

__all__ = ["ClassifierParamsMixin", "ParamsMixin", "check_fitted", "clone"]


def check_fitted(estimator, attribute=None):
    """Raise ``NotFittedError`` (scikit-learn's class) unless ``estimator`` has
    ``attribute`` (by default, as ``check_is_fitted``: any attribute ending in ``_``)."""
    if attribute is None:
        fitted = any(v.endswith("_") and not v.startswith("__") for v in vars(estimator))
    else:
        fitted = hasattr(estimator, attribute)
    if not fitted:
        from .exceptions import NotFittedError

        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' with "
            "appropriate arguments before using this estimator."
        )


def clone(estimator):
    """An unfitted copy of ``estimator`` with the same parameters, as
    ``sklearn.base.clone``; scikit-learn is imported only for an estimator that defines no
    ``__sklearn_clone__`` of its own."""
    if hasattr(estimator, "__sklearn_clone__") and not isinstance(estimator, type):
        return estimator.__sklearn_clone__()
    from sklearn.base import clone as sklearn_clone

    return sklearn_clone(estimator)


class ParamsMixin:
    """``get_params``/``set_params``/cloning/tags/``__repr__`` as in scikit-learn's
    ``BaseEstimator``."""

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

    def __sklearn_clone__(self):
        params = self.get_params(deep=False)
        return type(self)(**{
            name: clone(value)
            if hasattr(value, "get_params") and not isinstance(value, type)
            else copy.deepcopy(value)
            for name, value in params.items()
        })

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False))

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


class ClassifierParamsMixin(ParamsMixin):
    """:class:`ParamsMixin` for classifiers: scikit-learn's classifier tags and ``score``
    (mean accuracy), as ``sklearn.base.ClassifierMixin`` gives them."""

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : array-like
            Input of ``predict``.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples.

        Returns
        -------
        float
        """
        import numpy as np

        from ._validation import as_float_array

        pred = np.asarray(self.predict(X))
        truth = np.asarray(y)
        if truth.ndim != 1 or truth.shape[0] != pred.shape[0]:
            raise ParameterError(f"`y` must hold one label per sample of `X` "
                                 f"({pred.shape[0]}); got shape {truth.shape}")
        w = None
        if sample_weight is not None:
            w = as_float_array(sample_weight, "sample_weight", ndim=1, shape=pred.shape)
            if (w < 0).any() or not w.sum() > 0:
                raise ParameterError("`sample_weight` must be >= 0 with a positive sum")
        return float(np.average(pred == truth, weights=w))

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags())
