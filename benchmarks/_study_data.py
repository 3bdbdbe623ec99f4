"""Predictions on the shipped real data, shared by the shift and guarantees studies.

Each function returns :class:`Source` objects: a ``StructuredPrediction``, gold labels,
one group id per item (documents for GUM, images for BBBC039, else the item itself) and
a name; the event kinds the studies ask about come with them. Taggers trained here are
cached in ``benchmarks/.cache/`` (deterministic: the same files give the same models).

- GUM (shipped subset, 108 documents, 6 genres): a CRFsuite tagger with
  ``structcal.datasets.token_features``, (a) trained on the official train documents
  and applied to dev and test, and (b) cross-fitted over documents (5 folds: each
  document is tagged by a model that never saw it), which gives every genre held-out
  predictions for genre-to-genre pairs.
- WNUT-17: the shipped CRFsuite tagger on dev and test.
- OCR: the shipped likelihood ChainCRF on the recalibration pool and the test split.
- BBBC039: the pixel CRF segmenter of ``segmentation_study.py`` on validation and test.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from structcal import ChainPotentials, StructuredPrediction
from structcal.adapters import CRFsuiteModel
from structcal.datasets import load_gum, load_ocr, load_wnut17, token_features
from structcal.events import EntitySpans, MAPEvent, MarginalEvent

CACHE = Path(__file__).resolve().parent / ".cache"
#: GUM's tag column the studies use: proper-noun-headed mentions (classic named-entity
#: recognition; the all-mentions column tags 66% of tokens, pronouns and clauses included)
MENTIONS = "named"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Source:
    """Items of one data source with predictions, gold labels and groups."""

    name: str
    pred: StructuredPrediction
    y: np.ndarray
    groups: np.ndarray  # group of each item
    kinds: list
    item_meta: dict | None = None  # e.g. genre of each item

    def subset(self, items, name):
        items = np.asarray(items, dtype=np.int64)
        rows = np.concatenate([np.arange(self.pred.item_offsets[i], self.pred.item_offsets[i + 1])
                               for i in items]) if items.size else np.zeros(0, np.int64)
        meta = None if self.item_meta is None else {k: v[items] for k, v in self.item_meta.items()}
        return Source(name, self.pred.subset(items), self.y[rows], self.groups[items],
                      self.kinds, meta)


def ner_kinds(tags):
    return [MAPEvent(), MarginalEvent(), EntitySpans(tags)]


def _train_crfsuite(sentences, tags, path, max_iterations=100):
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(token_features(sentences), tags):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.1, "c2": 0.1, "max_iterations": max_iterations,
                        "feature.possible_transitions": True})
    trainer.train(str(path))
    return CRFsuiteModel.from_file(path)


def _key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
    return h.hexdigest()[:12]


def _crfsuite_for(data, rows, tag: str):
    """A CRFsuite tagger trained on the sentences ``rows`` of ``data`` (cached)."""
    CACHE.mkdir(exist_ok=True)
    # the key includes the features of a probe sentence: a new feature set retrains
    probe = token_features([["Probe", "@user", "#Tag", "in", "2017", "http://x.y", "new-york"]])
    path = CACHE / f"{tag}-{_key(tag, rows.tolist(), probe)}.crfsuite"
    sub = data.subset(rows)
    if path.exists():
        return CRFsuiteModel.from_file(path)
    log(f"  training CRFsuite tagger {tag} on {sub.n_sentences} sentences ...")
    return _train_crfsuite(sub.sentences, sub.tag_strings, path)


def _tag(model, data, rows):
    sub = data.subset(rows)
    return model.potentials(token_features(sub.sentences)), sub.tags


def gum_official():
    """GUM: tagger on the train documents; dev and test tagged (documents as groups)."""
    data = load_gum(mentions=MENTIONS)
    train = np.flatnonzero(data.split == 0)
    model = _crfsuite_for(data, train, f"gum-{MENTIONS}-train")
    out = {}
    for k, name in ((1, "dev"), (2, "test")):
        rows = np.flatnonzero(data.split == k)
        pot, tags = _tag(model, data, rows)
        index = {t: i for i, t in enumerate(model.labels)}
        y = np.array([index[data.tag_names[t]] for t in tags], dtype=np.int64)
        out[name] = Source(f"gum-{name}", StructuredPrediction(pot), y, data.document[rows],
                           ner_kinds(model.labels), {"genre": data.genre[rows]})
    return out


def gum_crossfit(n_folds=5):
    """GUM: every shipped document tagged by a model trained on the other folds of documents."""
    data = load_gum(mentions=MENTIONS)
    n_docs = len(data.document_ids)
    fold_of_doc = np.random.default_rng(0).permutation(n_docs) % n_folds
    fold = fold_of_doc[data.document]
    names = data.tag_names
    unary = np.empty((data.n_tokens, len(names)))
    transitions = []
    for f in range(n_folds):
        model = _crfsuite_for(data, np.flatnonzero(fold != f), f"gum-{MENTIONS}-cf{f}")
        # each fold's model orders its labels by first appearance: map them to the corpus order
        cols = np.array([list(model.labels).index(t) if t in model.labels else -1 for t in names])
        rows = np.flatnonzero(fold == f)
        pot, _ = _tag(model, data, rows)
        token_rows = np.concatenate([np.arange(data.offsets[r], data.offsets[r + 1]) for r in rows])
        u = np.where(cols >= 0, pot.unary[:, np.maximum(cols, 0)], -np.inf)
        unary[token_rows] = u
        T = np.where((cols[:, None] >= 0) & (cols[None, :] >= 0),
                     model.transitions[np.maximum(cols, 0)][:, np.maximum(cols, 0)], -np.inf)
        transitions.append(T)
    # per-edge matrices: each sentence keeps the transitions of its own fold's model
    lengths = data.lengths
    pw = np.concatenate([np.repeat(transitions[fold[s]][None], max(lengths[s] - 1, 0), axis=0)
                         for s in range(data.n_sentences)])
    pot = ChainPotentials(unary, data.offsets, pw, label_names=names)
    return Source("gum-crossfit", StructuredPrediction(pot), data.tags, data.document,
                  ner_kinds(names), {"genre": data.genre, "split": data.split})


def wnut17():
    """WNUT-17: the shipped tagger on dev and test (each sentence its own group)."""
    from structcal.datasets import wnut17_tagger_path

    model = CRFsuiteModel.from_file(wnut17_tagger_path())
    out = {}
    for name in ("dev", "test"):
        d = load_wnut17(name)
        pot = model.potentials(token_features(d.sentences))
        index = {t: i for i, t in enumerate(model.labels)}
        y = np.array([index[d.tag_names[t]] for t in d.tags], dtype=np.int64)
        out[name] = Source(f"wnut17-{name}", StructuredPrediction(pot), y,
                           np.arange(d.n_sentences), ner_kinds(model.labels))
    return out


def ocr():
    """OCR: the shipped likelihood ChainCRF on the recalibration pool and the test split."""
    from structcal.crf import ChainCRF
    from structcal.io import pretrained_path

    crf = ChainCRF.load(pretrained_path("ocr_chain_crf"))
    out = {}
    for name in ("recalibration", "test"):
        d = load_ocr(name)
        pot = crf.potentials(d.pixels, lengths=d.lengths)
        out[name] = Source(f"ocr-{name}", StructuredPrediction(pot), d.labels,
                           np.arange(d.n_words), [MAPEvent(), MarginalEvent()])
    return out


def bbbc039():
    """BBBC039: the tuned pixel CRF segmenter on validation and test (images as groups)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import segmentation_study as seg
    from structcal.datasets import load_bbbc039
    from structcal.events import AllObjectsFound, ObjectEvents
    from structcal.segmentation import PixelCRFSegmenter

    data = load_bbbc039()
    train, val, test = data.split("train"), data.split("val"), data.split("test")
    model = PixelCRFSegmenter().fit(train.images / 255.0, train.masks)
    model.tune(list(val.images / 255.0), list(val.masks), potts_grid=(0.0, 0.5, 1.0),
               contrast_grid=(0.0, 1.0, 2.0))
    out = {}
    for name, d in (("val", val), ("test", test)):
        pred = seg.predict(model, d)
        out[name] = Source(f"bbbc039-{name}", pred, d.masks.reshape(-1).astype(np.int64),
                           np.arange(d.n_images), [ObjectEvents(), AllObjectsFound(n_samples=16)])
    # modality-like changes of the test images, through the same segmenter
    rng = np.random.default_rng(0)
    for name, f in MODALITY_CHANGES.items():
        from types import SimpleNamespace

        d = SimpleNamespace(images=f(test.images.astype(np.float64), rng), masks=test.masks,
                            shape=test.shape, n_images=test.n_images)
        pred = seg.predict(model, d)
        out[f"test-{name}"] = Source(f"bbbc039-test-{name}", pred,
                                     d.masks.reshape(-1).astype(np.int64),
                                     np.arange(d.n_images), [ObjectEvents()])
    return out


#: image changes that mimic another imaging modality (uint8 intensities in, float out)
MODALITY_CHANGES = {
    # bright background, dark nuclei (as in brightfield or histology)
    "inverted": lambda im, rng: 255.0 - im,
    # a different exposure and gamma
    "contrast": lambda im, rng: 255.0 * (im / 255.0) ** 0.5 * 0.7,
    # a noisier sensor
    "noise": lambda im, rng: np.clip(im + rng.normal(0.0, 12.0, im.shape), 0.0, 255.0),
}
