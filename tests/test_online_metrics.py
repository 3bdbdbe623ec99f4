"""Running metrics against literal brute-force evaluation of their definitions."""

import subprocess
import sys

import numpy as np
import pytest

from structcal import ParameterError
from structcal.online import running_metrics, running_regret

from . import _online_reference as ref


@pytest.mark.parametrize("N", [1, 2, 5, 10])
@pytest.mark.parametrize("on_grid", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_running_calibration_matches_eq1_at_every_step(N, on_grid, seed):
    rng = np.random.default_rng(seed)
    T = 120
    p = rng.integers(0, N + 1, size=T) / N if on_grid else rng.random(T)
    p[:3] = [0.0, 1.0, 0.5]
    y = (rng.random(T) < p).astype(int)
    m = running_metrics(p, y, n_grid=N)
    for t in range(1, T + 1):
        assert m.calibration_l1[t - 1] == pytest.approx(ref.calibration_error(p[:t], y[:t], N, 1),
                                                        abs=1e-12)
        assert m.calibration_l2[t - 1] == pytest.approx(ref.calibration_error(p[:t], y[:t], N, 2),
                                                        abs=1e-12)


def test_running_calibration_long_stream_has_no_drift():
    rng = np.random.default_rng(0)
    T = 200_000
    p = rng.random(T)
    y = (rng.random(T) < p ** 2).astype(int)
    m = running_metrics(p, y, n_grid=20)
    assert m.calibration_l1[-1] == pytest.approx(ref.calibration_error(p, y, 20, 1), rel=1e-9)
    assert m.calibration_l2[-1] == pytest.approx(ref.calibration_error(p, y, 20, 2), rel=1e-9)


def test_losses_and_regret_match_direct_formulas():
    rng = np.random.default_rng(3)
    T = 300
    p = rng.random(T)
    p[:4] = [0.0, 1.0, 0.5, 0.4999999]
    base = rng.random(T)
    y = (rng.random(T) < 0.5).astype(int)
    y[:4] = [1, 0, 0, 1]
    eps = 1e-3
    m = running_metrics(p, y, log_eps=eps)
    t = np.arange(1, T + 1)
    q = np.clip(p, eps, 1 - eps)
    l2 = (y - p) ** 2
    ll = np.array([-np.log(qi) if yi else -np.log(1 - qi) for qi, yi in zip(q, y)])
    mc = np.array([(pi < 0.5) if yi else (pi >= 0.5) for pi, yi in zip(p, y)], dtype=float)
    np.testing.assert_allclose(m.l2_loss, np.cumsum(l2) / t, rtol=1e-12)
    np.testing.assert_allclose(m.log_loss, np.cumsum(ll) / t, rtol=1e-12)
    np.testing.assert_allclose(m.misclassification, np.cumsum(mc) / t, rtol=1e-12)
    assert m.misclassification[:4].tolist() == [1.0, 1.0, 1.0, 1.0]  # 0 and 1 and 1/2 wrong
    r = running_regret(p, base, y, log_eps=eps)
    mb = running_metrics(base, y, log_eps=eps)
    for name in ("l2_loss", "log_loss", "misclassification"):
        np.testing.assert_allclose(getattr(r, name), getattr(m, name) - getattr(mb, name),
                                   atol=1e-12)
    assert r.at(T)["l2_loss"] == pytest.approx(float(np.mean(l2 - (y - base) ** 2)))
    assert m.at(10)["calibration_l2"] == m.calibration_l2[9]
    assert m.n_steps == T


def test_log_loss_is_finite_at_the_grid_ends():
    m = running_metrics([0.0, 1.0], [1, 0], log_eps=1e-4)
    assert m.log_loss[-1] == pytest.approx(-np.log(1e-4))


def test_metric_errors():
    with pytest.raises(ParameterError, match="n_grid"):
        running_metrics([0.5], [1], n_grid=0)
    with pytest.raises(ParameterError, match="log_eps"):
        running_metrics([0.5], [1], log_eps=0.0)
    with pytest.raises(ParameterError, match="`p`"):
        running_metrics([1.5], [1])
    with pytest.raises(ParameterError, match="`p`"):
        running_metrics([np.nan], [1])
    with pytest.raises(ParameterError, match="`y`"):
        running_metrics([0.5], [2])
    with pytest.raises(ParameterError, match="one outcome per"):
        running_metrics([0.5, 0.5], [1])
    with pytest.raises(ParameterError, match="p_base"):
        running_regret([0.5, 0.5], [0.5], [1, 1])
    with pytest.raises(ParameterError, match="`t`"):
        running_metrics([0.5], [1]).at(2)
    empty = running_metrics([], [])
    assert empty.calibration_l1.shape == (0,) and empty.n_steps == 0


@pytest.mark.parametrize("module", ["metrics", "recalibrator"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"structcal.online.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_importing_online_compiles_nothing():
    code = (
        "import structcal.online as o; from structcal.online import _kernels as k;"
        "print(sum(len(d.overloads) for d in (k.run_stream, k.decide, k.running_calibration)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
