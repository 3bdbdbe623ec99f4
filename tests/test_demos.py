"""The ready-made OCR set-up (structcal.demos)."""

import numpy as np

from structcal.datasets import load_ocr
from structcal.demos import LETTER_CLASSIFIER, fit_letter_classifier, ocr_setup
from structcal.io import load, pretrained_path


def test_shipped_letter_classifier_is_the_fit_it_claims():
    shipped = load(pretrained_path(LETTER_CLASSIFIER))
    fresh = fit_letter_classifier(load_ocr("train"))
    test = load_ocr("test")
    assert np.array_equal(shipped.classes_, fresh.classes_)
    assert np.array_equal(shipped.decision_function(test.pixels),
                          fresh.decision_function(test.pixels))


def test_ocr_setup_loads_or_refits_the_same_classifier():
    loaded = ocr_setup()
    refit = ocr_setup(refit_letter_classifier=True)
    x = loaded.test.pixels[:50]
    assert np.array_equal(loaded.letter_classifier.decision_function(x),
                          refit.letter_classifier.decision_function(x))
