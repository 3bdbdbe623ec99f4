"""Progress messages on stderr and detection of JIT compilation (structcal/_progress.py)."""

import numpy as np
from numba import njit

from structcal._progress import compile_monitor, message, progress

FEATURES = ["phi_mp1", "phi_mp3", "phi_mg1", "phi_mg2"]


def test_compile_monitor_sees_compilation_only_when_it_happens(capsys):
    @njit  # a fresh, uncached function: its first call compiles
    def twice(x):
        return 2 * x

    with compile_monitor(verbose=True) as jit:
        assert twice(3) == 6
    assert jit.compiled and jit.n_compiled >= 1 and jit.seconds > 0
    assert "compiling Numba kernels" in capsys.readouterr().err
    with compile_monitor(verbose=True) as jit:
        assert twice(4) == 8  # already compiled
    assert not jit.compiled and jit.seconds == 0
    assert capsys.readouterr().err == ""


def test_progress_and_message_are_silent_unless_verbose(capsys):
    assert list(progress(range(3), desc="steps", verbose=False)) == [0, 1, 2]
    message("hello", verbose=False)
    assert capsys.readouterr().err == ""
    assert list(progress(["a", "b"], desc="steps", verbose=True)) == ["a", "b"]
    message("hello")
    err = capsys.readouterr().err
    assert "steps" in err and "structcal: hello" in err


def test_recalibrator_verbose_reports_its_steps(capsys):
    from structcal import ChainPotentials, StructuredPrediction, StructuredRecalibrator

    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 5, size=60)
    scores = rng.normal(size=(lengths.sum(), 3))
    truth = np.where(rng.random(scores.shape[0]) < 0.8, scores.argmax(axis=1), 0)
    pred = StructuredPrediction(ChainPotentials.from_scores(scores, lengths=lengths,
                                                               transitions=np.zeros((3, 3))))
    StructuredRecalibrator(features=FEATURES, verbose=False).fit(pred, truth)
    assert capsys.readouterr().err == ""
    StructuredRecalibrator(features=FEATURES, verbose=True).fit(pred, truth)
    err = capsys.readouterr().err
    assert "building the events" in err and "fitting forecasters" in err
