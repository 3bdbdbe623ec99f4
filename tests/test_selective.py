"""Selective prediction against brute force and closed forms."""

import numpy as np
import pytest

from structcal.exceptions import ParameterError
from structcal.selective import (
    TargetNotReachedWarning,
    decide,
    risk_coverage_curve,
    selective_threshold,
    top_label_confidence,
)


def brute_force_curve(correct, conf, w):
    thresholds = np.unique(conf)[::-1]
    cov, risk = [], []
    for t in thresholds:
        keep = conf >= t
        cov.append(w[keep].sum() / w.sum())
        risk.append(np.sum(w[keep] * (1 - correct[keep])) / w[keep].sum())
    return thresholds, np.array(cov), np.array(risk)


@pytest.mark.parametrize("seed", range(5))
def test_risk_coverage_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = [1, 7, 50, 300, 1000][seed]
    conf = np.round(rng.random(n), 1)  # many ties
    correct = (rng.random(n) < conf).astype(int)
    w = rng.random(n) + 0.1 if seed % 2 else np.ones(n)
    rc = risk_coverage_curve(correct, conf, sample_weight=w)
    t, cov, risk = brute_force_curve(correct, conf, w)
    np.testing.assert_array_equal(rc.thresholds, t)
    np.testing.assert_allclose(rc.coverage, cov, rtol=1e-12)
    np.testing.assert_allclose(rc.risk, risk, rtol=1e-12, atol=1e-15)
    assert rc.aurc == pytest.approx(np.sum(np.diff(np.r_[0, cov]) * risk), rel=1e-12)
    # invariant to sample order
    perm = rng.permutation(n)
    assert risk_coverage_curve(correct[perm], conf[perm], sample_weight=w[perm]).aurc == \
        pytest.approx(rc.aurc, rel=1e-12)


def test_aurc_known_values():
    # perfect ranking: errors last; without ties AURC = mean over k of errors/k
    correct = np.array([1, 1, 1, 0, 0])
    conf = np.array([5, 4, 3, 2, 1.0])
    rc = risk_coverage_curve(correct, conf)
    assert rc.aurc == pytest.approx((0 + 0 + 0 + 1 / 4 + 2 / 5) / 5)
    # reversed ranking is worse
    assert risk_coverage_curve(correct, -conf).aurc > rc.aurc
    # all tied: one point at full coverage
    rc = risk_coverage_curve(correct, np.ones(5))
    assert rc.coverage.tolist() == [1.0] and rc.aurc == pytest.approx(0.4)


@pytest.mark.parametrize("seed", range(4))
def test_selective_threshold_is_the_max_coverage_meeting_the_target(seed):
    rng = np.random.default_rng(seed)
    conf = rng.random(400)
    correct = (rng.random(400) < 0.5 + 0.5 * conf).astype(int)
    for target in (0.8, 0.9, 0.95):
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TargetNotReachedWarning)
                res = selective_threshold(correct, conf, target)
        best_cov, best_t = 0.0, np.inf
        for t in np.unique(conf):
            keep = conf >= t
            if correct[keep].mean() >= target and keep.mean() > best_cov:
                best_cov, best_t = keep.mean(), t
        assert res.coverage == pytest.approx(best_cov)
        assert res.threshold == best_t
        if res.achieved:
            assert res.accuracy >= target
            np.testing.assert_array_equal(res.accept(conf), conf >= best_t)


def test_selective_threshold_unreachable_target_warns():
    with pytest.warns(TargetNotReachedWarning, match="no confidence threshold"):
        res = selective_threshold([0, 1, 0], [0.9, 0.5, 0.2], 0.99)
    assert not res.achieved and res.threshold == np.inf and res.coverage == 0.0
    assert not res.accept([1.0, 0.5]).any()


def test_selective_threshold_holds_on_new_data_when_calibrated():
    rng = np.random.default_rng(5)

    def draw(n):
        conf = rng.uniform(0.5, 1.0, n)
        return (rng.random(n) < conf).astype(int), conf

    res = selective_threshold(*draw(20_000), 0.9)
    correct, conf = draw(200_000)
    kept = res.accept(conf)
    assert correct[kept].mean() == pytest.approx(0.9, abs=0.01)
    # for calibrated confidence c ~ U(0.5, 1), accuracy above t is (1 + t) / 2
    assert res.threshold == pytest.approx(0.8, abs=0.02)


def test_top_label_confidence():
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.3, 0.5]])
    correct, conf = top_label_confidence([0, 1], P)
    np.testing.assert_array_equal(correct, [1, 0])
    np.testing.assert_array_equal(conf, [0.7, 0.5])
    correct, conf = top_label_confidence([1, 1], [0.8, 0.3])
    np.testing.assert_array_equal(correct, [1, 0])
    np.testing.assert_array_equal(conf, [0.8, 0.7])


@pytest.mark.parametrize("seed", range(3))
def test_decide_minimises_expected_loss_brute_force(seed):
    rng = np.random.default_rng(seed)
    K, A, n = 3, 4, 200
    P = rng.dirichlet(np.ones(K), n)
    L = rng.random((K, A)) * 3
    c = np.median((P @ L).min(1)) * (0.5 + rng.random(K))  # abstention competitive
    d = decide(P, L, abstain_cost=c)
    for i in range(n):
        options = [P[i] @ L[:, a] for a in range(A)] + [P[i] @ c]
        best = int(np.argmin(options))
        assert d.expected_loss[i] == pytest.approx(min(options), rel=1e-12)
        assert d.actions[i] == (-1 if best == A else best)
    assert d.abstained.any() and not d.abstained.all()


def test_decide_zero_one_loss_is_chows_rule():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(4), 1000)
    np.testing.assert_array_equal(decide(P).actions, P.argmax(1))
    c = 0.4
    d = decide(P, abstain_cost=c)
    expect = np.where(P.max(1) < 1 - c, -1, P.argmax(1))
    np.testing.assert_array_equal(d.actions, expect)
    # binary 1-d probabilities
    d = decide(np.array([0.9, 0.5, 0.05]), abstain_cost=0.3)
    assert d.actions.tolist() == [1, -1, 0]


def test_realized_loss_matches_expected_loss_on_calibrated_data():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(3), 100_000)
    y = (rng.random(100_000)[:, None] > np.cumsum(P, 1)).sum(1)
    L = np.array([[0, 1, 5], [1, 0, 1], [10, 1, 0]], dtype=float)
    d = decide(P, L, abstain_cost=[0.5, 0.5, 2.0])
    realized = d.realized_loss(y)
    assert realized.mean() == pytest.approx(d.expected_loss.mean(), rel=0.02)
    # the optimal policy beats always predicting the arg max
    argmax_loss = L[y, P.argmax(1)].mean()
    assert realized.mean() < argmax_loss


def test_decide_and_curves_bad_input():
    with pytest.raises(ParameterError, match="loss_matrix"):
        decide(np.array([[0.5, 0.5]]), np.zeros((3, 2)))
    with pytest.raises(ParameterError, match="abstain_cost"):
        decide(np.array([[0.5, 0.5]]), abstain_cost=[1, 2, 3])
    with pytest.raises(ParameterError, match="sum to 1"):
        decide(np.array([[0.5, 0.6]]))
    with pytest.raises(ParameterError, match="binary outcomes"):
        risk_coverage_curve([0, 2], [0.1, 0.2])
    with pytest.raises(ParameterError, match="empty"):
        risk_coverage_curve([], [])
    with pytest.raises(ParameterError, match="NaN"):
        risk_coverage_curve([0, 1], [0.1, np.nan])
    with pytest.raises(ParameterError, match="target_accuracy"):
        selective_threshold([0, 1], [0.1, 0.2], 1.5)
    d = decide(np.array([[0.5, 0.5]]))
    with pytest.raises(ParameterError, match="labels"):
        d.realized_loss([3])


def test_docstring_examples():
    import doctest

    from structcal import selective

    result = doctest.testmod(selective)
    assert result.failed == 0 and result.attempted > 0
