"""Finite-sample guarantees on data whose truth is known: precision control and miss control
hold at their stated rates over many random calibration draws."""

import warnings

import numpy as np
import pytest

from structcal import io
from structcal.exceptions import ParameterError
from structcal.guarantees import (
    GuaranteeWarning,
    MissControl,
    PrecisionGuarantee,
    binomial_tail_pvalue,
    design_effect,
)


def _world(rng, G=80, group_effect=1.0):
    """Grouped events: forecasts calibrated on average, errors correlated within groups."""
    per = rng.integers(5, 40, G)
    g = np.repeat(np.arange(G), per)
    eff = rng.normal(size=G)[g] * group_effect
    z = rng.normal(size=g.size) * 2 + 1.5
    p = 1 / (1 + np.exp(-z))
    y = rng.random(g.size) < 1 / (1 + np.exp(-(z + eff)))
    return p, y, g


def test_binomial_tail_is_the_binomial_cdf():
    from scipy.stats import binom

    for n, k, a in [(10, 0, 0.05), (200, 7, 0.05), (57, 20, 0.3)]:
        assert binomial_tail_pvalue(k, n, a) == pytest.approx(binom.cdf(k, n, a), rel=1e-10)
    assert binomial_tail_pvalue(0, 0, 0.1) == 1.0


def test_design_effect_of_independent_and_clustered_errors():
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(200), 10)
    rho, deff = design_effect(rng.random(2000) < 0.2, g)
    assert rho < 0.05 and deff < 1.5
    e = np.repeat(rng.random(200) < 0.2, 10)  # every group all right or all wrong
    rho, deff = design_effect(e, g)
    assert rho > 0.95 and deff == pytest.approx(1 + 9 * rho)


@pytest.mark.parametrize("group_effect", [0.0, 1.0])
def test_precision_guarantee_holds_over_calibration_draws(group_effect):
    rng = np.random.default_rng(1)
    fails = accepted = 0
    R = 200
    for _ in range(R):
        p, y, g = _world(rng, group_effect=group_effect)
        cal = np.isin(g, rng.permutation(80)[:40])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GuaranteeWarning)
            pg = PrecisionGuarantee(target=0.9, delta=0.1).fit(p[cal], y[cal], groups=g[cal])
        a = pg.accept(p[~cal])
        if a.any():
            fails += y[~cal][a].mean() < 0.9
            accepted += 1
    assert accepted > 0.4 * R  # (clustered errors: fewer certificates, never wrong ones)
    assert fails / R <= 0.1  # the realised precision meets the target in >= 1 - delta


def test_precision_guarantee_per_class_and_refusal():
    rng = np.random.default_rng(2)
    p = rng.random(3000)
    y = rng.random(3000) < p
    cls = np.where(np.arange(3000) < 2900, "PER", "LOC")  # LOC: 100 events only
    with pytest.warns(GuaranteeWarning, match="cannot certify precision 0.99"):
        pg = PrecisionGuarantee(target=0.99, delta=0.05).fit(p, y, classes=cls)
    assert not pg.certificates_["LOC"].certified and pg.thresholds_["LOC"] == np.inf
    assert not pg.accept([0.9999], classes=["LOC"])[0]
    assert "threshold" in pg.format()
    with pytest.warns(GuaranteeWarning, match="class 'LOC'"):
        pg = PrecisionGuarantee(target=0.9, delta=0.1).fit(p, y, classes=cls)
    assert pg.certificates_["PER"].certified and pg.thresholds_["PER"] >= 0.9
    with pytest.raises(ParameterError, match="`outcomes`"):
        PrecisionGuarantee().fit(p, y[:10])
    with pytest.raises(ParameterError, match="probabilities"):
        PrecisionGuarantee().fit(p * 2, y)


def test_guarantees_save_and_load(tmp_path):
    rng = np.random.default_rng(3)
    p = rng.random(20000)
    y = rng.random(20000) < p
    cls = np.arange(20000) % 2
    pg = PrecisionGuarantee(0.9, 0.1).fit(p, y, classes=cls)
    io.save(pg, tmp_path / "g")
    back = io.load(tmp_path / "g")
    assert back.thresholds_ == pg.thresholds_
    np.testing.assert_array_equal(back.accept(p, cls), pg.accept(p, cls))


def test_miss_control_holds_on_average():
    rng = np.random.default_rng(4)
    losses = []
    for _ in range(150):
        G = 100
        n_gold = rng.integers(0, 6, G)
        sc, oc, gr = [], [], []
        for g in range(G):
            for _ in range(n_gold[g]):
                if rng.random() < 0.95:
                    sc.append(rng.beta(5, 2))
                    oc.append(True)
                    gr.append(g)
            for _ in range(rng.integers(0, 6)):
                sc.append(rng.beta(2, 5))
                oc.append(False)
                gr.append(g)
        sc, oc, gr = np.array(sc), np.array(oc), np.array(gr)
        cal = rng.permutation(G)[:50]
        m = np.isin(gr, cal)
        mc = MissControl(0.2).fit(sc[m], oc[m], gr[m], (cal, n_gold[cal]))
        test = np.setdiff1d(np.arange(G), cal)
        a = mc.accept(sc[~m])
        hits = np.bincount(gr[~m][a & oc[~m]], minlength=G)
        losses.append(np.mean([(n_gold[g] - hits[g]) / n_gold[g] if n_gold[g] else 0.0
                               for g in test]))
    assert np.mean(losses) <= 0.2 + 0.01
    # candidates that cover too little gold: everything accepted, said so
    with pytest.warns(GuaranteeWarning, match="cover too little gold"):
        mc = MissControl(0.01).fit([0.9, 0.8], [True, False], [0, 1], {0: 3, 1: 2})
    assert mc.threshold_ == -np.inf and not mc.achievable_
