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
    betting_evalues,
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
    with pytest.raises(ParameterError, match="n_errors"):
        binomial_tail_pvalue(-1, 10, 0.1)
    with pytest.raises(ParameterError, match="exceed"):
        binomial_tail_pvalue(11, 10, 0.1)


@pytest.mark.parametrize("kind", ["bernoulli", "bounded", "skewed"])
def test_betting_evalue_is_valid_at_the_boundary_of_the_null(kind):
    """Terms of mean exactly 0 (the least favourable null): P(E >= 1/a) <= a."""
    rng = np.random.default_rng(5)
    R, n = 4000, 60
    if kind == "bernoulli":  # an event is wrong w.p. 0.1, term = wrong - 0.1
        x = (rng.random((R, n)) < 0.1) - 0.1
        upper = 0.9
    elif kind == "bounded":
        x = rng.uniform(-0.5, 0.5, (R, n))
        upper = 0.5
    else:  # rare large positive terms, the case a variance plug-in gets wrong
        x = np.where(rng.random((R, n)) < 0.02, 0.98, -0.02)
        upper = 0.98
    e = betting_evalues(x.T, upper)
    for a in (0.05, 0.1, 0.2):
        assert np.mean(e >= 1 / a) <= a + 3 * np.sqrt(a / R)
    # and evidence against a mean below 0 grows
    assert betting_evalues(np.full(60, -0.1), 0.9) > 100
    with pytest.raises(ParameterError, match="upper"):
        betting_evalues([0.5, 2.0], 1.0)


def test_design_effect_of_independent_and_clustered_errors():
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(200), 10)
    rho, deff = design_effect(rng.random(2000) < 0.2, g)
    assert rho < 0.05 and deff < 1.5
    e = np.repeat(rng.random(200) < 0.2, 10)  # every group all right or all wrong
    rho, deff = design_effect(e, g)
    assert rho > 0.95 and deff == pytest.approx(1 + 9 * rho)


def _oracle_share(p, y, target):
    o = np.argsort(-p)
    prec = np.cumsum(y[o]) / np.arange(1, o.size + 1)
    ok = np.flatnonzero(prec >= target)
    return (ok.max() + 1) / o.size if ok.size else 0.0


@pytest.mark.parametrize("group_effect", [0.0, 1.0])
def test_precision_guarantee_holds_over_calibration_draws(group_effect):
    """Valid with errors clustered in groups (no correlation estimated), and with power:
    100 calibration groups accept most of what the oracle accepts."""
    rng = np.random.default_rng(1)
    fails, shares, oracle = 0, [], []
    R = 100
    for _ in range(R):
        p, y, g = _world(rng, G=200, group_effect=group_effect)
        cal = np.isin(g, rng.permutation(200)[:100])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GuaranteeWarning)
            pg = PrecisionGuarantee(target=0.9, delta=0.1).fit(p[cal], y[cal], groups=g[cal])
        a = pg.accept(p[~cal])
        fails += a.any() and y[~cal][a].mean() < 0.9
        shares.append(a.mean())
        oracle.append(_oracle_share(p[~cal], y[~cal], 0.9))
    assert fails / R <= 0.1  # the realised precision meets the target in >= 1 - delta
    assert np.median(shares) >= (0.75 if group_effect == 0 else 0.6) * np.median(oracle)


def test_too_few_groups_are_refused_with_the_reason():
    """A group multiplies the evidence by at most ~1/target: 15 all-right groups cannot
    certify 0.9 at delta 0.1 (the bound needs 29), whatever their size."""
    g = np.repeat(np.arange(15), 50)
    p = np.full(g.size, 0.97)
    y = np.ones(g.size, dtype=bool)
    with pytest.warns(GuaranteeWarning, match=r"only 15 of its 15 calibration groups.*from 29 groups on"):
        pg = PrecisionGuarantee(0.9, 0.1).fit(p, y, groups=g)
    assert pg.thresholds_[0] == np.inf and pg.certificates_[0].n_groups == 15
    g = np.repeat(np.arange(40), 50)  # 40 all-right groups: certified
    pg = PrecisionGuarantee(0.9, 0.1).fit(np.full(g.size, 0.97), np.ones(g.size, bool), groups=g)
    assert pg.thresholds_[0] <= 0.97
    # the bound is tight: groups_needed groups certify, one fewer does not
    from structcal.guarantees import groups_needed

    for target in (0.8, 0.9):
        k = groups_needed(target, 0.1)
        for G, ok in ((k, True), (k - 1, False)):
            g = np.repeat(np.arange(G), 3)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GuaranteeWarning)
                pg = PrecisionGuarantee(target, 0.1).fit(np.full(g.size, 0.99),
                                                         np.ones(g.size, bool), groups=g)
            assert pg.certificates_[0].certified == ok, (target, G)


def test_weighted_certificate_follows_a_covariate_shift():
    """Calibration forecasts overconfident where the new data live: the unweighted
    certificate is wrong there, the one weighted by the density ratio is not."""
    rng = np.random.default_rng(6)
    fails_w = fails_u = 0
    R = 60
    for _ in range(R):
        n = 6000
        x = rng.random(n)  # a covariate; the forecasts are overconfident for x > 0.7
        p = np.clip(0.8 + 0.2 * rng.random(n), 0, 1)
        truth = np.where(x > 0.7, p - 0.12, p)
        y = rng.random(n) < truth
        # new data: mostly x > 0.7; density ratio known
        w = np.where(x > 0.7, 0.9 / 0.3, 0.1 / 0.7)
        xn = np.where(rng.random(n) < 0.9, 0.7 + 0.3 * rng.random(n), 0.7 * rng.random(n))
        pn = np.clip(0.8 + 0.2 * rng.random(n), 0, 1)
        yn = rng.random(n) < np.where(xn > 0.7, pn - 0.12, pn)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GuaranteeWarning)
            gw = PrecisionGuarantee(0.85, 0.1).fit(p, y, weights=w)
            gu = PrecisionGuarantee(0.85, 0.1).fit(p, y)
        aw, au = gw.accept(pn), gu.accept(pn)
        fails_w += aw.any() and yn[aw].mean() < 0.85
        fails_u += au.any() and yn[au].mean() < 0.85
    assert fails_w / R <= 0.1 and fails_u / R > 0.5
    assert gw.certificates_[0].effective_groups < 0.8 * n
    with pytest.raises(ParameterError, match="weights"):
        PrecisionGuarantee(0.85).fit(p, y, weights=-w)


def test_precision_guarantee_per_class_and_refusal():
    rng = np.random.default_rng(2)
    p = rng.random(3000)
    y = rng.random(3000) < p
    cls = np.where(np.arange(3000) < 2900, "PER", "LOC")  # LOC: 100 events only
    with pytest.warns(GuaranteeWarning, match="cannot certify precision 0.99"):
        pg = PrecisionGuarantee(target=0.99, delta=0.05).fit(p, y, classes=cls)
    assert not pg.certificates_["LOC"].certified and pg.thresholds_["LOC"] == np.inf
    assert "LOC" in pg.certificates_["LOC"].message
    assert not pg.accept([0.9999], classes=["LOC"])[0]
    assert "threshold" in pg.format() and "e-value" in pg.format()
    with pytest.warns(GuaranteeWarning, match="class 'LOC'"):
        pg = PrecisionGuarantee(target=0.9, delta=0.1).fit(p, y, classes=cls)
    assert pg.certificates_["PER"].certified and 0.85 <= pg.thresholds_["PER"] < 1
    with pytest.raises(ParameterError, match="`outcomes`"):
        PrecisionGuarantee().fit(p, y[:10])
    with pytest.raises(ParameterError, match="probabilities"):
        PrecisionGuarantee().fit(p * 2, y)
    with pytest.raises(ParameterError, match="`groups` must have shape"):
        PrecisionGuarantee().fit(p, y, groups=np.arange(10))
    with pytest.raises(ParameterError, match="NaN"):
        PrecisionGuarantee().fit(p, y, groups=np.where(np.arange(3000) == 5, np.nan, 1.0))


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


def test_miss_control_refuses_counts_it_cannot_read():
    with pytest.raises(ParameterError, match="more than once"):
        MissControl(0.3).fit([0.9, 0.8], [True, False], [0, 1], ([0, 1, 1], [2, 1, 1]))
    with pytest.raises(ParameterError, match="whole numbers"):
        MissControl(0.3).fit([0.9], [True], [0], ([0], [3.7]))
    with pytest.raises(ParameterError, match="no calibration group"):
        MissControl(0.3).fit([], [], [], {})


def test_fallback_passes_the_level_of_a_certified_run_down():
    from structcal.guarantees import _fallback

    delta = 0.1
    share = np.zeros(10)
    share[[5, 9]] = [0.7, 0.1]
    usable = np.ones(10, dtype=bool)
    E = np.full(10, 1 / (0.75 * delta))  # enough at level 0.8 delta, not at 0.7 delta
    assert _fallback(E, share, delta, usable) is None  # the top anchor fails: 0.7 alone
    E[6:] = 1e6  # the run from the top anchor reaches index 5 with level 0.8 delta
    E[:4] = 1.0
    assert _fallback(E, share, delta, usable) == 4  # and index 4 keeps it; 3 fails
    usable[4] = False  # no accepted event there: not certified, and the run stops
    assert _fallback(E, share, delta, usable) == 5
    E[7] = 1.0  # a break in the run: 8 stays certified; 6 has no share of its own, and
    assert _fallback(E, share, delta, usable) == 8  # 5 alone (0.7 delta) fails


@pytest.mark.parametrize("grouped", [False, True])
def test_a_precision_at_the_target_is_certified_at_most_delta_of_the_time(grouped):
    """Every threshold is a true null (events right with probability 0.9 whatever their
    forecast): any certificate at 0.9 is a false one. Ungrouped, the exact binomial tail
    makes this sharp (with every share of delta ten times too large, 67% of draws
    certify); grouped, with errors clustered, the betting e-value is conservative at the
    boundary and only a gross error would show."""
    rng = np.random.default_rng(3)
    R, certified = 300, 0
    for _ in range(R):
        g = np.repeat(np.arange(60), 10)
        p = rng.uniform(0.5, 1.0, g.size)
        rate = 0.9 + (0.08 * rng.choice([-1.0, 1.0], 60) if grouped else np.zeros(60))
        y = rng.random(g.size) < rate[g]  # the mean over groups of their precision: 0.9
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GuaranteeWarning)
            pg = PrecisionGuarantee(target=0.9, delta=0.1).fit(
                p, y, groups=g if grouped else None)
        certified += np.isfinite(pg.thresholds_[0])
    # delta plus three binomial standard deviations
    assert certified / R <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / R)
