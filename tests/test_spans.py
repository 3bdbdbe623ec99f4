"""Entity (span) events: chunking, exact probabilities and outcomes against enumeration."""

import itertools

import numpy as np
import pytest

from structcal import ChainPotentials, ParameterError, ParameterTypeError
from structcal.adapters import TagScheme
from structcal.events import (
    AllEntitiesCorrect,
    ContainsEntity,
    EntitySpans,
    MAPEvent,
    MarginalEvent,
    build_events,
    entity_table,
)
from structcal.inference.exact import exact_chain
from structcal.prediction import StructuredPrediction

from ._problems import random_chains

TAGS = {
    "BIO": ["O", "B-A", "I-A", "B-B", "I-B"],
    "IOB1": ["I-A", "O", "B-A", "I-B", "B-B"],
    "BIOES": ["O", "B-A", "I-A", "E-A", "S-A", "B-B", "E-B", "S-B"],
    "BILOU": ["O", "B-A", "I-A", "L-A", "U-A", "U-B"],
}


def conlleval_chunks(tags):
    """Chunks of one tag sequence, straight from conlleval's startOfChunk / endOfChunk."""

    def split(t):
        return ("O", "") if t == "O" else (t[0].replace("L", "E").replace("U", "S"), t[2:])

    out, start = [], None
    prev_tag, prev_type = "O", ""
    for i, t in enumerate(list(tags) + ["O"]):
        tag, typ = split(t)
        end = (
            prev_tag in ("E", "S")
            or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
            or (prev_tag != "O" and prev_type != typ)
        )
        begin = (
            tag in ("B", "S")
            or (prev_tag in ("E", "S") and tag in ("E", "I"))
            or (prev_tag == "O" and tag in ("E", "I"))
            or (tag != "O" and prev_type != typ)
        )
        if end and start is not None:
            out.append((start, i, prev_type))
            start = None
        if begin:
            start = i
        prev_tag, prev_type = tag, typ
    return out


@pytest.mark.parametrize("scheme", list(TAGS))
def test_chunks_follow_conlleval_on_every_sequence(scheme):
    s = TagScheme(TAGS[scheme], scheme)
    K = s.n_tags
    seqs = np.array(list(itertools.product(range(K), repeat=3)))
    labels = seqs.ravel()
    offsets = np.arange(seqs.shape[0] + 1) * 3
    c = s.chunks(labels, offsets)
    got = {}
    for i, a, b, t in zip(c.item, c.start, c.end, c.type):
        got.setdefault(int(i), []).append((int(a - offsets[i]), int(b - offsets[i]), s.types[t]))
    for i, seq in enumerate(seqs):
        assert got.get(i, []) == conlleval_chunks([s.tag_names[k] for k in seq]), [
            s.tag_names[k] for k in seq
        ]


def _brute_chunks(s, labelings):
    return [set(conlleval_chunks([s.tag_names[k] for k in lab])) for lab in labelings]


@pytest.mark.parametrize("scheme", list(TAGS))
@pytest.mark.parametrize("seed", range(3))
def test_span_events_against_enumeration(scheme, seed):
    s = TagScheme(TAGS[scheme], scheme)
    rng = np.random.default_rng(seed)
    lengths = [4, 1, 0, 5, 3] if s.n_tags <= 6 else [4, 1, 0, 4, 3]
    p = random_chains(rng, s.n_tags, lengths, scale=2.5, shared=bool(seed % 2))
    pred = StructuredPrediction(p)
    y = rng.integers(0, s.n_tags, size=p.n_tokens)
    # random gold tags: invalid sequences are read by conlleval's rules
    kinds = [EntitySpans(s, invalid_gold="conlleval"), ContainsEntity(s, invalid_gold="conlleval"),
             AllEntitiesCorrect(s, invalid_gold="conlleval")]
    t = build_events(
        pred,
        kinds,
        y_true=y,
        features={
            "entity": ["raw", "span_boundary", "set_size"],
            "contains_entity": ["raw"],
            "all_entities": ["raw"],
        },
    )
    spans = entity_table(t, "entity", s)
    ent = t.kind == 0
    boundary = t.columns("span_boundary")[ent]
    off = p.offsets
    n_checked = 0
    for i in range(p.n_chains):
        ex = exact_chain(p, i)
        chunk_sets = _brute_chunks(s, ex.labelings)
        gold = set(conlleval_chunks([s.tag_names[k] for k in y[off[i] : off[i + 1]]]))
        mine = set(conlleval_chunks([s.tag_names[k] for k in pred.map_labels[off[i] : off[i + 1]]]))
        rows = np.flatnonzero(spans["item"] == i)
        assert {
            (int(spans["start"][r]), int(spans["end"][r]), spans["type_name"][r]) for r in rows
        } == mine
        for r in rows:
            key = (int(spans["start"][r]), int(spans["end"][r]), spans["type_name"][r])
            want = ex.probability(np.array([key in cs for cs in chunk_sets]))
            np.testing.assert_allclose(t.raw[spans["row"][r]], want, rtol=1e-10, atol=1e-14)
            assert t.outcome[spans["row"][r]] == (key in gold)
            p_start = ex.probability(
                np.array([any(c[0] == key[0] and c[2] == key[2] for c in cs) for cs in chunk_sets])
            )
            p_end = ex.probability(
                np.array([any(c[1] == key[1] and c[2] == key[2] for c in cs) for cs in chunk_sets])
            )
            np.testing.assert_allclose(boundary[r], [p_start, p_end], rtol=1e-10, atol=1e-14)
            n_checked += 1
        for r in np.flatnonzero((t.kind == 1) & (t.item == i)):
            typ = s.types[t.label[r]]
            want = ex.probability(np.array([any(c[2] == typ for c in cs) for cs in chunk_sets]))
            np.testing.assert_allclose(t.raw[r], want, rtol=1e-10, atol=1e-14)
            assert t.outcome[r] == any(c[2] == typ for c in gold)
        if off[i] == off[i + 1]:
            # an empty sentence has no events at all (issue 15: empty items have no events)
            assert not np.any(t.item == i)
            continue
        (r,) = np.flatnonzero((t.kind == 2) & (t.item == i))
        want = ex.probability(np.array([cs == mine for cs in chunk_sets]))
        np.testing.assert_allclose(t.raw[r], want, rtol=1e-10, atol=1e-14)
        assert t.outcome[r] == (gold == mine)
    assert n_checked > 0


def test_per_edge_pairwise_adjacent_chunks_and_extreme_potentials():
    s = TagScheme(TAGS["BIO"], "BIO")
    rng = np.random.default_rng(7)
    for scale in (1.0, 1e4):
        p = random_chains(rng, 5, [5, 4], scale=scale, shared=False)
        # force adjacent chunks in the MAP: B-A B-A B-B at the start of chain 0
        u = p.unary.copy()
        u[0:3] = -50.0 * scale
        u[[0, 1, 2], [1, 1, 3]] = 50.0 * scale
        p = ChainPotentials(u, p.offsets, p.pairwise)
        pred = StructuredPrediction(p)
        t = build_events(pred, [EntitySpans(s), AllEntitiesCorrect(s)], features=["raw"])
        ex = exact_chain(p, 0)
        chunk_sets = _brute_chunks(s, ex.labelings)
        mine = set(conlleval_chunks([s.tag_names[k] for k in pred.map_labels[:5]]))
        assert {(0, 1, "A"), (1, 2, "A"), (2, 3, "B")} <= mine or (2, 4, "B") in mine
        r = np.flatnonzero((t.kind == 1) & (t.item == 0))[0]
        want = ex.probability(np.array([cs == mine for cs in chunk_sets]))
        np.testing.assert_allclose(t.raw[r], want, rtol=1e-9, atol=1e-300)
        assert np.all(np.isfinite(t.raw))


def test_no_entities_gives_no_events_and_empty_batches():
    s = TagScheme(TAGS["BIO"], "BIO")
    u = np.full((4, 5), -5.0)
    u[:, 0] = 5.0
    p = ChainPotentials(u, [0, 3, 3, 4], np.zeros((5, 5)))
    pred = StructuredPrediction(p)
    t = build_events(
        pred, [EntitySpans(s)], y_true=np.zeros(4, int), features=["raw", "set_size", "phi_mp1"]
    )
    assert t.n_events == 0 and t.members.shape == (0,)
    t = build_events(
        pred,
        [AllEntitiesCorrect(s), ContainsEntity(s, types=["B"])],
        y_true=np.zeros(4, int),
        features=["raw", "phi_mp1"],
    )
    # the empty sentence (item 1) has no events at all (issue 15: empty items have no events)
    assert t.item.tolist() == [0, 2, 0, 2]
    assert t.outcome.tolist() == [True, True, False, False]


def test_full_default_features_and_invalid_tags():
    s = TagScheme(TAGS["BIO"], "BIO")
    rng = np.random.default_rng(1)
    p = random_chains(rng, 5, [6, 3, 7], scale=2.0)
    pred = StructuredPrediction(p)
    feats = [
        "raw",
        "map_in_event",
        "phi_mp1",
        "phi_mp3",
        "phi_mg1",
        "set_size",
        "set_class",
        "set_min_marginal",
        "set_mean_marginal",
        "set_prod_marginal",
        "set_min_pseudo_margin",
        "span_boundary",
    ]
    t = build_events(pred, [EntitySpans(s)], features=feats)
    assert t.n_events > 0
    ent = entity_table(t)
    # min >= product; the exact probability can exceed the MAP tag's marginal (I-X may
    # start the chunk too) but never the probability that every token has the type
    assert np.all(
        t.columns("set_min_marginal")[:, 0] >= t.columns("set_prod_marginal")[:, 0] - 1e-15
    )
    type_marg = pred.marginals @ s.type_masks()["any"].T.astype(float)
    for r in range(t.n_events):
        nodes = t.members_of(r)
        assert t.raw[r] <= type_marg[nodes, t.label[r]].min() + 1e-12
    assert [f"set_class[{n}]" for n in s.types] == [
        c for c in t.feature_names if c.startswith("set_class")
    ]
    assert np.all(ent["end"] > ent["start"])


def test_bad_tag_sets_and_inputs():
    with pytest.raises(ParameterError, match="'O'"):
        TagScheme(["B-A", "I-A"])
    with pytest.raises(ParameterError, match="unknown tag name 'E-A'"):
        TagScheme(["O", "B-A", "E-A"], "BIO")
    with pytest.raises(ParameterError, match="unknown tag name 'PER'"):
        TagScheme(["O", "PER"])
    with pytest.raises(ParameterError, match="scheme"):
        TagScheme(["O"], "XYZ")
    with pytest.raises(ParameterError, match="duplicates"):
        TagScheme(["O", "O"])
    with pytest.raises(ParameterTypeError, match="tag_names"):
        TagScheme("O B-A")
    s = TagScheme(TAGS["BIO"])
    with pytest.raises(ParameterError, match="unknown tag 'B-C' at token 1"):
        s.encode(["O", "B-C"])
    p = random_chains(np.random.default_rng(0), 3, [3], scale=1.0)
    with pytest.raises(ParameterError, match="5 tags"):
        build_events(StructuredPrediction(p), [EntitySpans(s)], features=["raw"])
    with pytest.raises(ParameterError, match="types"):
        ContainsEntity(s, types=["Z"])


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES", "BILOU"])
def test_transitions_validity_and_conversion(scheme):
    s = TagScheme(TAGS[scheme], scheme)
    pw, st, en = s.transitions()
    K = s.n_tags
    seqs = np.array(list(itertools.product(range(K), repeat=3)))
    offsets = np.arange(seqs.shape[0] + 1) * 3
    valid = s.is_valid(seqs.ravel(), offsets)
    for seq, v in zip(seqs, valid):
        score = st[seq[0]] + pw[seq[0], seq[1]] + pw[seq[1], seq[2]] + en[seq[2]]
        assert v == np.isfinite(score)
    # every valid sequence is the canonical encoding of its chunks (full tag sets)
    full = {
        "BIO": ["O", "B-A", "I-A", "B-B", "I-B"],
        "IOB1": ["O", "I-A", "B-A", "I-B", "B-B"],
        "BIOES": ["O"] + [f"{p}-{t}" for t in "AB" for p in "BIES"],
        "BILOU": ["O"] + [f"{p}-{t}" for t in "AB" for p in "BILU"],
    }
    s = TagScheme(full[scheme], scheme)
    seqs = np.array(list(itertools.product(range(s.n_tags), repeat=3)))
    offsets = np.arange(seqs.shape[0] + 1) * 3
    valid = s.is_valid(seqs.ravel(), offsets)
    conv = s.convert(seqs.ravel(), offsets, s).reshape(-1, 3)
    np.testing.assert_array_equal(conv[valid], seqs[valid])
    assert s.is_valid(conv.ravel(), offsets).all()
    # conversion to every other scheme keeps the chunks
    for name, tags in full.items():
        other = TagScheme(tags, name)
        back = other.convert(s.convert(seqs.ravel(), offsets, other), offsets, s)
        assert other.is_valid(s.convert(seqs.ravel(), offsets, other), offsets).all()
        c1, c2 = s.chunks(seqs.ravel(), offsets), s.chunks(back, offsets)
        for a in ("item", "start", "end", "type"):
            np.testing.assert_array_equal(getattr(c1, a), getattr(c2, a))


@pytest.mark.parametrize("shared", [True, False])
def test_entity_features_on_the_sentences_with_entities_equal_the_whole_batch(monkeypatch, shared):
    # build_events computes a sparse kind's features on the items that have events only;
    # every column must equal the whole-batch computation bit for bit
    from structcal.events import MAPEvent
    from structcal.events import table as event_table

    s = TagScheme(TAGS["BIO"], "BIO")
    rng = np.random.default_rng(11)
    lengths = [5, 3, 0, 6, 4, 1, 7, 5, 2, 6, 4, 3]
    p = random_chains(rng, s.n_tags, lengths, scale=1.5, shared=shared)
    u = p.unary.copy()
    quiet = np.repeat(~np.isin(np.arange(len(lengths)), [3, 6, 9]), lengths)
    u[quiet, 0] += 20.0  # O everywhere except in sentences 3, 6 and 9
    p = ChainPotentials(u, p.offsets, p.pairwise)
    y = rng.integers(0, s.n_tags, size=p.n_tokens)
    kinds = [EntitySpans(s, invalid_gold="conlleval"), MAPEvent()]

    def table(subset_below):
        monkeypatch.setattr(event_table, "_SUBSET_BELOW", subset_below)
        pred = StructuredPrediction(p)
        return build_events(pred, kinds, y_true=y, features="auto"), pred

    restricted, pred = table(0.5)
    assert set(np.unique(restricted.item[restricted.kind == 0]).tolist()) <= {3, 6, 9}
    assert restricted.n_events > len(lengths)  # some entities
    whole, pred_whole = table(-1.0)
    assert "marginals" in pred_whole.computed  # (the MAP events need them on every item)
    for field in ("kind", "item", "node", "position", "label", "X", "outcome", "raw",
                  "members", "member_offsets", "defined"):
        np.testing.assert_array_equal(getattr(restricted, field), getattr(whole, field))
    assert restricted.feature_names == whole.feature_names
    # the entity kind alone: inference ran on the three sentences only
    monkeypatch.setattr(event_table, "_SUBSET_BELOW", 0.5)
    pred = StructuredPrediction(p)
    build_events(pred, [EntitySpans(s)], features="auto")
    assert pred.computed == {"map"}


def test_gold_in_another_scheme_is_refused():
    # IOB1 gold (entities start with I-) read as BIO: refused, naming the conversion
    tags = TAGS["BIO"]
    iob1, bio = TagScheme(tags, "IOB1"), TagScheme(tags, "BIO")
    gold_bio = np.array([1, 2, 0, 3, 0, 1, 2, 2])  # valid BIO
    offsets = np.array([0, 4, 8])
    gold_iob1 = bio.convert(gold_bio, offsets, iob1)
    assert not bio.is_valid(gold_iob1, offsets).all()
    p = ChainPotentials.from_scores(3.0 * np.eye(len(tags))[gold_bio], lengths=[4, 4],
                                    transitions=np.zeros((len(tags), len(tags))))
    pred = StructuredPrediction(p)
    for kind in (EntitySpans(bio), ContainsEntity(bio), AllEntitiesCorrect(bio)):
        with pytest.raises(ParameterError, match=r"not valid BIO.*convert"):
            build_events(pred, [kind], y_true=gold_iob1, features=["raw"])
    back = iob1.convert(gold_iob1, offsets, bio)
    np.testing.assert_array_equal(back, gold_bio)
    build_events(pred, [EntitySpans(bio)], y_true=back, features=["raw"])
    # asked for: read by conlleval's rules
    build_events(pred, [EntitySpans(bio, invalid_gold="conlleval")], y_true=gold_iob1,
                 features=["raw"])
    with pytest.raises(ParameterError, match="invalid_gold"):
        EntitySpans(bio, invalid_gold="ignore")
    # token kinds compare tags position by position: given the scheme, they refuse too
    for kind in (MAPEvent(tag_scheme=bio), MarginalEvent(tag_scheme=bio)):
        with pytest.raises(ParameterError, match=r"not valid BIO.*convert"):
            build_events(pred, [kind], y_true=gold_iob1, features=["raw"])
        t = build_events(pred, [kind], y_true=back, features=["raw"])
        assert t.outcome.all()  # the converted gold is what the model predicts
    # without a scheme they cannot know (documented): IOB1 gold counts right tags wrong
    t = build_events(pred, [MarginalEvent()], y_true=gold_iob1, features=["raw"])
    assert not t.outcome.all()
    with pytest.raises(ParameterTypeError, match="tag_scheme"):
        MarginalEvent(tag_scheme="BIO")
    # a scheme whose tags are in another order than the model's labels is refused, as for
    # entity kinds
    named = StructuredPrediction(ChainPotentials(p.unary, p.offsets, p.pairwise,
                                                 label_names=list(reversed(tags))))
    with pytest.raises(ParameterError, match="not in the order of the model's labels"):
        build_events(named, [MarginalEvent(tag_scheme=bio)], y_true=back, features=["raw"])


def test_bio_tag_names_are_refused_as_bioes_or_bilou():
    with pytest.raises(ParameterError, match="pass scheme='BIO'"):
        TagScheme(["O", "B-PER", "I-PER"], "BIOES")
    with pytest.raises(ParameterError, match="L- or U- tags"):
        TagScheme(["O", "B-PER", "I-PER"], "BILOU")
    assert TagScheme(["O", "B-A", "I-A", "L-A", "U-A", "U-B"], "BILOU").scheme == "BILOU"


def test_entity_table_refuses_what_is_not_an_entity_table():
    from structcal import ChainPotentials, StructuredPrediction
    from structcal.adapters import TagScheme
    from structcal.events import EntitySpans, MAPEvent, build_events, entity_table
    from structcal.exceptions import ParameterError, ParameterTypeError

    rng = np.random.default_rng(0)
    tags = TagScheme(["O", "B-x", "I-x", "B-y", "I-y"])
    pots = ChainPotentials.from_list([rng.normal(size=(n, 5)) for n in (4, 5, 3)],
                                     pairwise=rng.normal(size=(5, 5)))
    t = build_events(StructuredPrediction(pots), [EntitySpans(tags), MAPEvent()])
    out = entity_table(t, "entity", tags)
    assert set(out["type_name"]) <= {"x", "y"}
    with pytest.raises(ParameterError, match="scope 'item'"):
        entity_table(t, "map")  # was an IndexError
    with pytest.raises(ParameterTypeError, match="table"):
        entity_table(None)
    with pytest.raises(ParameterTypeError, match="tag_scheme"):
        entity_table(t, "entity", ["O", "B-x"])
    assert (out["type"] == 1).any()  # an entity of the second type ...
    with pytest.raises(ParameterError, match="tag scheme"):  # ... that this scheme lacks
        entity_table(t, "entity", TagScheme(["O", "B-x", "I-x"]))
