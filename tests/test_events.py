"""Events, features and the event table, checked against enumeration and direct computation."""

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError, ParameterTypeError
from structcal.events import (
    AnyLabel,
    InLexicon,
    LabelAt,
    Lexicon,
    MAPEvent,
    MarginalEvent,
    Predicate,
    SpanEquals,
    build_events,
)
from structcal.features import FEATURE_GROUPS, feature_names, get_feature, register_feature
from structcal.inference.exact import exact_chain
from structcal.prediction import StructuredPrediction

from ._problems import random_chains


def _problem(seed=0, K=3, lengths=(3, 1, 4, 2, 5), scale=2.0, shared=True):
    rng = np.random.default_rng(seed)
    p = random_chains(rng, K, lengths, scale=scale, shared=shared)
    y = rng.integers(0, K, size=p.n_tokens)
    svm = rng.standard_normal((p.n_tokens, K))
    return p, y, svm


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shared", [True, False])
def test_raw_probabilities_and_outcomes_match_enumeration(seed, shared):
    p, y, _ = _problem(seed, shared=shared)
    lex_words = [[0, 1, 2], [1], [2, 2, 0, 1], [0, 0], [1, 1], [0, 1, 2, 0, 1]]
    lex = Lexicon(lex_words, n_states=3)
    kinds = [
        MAPEvent(), MarginalEvent(), InLexicon(lex), AnyLabel(2), LabelAt(-1, 1),
        SpanEquals(0, [0, 1], on_short="skip"), Predicate(lambda lab: bool(lab.sum() % 2 == 0), "even"),
    ]
    pred = StructuredPrediction(p)
    t = build_events(pred, kinds, y_true=y, features=["phi_mp1", "map_in_event"])
    groups = t.group_by("kind")
    mp = pred.map_labels
    words = [tuple(w) for w in lex_words]
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        s, e = p.offsets[c], p.offsets[c + 1]
        yc, mc, labs = y[s:e], mp[s:e], ex.labelings
        expected = {
            "map": (ex.probability((labs == mc).all(axis=1)), (yc == mc).all(), True),
            "in_lexicon": (
                ex.probability(np.array([tuple(r) in words for r in labs])),
                tuple(yc) in words, tuple(mc) in words,
            ),
            "any_label=2": (ex.probability((labs == 2).any(axis=1)), (yc == 2).any(), (mc == 2).any()),
            "label_at[-1]=1": (ex.probability(labs[:, -1] == 1), yc[-1] == 1, mc[-1] == 1),
            "even": (np.nan, yc.sum() % 2 == 0, mc.sum() % 2 == 0),
        }
        if e - s >= 2:
            expected["span[0]=0-1"] = (
                ex.probability((labs[:, :2] == [0, 1]).all(axis=1)),
                tuple(yc[:2]) == (0, 1), tuple(mc[:2]) == (0, 1),
            )
        for name, (prob, outcome, map_in) in expected.items():
            g = groups[name]
            row = np.flatnonzero(g.item == c)
            assert row.size == 1, name
            np.testing.assert_allclose(g.raw[row[0]], prob, rtol=1e-9, atol=1e-12, err_msg=name)
            assert g.outcome[row[0]] == outcome, name
            assert g.columns("map_in_event")[row[0], 0] == map_in, name
        g = groups["marginal"]
        rows = np.flatnonzero(g.item == c)
        np.testing.assert_array_equal(g.position[rows], np.arange(e - s))
        np.testing.assert_array_equal(g.label[rows], mc)
        np.testing.assert_allclose(g.raw[rows], ex.marginals[np.arange(e - s), mc], atol=1e-12)
        np.testing.assert_array_equal(g.outcome[rows], yc == mc)
    # the short chain (length 1) has no span event
    assert 1 not in groups["span[0]=0-1"].item


def test_table1_features_by_direct_computation():
    p, y, svm = _problem(1, K=4, lengths=(3, 1, 4))
    pred = StructuredPrediction(p, unstructured_scores=svm)
    lex = Lexicon([[int(a) for a in pred.map_labels[:3]]], n_states=4)  # item 0's MAP is admissible
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features="all", lexicon=lex,
                     label_set=[0, 2], label_names="wxyz")
    mp, marg, pm = pred.map_labels, pred.marginals, pred.pseudo_marginals

    def mrg(row):
        s = np.sort(row)[::-1]
        return s[0] - s[1]

    m = t.group_by("kind")["map"]
    assert m.feature_names == (
        "phi_no1", "phi_mp1", "phi_mp2", "phi_mp3", "phi_mg1", "map_in_event", "raw"
    )
    from structcal.inference import kbest

    kb = kbest(p, 2)
    for c in range(3):
        s, e = p.offsets[c], p.offsets[c + 1]
        want = [
            min(mrg(svm[j]) for j in range(s, e)), e - s, float(c == 0),
            kb.scores[c, 0] - kb.scores[c, 1], min(mrg(marg[j]) for j in range(s, e)), 1.0,
            np.exp(pred.map_score[c] - pred.log_partition[c]),
        ]
        np.testing.assert_allclose(m.X[c], want, rtol=1e-12)
    n = t.group_by("kind")["marginal"]
    assert n.feature_names[:2] == ("map_in_event", "raw") or "phi_no2" in n.feature_names
    cols = {name: n.columns(name) for name in ("phi_no2", "phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7", "phi_mg2", "phi_mg3")}
    assert [c for c in n.feature_names if c.startswith("phi_mp6")] == ["phi_mp6[w]", "phi_mp6[y]"]
    for j in range(p.n_tokens):
        c = np.searchsorted(p.offsets, j, side="right") - 1
        s, e = p.offsets[c], p.offsets[c + 1]
        nbrs = [k for k in (j - 1, j + 1) if s <= k < e]
        np.testing.assert_allclose(cols["phi_no2"][j, 0], mrg(svm[j]))
        np.testing.assert_allclose(cols["phi_mp4"][j, 0], np.mean(mp[s:e] == mp[j]))
        np.testing.assert_allclose(cols["phi_mp5"][j, 0], np.mean(mp[nbrs] == mp[j]) if nbrs else 0.0)
        np.testing.assert_allclose(cols["phi_mp6"][j], [mp[j] == 0, mp[j] == 2])
        np.testing.assert_allclose(cols["phi_mp7"][j, 0], mrg(pm[j]))
        np.testing.assert_allclose(cols["phi_mg2"][j, 0], mrg(marg[j]))
        np.testing.assert_allclose(cols["phi_mg3"][j, 0], float(marg[j].argmax() == mp[j]))


@pytest.mark.parametrize(
    "features,expected",
    [
        (["phi_mp1"], set()),
        (["phi_no1"], set()),
        (["phi_no1", "phi_no2"], {"map"}),  # marginal events are defined by the MAP
        (["phi_mp2"], {"map"}),
        (["phi_mp3"], {"top2"}),
        (["phi_mp7", "phi_mp5", "phi_mp4"], {"map", "pseudo_marginals"}),
        (["phi_mg2"], {"map", "marginals"}),  # marginal events need the MAP label
    ],
)
def test_features_compute_only_the_inference_they_declare(features, expected):
    p, y, svm = _problem(2)
    lex = Lexicon([[0]], n_states=3)
    kinds = [MAPEvent()] if all(get_feature(f).scope == "item" for f in features) else [MarginalEvent()]
    if any(get_feature(f).scope == "item" for f in features) and any(
        get_feature(f).scope == "node" for f in features
    ):
        kinds = [MAPEvent(), MarginalEvent()]
    pred = StructuredPrediction(p, unstructured_scores=svm)
    build_events(pred, kinds, features=features, lexicon=lex, raw=False)
    needs = set().union(*(get_feature(f).needs for f in features))
    assert pred.computed == expected
    if "marginals" not in needs:
        assert "marginals" not in pred.computed


def test_grouping_splitting_and_concat():
    p, y, _ = _problem(3)
    pred = StructuredPrediction(p)
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features=["phi_mp1", "phi_mg2"])
    assert t.n_events == p.n_chains + p.n_tokens
    by_kind = t.group_by("kind")
    assert by_kind["map"].feature_names == ("phi_mp1",)
    assert by_kind["marginal"].feature_names == ("phi_mg2",)
    # pooled columns: a kind's undefined columns hold 0
    assert (t.X[t.kind == 0, 1] == 0).all() and (t.X[t.kind == 1, 0] == 0).all()
    by_pos = t.group_by("position")
    assert set(by_pos) == set(range(p.lengths.max())) | {-1}  # -1: per-item events
    assert by_pos[-1].n_events == p.n_chains
    assert sum(g.n_events for k, g in by_pos.items() if k >= 0) == p.n_tokens
    by_len = t.group_by("length")
    assert set(by_len) == set(p.lengths.tolist())
    inside, outside = t.split_items([0, 2])
    assert set(inside.item) == {0, 2} and not ({0, 2} & set(outside.item))
    back = type(t).concat([inside, outside])
    assert back.n_events == t.n_events
    np.testing.assert_array_equal(np.sort(back.raw), np.sort(t.raw))


def test_user_registered_feature_and_aliases():
    @register_feature("test_first_is_zero", scope="item", needs=["map"], replace=True)
    def _f(ctx):
        first = ctx.pred.item_offsets[:-1][ctx.events.item]
        return (ctx.pred.map_labels[first] == 0).astype(float)

    p, y, _ = _problem(4)
    pred = StructuredPrediction(p)
    t = build_events(pred, [MAPEvent()], features=["test_first_is_zero", "φmp1", "mp3"], raw=False)
    assert t.feature_names == ("test_first_is_zero", "phi_mp1", "phi_mp3")
    np.testing.assert_array_equal(t.X[:, 0], pred.map_labels[p.offsets[:-1]] == 0)
    assert "test_first_is_zero" in feature_names("item")
    assert set(FEATURE_GROUPS["node"]["all"]) <= set(feature_names("node"))


def test_empty_items_and_single_state():
    p = ChainPotentials(np.zeros((3, 1)), [0, 2, 2, 3], np.zeros((1, 1)))
    pred = StructuredPrediction(p, unstructured_scores=np.zeros((3, 1)))
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=[0, 0, 0], features="table1",
                     lexicon=Lexicon([[0, 0]], n_states=1))
    m = t.group_by("kind")["map"]
    assert np.isfinite(m.X).all() and m.outcome.all()
    np.testing.assert_allclose(m.raw, 1.0)
    np.testing.assert_allclose(m.columns("phi_mp3")[:, 0], 100.0)  # one labeling: capped margin


def test_table1_adds_map_in_event_only_for_user_kinds():
    p, y, _ = _problem(6, lengths=(3, 2, 4))
    pred = StructuredPrediction(p, unstructured_scores=np.zeros((p.n_tokens, p.n_states)))
    paper = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features="table1",
                         lexicon=Lexicon([[0, 0]], n_states=p.n_states))
    assert "map_in_event" not in paper.feature_names
    first_zero = Predicate(lambda lab: bool(lab[0] == 0), name="first_is_zero")
    t = build_events(pred, [MAPEvent(), first_zero], y_true=y, features="table1",
                     lexicon=Lexicon([[0, 0]], n_states=p.n_states))
    ev = t.group_by("kind")["first_is_zero"]
    expected = pred.map_labels[p.offsets[:-1]] == 0
    np.testing.assert_array_equal(ev.columns("map_in_event")[:, 0], expected.astype(float))


# ------------------------------------------------------------------ bad input


def test_bad_event_inputs():
    p, y, _ = _problem(5, lengths=(3, 1, 4))
    pred = StructuredPrediction(p)
    with pytest.raises(ParameterError, match="position 2 is past the end of item 1"):
        build_events(pred, [LabelAt(2, 0)], features=["phi_mg2"])
    t = build_events(pred, [LabelAt(2, 0, on_short="skip")], features=["phi_mg2"])
    assert t.item.tolist() == [0, 2]
    with pytest.raises(ParameterError, match="does not fit in item 1"):
        build_events(pred, [SpanEquals(0, [1, 1])], features=["phi_mp1"])
    with pytest.raises(ParameterError, match="unknown feature 'phi_nope'"):
        build_events(pred, [MAPEvent()], features=["phi_nope"])
    with pytest.raises(ParameterError, match="applies to none of the event kinds"):
        build_events(pred, [MAPEvent()], features=["phi_mp1", "phi_mg2"])
    with pytest.raises(ParameterError, match="needs the scores of an unstructured classifier"):
        build_events(pred, [MAPEvent()], features=["phi_no1"])
    with pytest.raises(ParameterError, match="needs a `lexicon`"):
        build_events(pred, [MAPEvent()], features=["phi_mp2"])
    with pytest.raises(ParameterError, match=r"`y_true` must have shape \(8,\)"):
        build_events(pred, [MAPEvent()], y_true=[0, 1], features=["phi_mp1"])
    with pytest.raises(ParameterError, match=r"`y_true\[1\]` must have length 1"):
        build_events(pred, [MAPEvent()], y_true=[[0, 1, 2], [0, 1], [0, 0, 0, 0]], features=["phi_mp1"])
    with pytest.raises(ParameterError, match="entries must be < 3"):
        build_events(pred, [MAPEvent()], y_true=np.full(8, 3), features=["phi_mp1"])
    with pytest.raises(ParameterError, match="event kind names must be unique"):
        build_events(pred, [MAPEvent(), MAPEvent()], features=["phi_mp1"])
    with pytest.raises(ParameterError, match="has no model probability"):
        build_events(pred, [Predicate(lambda lab: True, "t")], features=["raw"])

    @register_feature("test_nan_feature", scope="item", replace=True)
    def _nan(ctx):
        return np.full(len(ctx.events), np.nan)

    with pytest.raises(ParameterError, match="feature 'test_nan_feature' is not finite"):
        build_events(pred, [MAPEvent()], features=["test_nan_feature"])
    with pytest.raises(TypeError, match="must return a bool"):
        build_events(pred, [Predicate(lambda lab: 1, "int")], y_true=y, features=["phi_mp1"])


def test_lexicon_validation_and_queries():
    lex = Lexicon(["ab", "abc", "b", "ab"], n_states=3, alphabet="abc")
    assert lex.n_words == 3
    assert lex.contains([0, 1, 1, 0, 1, 2, 2], [0, 2, 3, 6, 7]).tolist() == [True, True, True, False]
    with pytest.raises(ParameterError, match="not in the alphabet"):
        Lexicon(["abd"], n_states=3, alphabet="abc")
    with pytest.raises(ParameterError, match="need an `alphabet`"):
        Lexicon(["ab"], n_states=3)
    with pytest.raises(TypeError, match="iterable of words"):
        Lexicon("abc", n_states=3)


def test_external_events_go_through_the_same_recalibrator():
    """Events of an outside model: a table; own kinds' tables take the same path."""
    import warnings

    from structcal import StructuredRecalibrator, io
    from structcal.events import (
        MAPEvent,
        MarginalEvent,
        build_events,
        external_events,
        object_outcomes,
        span_outcomes,
    )

    rng = np.random.default_rng(0)
    n = 2000
    item = rng.integers(0, 400, n)
    score = rng.random(n)
    y = rng.random(n) < score**2
    t = external_events(item, kind="entity", raw=score, features={"len": rng.integers(1, 4, n)},
                        outcome=y, label=rng.integers(0, 3, n))
    assert t.kind_scopes == ("external",) and t.feature_names == ("raw", "len")
    rec = StructuredRecalibrator(random_state=0).fit_events(t, groups=np.arange(400) // 8)
    assert rec.selection_["entity"]["n_groups"] == 50
    out = rec.predict_events(t.select(np.arange(100)), groups=np.arange(400) // 8)
    assert out.forecast.shape == (100,) and (out.forecast > 0).all() and (out.forecast < 1).all()
    with pytest.raises(ParameterTypeError, match="predict_events"):
        rec.predict(None)
    # own kinds: a table built by build_events goes through fit_events the same way as fit
    from .test_recalibration import _overconfident_world

    pred, yy, _ = _overconfident_world(300, seed=3)
    kinds = [MAPEvent(), MarginalEvent()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = StructuredRecalibrator(kinds, random_state=0).fit(pred, yy)
        b = StructuredRecalibrator(kinds, random_state=0).fit_events(a.events(pred, yy))
    assert a.selection_ == b.selection_
    np.testing.assert_array_equal(a.predict(pred).forecast,
                                  b.predict_events(a.events(pred)).forecast)
    # outcomes from gold structures
    assert span_outcomes([0, 0], [1, 4], [3, 5], [0, 1], [0], [1], [3], [0]).tolist() == [True,
                                                                                          False]
    gold = np.zeros((4, 4), int)
    gold[:2, :2] = 1
    gold[3, 3] = 2
    assert object_outcomes([[0, 1, 4, 5], [15], [15]], [1, 2, 1], [0, 0, 0], [gold]).tolist() == \
        [True, True, False]
    with pytest.raises(ParameterError, match="probabilities"):
        external_events([0], raw=[1.5])


@pytest.mark.parametrize("bad", ["valid", "short_node", "item_range", "node_outside", "label_range",
                                 "member_outside", "offsets_length", "not_instances"])
def test_events_of_a_custom_kind_are_checked_against_the_batch(bad):
    from structcal.events.kinds import EventInstances, EventKind

    rng = np.random.default_rng(0)
    pots = ChainPotentials.from_list([rng.normal(size=(n, 3)) for n in (3, 2, 4)],
                                     pairwise=rng.normal(size=(3, 3)))
    pred = StructuredPrediction(pots)
    item = np.array([0, 1, 2])
    node = np.array([1, 3, 5])  # item offsets: 0, 3, 5, 9
    label = np.array([0, 1, 2])
    members = np.array([0, 1, 3, 5, 6])
    offsets = np.array([0, 2, 3, 5])
    if bad == "short_node":
        node = node[:2]
    elif bad == "item_range":
        item = np.array([0, 1, 3])
    elif bad == "node_outside":
        node = np.array([1, 2, 5])  # node 2 is in item 0, not item 1
    elif bad == "label_range":
        label = np.array([0, 1, 3])
    elif bad == "member_outside":
        members = np.array([0, 1, 2, 5, 6])  # node 2 is not in item 1
    elif bad == "offsets_length":
        offsets = np.array([0, 5])

    class Custom(EventKind):
        scope = "set"
        name = "custom"

        def instances(self, pred):
            if bad == "not_instances":
                return {"item": item}
            return EventInstances(item, node, label, members=members, member_offsets=offsets,
                                  member_labels=np.zeros(members.size, np.int64))

    if bad == "valid":
        t = build_events(pred, [Custom()], features=["set_mean_marginal"], raw=False)
        assert len(t) == 3
        return
    with pytest.raises((ParameterError, ParameterTypeError), match="'custom' events"):
        build_events(pred, [Custom()], features=["set_mean_marginal"], raw=False)


@pytest.mark.parametrize("make, error", [
    (lambda: Predicate(lambda y: True, ""), ParameterError),
    (lambda: Predicate(lambda y: True, 5), ParameterTypeError),
    (lambda: LabelAt(0, 1, name=3), ParameterTypeError),
    (lambda: AnyLabel(1, name=b"x"), ParameterTypeError),
    (lambda: feature_names("bogus"), ParameterError),
    (lambda: register_feature("", scope="item"), ParameterTypeError),
    (lambda: InLexicon("abc"), ParameterTypeError),
    (lambda: __import__("structcal.events.external", fromlist=["x"]).ExternalKind(""),
     ParameterTypeError),
])
def test_names_and_scopes_are_checked(make, error):
    """A kind's name keys its events (columns, groups, saved files): a non-empty str, not a
    value turned into one; an unknown scope is named, not answered with no features."""
    with pytest.raises(error):
        make()
    assert LabelAt(0, 1).name == "label_at[0]=1" and LabelAt(0, 1, name="").name == "label_at[0]=1"


def test_an_event_table_with_misaligned_columns_is_refused():
    import dataclasses

    rng = np.random.default_rng(0)
    pots = ChainPotentials.from_list([rng.normal(size=(n, 3)) for n in (3, 2, 4)],
                                     pairwise=rng.normal(size=(3, 3)))
    t = build_events(StructuredPrediction(pots), [MAPEvent(), MarginalEvent()],
                     y_true=rng.integers(0, 3, 9))
    for change, word in (({"item": t.item[:-1]}, "item"), ({"X": t.X[:, :-1]}, "X"),
                         ({"outcome": t.outcome[1:]}, "outcome"),
                         ({"kind": np.where(t.kind == 0, 5, t.kind)}, "kind"),
                         ({"item": t.item + 3}, "item"),
                         ({"kind_scopes": t.kind_scopes[:1]}, "scopes")):
        with pytest.raises(ParameterError, match=word):
            dataclasses.replace(t, **change)
    assert dataclasses.replace(t).n_events == t.n_events


def test_backends_take_only_their_own_potentials():
    from structcal.potentials import GraphPotentials
    from structcal.prediction import ChainBackend, GraphBackend, register_backend

    chain = ChainPotentials.from_list([np.zeros((2, 2))], np.zeros((2, 2)))
    graph = GraphPotentials.from_grid([np.zeros((2, 2, 2))], potts=0.5)
    for backend, ok, bad in ((ChainBackend, chain, graph), (GraphBackend, graph, chain)):
        assert backend(ok).potentials is ok
        for wrong in (bad, None, np.zeros(3)):
            with pytest.raises(ParameterTypeError, match="potentials"):
                backend(wrong)
    with pytest.raises(ParameterTypeError, match="potentials_type"):
        register_backend(3)
    with pytest.raises(ParameterTypeError, match="backend"):
        register_backend(ChainPotentials)(lambda p: p)
