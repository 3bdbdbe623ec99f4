"""Cross-validated calibration: out-of-fold scores for the calibrator, final model on all data."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import cross_val_predict
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, column_or_1d

from .._validation import check_option
from ..exceptions import ParameterError
from ..io import SaveLoadMixin
from .spline import SplineCalib

__all__ = ["CrossValidatedCalibration"]


class CrossValidatedCalibration(SaveLoadMixin, ClassifierMixin, BaseEstimator):
    """Calibrate a model without setting data aside (Lucena's Algorithm 4).

    ``fit`` trains ``estimator`` on all the data (the model used for predictions),
    collects out-of-fold scores with ``cv``-fold cross-validation (each sample scored by
    a model that did not see it), and fits ``calibrator`` on those scores.
    ``predict_proba`` applies the calibrator to the final model's scores.

    Parameters
    ----------
    estimator : classifier
        The model to calibrate (any scikit-learn classifier).
    calibrator : calibrator, default=None
        A structcal calibrator (or any classifier taking the scores as ``X``); ``None``
        means :class:`SplineCalib` with ``random_state=0``.
    cv : int or cross-validation generator, default=5
        Folds for the out-of-fold scores (stratified for classifiers, as in
        :func:`sklearn.model_selection.cross_val_predict`).
    method : {"predict_proba", "decision_function"}, default="predict_proba"
        Which scores of ``estimator`` are calibrated.

    Attributes
    ----------
    estimator_ : classifier
        The model fitted on all data.
    calibrator_ : calibrator
        The calibrator fitted on out-of-fold scores.
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features of ``X``.

    Notes
    -----
    The calibrator learns from fold models' scores but is applied to the final model,
    which saw more data; with 5 or more folds the difference is usually small (Lucena).
    scikit-learn's ``CalibratedClassifierCV(ensemble=False)`` follows the same scheme.

    References
    ----------
    B. Lucena, *Spline-based probability calibration*, arXiv:1809.07751, 2018, §7.
    """

    def __init__(self, estimator, calibrator=None, *, cv=5, method="predict_proba"):
        self.estimator = estimator
        self.calibrator = calibrator
        self.cv = cv
        self.method = method

    def _scores(self, model, X):
        return getattr(model, self.method)(X)

    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the final model and the calibrator.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the model's ``fit`` (every fold and the final model) and to the
            calibrator's.
        **fit_params : dict
            Other parameters of ``estimator.fit``.

        Returns
        -------
        self
        """
        check_option(self.method, "method", ("predict_proba", "decision_function"))
        if self.estimator is None or not hasattr(self.estimator, "fit"):
            raise ParameterError("`estimator` must be a classifier with a fit method")
        y = column_or_1d(y, warn=True)
        if sample_weight is not None:
            fit_params = {**fit_params, "sample_weight": sample_weight}
        self.estimator_ = clone(self.estimator).fit(X, y, **fit_params)
        oof = cross_val_predict(clone(self.estimator), X, y, cv=self.cv, method=self.method,
                                params=fit_params or None)
        cal = SplineCalib(random_state=0) if self.calibrator is None else self.calibrator
        self.calibrator_ = clone(cal).fit(oof, y, sample_weight=sample_weight)
        self.classes_ = self.estimator_.classes_
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        if not np.array_equal(np.asarray(self.calibrator_.classes_), np.asarray(self.classes_)):
            raise ParameterError(
                "the calibrator's classes differ from the model's: "
                f"{self.calibrator_.classes_!r} vs {self.classes_!r}"
            )
        return self

    def predict_proba(self, X):
        """Calibrated class probabilities of the final model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.calibrator_.predict_proba(self._scores(self.estimator_, X))

    def predict(self, X):
        """Most probable class after calibration.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.estimator is not None:
            tags.input_tags.sparse = get_tags(self.estimator).input_tags.sparse
        return tags
