"""Events over node sets: constraints, exact probabilities, reductions, boundaries, table."""

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError
from structcal.events import EventInstances, NodeSetKind, build_events
from structcal.events.nodesets import (
    NodeSetConstraints,
    constraints_probability,
    exact_set_constraints,
    outer_boundary,
    segment_reduce,
)
from structcal.inference.exact import exact_chain
from structcal.prediction import StructuredPrediction

from ._problems import random_chains


class RandomSets(NodeSetKind):
    """Random node sets (not contiguous) per item, target labels from a seed."""

    name = "random_sets"

    def __init__(self, seed, n_per_item=3, boundary=False):
        self.seed = seed
        self.n_per_item = n_per_item
        self.boundary = boundary

    def instances(self, pred):
        rng = np.random.default_rng(self.seed)
        items, members, sizes = [], [], []
        for i in range(pred.n_items):
            s, L = pred.item_offsets[i], pred.lengths[i]
            for _ in range(self.n_per_item if L else 0):
                size = rng.integers(1, L + 1)
                nodes = np.sort(rng.choice(L, size=size, replace=False)) + s
                items.append(i)
                members.append(nodes)
                sizes.append(size)
        members = np.concatenate(members) if members else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        labels = rng.integers(0, pred.n_states, size=members.shape[0])
        items = np.asarray(items, dtype=np.int64)
        return EventInstances(
            items,
            np.full(items.shape[0], -1),
            labels[offsets[:-1]] if len(items) else items,
            members.astype(np.int64),
            offsets,
            labels.astype(np.int64),
        )

    def constraints(self, pred, events):
        if not self.boundary:
            return super().constraints(pred, events)
        indptr, indices = pred.neighbors()
        b, boff = outer_boundary(events.members, events.member_offsets, indptr, indices)
        forbidden = np.repeat(events.label, np.diff(boff))
        return exact_set_constraints(
            events.members,
            events.member_offsets,
            events.member_labels,
            pred.n_states,
            boundary=b,
            boundary_offsets=boff,
            boundary_forbidden=forbidden,
        )


def _brute(pred, events, constraints):
    """Probability and MAP/outcome membership of every event by enumeration."""
    probs = np.empty(len(events))
    for e in range(len(events)):
        i = events.item[e]
        ex = exact_chain(pred.potentials, i)
        s = pred.item_offsets[i]
        inside = np.zeros(ex.labelings.shape[0], dtype=bool)
        for p in np.flatnonzero(constraints.event == e):
            rows = slice(constraints.pattern_offsets[p], constraints.pattern_offsets[p + 1])
            ok = np.ones(ex.labelings.shape[0], dtype=bool)
            for node, allowed in zip(constraints.node[rows], constraints.allowed[rows]):
                ok &= allowed[ex.labelings[:, node - s]]
            assert not (inside & ok).any(), "patterns must be disjoint"
            inside |= ok
        probs[e] = ex.probability(inside)
    return probs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("boundary", [False, True])
def test_node_set_probability_outcome_against_enumeration(seed, boundary):
    rng = np.random.default_rng(seed)
    p = random_chains(rng, 3, [4, 1, 5, 0, 3], scale=2.0, shared=bool(seed % 2))
    pred = StructuredPrediction(p)
    kind = RandomSets(seed, boundary=boundary)
    events = kind.instances(pred)
    c = kind.constraints(pred, events)
    np.testing.assert_allclose(
        kind.probabilities(pred, events), _brute(pred, events, c), rtol=1e-10, atol=1e-13
    )
    y = rng.integers(0, 3, size=p.n_tokens)
    for e in range(len(events)):
        m = events.members[events.member_offsets[e] : events.member_offsets[e + 1]]
        want = (
            y[m] == events.member_labels[events.member_offsets[e] : events.member_offsets[e + 1]]
        ).all()
        if boundary:
            s, L = pred.item_offsets[events.item[e]], pred.lengths[events.item[e]]
            nb = {j for j in m.tolist() for j in (j - 1, j + 1) if s <= j < s + L} - set(m.tolist())
            want &= all(y[j] != events.label[e] for j in nb)
        assert kind.outcomes(pred, events, y)[e] == want


def test_disjoint_patterns_sum_and_extreme_potentials():
    # two patterns "y0 = 0" and "y0 = 1" of one event sum to P(y0 != 2); at magnitude 1e4
    rng = np.random.default_rng(0)
    for scale in (1.0, 1e4):
        p = random_chains(rng, 3, [3], scale=scale)
        pred = StructuredPrediction(p)
        allowed = np.zeros((2, 3), dtype=bool)
        allowed[0, 0] = allowed[1, 1] = True
        c = NodeSetConstraints(
            np.zeros(2, np.int64), np.array([0, 1, 2]), np.array([0, 0]), allowed, 1
        )
        got = constraints_probability(pred, c, np.array([0]))
        want = pred.marginals[0, 0] + pred.marginals[0, 1]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    # an event without patterns and an infeasible pattern have probability 0
    p = ChainPotentials.from_list([np.array([[0.0, -np.inf], [0.0, 0.0]])], np.zeros((2, 2)))
    pred = StructuredPrediction(p)
    allowed = np.array([[False, True]])
    c = NodeSetConstraints(np.array([1]), np.array([0, 1]), np.array([0]), allowed, 2)
    np.testing.assert_array_equal(constraints_probability(pred, c, np.array([0, 0])), [0.0, 0.0])
    np.testing.assert_array_equal(c.satisfied(np.array([1, 0])), [False, True])


def test_concat_orders_patterns_by_event():
    a = NodeSetConstraints(
        np.array([0, 2]),
        np.array([0, 1, 3]),
        np.array([5, 6, 7]),
        np.eye(3, dtype=bool)[[0, 1, 2]],
        3,
    )
    b = NodeSetConstraints(
        np.array([1]), np.array([0, 2]), np.array([8, 9]), np.eye(3, dtype=bool)[[2, 2]], 3
    )
    c = NodeSetConstraints.concat([a, b], 3)
    np.testing.assert_array_equal(c.event, [0, 1, 2])
    np.testing.assert_array_equal(c.pattern_offsets, [0, 1, 3, 5])
    np.testing.assert_array_equal(c.node, [5, 8, 9, 6, 7])
    np.testing.assert_array_equal(c.allowed.argmax(1), [0, 2, 2, 1, 2])


def test_segment_reduce_and_outer_boundary():
    v = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    off = np.array([0, 2, 2, 5])
    np.testing.assert_array_equal(segment_reduce(v, off, "min", empty=9), [1, 9, 2])
    np.testing.assert_array_equal(segment_reduce(v, off, "max"), [3, np.nan, 5])
    np.testing.assert_array_equal(segment_reduce(v, off, "sum"), [4, 0, 11])
    np.testing.assert_allclose(segment_reduce(v, off, "mean", empty=0), [2, 0, 11 / 3])
    np.testing.assert_array_equal(segment_reduce(v, off, "prod"), [3, 1, 40])
    np.testing.assert_array_equal(segment_reduce(v, off, "size"), [2, 0, 3])
    np.testing.assert_array_equal(segment_reduce(v, np.array([0]), "min"), [])
    with pytest.raises(ParameterError, match="`op`"):
        segment_reduce(v, off, "median")
    # path 0-1-2-3-4 (one chain of 5) and a chain of 1
    p = ChainPotentials.from_list([np.zeros((5, 2)), np.zeros((1, 2))], np.zeros((2, 2)))
    indptr, indices = StructuredPrediction(p).neighbors()
    b, boff = outer_boundary(np.array([1, 2, 4, 0, 5]), np.array([0, 3, 4, 5]), indptr, indices)
    np.testing.assert_array_equal(boff, [0, 2, 3, 3])
    np.testing.assert_array_equal(b, [0, 3, 1])


def test_table_carries_members_and_set_features():
    rng = np.random.default_rng(3)
    p = random_chains(rng, 3, [4, 2, 5], scale=1.5)
    pred = StructuredPrediction(p)
    kind = RandomSets(1)
    y = rng.integers(0, 3, size=p.n_tokens)
    from structcal.features import FEATURE_GROUPS

    feats = ["raw", "map_in_event", "phi_mp1", "phi_mp3", "phi_mg1"] + FEATURE_GROUPS["set"]["set"]
    t = build_events(pred, [kind], y_true=y, features=feats)
    ev = kind.instances(pred)
    np.testing.assert_array_equal(t.members, ev.members)
    np.testing.assert_array_equal(t.member_offsets, ev.member_offsets)
    marg = pred.marginals[ev.members, ev.member_labels]
    for r in range(t.n_events):
        sl = slice(ev.member_offsets[r], ev.member_offsets[r + 1])
        np.testing.assert_array_equal(t.members_of(r), ev.members[sl])
        assert t.columns("set_size")[r, 0] == sl.stop - sl.start
        assert t.columns("set_min_marginal")[r, 0] == marg[sl].min()
        np.testing.assert_allclose(t.columns("set_prod_marginal")[r, 0], marg[sl].prod())
        np.testing.assert_allclose(t.columns("set_mean_marginal")[r, 0], marg[sl].mean())
        assert t.columns("set_class")[r].argmax() == ev.label[r]
        assert t.columns("phi_mp1")[r, 0] == pred.lengths[ev.item[r]]
        np.testing.assert_allclose(t.raw[r], kind.probabilities(pred, ev)[r])
        assert t.outcome[r] == (y[ev.members[sl]] == ev.member_labels[sl]).all()
    sub = t.select(np.array([2, 0]))
    np.testing.assert_array_equal(sub.members_of(0), t.members_of(2))
    both = type(t).concat([sub, t])
    np.testing.assert_array_equal(both.members_of(3), t.members_of(1))
