"""Ready-made set-ups for the shipped data and models (used by the CLI, notebooks, studies)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OCRSetup", "ocr_setup", "fit_letter_classifier"]


@dataclass(frozen=True)
class OCRSetup:
    """A shipped OCR chain CRF with what its Table 1 features need.

    Attributes
    ----------
    model : ChainCRF
        The shipped model (trained on the ``train`` split).
    letter_classifier : sklearn.svm.LinearSVC
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
    its decision scores feed ``phi_no1`` and ``phi_no2``.
    """
    from sklearn.svm import LinearSVC

    return LinearSVC(C=0.1, dual=False).fit(train.pixels, train.labels)


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
