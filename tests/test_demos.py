"""The ready-made OCR set-up (structcal.demos)."""

import numpy as np
import pytest

from structcal.datasets import load_ocr
from structcal.demos import LETTER_CLASSIFIER, fit_letter_classifier, ocr_setup
from structcal.io import load, pretrained_path

# A refit is not bit-identical across machines: liblinear's primal Newton solver stops at
# tol=1e-4 and its dot products run on the CPU's own BLAS kernels, so the stopping iterate
# moves with the rounding (seen: coefficients 7e-4 apart on an AVX-512 machine). A refit
# must agree with the shipped fit to well within that tolerance's effect on the scores,
# and rank the letters the same way.
SCORE_ATOL = 1e-2


def _assert_same_fit(a, b, x):
    sa, sb = a.decision_function(x), b.decision_function(x)
    np.testing.assert_allclose(sa, sb, rtol=0, atol=SCORE_ATOL)
    assert np.mean(sa.argmax(axis=1) == sb.argmax(axis=1)) > 0.999


def test_shipped_letter_classifier_is_the_fit_it_claims():
    shipped = load(pretrained_path(LETTER_CLASSIFIER))
    fresh = fit_letter_classifier(load_ocr("train"))
    test = load_ocr("test")
    assert np.array_equal(shipped.classes_, fresh.classes_)
    _assert_same_fit(shipped, fresh, test.pixels)
    # the tolerance is not vacuous: another regularisation is a different classifier
    from sklearn.svm import LinearSVC

    train = load_ocr("train")
    other = LinearSVC(C=0.2, dual=False).fit(train.pixels, train.labels)
    assert np.abs(shipped.decision_function(test.pixels)
                  - other.decision_function(test.pixels)).max() > SCORE_ATOL

def test_ocr_setup_loads_or_refits_the_same_classifier():
    loaded = ocr_setup()
    refit = ocr_setup(refit_letter_classifier=True)
    _assert_same_fit(loaded.letter_classifier, refit.letter_classifier, loaded.test.pixels)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_linear_decision_map_scores_as_the_classifier_does(tmp_path, n_classes):
    from sklearn.svm import LinearSVC

    from structcal.demos import LinearDecisionMap
    from structcal.exceptions import ParameterError, ParameterTypeError

    rng = np.random.default_rng(n_classes)
    X = rng.normal(size=(90, 5))
    y = np.array(["a", "b", "c"])[np.arange(90) % n_classes]
    svm = LinearSVC(dual=False).fit(X + (np.arange(90) % n_classes)[:, None], y)
    m = LinearDecisionMap.from_estimator(svm)
    test = rng.normal(size=(40, 5)) * 3
    np.testing.assert_allclose(m.decision_function(test), svm.decision_function(test),
                               rtol=1e-12, atol=1e-12)
    assert np.array_equal(m.predict(test), svm.predict(test))
    m.save(tmp_path / "m")
    again = LinearDecisionMap.load(tmp_path / "m")
    assert np.array_equal(again.decision_function(test), m.decision_function(test))
    with pytest.raises(ParameterError, match="5 feature columns"):
        m.decision_function(test[:, :4])
    with pytest.raises(ParameterTypeError, match="`estimator` must be a fitted linear"):
        LinearDecisionMap.from_estimator(LinearSVC())
    # classes that do not match the rows of coef_, or repeat, would pick wrong labels
    from types import SimpleNamespace

    for classes in (["a", "b", "c", "d"], ["a", "a", "b"][:n_classes + (n_classes == 2)]):
        bad = SimpleNamespace(coef_=svm.coef_, intercept_=svm.intercept_, classes_=classes)
        with pytest.raises(ParameterError, match="estimator.classes_"):
            LinearDecisionMap.from_estimator(bad)


def test_loading_the_ocr_setup_and_scoring_imports_no_sklearn():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from structcal.demos import ocr_setup\n"
        "s = ocr_setup()\n"
        "p = s.predict(s.test)\n"
        "p.map_labels\n"
        "print(sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
