"""Ready-made set-ups for the shipped data and models (used by the CLI, notebooks, studies)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._estimator import ParamsMixin, check_fitted
from .io import SaveLoadMixin

__all__ = ["OCRSetup", "ocr_setup", "fit_letter_classifier", "LinearDecisionMap"]


class LinearDecisionMap(SaveLoadMixin, ParamsMixin):
    """A fitted linear classifier's decision scores, from its arrays alone.

    ``decision_function(X) = X @ coef_.T + intercept_``, as scikit-learn's linear
    classifiers compute it, without importing scikit-learn to load or score.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_features) or (1, n_features)
    intercept_ : ndarray of shape (n_classes,) or (1,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    """

    @classmethod
    def from_estimator(cls, estimator):
        """The decision map of a fitted linear classifier (``coef_``, ``intercept_``,
        ``classes_``), e.g. ``sklearn.svm.LinearSVC``."""
        from ._validation import as_float_array, as_ids, describe
        from .exceptions import ParameterTypeError

        if not all(hasattr(estimator, a) for a in ("coef_", "intercept_", "classes_")):
            raise ParameterTypeError(
                "`estimator` must be a fitted linear classifier with coef_, intercept_ and "
                f"classes_; got {describe(estimator)}"
            )
        out = cls()
        out.coef_ = as_float_array(estimator.coef_, "estimator.coef_", ndim=2)
        out.intercept_ = as_float_array(
            np.ravel(estimator.intercept_), "estimator.intercept_", shape=(out.coef_.shape[0],)
        )
        rows = out.coef_.shape[0]
        out.classes_ = as_ids(estimator.classes_, "estimator.classes_", 2 if rows == 1 else rows,
                              "one class per row of coef_ (two for one row)", unique=True)
        out.n_features_in_ = int(out.coef_.shape[1])
        return out

    def decision_function(self, X):
        """Decision scores, as the classifier's ``decision_function``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), or (n_samples,) for two classes
        """
        from ._validation import as_float_array

        check_fitted(self, "coef_")
        X = as_float_array(X, "X", ndim=2)
        if X.shape[1] != self.n_features_in_:
            from .exceptions import ParameterError

            raise ParameterError(f"`X` must have {self.n_features_in_} feature columns (as "
                                 f"at fit); got {X.shape[1]}")
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if self.coef_.shape[0] == 1 else scores

    def predict(self, X):
        """The class of the highest score."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.int64)]
        return self.classes_[np.argmax(scores, axis=1)]


@dataclass(frozen=True)
class OCRSetup:
    """A shipped OCR chain CRF with what its Table 1 features need.

    Attributes
    ----------
    model : ChainCRF
        The shipped model (trained on the ``train`` split).
    letter_classifier : LinearDecisionMap
        Unstructured per-letter classifier on the raw pixels, fit on the ``train`` split
        (:func:`fit_letter_classifier`; its scores feed ``phi_no1`` and ``phi_no2``).
    lexicon : Lexicon
        The training words: the admissible outputs G of ``phi_mp2``.
    train, recalibration, test : OCRWords
        The project-wide splits (folds 0-2, 6-9 and 3-5).
    """

    model: object
    letter_classifier: object
    lexicon: object
    train: object
    recalibration: object
    test: object

    def predict(self, words):
        """A :class:`~structcal.StructuredPrediction` of the model on ``words`` (OCRWords)."""
        from .prediction import StructuredPrediction

        return StructuredPrediction(
            self.model.potentials(words.X),
            unstructured_scores=self.letter_classifier.decision_function(words.pixels),
        )


#: Name of the shipped letter classifier (:func:`fit_letter_classifier` on the ``train``
#: split, saved by ``benchmarks/train_ocr_models.py``).
LETTER_CLASSIFIER = "ocr_letter_svm"


def fit_letter_classifier(train):
    """The unstructured per-letter classifier of the OCR set-up, fit on ``train`` (OCRWords).

    A linear SVM (``LinearSVC(C=0.1, dual=False)``; deterministic on one machine, and
    within the solver tolerance across machines) on the 128 raw pixels;
    its decision scores feed ``phi_no1`` and ``phi_no2``. Returns them as a
    :class:`LinearDecisionMap`, which loads and scores without scikit-learn.
    """
    from sklearn.svm import LinearSVC

    return LinearDecisionMap.from_estimator(LinearSVC(C=0.1, dual=False).fit(train.pixels, train.labels))


def ocr_setup(model="ocr_chain_crf", *, refit_letter_classifier=False) -> OCRSetup:
    """Load a shipped OCR model, the OCR data and the unstructured letter classifier.

    Parameters
    ----------
    model : {'ocr_chain_crf', 'ocr_chain_crf_max_margin'} or ChainCRF, default='ocr_chain_crf'
        The shipped chain CRF (trained by maximum likelihood or as a structured SVM), or
        a ``ChainCRF`` instance: fitted, it is used as is; unfitted, it is fitted on the
        ``train`` split here.
    refit_letter_classifier : bool, default=False
        Fit the letter classifier (:func:`fit_letter_classifier`) on the ``train`` split
        here (about 1 s) instead of loading the shipped one, which is that same fit
        saved (identical decision scores; tested).

    Returns
    -------
    OCRSetup
    """
    from .crf import ChainCRF
    from .datasets import load_ocr
    from .events import Lexicon
    from .io import pretrained_path

    data = load_ocr()
    train = data.split("train")
    if isinstance(model, ChainCRF):
        crf = model if hasattr(model, "coef_") else model.fit(train.X, train.y)
    elif isinstance(model, str):
        crf = ChainCRF.load(pretrained_path(model))
    else:
        from ._validation import describe
        from .exceptions import ParameterTypeError

        raise ParameterTypeError(f"`model` must be a shipped model name or a ChainCRF; got {describe(model)}")
    if refit_letter_classifier:
        svm = fit_letter_classifier(train)
    else:
        from .io import load

        svm = load(pretrained_path(LETTER_CLASSIFIER))
    lexicon = Lexicon(set(train.words), n_states=len(train.alphabet), alphabet=train.alphabet)
    return OCRSetup(crf, svm, lexicon, train, data.split("recalibration"), data.split("test"))
