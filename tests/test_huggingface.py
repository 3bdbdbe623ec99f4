"""Hugging Face token classification with real transformers objects: a tiny BERT built from
a config and a WordPiece tokenizer trained offline in the test (skipped without
transformers / torch)."""

import warnings

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
tokenizers = pytest.importorskip("tokenizers")

from structcal import StructuredPrediction, StructuredRecalibrator  # noqa: E402
from structcal.adapters import TagScheme, hf_entities, hf_potentials  # noqa: E402
from structcal.events import EntitySpans, build_events  # noqa: E402
from structcal.inference.exact import exact_chain  # noqa: E402

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
ID2LABEL = dict(enumerate(TAGS))
TEXTS = ["Ada Lovelace visited London yesterday", "Charles Babbage lives in Paris",
         "the engine was built in Marylebone by Babbage", "Lovelace wrote notes"]


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(TEXTS * 20, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]")
    config = transformers.BertConfig(vocab_size=fast.vocab_size, hidden_size=16,
                                     num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, num_labels=len(TAGS),
                                     id2label=ID2LABEL, label2id={t: i for i, t in ID2LABEL.items()})
    torch.manual_seed(0)
    model = transformers.BertForTokenClassification(config).eval()
    return model, fast


def _run(model, tok, texts):
    enc = tok([t.split() for t in texts], is_split_into_words=True, padding=True,
              return_tensors="pt", return_offsets_mapping=True)
    with torch.no_grad():
        logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
    return enc, logits * 4.0  # a sharper classifier than random initial weights


def test_potentials_are_the_word_level_classifier_restricted_to_valid_sequences(
        model_and_tokenizer):
    model, tok = model_and_tokenizer
    enc, logits = _run(model, tok, TEXTS)
    pot = hf_potentials(enc, logits, model.config.id2label)
    assert pot.label_names == tuple(TAGS)
    assert pot.lengths.tolist() == [len(t.split()) for t in TEXTS]
    # the first subword of each word gives its scores (log-softmax), invalid moves forbidden
    L = logits.numpy()
    for i in range(len(TEXTS)):
        ids = enc.word_ids(i)
        first = [ids.index(w) for w in range(len(TEXTS[i].split()))]
        want = L[i, first] - np.log(np.exp(L[i, first]).sum(axis=1, keepdims=True))
        got = pot.unary[pot.offsets[i]:pot.offsets[i + 1]]
        finite = np.isfinite(got)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-6)
    # entities: the exact probability of each chunk, checked by enumeration
    scheme = TagScheme(TAGS)
    t = build_events(StructuredPrediction(pot), [EntitySpans(scheme)], features=["raw"])
    from structcal.events import entity_table

    from .test_spans import conlleval_chunks

    spans = entity_table(t, "entity", scheme)
    for r in range(t.n_events):
        ex = exact_chain(pot, int(spans["item"][r]))
        key = (int(spans["start"][r]), int(spans["end"][r]), spans["type_name"][r])
        cs = [set(conlleval_chunks([TAGS[q] for q in lab])) for lab in ex.labelings]
        assert t.raw[r] == pytest.approx(ex.probability(np.array([key in c for c in cs])),
                                         abs=1e-10)


def test_entities_with_offsets_and_calibrated_scores(model_and_tokenizer):
    model, tok = model_and_tokenizer
    enc, logits = _run(model, tok, TEXTS)
    ents = hf_entities(enc, logits, model.config.id2label)
    assert len(ents) == len(TEXTS)
    for text, sent in zip(TEXTS, ents):
        words = text.split()
        for e in sent:
            assert 0 <= e["start_word"] < e["end_word"] <= len(words)
            assert 0.0 <= e["exact"] <= 1.0 and e["score"] == e["exact"]
            assert set(e) >= {"entity_group", "start", "end"}
    # a recalibrator fitted on such entities gives calibrated scores
    rng = np.random.default_rng(0)
    many = [" ".join(rng.choice(" ".join(TEXTS).split(), size=6)) for _ in range(120)]
    enc2, logits2 = _run(model, tok, many)
    pot = hf_potentials(enc2, logits2, model.config.id2label)
    pred = StructuredPrediction(pot)
    y = pred.map_labels.copy()
    flip = rng.random(y.shape[0]) < 0.2
    y[flip] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator([EntitySpans(TagScheme(TAGS), invalid_gold="conlleval")],
                                     shift_check=False).fit(pred, y)
    cal = hf_entities(enc, logits, model.config.id2label, recalibrator=rec)
    flat = [e for s in cal for e in s]
    assert flat and all(0 < e["score"] < 1 for e in flat)
