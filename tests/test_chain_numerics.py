"""Chain inference at every magnitude against an independent log-space reference.

The reference below is written here in plain NumPy (log-sum-exp over the forward and
backward recursions, batched over chains), independent of the kernels. It checks every
sum-product entry point (``infer``, ``forward_backward``, ``log_probability``,
``assignment_probability``, ``constrained_log_partition``, pseudo-marginals and the event
probabilities built on them) on random batches at scales 1 to 1e4, with shared and
per-edge pairwise potentials, random ``-inf`` patterns, lengths 0..30 and 1..5 states.
Before the certified scaled pass, a few chains per thousand at magnitudes of a few
hundred came back silently wrong (issue 15); the two reproducers of that issue are here.
"""

import numpy as np
import pytest

from structcal import ChainPotentials
from structcal.events import AnyLabel, InLexicon, LabelAt, Lexicon, SpanEquals
from structcal.inference import (
    assignment_probability,
    constrained_log_partition,
    forward_backward,
    infer,
    log_probability,
    pseudo_marginals,
)
from structcal.inference.exact import exact_chain
from structcal.prediction import StructuredPrediction
from structcal._tier import forced_tier as forced

# every test runs on both implementations of chain inference (structcal._tier)
pytestmark = pytest.mark.usefixtures("both_tiers")

SCALES = [1.0, 10.0, 100.0, 300.0, 1e3, 1e4]


# --------------------------------------------------------------------------- the reference


def _lse(x, axis):
    """log(sum(exp(x))) along ``axis``; ``-inf`` where every term is ``-inf``."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)


class Reference:
    """Log-space forward-backward on a batch, chains padded to one length.

    Padding positions allow only state 0 with score 0 (unary ``[0, -inf, ...]``,
    pairwise 0), which leaves the log-partition and the real positions' marginals
    unchanged exactly.
    """

    def __init__(self, p: ChainPotentials, unary=None):
        self.p = p
        n, K = p.n_chains, p.n_states
        self.lengths = p.lengths
        self.T = max(1, int(self.lengths.max(initial=0)))
        U = np.full((n, self.T, K), -np.inf)
        U[:, :, 0] = 0.0
        PW = np.zeros((n, self.T - 1, K, K))
        pw = p.pairwise
        unary = p.unary if unary is None else unary
        for c in range(n):
            s, L = p.offsets[c], self.lengths[c]
            U[c, :L] = unary[s : s + L]
            if L > 1:
                PW[c, : L - 1] = pw if pw.ndim == 2 else pw[p.edge_offsets[c] : p.edge_offsets[c] + L - 1]
        self.U, self.PW = U, PW

    def forward(self, U=None, semiring=_lse):
        U = self.U if U is None else U
        la = np.empty_like(U)
        la[:, 0] = U[:, 0]
        for t in range(1, self.T):
            la[:, t] = semiring(la[:, t - 1, :, None] + self.PW[:, t - 1], axis=1) + U[:, t]
        return la

    def log_partition(self, U=None):
        return _lse(self.forward(U)[:, -1], axis=1)

    def map_score(self):
        return np.max(self.forward(semiring=np.max)[:, -1], axis=1)

    def marginals(self):
        la = self.forward()
        logz = _lse(la[:, -1], axis=1)
        lb = np.zeros_like(la)
        for t in range(self.T - 2, -1, -1):
            lb[:, t] = _lse(self.PW[:, t] + (self.U[:, t + 1] + lb[:, t + 1])[:, None, :], axis=2)
        with np.errstate(invalid="ignore"):
            node = np.exp(la + lb - logz[:, None, None])
            edge = np.exp(
                la[:, :-1, :, None] + self.PW + (self.U[:, 1:] + lb[:, 1:])[:, :, None, :]
                - logz[:, None, None, None]
            )
        flat_node = np.concatenate([node[c, :L] for c, L in enumerate(self.lengths)])
        flat_edge = np.concatenate(
            [edge[c, : max(L - 1, 0)] for c, L in enumerate(self.lengths)]
            + [np.zeros((0, self.p.n_states, self.p.n_states))]
        )
        return logz, flat_node, flat_edge

    def constrained(self, chains, positions_per_query, allowed_per_query):
        """Log-partition of each query: labels outside ``allowed`` forbidden at ``positions``."""
        U = self.U[chains].copy()
        for q, (pos, allowed) in enumerate(zip(positions_per_query, allowed_per_query)):
            for t, a in zip(pos, allowed):
                U[q, t, ~a] = -np.inf
        ref = Reference.__new__(Reference)
        ref.p, ref.lengths, ref.T, ref.U, ref.PW = self.p, self.lengths[chains], self.T, U, self.PW[chains]
        return ref.log_partition()

    def score(self, labels):
        """Unnormalised score of one labeling per chain (flat labels)."""
        p = self.p
        out = np.zeros(p.n_chains)
        for c in range(p.n_chains):
            s, L = p.offsets[c], self.lengths[c]
            y = labels[s : s + L]
            out[c] = self.U[c, np.arange(L), y].sum() + self.PW[c, np.arange(L - 1), y[:-1], y[1:]].sum()
        return out


# --------------------------------------------------------------------------- random batches


def random_batch(rng, n_chains, *, scale, shared, neginf, max_len=30, K=None, min_len=0):
    """Random potentials: N(0, 1) entries times per-entry magnitudes drawn log-uniformly
    in [scale / 100, scale] (so steps of very different dynamic range meet in one chain),
    a fraction ``neginf`` of entries ``-inf``, and a random witness labeling per chain
    kept finite so that every chain is feasible."""
    K = int(rng.integers(1, 6)) if K is None else K
    lengths = rng.integers(min_len, max_len + 1, size=n_chains)
    n_tok, n_edges = int(lengths.sum()), int(np.maximum(lengths - 1, 0).sum())

    def draw(shape):
        mag = scale * 10.0 ** rng.uniform(-2, 0, size=shape)
        return rng.standard_normal(shape) * mag

    unary = draw((n_tok, K))
    pw = draw((K, K)) if shared else draw((n_edges, K, K))
    fu, fp = unary.copy(), pw.copy()
    if neginf:
        unary[rng.random(unary.shape) < neginf] = -np.inf
        pw[rng.random(pw.shape) < neginf] = -np.inf
        w = rng.integers(0, K, size=n_tok)
        unary[np.arange(n_tok), w] = fu[np.arange(n_tok), w]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        e = 0
        for c, L in enumerate(lengths):
            for t in range(L - 1):
                a, b = w[offsets[c] + t], w[offsets[c] + t + 1]
                if shared:
                    pw[a, b] = fp[a, b]
                else:
                    pw[e, a, b] = fp[e, a, b]
                e += 1
    return ChainPotentials(unary, np.concatenate([[0], np.cumsum(lengths)]), pw)


def _magnitude(p):
    """Sum over each chain's positions of the largest finite |potential|: the size of the
    numbers the reference adds up, which bounds its own rounding error."""
    fin = lambda a: np.where(np.isfinite(a), np.abs(a), 0.0)  # noqa: E731
    per_tok = fin(p.unary).max(axis=1, initial=0.0) + fin(p.pairwise).max(initial=0.0)
    return np.add.reduceat(np.append(per_tok, 0.0), p.offsets[:-1])[: p.n_chains] * (p.lengths > 0)


def check_batch(p, rng, *, n_queries=None):
    """Every sum-product entry point on ``p`` against the reference."""
    ref = Reference(p)
    tol = 1e-9 + 1e-14 * _magnitude(p)  # absolute, on log-partitions
    mtol = 1e-9 + 1e-14 * _magnitude(p).max(initial=0.0)  # absolute, on probabilities

    r = infer(p, edge_marginals=True)
    logz, node, edge = ref.marginals()
    assert np.all(np.abs(r.log_partition - logz) <= tol), "log_partition"
    np.testing.assert_allclose(r.marginals, node, rtol=0, atol=mtol, err_msg="marginals")
    np.testing.assert_allclose(r.edge_marginals, edge, rtol=0, atol=mtol, err_msg="edge marginals")
    assert np.all(np.abs(r.map_score - ref.map_score()) <= tol), "map_score"
    assert np.all(np.abs(ref.score(r.map_labels) - r.map_score) <= tol), "MAP labels"
    vit = infer(p, marginals=False)  # Viterbi alone: its own scratch (checkpointed rows)
    np.testing.assert_array_equal(vit.map_score, r.map_score)
    assert np.all(np.abs(ref.score(vit.map_labels) - vit.map_score) <= tol), "Viterbi labels"
    fb = forward_backward(p)
    np.testing.assert_array_equal(fb.log_partition, r.log_partition)
    np.testing.assert_array_equal(fb.marginals, r.marginals)

    # log-probability of the MAP labeling and of a random labeling (often -inf)
    for labels in (r.map_labels, rng.integers(0, p.n_states, size=p.n_tokens)):
        want = ref.score(labels) - logz
        got = log_probability(p, labels)
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), fin)
        assert np.all(np.abs(got[fin] - want[fin]) <= tol[fin]), "log_probability"
        assert np.all(got <= 0.0)

    # pseudo-marginals around the MAP labeling, computed directly
    pm = pseudo_marginals(p, r.map_labels)
    for c in range(p.n_chains):
        s, L = p.offsets[c], ref.lengths[c]
        y = r.map_labels[s : s + L]
        for t in range(L):
            x = ref.U[c, t].copy()
            if t > 0:
                x = x + ref.PW[c, t - 1, y[t - 1], :]
            if t < L - 1:
                x = x + ref.PW[c, t, :, y[t + 1]]
            np.testing.assert_allclose(pm[s + t], np.exp(x - _lse(x, 0)), rtol=0, atol=1e-12)

    # constrained log-partitions: random label sets at random positions (some infeasible)
    nonempty = np.flatnonzero(ref.lengths > 0)
    if nonempty.size == 0:
        return
    n_q = n_queries or 2 * p.n_chains
    chains = rng.choice(nonempty, size=n_q)
    pos_q, allowed_q = [], []
    for c in chains:
        m = int(rng.integers(0, min(3, ref.lengths[c]) + 1))
        pos_q.append(rng.integers(0, ref.lengths[c], size=m))
        allowed_q.append(rng.random((m, p.n_states)) < 0.5)
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in pos_q])])
    got = constrained_log_partition(
        p, chains, offsets, np.concatenate(pos_q + [np.zeros(0, np.int64)]),
        np.concatenate(allowed_q + [np.zeros((0, p.n_states), bool)]),
    )
    want = ref.constrained(chains, pos_q, allowed_q)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), fin)
    assert np.all(np.abs(got[fin] - want[fin]) <= tol[chains][fin]), "constrained_log_partition"

    # assignment probabilities, dict and span forms
    queries, pos_a, lab_a = [], [], []
    for c in chains[: p.n_chains]:
        L = ref.lengths[c]
        if rng.random() < 0.5:
            pos = np.unique(rng.integers(0, L, size=2))
            lab = rng.integers(0, p.n_states, size=pos.size)
            queries.append((int(c), {int(t): int(a) for t, a in zip(pos, lab)}))
        else:
            start = int(rng.integers(0, L))
            lab = rng.integers(0, p.n_states, size=int(rng.integers(1, L - start + 1)))
            pos = np.arange(start, start + lab.size)
            queries.append((int(c), (start, lab.tolist())))
        pos_a.append(pos)
        lab_a.append(np.eye(p.n_states, dtype=bool)[lab])
    q_chains = np.array([q[0] for q in queries], dtype=np.int64)
    want = np.exp(ref.constrained(q_chains, pos_a, lab_a) - logz[q_chains])
    got = assignment_probability(p, queries)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=mtol, err_msg="assignment_probability")
    assert np.all((got >= 0) & (got <= 1))


def check_events(p):
    """LabelAt, SpanEquals, AnyLabel and InLexicon raw probabilities against the reference."""
    ref = Reference(p)
    logz, node, _ = ref.marginals()
    pred = StructuredPrediction(p)
    K, n = p.n_states, p.n_chains

    def raw(kind):
        ev = kind.instances(pred)
        return ev, kind.probabilities(pred, ev)

    ev, got = raw(LabelAt(0, K - 1, on_short="skip"))
    np.testing.assert_allclose(got, node[p.offsets[ev.item], K - 1], atol=1e-9)

    span = [K - 1, 0]
    ev, got = raw(SpanEquals(0, span, on_short="skip"))
    want = np.exp(ref.constrained(ev.item, [[0, 1]] * len(ev.item), [np.eye(K, dtype=bool)[span]] * len(ev.item)) - logz[ev.item])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9, err_msg="SpanEquals")

    ev, got = raw(AnyLabel(0))
    U = ref.U.copy()
    for c in range(n):
        U[c, : ref.lengths[c], 0] = -np.inf
    absent = np.exp(ref.log_partition(U) - logz)
    np.testing.assert_allclose(got, (1 - absent)[ev.item], rtol=0, atol=1e-9, err_msg="AnyLabel")

    words = [[0], [K - 1, 0], [0, 0, K - 1], [K - 1] * 4, [0, K - 1] * 3]
    ev, got = raw(InLexicon(Lexicon(words, n_states=K)))
    want = np.zeros(n)
    for c in range(n):
        L = ref.lengths[c]
        scores = []
        for w in words:
            if len(w) == L:
                y = np.asarray(w)
                scores.append(ref.U[c, np.arange(L), y].sum() + ref.PW[c, np.arange(L - 1), y[:-1], y[1:]].sum())
        want[c] = np.exp(_lse(np.array(scores + [-np.inf]), 0) - logz[c])
    np.testing.assert_allclose(got, want[ev.item], rtol=1e-12, atol=1e-9, err_msg="InLexicon")


# --------------------------------------------------------------------------- the reproducers


@forced("kernels")  # the kernels' certified scaled pass and its fallback
def test_issue_15_reproducer_lost_state_made_dominant_later():
    unary = np.array([[-370.0, 190.0], [-446.0, 344.0], [-16.0, -432.0], [-186.0, -213.0]])
    pairwise = np.array([[[-160.0, 122.0], [202.0, -242.0]],
                         [[-10.0, -194.0], [-657.0, 205.0]],
                         [[199.0, 418.0], [157.0, -231.0]]])
    p = ChainPotentials(unary, [0, 4], pairwise)
    r = infer(p)
    ex = exact_chain(p, 0)
    assert r.map_labels.tolist() == [1, 0, 0, 1] and r.map_score[0] == 125.0
    np.testing.assert_allclose(r.log_partition, [ex.log_partition], rtol=1e-15)
    np.testing.assert_allclose(ex.log_partition, 125.0, atol=1e-30)
    np.testing.assert_allclose(r.marginals, ex.marginals, atol=1e-15)
    assert r.n_fallback == 1  # one step spans > 680 nats: certified log space, not luck


def test_issue_15_reproducer_forward_only_path():
    ninf = -np.inf
    p = ChainPotentials(np.array([[0.0, ninf], [0.0, 0.0], [ninf, 0.0]]), [0, 3],
                        np.array([[[-750.0, -345.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, -440.0]]]))
    ex = exact_chain(p, 0)
    want = ex.scores[(ex.labelings == [0, 0, 1]).all(axis=1)][0] - ex.log_partition
    np.testing.assert_allclose(log_probability(p, [0, 0, 1]), [want], atol=1e-15)
    assert log_probability(p, [0, 0, 1])[0] <= 0.0
    got = assignment_probability(p, [(0, {1: 0})])
    np.testing.assert_allclose(got, [ex.probability(ex.labelings[:, 1] == 0)], rtol=1e-15)
    assert 0.0 <= got[0] <= 1.0


def test_certificate_is_not_fooled_by_a_state_revived_after_many_steps():
    """A state pushed 600 nats down one step at a time (never more than 150 per step, so
    no single step looks extreme), then made dominant by one transition: the scaled pass
    must either keep it or hand the chain to log space."""
    K, L = 2, 8
    unary = np.zeros((L, K))
    unary[1:5, 1] = -150.0  # state 1 sinks 150 nats per step for four steps
    pw = np.zeros((L - 1, K, K))
    pw[:, 0, 1] = -np.inf  # and can only be reached from itself
    pw[5, 1, :] = 700.0  # then pays back 700 at once
    pw[5, 0, :] = 0.0
    p = ChainPotentials(unary, [0, L], pw)
    ref = Reference(p)
    logz, node, _ = ref.marginals()
    r = infer(p)
    np.testing.assert_allclose(r.log_partition, logz, rtol=1e-14)
    np.testing.assert_allclose(r.marginals, node, atol=1e-12)
    lp = log_probability(p, np.ones(L, dtype=np.int64))
    np.testing.assert_allclose(lp, ref.score(np.ones(L, dtype=np.int64)) - logz, atol=1e-9)


@forced("kernels")  # the kernels' certified scaled pass and its fallback
def test_moderate_potentials_stay_on_the_scaled_pass():
    """The certificate is not so conservative that ordinary models lose the fast pass."""
    rng = np.random.default_rng(0)
    p = random_batch(rng, 400, scale=10.0, shared=True, neginf=0.1, K=5)
    assert infer(p).n_fallback == 0
    p = random_batch(rng, 400, scale=10.0, shared=False, neginf=0.0, K=5)
    assert infer(p).n_fallback == 0


@forced("kernels")  # the kernels' certified scaled pass and its fallback
def test_extreme_steps_fall_back_and_stay_exact():
    rng = np.random.default_rng(1)
    p = random_batch(rng, 300, scale=1e4, shared=False, neginf=0.2, K=3, min_len=2)
    r = infer(p)
    assert r.n_fallback > 0.9 * p.n_chains
    check_batch(p, rng)


# --------------------------------------------------------------------------- stress


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("neginf", [0.0, 0.3])
def test_entry_points_match_log_space_reference(scale, shared, neginf):
    rng = np.random.default_rng([int(scale), shared, int(10 * neginf)])
    for _ in range(3):
        check_batch(random_batch(rng, 40, scale=scale, shared=shared, neginf=neginf), rng)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("shared", [True, False])
def test_event_probabilities_match_log_space_reference(scale, shared):
    rng = np.random.default_rng([int(scale), shared, 7])
    for K in (2, 3):
        check_events(random_batch(rng, 30, scale=scale, shared=shared, neginf=0.2, K=K, min_len=1))


@pytest.mark.parametrize("scale", [1.0, 300.0, 1e4])
def test_tiny_problems_match_enumeration(scale):
    """The reference itself, and the kernels, against brute force on tiny chains."""
    rng = np.random.default_rng(int(scale))
    for _ in range(20):
        p = random_batch(rng, 4, scale=scale, shared=bool(rng.integers(2)), neginf=0.3, max_len=5, K=3)
        r = infer(p)
        ref_logz, ref_node, _ = Reference(p).marginals()
        for c in range(p.n_chains):
            ex = exact_chain(p, c)
            s, e = p.offsets[c], p.offsets[c + 1]
            np.testing.assert_allclose(ref_logz[c], ex.log_partition, rtol=1e-13, atol=1e-12)
            np.testing.assert_allclose(r.log_partition[c], ex.log_partition, rtol=1e-13, atol=1e-12)
            if e > s:
                np.testing.assert_allclose(ref_node[s:e], ex.marginals, atol=1e-12)
                np.testing.assert_allclose(r.marginals[s:e], ex.marginals, atol=1e-12)


@pytest.mark.slow
def test_stress_hundred_thousand_chains():
    """At least 10^5 chains over every scale, pairwise layout and -inf density."""
    rng = np.random.default_rng(15)
    total = 0
    while total < 100_000:
        for scale in SCALES:
            for shared in (True, False):
                for neginf in (0.0, 0.1, 0.4):
                    p = random_batch(rng, 300, scale=scale, shared=shared, neginf=neginf)
                    check_batch(p, rng, n_queries=300)
                    total += p.n_chains
    assert total >= 100_000


@pytest.mark.parametrize("scale", [1.0, 100.0, 1e4])
@pytest.mark.parametrize("shared", [True, False])
def test_chains_longer_than_a_block(scale, shared):
    """Chains of several blocks (``_BLOCK`` = 128 positions): the backward pass
    recomputes earlier blocks' exponentials, the certificate carries across blocks."""
    rng = np.random.default_rng([int(scale), shared, 11])
    p = random_batch(rng, 6, scale=scale, shared=shared, neginf=0.1, K=4, min_len=120, max_len=400)
    check_batch(p, rng, n_queries=12)
