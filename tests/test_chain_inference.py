"""Chain inference against brute-force enumeration, invariants and edge cases."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from structcal import ChainPotentials, InfeasibleError, ParameterError
from structcal.inference import (
    assignment_probability,
    constrained_log_partition,
    forward_backward,
    infer,
    kbest,
    log_probability,
    pseudo_marginals,
    score_labelings,
    viterbi,
)
from structcal.inference.exact import enumerate_model, exact_chain

from ._problems import random_chains
from structcal._tier import forced_tier as forced

# every test runs on both implementations of chain inference (structcal._tier)
pytestmark = pytest.mark.usefixtures("both_tiers")

CASES = [
    (n_states, shared, scale, neginf, seed)
    for n_states in (1, 2, 3, 4)
    for shared in (True, False)
    for scale in (1.0, 30.0, 1e4)
    for neginf in (0.0, 0.25)
    for seed in range(3)
]


def _problem(n_states, shared, scale, neginf, seed):
    rng = np.random.default_rng(seed * 1000 + n_states * 10 + int(shared))
    lengths = rng.integers(1, 7, size=6)
    if n_states == 4:
        lengths = np.minimum(lengths, 5)  # keep 4**L enumerations small
    return random_chains(rng, n_states, lengths, scale=scale, shared=shared, neginf=neginf)


def _tol(scale):
    # log-scores of magnitude `scale` carry rounding of about 1e-16 * scale * L
    return dict(rtol=1e-9, atol=1e-9 * max(1.0, scale))


def _assert_sum_product_matches(r, p, c, ex, scale):
    """Log-partition, node and edge marginals of chain ``c`` in ``r`` against enumeration."""
    s, t = p.offsets[c], p.offsets[c + 1]
    e0, e1 = p.edge_offsets[c], p.edge_offsets[c + 1]
    np.testing.assert_allclose(r.log_partition[c], ex.log_partition, **_tol(scale))
    np.testing.assert_allclose(r.marginals[s:t], ex.marginals, atol=1e-9)
    np.testing.assert_allclose(r.edge_marginals[e0:e1], ex.edge_marginals, atol=1e-9)


@pytest.mark.parametrize("n_states,shared,scale,neginf,seed", CASES)
def test_marginals_and_log_partition_match_enumeration(n_states, shared, scale, neginf, seed):
    p = _problem(n_states, shared, scale, neginf, seed)
    r = forward_backward(p, edge_marginals=True)
    for c in range(p.n_chains):
        _assert_sum_product_matches(r, p, c, exact_chain(p, c), scale)
    # invariants: rows sum to one, edge marginals agree with node marginals
    np.testing.assert_allclose(r.marginals.sum(axis=1), 1.0, atol=1e-12)
    for c in range(p.n_chains):
        s = p.offsets[c]
        for t in range(p.lengths[c] - 1):
            e = p.edge_offsets[c] + t
            np.testing.assert_allclose(r.edge_marginals[e].sum(axis=1), r.marginals[s + t], atol=1e-9)
            np.testing.assert_allclose(r.edge_marginals[e].sum(axis=0), r.marginals[s + t + 1], atol=1e-9)
    assert np.isfinite(r.log_partition).all() and np.isfinite(r.marginals).all()


@pytest.mark.parametrize("n_states,shared,scale,neginf,seed", CASES)
def test_viterbi_matches_enumeration(n_states, shared, scale, neginf, seed):
    p = _problem(n_states, shared, scale, neginf, seed)
    r = viterbi(p)
    assert r.marginals is None and r.map_labels.dtype == np.int64
    np.testing.assert_allclose(score_labelings(p, r.map_labels), r.map_score, **_tol(scale))
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        np.testing.assert_allclose(r.map_score[c], ex.map_score, **_tol(scale))
    # the fused pass gives the same MAP as Viterbi alone
    both = infer(p)
    np.testing.assert_array_equal(both.map_labels, r.map_labels)
    np.testing.assert_array_equal(both.map_score, r.map_score)


# More states: the vectorised kernels work on blocks of 32 states (Viterbi clamps its last
# vectors to start at K - 4, the sum-product passes pad rows to a multiple of 32); these
# sizes cover one and two blocks, K below and at 32, and every K % 4.
WIDE_STATES = (5, 6, 7, 9, 13, 16, 17, 19, 26, 32, 33, 40)


@pytest.mark.parametrize("n_states", WIDE_STATES)
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("scale,neginf", [(1.0, 0.0), (30.0, 0.3), (1e4, 0.0)])
def test_many_states_match_enumeration(n_states, shared, scale, neginf):
    rng = np.random.default_rng(n_states * 10 + int(shared) + int(scale))
    lengths = rng.integers(1, 4 if n_states <= 19 else 3, size=4)
    p = random_chains(rng, n_states, lengths, scale=scale, shared=shared, neginf=neginf)
    r = infer(p, edge_marginals=True)
    first = assignment_probability(p, [(c, (0, [0])) for c in range(p.n_chains)])
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        _assert_sum_product_matches(r, p, c, ex, scale)
        np.testing.assert_allclose(r.map_score[c], ex.map_score, **_tol(scale))
        np.testing.assert_allclose(first[c], ex.marginals[0, 0], atol=1e-9)
    np.testing.assert_allclose(score_labelings(p, r.map_labels), r.map_score, **_tol(scale))


def _log_space_reference(unary, pairwise):
    """Forward-backward and Viterbi of one chain in plain NumPy/SciPy log space."""
    from scipy.special import logsumexp

    L, K = unary.shape
    fwd, bwd, vit = np.empty((L, K)), np.zeros((L, K)), np.empty((L, K))
    fwd[0] = vit[0] = unary[0]
    for t in range(1, L):
        fwd[t] = logsumexp(fwd[t - 1][:, None] + pairwise, axis=0) + unary[t]
        vit[t] = np.max(vit[t - 1][:, None] + pairwise, axis=0) + unary[t]
    for t in range(L - 2, -1, -1):
        bwd[t] = logsumexp(pairwise + (unary[t + 1] + bwd[t + 1])[None, :], axis=1)
    logz = logsumexp(fwd[-1])
    return logz, np.exp(fwd + bwd - logz), vit[-1].max()


@pytest.mark.parametrize("n_states", [4, 17, 26, 40])
@pytest.mark.parametrize("scale", [1.0, 8.0])
def test_long_chains_match_log_space_reference(n_states, scale):
    """Long chains (no enumeration possible): the scaled pass against plain log space."""
    rng = np.random.default_rng(n_states)
    p = random_chains(rng, n_states, [60, 1, 33], scale=scale)
    r = infer(p)
    assert r.n_fallback == 0
    for c in range(p.n_chains):
        s, t = p.offsets[c], p.offsets[c + 1]
        logz, marg, best = _log_space_reference(p.unary[s:t], p.pairwise)
        np.testing.assert_allclose(r.log_partition[c], logz, rtol=1e-12)
        np.testing.assert_allclose(r.marginals[s:t], marg, atol=1e-11)
        np.testing.assert_allclose(r.map_score[c], best, rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 7])
@pytest.mark.parametrize("n_states,shared,scale,neginf,seed", CASES[::2])
def test_kbest_matches_enumeration(n_states, shared, scale, neginf, seed, k):
    p = _problem(n_states, shared, scale, neginf, seed)
    r = kbest(p, k)
    assert r.labels.shape == (k, p.n_tokens) and r.scores.shape == (p.n_chains, k)
    vit = viterbi(p)
    np.testing.assert_allclose(r.scores[:, 0], vit.map_score, **_tol(scale))
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        finite = np.isfinite(ex.scores)
        n_feasible = int(finite.sum())
        assert r.n_found[c] == min(k, n_feasible)
        want = np.full(k, -np.inf)
        want[: min(k, n_feasible)] = ex.scores[finite][:k]
        np.testing.assert_allclose(r.scores[c], want, **_tol(scale))
        assert (np.diff(r.scores[c][np.isfinite(r.scores[c])]) <= 0).all()  # sorted
        s, t = p.offsets[c], p.offsets[c + 1]
        found = r.labels[: r.n_found[c], s:t]
        assert len({tuple(row) for row in found}) == r.n_found[c]  # distinct
        assert (r.labels[r.n_found[c] :, s:t] == -1).all()
        for q in range(r.n_found[c]):  # each reported score is the labeling's score
            lab = p.subset([c])
            np.testing.assert_allclose(
                score_labelings(lab, found[q]), r.scores[c, q], **_tol(scale)
            )


@pytest.mark.parametrize("seed", range(6))
def test_kbest_ties_come_in_colexicographic_order(seed):
    """Small integer potentials (sums exact in float64) give many exact ties: the whole
    list must equal the enumeration sorted by score, ties by the reversed labeling."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 4))
    lengths = rng.integers(0, 5, size=4)
    unary = rng.integers(-1, 2, size=(int(lengths.sum()), K)).astype(float)
    unary[rng.random(unary.shape) < 0.1] = -np.inf
    pw = rng.integers(-1, 2, size=(K, K)).astype(float)
    p = ChainPotentials(unary, np.concatenate([[0], np.cumsum(lengths)]), pw)
    k = K ** int(lengths.max())
    r = kbest(p, k)
    for c in range(p.n_chains):
        s, t = p.offsets[c], p.offsets[c + 1]
        labs = np.array(list(itertools.product(range(K), repeat=t - s)), dtype=np.int64).reshape(K ** (t - s), t - s)
        sc = score_labelings(p.subset([c] * labs.shape[0]), labs.ravel()) if t > s else np.zeros(1)
        keep = np.isfinite(sc)
        order = sorted(range(labs.shape[0]), key=lambda q: (-sc[q], tuple(labs[q][::-1])))
        order = [q for q in order if keep[q]]
        assert r.n_found[c] == len(order)
        np.testing.assert_array_equal(r.labels[: len(order), s:t], labs[order])
        np.testing.assert_array_equal(r.scores[c, : len(order)], sc[order])
    z = ChainPotentials.from_list([np.zeros((2, 2))], np.zeros((2, 2)))  # the docstring's rule
    assert kbest(z, 4).labels.tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]


@pytest.mark.parametrize("n_states,shared,scale,neginf,seed", CASES[::2])
def test_log_probability_and_pseudo_marginals(n_states, shared, scale, neginf, seed):
    p = _problem(n_states, shared, scale, neginf, seed)
    mp = viterbi(p).map_labels
    logp = log_probability(p, mp)
    pm = pseudo_marginals(p, mp)
    np.testing.assert_allclose(pm.sum(axis=1), 1.0, atol=1e-12)
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        s, t = p.offsets[c], p.offsets[c + 1]
        y = mp[s:t]
        match = (ex.labelings == y).all(axis=1)
        np.testing.assert_allclose(np.exp(logp[c]), ex.probability(match), rtol=1e-9, atol=1e-12)
        for j in range(t - s):
            others = np.delete(np.arange(t - s), j)
            rows = (ex.labelings[:, others] == y[others]).all(axis=1)
            # conditional by enumeration: p(y_j = a | rest) from the unnormalised scores
            sc = ex.scores[rows]
            lab = ex.labelings[rows, j]
            w = np.exp(sc - sc.max())
            want = np.zeros(p.n_states)
            np.add.at(want, lab, w / w.sum())
            np.testing.assert_allclose(pm[s + j], want, atol=1e-9)


@pytest.mark.parametrize("n_states,shared,scale,neginf,seed", CASES[::3])
def test_partial_assignments_match_enumeration(n_states, shared, scale, neginf, seed):
    p = _problem(n_states, shared, scale, neginf, seed)
    rng = np.random.default_rng(seed)
    queries, masks = [], []
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        L = p.lengths[c]
        for _ in range(3):
            start = int(rng.integers(0, L))
            span = rng.integers(0, n_states, size=int(rng.integers(1, L - start + 1)))
            queries.append((c, (start, span)))
            masks.append((ex, (ex.labelings[:, start : start + len(span)] == span).all(axis=1)))
            pos = rng.choice(L, size=min(L, 2), replace=False)
            lab = rng.integers(0, n_states, size=pos.shape[0])
            queries.append((c, dict(zip(pos.tolist(), lab.tolist()))))
            masks.append((ex, (ex.labelings[:, pos] == lab).all(axis=1)))
    got = assignment_probability(p, queries)
    want = [ex.probability(m) for ex, m in masks]
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)
    logs = assignment_probability(p, queries, log=True)
    np.testing.assert_allclose(np.exp(logs), got, rtol=1e-12)


def test_constrained_log_partition_with_label_sets(rng):
    """'no position has label a' via allowed masks, against enumeration."""
    p = random_chains(rng, 3, [4, 2, 5], scale=2.0)
    chains, offsets, positions, allowed, want = [], [0], [], [], []
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        for a in range(3):
            L = p.lengths[c]
            chains.append(c)
            positions.extend(range(L))
            row = np.ones(3, bool)
            row[a] = False
            allowed.extend([row] * L)
            offsets.append(offsets[-1] + L)
            want.append(ex.probability((ex.labelings != a).all(axis=1)))
    logz = forward_backward(p).log_partition[chains]
    got = np.exp(constrained_log_partition(p, chains, offsets, positions, np.array(allowed)) - logz)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-14)


def test_shared_equals_per_edge_copy(rng):
    p = random_chains(rng, 4, [3, 1, 5, 2], scale=3.0)
    per_edge = ChainPotentials(p.unary, p.offsets, np.broadcast_to(p.pairwise, (p.n_edges, 4, 4)))
    a, b = infer(p, edge_marginals=True), infer(per_edge, edge_marginals=True)
    np.testing.assert_array_equal(a.map_labels, b.map_labels)
    np.testing.assert_allclose(a.marginals, b.marginals, atol=1e-14)
    np.testing.assert_allclose(a.log_partition, b.log_partition, rtol=1e-14)
    np.testing.assert_allclose(a.edge_marginals, b.edge_marginals, atol=1e-14)


@pytest.mark.parametrize("n_states", [3, 26])
@pytest.mark.parametrize("n_chains", [300, 900])  # serial / parallel driver (by token count)
def test_per_edge_batch_matches_chain_by_chain(n_states, n_chains):
    """Per-edge matrices are exponentiated per chain in scratch shared by a chunk of chains
    of mixed lengths (0 and 1 included): every chain's results, and single-position
    queries in shuffled order, must equal that chain's own."""
    rng = np.random.default_rng(n_states + n_chains)
    lengths = rng.integers(0, 12, size=n_chains)
    p = random_chains(rng, n_states, lengths, scale=4.0, shared=False, neginf=0.1)
    assert (p.n_tokens >= 4096) == (n_chains == 900)
    r = infer(p, edge_marginals=True)
    assert r.n_fallback == 0  # the fast pass, which uses the exponentials, ran everywhere
    for c in range(p.n_chains):
        one = infer(p.chain(c), edge_marginals=True)
        s, t = p.offsets[c], p.offsets[c + 1]
        e0, e1 = p.edge_offsets[c], p.edge_offsets[c + 1]
        np.testing.assert_array_equal(r.map_labels[s:t], one.map_labels)
        np.testing.assert_allclose(r.log_partition[c], one.log_partition[0], rtol=1e-13)
        np.testing.assert_allclose(r.marginals[s:t], one.marginals, atol=1e-13)
        np.testing.assert_allclose(r.edge_marginals[e0:e1], one.edge_marginals, atol=1e-13)
    # runs of queries on one chain (the exponentials are reused) and interleaved chains
    chains = np.repeat(np.flatnonzero(p.lengths > 0), 2)
    chains = np.concatenate([chains, rng.permutation(chains)])
    pos = (rng.random(chains.shape[0]) * p.lengths[chains]).astype(np.int64)
    lab = rng.integers(0, n_states, size=chains.shape[0])
    queries = [(int(c), {int(t): int(a)}) for c, t, a in zip(chains, pos, lab)]
    got = assignment_probability(p, queries)
    np.testing.assert_allclose(got, r.marginals[p.offsets[chains] + pos, lab], atol=1e-12)


def test_zero_potentials_count_labelings():
    # log Z of all-zero potentials is L log K, marginals uniform
    p = ChainPotentials.from_list([np.zeros((L, 3)) for L in (1, 2, 5)], np.zeros((3, 3)))
    r = forward_backward(p)
    np.testing.assert_allclose(r.log_partition, np.array([1, 2, 5]) * np.log(3), rtol=1e-14)
    np.testing.assert_allclose(r.marginals, 1 / 3, rtol=1e-14)


def test_textbook_example_exact_numbers():
    """Two-state chain worked by hand: unary log([.5,.5],[.9,.1]), transitions log([[.7,.3],[.4,.6]])."""
    U = np.log([[0.5, 0.5], [0.9, 0.1]])
    P = np.log([[0.7, 0.3], [0.4, 0.6]])
    r = infer(ChainPotentials.from_list([U], P), edge_marginals=True)
    # path weights: 00: .5*.7*.9=.315  01: .5*.3*.1=.015  10: .5*.4*.9=.18  11: .5*.6*.1=.03
    Z = 0.315 + 0.015 + 0.18 + 0.03
    np.testing.assert_allclose(np.exp(r.log_partition[0]), Z)
    np.testing.assert_allclose(r.marginals[0], [(0.315 + 0.015) / Z, (0.18 + 0.03) / Z])
    np.testing.assert_allclose(r.edge_marginals[0], np.array([[0.315, 0.015], [0.18, 0.03]]) / Z)
    assert r.map_labels.tolist() == [0, 0]
    np.testing.assert_allclose(r.map_score[0], np.log(0.315))


@forced("kernels")  # the kernels' certified scaled pass and its fallback
def test_fast_pass_used_for_moderate_potentials_and_fallback_for_extreme(rng):
    moderate = random_chains(rng, 26, [8] * 20, scale=10.0)
    assert infer(moderate).n_fallback == 0
    extreme = random_chains(rng, 3, [6] * 5, scale=1e4)
    r = infer(extreme)
    assert r.n_fallback > 0
    for c in range(extreme.n_chains):
        np.testing.assert_allclose(r.log_partition[c], exact_chain(extreme, c).log_partition, rtol=1e-12)


def test_length_one_and_empty_chains():
    u = np.array([[0.0, np.log(3.0)]])
    p = ChainPotentials(np.concatenate([u, u]), [0, 1, 1, 2], np.zeros((2, 2)))
    assert p.n_edges == 0 and p.lengths.tolist() == [1, 0, 1]
    r = infer(p, edge_marginals=True)
    np.testing.assert_allclose(r.marginals, [[0.25, 0.75], [0.25, 0.75]])
    np.testing.assert_allclose(r.log_partition, [np.log(4), 0.0, np.log(4)])
    np.testing.assert_allclose(r.map_score, [np.log(3), 0.0, np.log(3)])
    assert r.map_labels.tolist() == [1, 1] and r.edge_marginals.shape == (0, 2, 2)
    kb = kbest(p, 3)
    assert kb.n_found.tolist() == [2, 1, 2]
    np.testing.assert_allclose(kb.scores[1], [0.0, -np.inf, -np.inf])
    np.testing.assert_allclose(log_probability(p, [1, 0]), [np.log(0.75), 0.0, np.log(0.25)])
    assert pseudo_marginals(p, [1, 1]).shape == (2, 2)
    only_empty = ChainPotentials(np.zeros((0, 2)), [0, 0], np.zeros((2, 2)))
    r = infer(only_empty)
    assert r.marginals.shape == (0, 2) and r.log_partition.tolist() == [0.0]


def test_single_state():
    p = ChainPotentials.from_list([np.full((4, 1), 2.0)], np.full((1, 1), -1.0))
    r = infer(p)
    np.testing.assert_allclose(r.log_partition, [8.0 - 3.0])
    assert r.map_labels.tolist() == [0, 0, 0, 0]
    assert kbest(p, 2).n_found.tolist() == [1]


def test_infeasible_chain_raises():
    P = np.array([[0.0, -np.inf], [-np.inf, 0.0]])  # labels can never change
    U = np.array([[0.0, -np.inf], [-np.inf, 0.0]])  # but the unaries force a change
    p = ChainPotentials.from_list([np.zeros((2, 2)), U], P)
    for f in (infer, viterbi, forward_backward):
        with pytest.raises(InfeasibleError, match=r"chain\(s\) \[1\]"):
            f(p)
    assert kbest(p, 2).n_found.tolist() == [2, 0]
    np.testing.assert_array_equal(score_labelings(p, [0, 0, 0, 1]), [0.0, -np.inf])
    with pytest.raises(InfeasibleError):
        pseudo_marginals(p, [0, 1, 0, 1])


def test_results_are_deterministic(rng):
    p = random_chains(rng, 5, rng.integers(1, 10, size=300), scale=5.0)
    a, b = infer(p, edge_marginals=True), infer(p, edge_marginals=True)
    np.testing.assert_array_equal(a.marginals, b.marginals)
    np.testing.assert_array_equal(a.edge_marginals, b.edge_marginals)
    np.testing.assert_array_equal(a.map_labels, b.map_labels)


def test_reversal_transposes_pairwise(rng):
    """Reversing a chain and transposing its transitions leaves marginals and MAP unchanged."""
    p = random_chains(rng, 3, [6], scale=2.0)
    rev = ChainPotentials(p.unary[::-1], p.offsets, p.pairwise.T)
    a, b = infer(p), infer(rev)
    np.testing.assert_allclose(a.marginals, b.marginals[::-1], atol=1e-12)
    np.testing.assert_allclose(a.log_partition, b.log_partition, rtol=1e-12)
    np.testing.assert_array_equal(a.map_labels, b.map_labels[::-1])


@given(
    n_states=st.integers(1, 3),
    lengths=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    scale=st.sampled_from([0.1, 1.0, 50.0, 1e3]),
    seed=st.integers(0, 2**32 - 1),
)

def test_property_marginals_and_map(n_states, lengths, scale, seed):
    rng = np.random.default_rng(seed)
    p = random_chains(rng, n_states, lengths, scale=scale, shared=bool(seed % 2))
    r = infer(p)
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        s, t = p.offsets[c], p.offsets[c + 1]
        np.testing.assert_allclose(r.log_partition[c], ex.log_partition, **_tol(scale))
        np.testing.assert_allclose(r.marginals[s:t], ex.marginals, atol=1e-9)
        np.testing.assert_allclose(r.map_score[c], ex.map_score, **_tol(scale))


def test_oracle_itself_on_a_hand_case():
    ex = enumerate_model([[0.0, 1.0]], np.zeros((0, 2), int), np.zeros((0, 2, 2)))
    assert ex.labelings.tolist() == [[1], [0]]
    np.testing.assert_allclose(ex.log_partition, np.log(1 + np.e))
    # every labeling of a 3-node 2-state model appears once
    ex = enumerate_model(np.zeros((3, 2)), [[0, 1], [1, 2]], np.zeros((2, 2, 2)))
    assert sorted(map(tuple, ex.labelings)) == list(itertools.product([0, 1], repeat=3))


# ------------------------------------------------------------------ bad input


def test_potentials_validation_messages():
    U = np.zeros((4, 3))
    with pytest.raises(ParameterError, match="`offsets` must end at the number of rows"):
        ChainPotentials(U, [0, 2, 3], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="non-decreasing"):
        ChainPotentials(U, [0, 3, 2, 4], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="must start at 0"):
        ChainPotentials(U, [1, 4], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match=r"`pairwise` must have shape \(n_states, n_states\)=\(3, 3\)"):
        ChainPotentials(U, [0, 4], np.zeros((3, 4)))
    with pytest.raises(ParameterError, match=r"per-edge `pairwise` must have shape .*\(3, 3, 3\)"):
        ChainPotentials(U, [0, 4], np.zeros((4, 3, 3)))
    bad = U.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ParameterError, match=r"`unary` must not contain NaN; found NaN at index \(2, 1\)"):
        ChainPotentials(bad, [0, 4], np.zeros((3, 3)))
    bad[2, 1] = np.inf
    with pytest.raises(ParameterError, match=r"\+inf"):
        ChainPotentials(bad, [0, 4], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="2-d"):
        ChainPotentials(np.zeros(4), [0, 4], np.zeros((3, 3)))
    with pytest.raises(TypeError, match="`offsets` must be an integer array"):
        ChainPotentials(U, np.array([0.0, 4.0]), np.zeros((3, 3)))
    with pytest.raises(TypeError, match="real numbers"):
        ChainPotentials(np.array([["a"]]), [0, 1], np.zeros((1, 1)))
    with pytest.raises(ParameterError, match="same number of states"):
        ChainPotentials.from_list([np.zeros((2, 3)), np.zeros((2, 2))], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="empty list"):
        ChainPotentials.from_list([], np.zeros((3, 3)))


def test_inference_argument_validation(rng):
    p = random_chains(rng, 3, [2, 3], scale=1.0)
    with pytest.raises(ParameterError, match="`k` must be >= 1; got 0"):
        kbest(p, 0)
    with pytest.raises(TypeError, match="`k` must be an integer"):
        kbest(p, 2.0)
    with pytest.raises(ParameterError, match=r"`labels` entries must be < 3; got 3"):
        score_labelings(p, [0, 1, 2, 0, 3])
    with pytest.raises(ParameterError, match=r"`labels` must have shape \(5,\)"):
        log_probability(p, [0, 1, 2])
    with pytest.raises(ParameterError, match=r"`labels\[1\]` must have the chain's length 3"):
        pseudo_marginals(p, [np.array([0, 1]), np.array([0, 1])])
    with pytest.raises(TypeError, match="integer array"):
        score_labelings(p, np.zeros(5))
    with pytest.raises(TypeError, match="ChainPotentials"):
        infer(np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="past the end of chain 0"):
        assignment_probability(p, [(0, {2: 1})])
    with pytest.raises(ParameterError, match="entries must be < 2"):
        assignment_probability(p, [(2, {0: 1})])
    with pytest.raises(ParameterError, match="assignment labels` entries must be < 3"):
        assignment_probability(p, [(0, (0, [5]))])


def test_potentials_are_read_only_and_not_aliasing_user_arrays(rng):
    U = rng.standard_normal((3, 2))
    p = ChainPotentials(U, [0, 3], np.zeros((2, 2)))
    with pytest.raises(ValueError):
        p.unary[0, 0] = 1.0
    U[0, 0] = 5.0  # the user's array stays writable
    sub = p.subset([0])
    assert sub.n_tokens == 3


def test_from_scores_folds_start_and_end(rng):
    scores = rng.standard_normal((5, 3))
    T = rng.standard_normal((3, 3))
    start, end = rng.standard_normal(3), rng.standard_normal(3)
    p = ChainPotentials.from_scores(scores, [2, 0, 3], T, start=start, end=end)
    y = [1, 2, 0, 0, 2]
    want = [
        scores[0, 1] + scores[1, 2] + T[1, 2] + start[1] + end[2],
        0.0,
        scores[2, 0] + scores[3, 0] + scores[4, 2] + T[0, 0] + T[0, 2] + start[0] + end[2],
    ]
    np.testing.assert_allclose(score_labelings(p, y), want)
    with pytest.raises(ParameterError, match="must sum to the number of rows"):
        ChainPotentials.from_scores(scores, [2, 2], T)


def test_subset_per_edge(rng):
    p = random_chains(rng, 3, [3, 1, 4, 2], scale=1.0, shared=False)
    sub = p.subset([2, 0])
    full = infer(p)
    part = infer(sub)
    np.testing.assert_allclose(part.marginals, np.concatenate([full.marginals[4:8], full.marginals[0:3]]))
