"""spaCy adapter: a small beam NER trained on shipped GUM sentences (skipped without spaCy)."""

import random
import subprocess
import sys
import warnings

import numpy as np
import pytest

spacy = pytest.importorskip("spacy")

from spacy.tokens import Doc, Span, SpanGroup  # noqa: E402
from spacy.training import Example, biluo_tags_to_spans, iob_to_biluo  # noqa: E402

from structcal import StructuredRecalibrator  # noqa: E402
from structcal.adapters.spacy_ner import spacy_entity_events  # noqa: E402
from structcal.datasets import load_gum  # noqa: E402
from structcal.exceptions import ParameterError, ParameterTypeError  # noqa: E402
from structcal.guarantees import accept_events, certify_precision  # noqa: E402


def _docs(nlp, data, n):
    out = []
    for i in range(min(n, data.n_sentences)):
        d = Doc(nlp.vocab, words=list(data.sentences[i]))
        d.ents = biluo_tags_to_spans(d, iob_to_biluo([data.tag_names[t] for t in data.y[i]]))
        out.append(d)
    return out


@pytest.fixture(scope="module")
def trained():
    nlp = spacy.blank("en")
    train = _docs(nlp, load_gum("train", mentions="named"), 600)
    gold = _docs(nlp, load_gum("dev", mentions="named"), 300)
    ner = nlp.add_pipe("beam_ner", config={"beam_width": 8})
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in train]
    opt = nlp.initialize(lambda: examples)
    random.seed(0)
    for _ in range(6):
        random.shuffle(examples)
        for batch in spacy.util.minibatch(examples, 32):
            nlp.update(batch, sgd=opt)
    pred = list(nlp.pipe([Doc(nlp.vocab, words=[t.text for t in d]) for d in gold]))
    return nlp, ner, pred, gold


def test_scores_are_the_beams_entity_probabilities(trained):
    nlp, ner, pred, gold = trained
    ents = spacy_entity_events(pred[:50], ner=ner, gold=gold[:50])
    beams = ner.predict(pred[:50])
    for r in range(len(ents)):
        i, s, e = int(ents.doc[r]), int(ents.start[r]), int(ents.end[r])
        label = ents.label_names[int(ents.table.label[r])]
        parses = ner.moves.get_beam_parses(beams[i])
        assert sum(p for p, _ in parses) == pytest.approx(1.0, abs=1e-6)
        want = sum(p for p, spans in parses if (s, e, label) in spans)
        assert ents.table.raw[r] == pytest.approx(min(want, 1.0), abs=1e-9)
        assert ents.table.outcome[r] == any(
            (g.start, g.end, g.label_) == (s, e, label) for g in gold[i].ents)
    # every predicted entity the beam scored is an event, with its span and type features
    assert len(ents) == sum(len(d.ents) for d in pred[:50])
    X = dict(zip(ents.table.feature_names, ents.table.X.T))
    np.testing.assert_array_equal(X["length"], ents.end - ents.start)
    assert ents.table.members.shape[0] == int((ents.end - ents.start).sum())


def test_beam_candidates_include_what_the_best_parse_left_out(trained):
    _, ner, pred, gold = trained
    best = spacy_entity_events(pred, ner=ner, gold=gold)
    every = spacy_entity_events(pred, ner=ner, gold=gold, candidates="beam", min_score=0.01)
    assert len(every) > len(best)
    assert every.table.outcome.sum() >= best.table.outcome.sum()
    assert (every.table.raw > 0.01).all()


def test_component_writes_the_recalibrated_confidence(trained, tmp_path):
    nlp, ner, pred, gold = trained
    fit = spacy_entity_events(pred[:200], ner=ner, gold=gold[:200])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(random_state=0).fit_events(fit.table)
    rec.save(tmp_path / "rec")
    new = pred[200:]
    table = spacy_entity_events(new, ner=ner).table
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = rec.predict_events(table).forecast
    nlp.add_pipe("structcal", config={"recalibrator": str(tmp_path / "rec")})
    texts = [Doc(nlp.vocab, words=[t.text for t in d]) for d in new]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = list(nlp.pipe(texts, batch_size=1000))
    got = [e._.confidence for d in out for e in d.ents]
    raw = [e._.raw_confidence for d in out for e in d.ents]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(raw, table.raw, rtol=0, atol=1e-12)
    assert all(0.0 < c < 1.0 for c in got)

    # the pipeline saves and loads with its recalibrator
    nlp.to_disk(tmp_path / "pipeline")
    again = spacy.load(tmp_path / "pipeline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out2 = list(again.pipe([Doc(again.vocab, words=[t.text for t in d]) for d in new],
                               batch_size=1000))
    np.testing.assert_allclose([e._.confidence for d in out2 for e in d.ents], got, atol=1e-12)
    nlp.remove_pipe("structcal")
    # a fresh process finds the component by name (entry point), without importing structcal
    code = ("import spacy, sys; nlp = spacy.load(sys.argv[1]); "
            "assert 'structcal' in nlp.pipe_names; doc = nlp('Barack Obama visited Paris'); "
            "print(all(e._.confidence is None or 0 < e._.confidence < 1 for e in doc.ents))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "pipeline")],
                         capture_output=True, text=True)
    if "No such component" in run.stderr or "E002" in run.stderr:
        pytest.skip("structcal is not installed with its entry points in this environment")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "True"


def test_guarantee_drops_exactly_the_rejected_entities(trained, tmp_path):
    nlp, ner, pred, gold = trained
    a, b = spacy_entity_events(pred[:150], ner=ner, gold=gold[:150]), \
        spacy_entity_events(pred[150:], ner=ner, gold=gold[150:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(random_state=0).fit_events(a.table)
        g = certify_precision(rec.predict_events(b.table), 0.3, delta=0.2)
        accepted = accept_events(g, rec.predict_events(b.table))
    rec.save(tmp_path / "rec")
    g.save(tmp_path / "guarantee")
    nlp.add_pipe("structcal", config={"recalibrator": str(tmp_path / "rec"),
                                      "guarantee": str(tmp_path / "guarantee"),
                                      "drop_rejected": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = list(nlp.pipe([Doc(nlp.vocab, words=[t.text for t in d]) for d in pred[150:]],
                            batch_size=1000))
    kept = {(i, e.start, e.end, e.label_) for i, d in enumerate(out) for e in d.ents}
    want = {(int(b.doc[r]), int(b.start[r]), int(b.end[r]),
             b.label_names[int(b.table.label[r])]) for r in np.flatnonzero(accepted)}
    assert kept == want
    assert all(e._.accepted for d in out for e in d.ents)
    nlp.remove_pipe("structcal")


def test_entities_the_beam_did_not_score_are_kept_without_confidence(trained, tmp_path):
    nlp, ner, pred, _ = trained
    nlp.add_pipe("structcal", config={})
    ruler = nlp.add_pipe("entity_ruler", after="structcal", config={"overwrite_ents": True})
    ruler.add_patterns([{"label": "RULED", "pattern": "the"}])
    doc = nlp("the cat saw the dog in Paris")
    ruled = [e for e in doc.ents if e.label_ == "RULED"]
    assert ruled and all(e._.confidence is None for e in ruled)
    nlp.remove_pipe("entity_ruler")
    # without a recalibrator the confidence is the beam's own probability
    doc = nlp(" ".join(pred[0][:].text.split()))
    assert all(e._.confidence == e._.raw_confidence for e in doc.ents)
    nlp.remove_pipe("structcal")


def test_span_categorizer_scores():
    nlp = spacy.blank("en")
    doc = nlp("Ada Lovelace met Charles Babbage in London")
    spans = [Span(doc, 0, 2, label="PER"), Span(doc, 3, 5, label="PER"),
             Span(doc, 6, 7, label="LOC")]
    group = SpanGroup(doc, name="sc", spans=spans, attrs={"scores": [0.9, 0.4, 0.7]})
    doc.spans["sc"] = group
    ents = spacy_entity_events([doc], spans_key="sc", gold=[[(0, 2, "PER"), (6, 7, "GPE")]])
    assert ents.table.raw.tolist() == [0.9, 0.4, 0.7]
    assert ents.table.outcome.tolist() == [True, False, False]
    assert ents.label_names == ("LOC", "PER")


@pytest.mark.parametrize("bad", [1.7, -0.1, float("nan")])
def test_span_scores_outside_zero_one_are_refused_not_clipped(bad):
    nlp = spacy.blank("en")
    doc = nlp("Ada Lovelace met Charles Babbage")
    spans = [Span(doc, 0, 2, label="PER"), Span(doc, 3, 5, label="PER")]
    doc.spans["sc"] = SpanGroup(doc, name="sc", spans=spans, attrs={"scores": [0.9, bad]})
    with pytest.raises(ParameterError, match="probabilities in \\[0, 1\\]"):
        spacy_entity_events([doc], spans_key="sc")
    # a probability a hair above 1 (rounding in a sum) is 1
    doc.spans["sc"] = SpanGroup(doc, name="sc", spans=spans, attrs={"scores": [0.9, 1 + 1e-12]})
    assert spacy_entity_events([doc], spans_key="sc").table.raw.tolist() == [0.9, 1.0]


def test_bad_inputs(trained):
    nlp, ner, pred, gold = trained
    greedy = spacy.blank("en").add_pipe("ner")
    with pytest.raises(ParameterTypeError, match="beam"):
        spacy_entity_events(pred[:2], ner=greedy)
    with pytest.raises(ParameterError, match="exactly one"):
        spacy_entity_events(pred[:2])
    with pytest.raises(ParameterError, match="one entry per doc"):
        spacy_entity_events(pred[:2], ner=ner, gold=gold[:1])
    with pytest.raises(ParameterError, match="candidates"):
        spacy_entity_events(pred[:2], ner=ner, candidates="all")
    assert len(spacy_entity_events([], ner=ner)) == 0
    # what is not a Doc, named
    with pytest.raises(ParameterTypeError, match=r"`docs\[1\]` must be a spaCy Doc"):
        spacy_entity_events([pred[0], "a sentence"], ner=ner)
    with pytest.raises(ParameterTypeError, match="`docs` must be a sequence"):
        spacy_entity_events("a sentence", ner=ner)
    # min_score: a probability, not NaN (which kept nothing)
    for bad in (float("nan"), 1.5, -1.0):
        with pytest.raises(ParameterError, match="min_score"):
            spacy_entity_events(pred[:2], ner=ner, candidates="beam", min_score=bad)
    # labels: names, once each (a repeated name took the first's features)
    with pytest.raises(ParameterError, match="repeat"):
        spacy_entity_events(pred[:2], ner=ner, labels=list(ner.labels) + [ner.labels[0]])
    with pytest.raises(ParameterError, match="non-empty label names"):
        spacy_entity_events(pred[:2], ner=ner, labels=[1, 2])
    # gold spans: integer offsets inside the doc, str labels (1.7 was read as 1)
    n0 = len(pred[0])
    for bad in ([(0, 1.7, "PER")], [(0, n0 + 1, "PER")], [(2, 1, "PER")], [(0, 1, 5)],
                [(0, 1)], 5):
        with pytest.raises(ParameterError, match=r"`gold\[0\]`"):
            spacy_entity_events(pred[:1], ner=ner, gold=[bad])
    with pytest.raises(ParameterError, match="tokens but doc 0 has"):
        spacy_entity_events(pred[:1], ner=ner, gold=[gold[1] if len(gold[1]) != n0 else gold[2]])


def test_component_options_are_checked():
    from structcal.adapters.spacy_ner import EntityConfidence, make_structcal_component

    nlp = spacy.blank("en")
    with pytest.raises(ParameterTypeError, match="`drop_rejected` must be True or False"):
        EntityConfidence(nlp, "structcal", drop_rejected="yes")
    with pytest.raises(ParameterError, match="`drop_rejected` needs a `guarantee`"):
        make_structcal_component(nlp, "structcal", None, "beam_ner", None, None, True, None)
