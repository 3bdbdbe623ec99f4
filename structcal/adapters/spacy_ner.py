"""spaCy: calibrated entity confidence from a beam NER or a span categorizer.

spaCy's default NER gives no score; two of its components do: the beam NER
(``beam_ner``), whose beam gives each candidate entity the total probability of the
parses that contain it, and the span categorizer (``spancat``), whose scores sit in
``doc.spans[key].attrs["scores"]``. :func:`spacy_entity_events` turns those entities into
an ordinary :class:`~structcal.events.EventTable` (built by
:func:`~structcal.events.external_events`: raw score, span length and type features; with
gold docs, the exact-match outcome), so a :class:`~structcal.StructuredRecalibrator`
is fit on it as on any table. The pipeline component ``"structcal"`` (also found by
name through the ``spacy_factories`` entry point) then writes on every entity:

- ``Span._.confidence``: the calibrated probability that the entity is right (exact span
  and type);
- ``Span._.raw_confidence``: the model's own score;
- ``Span._.accepted``: with a precision guarantee, whether the entity passes its
  certified threshold (``drop_rejected=True`` removes the others from ``doc.ents``).

Entities the scoring component did not produce (for instance added by an entity ruler)
get ``None`` and are never dropped. spaCy is needed only to call these; importing this
module without it works (the component is registered when spaCy is importable).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["SpacyEntities", "EntityConfidence", "spacy_entity_events", "make_structcal_component"]


@dataclass(frozen=True, eq=False)
class SpacyEntities:
    """Entity events of a batch of spaCy docs (from :func:`spacy_entity_events`).

    Attributes
    ----------
    table : EventTable
        One event per entity, kind ``"entity"``; features ``raw``, ``length`` and one
        ``type=<LABEL>`` indicator per label; ``label`` holds the label's index in
        ``labels``; ``outcome`` (with gold) whether a gold entity has the same span and
        type.
    doc : ndarray of int
        Index of each entity's doc in the batch.
    start, end : ndarray of int
        Token offsets (``end`` exclusive) of each entity.
    label_names : tuple of str
        The labels, in the order of the features.
    """

    table: object
    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    label_names: tuple

    def __len__(self):
        return len(self.table)


def _spacy():
    try:
        import spacy
    except ImportError as exc:
        raise ImportError("the spaCy adapter needs spaCy (pip install spacy)") from exc
    return spacy


def _beam_scores(ner, docs):
    if not hasattr(ner, "scored_ents") or int(getattr(ner, "cfg", {}).get("beam_width", 1)) < 2:
        raise ParameterTypeError(
            f"`ner` must be a beam NER component (nlp.get_pipe('beam_ner'), which scores its "
            f"entities); got {type(ner).__name__}. spaCy's greedy 'ner' gives no scores: "
            "use 'beam_ner' or a span categorizer (spans_key=)"
        )
    if not docs:
        return []
    return [dict(s) for s in ner.scored_ents(ner.predict(docs))]


def _gold_spans(g, j, n_tokens):
    if hasattr(g, "ents"):
        if len(g) != n_tokens:
            raise ParameterError(f"`gold[{j}]` has {len(g)} tokens but doc {j} has {n_tokens}")
        return {(e.start, e.end, e.label_) for e in g.ents}
    what = (f"`gold[{j}]` must be a Doc or a list of (start, end, label) token spans with "
            f"integer offsets 0 <= start < end <= {n_tokens} (the doc's length) and a str "
            "label")
    try:
        spans = [tuple(x) for x in g]
    except TypeError as exc:
        raise ParameterError(f"{what}; got {type(g).__name__}") from exc
    out = set()
    for x in spans:
        if (len(x) != 3 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                   for v in x[:2])
                or not isinstance(x[2], str) or not 0 <= x[0] < x[1] <= n_tokens):
            raise ParameterError(f"{what}; got {x!r}")
        out.add((int(x[0]), int(x[1]), x[2]))
    return out


def _check_scores(scores, where):
    """Scores as floats in [0, 1]: a probability a hair above 1 (rounding in the beam's
    sums) is taken as 1; anything else outside, or NaN, is refused."""
    scores = np.asarray(scores, dtype=np.float64)
    bad = ~((scores >= 0.0) & (scores <= 1.0 + 1e-9))
    if bad.any():
        raise ParameterError(f"{where}: scores must be probabilities in [0, 1]; got "
                             f"{scores[bad][0]!r}")
    return np.minimum(scores, 1.0)


def spacy_entity_events(docs, *, ner=None, spans_key=None, gold=None, candidates="predicted",
                        min_score=0.0, labels=None, kind="entity") -> SpacyEntities:
    """Entity events of spaCy docs, with the scores of a beam NER or a span categorizer.

    Parameters
    ----------
    docs : sequence of spacy.tokens.Doc
        Docs the pipeline has processed (their ``ents`` set by the NER).
    ner : spaCy beam NER component, optional
        ``nlp.get_pipe("beam_ner")``: its beam, run again on ``docs``, gives each
        candidate entity the probability of the parses that contain it.
    spans_key : str, optional
        Instead of ``ner``: a span categorizer's spans ``doc.spans[spans_key]`` with their
        ``attrs["scores"]``.
    gold : sequence of Doc or of lists of (start, end, label), optional
        The gold entities of each doc (integer token offsets within the doc, ``end``
        exclusive; str labels), for the outcomes.
    candidates : {"predicted", "beam"}, default="predicted"
        With ``ner``: the entities of ``doc.ents`` (those the beam scores), or every
        candidate of the beam with a score above ``min_score`` (for decisions about
        entities the best parse left out).
    min_score : float in [0, 1], default=0.0
        With ``candidates="beam"``: keep the candidates scored above it.
    labels : sequence of str, optional
        The labels in feature order (default: ``ner.labels``, or the sorted labels seen);
        give the same list when fitting and predicting.
    kind : str, default="entity"

    Returns
    -------
    SpacyEntities
    """
    from ..events.external import external_events
    from .._validation import check_float, describe

    _spacy()
    from spacy.tokens import Doc

    if isinstance(docs, (str, bytes)) or not hasattr(docs, "__iter__"):
        raise ParameterTypeError(f"`docs` must be a sequence of spaCy Docs; got {describe(docs)}")
    docs = list(docs)
    for i, doc in enumerate(docs):
        if not isinstance(doc, Doc):
            raise ParameterTypeError(f"`docs[{i}]` must be a spaCy Doc; got {describe(doc)}")
    min_score = check_float(min_score, "min_score", low=0.0, high=1.0)
    if (ner is None) == (spans_key is None):
        raise ParameterError("give exactly one source of scores: `ner` (a beam NER) or "
                             "`spans_key` (a span categorizer's spans)")
    if candidates not in ("predicted", "beam"):
        raise ParameterError(f"`candidates` must be 'predicted' or 'beam'; got {candidates!r}")
    if candidates == "beam" and ner is None:
        raise ParameterError("candidates='beam' needs `ner`")
    if gold is not None:
        gold = list(gold)
        if len(gold) != len(docs):
            raise ParameterError(f"`gold` must hold one entry per doc ({len(docs)}); got "
                                 f"{len(gold)}")
    rows = []  # (doc, start, end, label, score)
    if ner is not None:
        for i, (doc, scores) in enumerate(zip(docs, _beam_scores(ner, docs))):
            checked = _check_scores(list(scores.values()), f"the beam's scores of doc {i}")
            scores = dict(zip(scores, checked.tolist()))
            if candidates == "predicted":
                for e in doc.ents:
                    s = scores.get((e.start, e.end, e.label_))
                    if s is not None:
                        rows.append((i, e.start, e.end, e.label_, s))
            else:
                for (s0, s1, lab), s in sorted(scores.items()):
                    if s > min_score:
                        rows.append((i, s0, s1, lab, s))
    else:
        for i, doc in enumerate(docs):
            if spans_key not in doc.spans:
                raise ParameterError(f"doc {i} has no spans under `spans_key` {spans_key!r}")
            group = doc.spans[spans_key]
            scores = group.attrs.get("scores")
            if scores is None or len(scores) != len(group):
                raise ParameterError(f"doc {i}: spans {spans_key!r} carry no 'scores' attribute "
                                     "(a span categorizer writes one)")
            scores = _check_scores(scores, f"doc {i}, spans {spans_key!r}")
            for sp, s in zip(group, scores.tolist()):
                rows.append((i, sp.start, sp.end, sp.label_, s))
    if labels is None:
        labels = (tuple(ner.labels) if ner is not None and getattr(ner, "labels", None)
                  else tuple(sorted({r[3] for r in rows})))
    if isinstance(labels, str) or not all(isinstance(x, str) and x for x in labels):
        raise ParameterError(f"`labels` must be a sequence of non-empty label names; got "
                             f"{labels!r}")
    labels = tuple(labels)
    if len(set(labels)) != len(labels):
        raise ParameterError(f"`labels` must not repeat a name; got {list(labels)}")
    unknown = sorted({r[3] for r in rows} - set(labels))
    if unknown:
        raise ParameterError(f"entities of labels {unknown} not in `labels` {list(labels)}")
    n = len(rows)
    doc_i = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = np.array([r[2] for r in rows], dtype=np.int64)
    lab = np.array([labels.index(r[3]) for r in rows], dtype=np.int64)
    raw = np.array([r[4] for r in rows], dtype=np.float64)
    features = {"length": (end - start).astype(np.float64)}
    for k, name in enumerate(labels):
        features[f"type={name}"] = (lab == k).astype(np.float64)
    outcome = None
    if gold is not None:
        gsets = [_gold_spans(g, j, len(docs[j])) for j, g in enumerate(gold)]
        outcome = np.array([(r[1], r[2], r[3]) in gsets[r[0]] for r in rows], dtype=bool)
    members = [np.arange(s0, s1) for s0, s1 in zip(start.tolist(), end.tolist())]
    table = external_events(doc_i, kind=kind, raw=raw, features=features, outcome=outcome,
                            label=lab, members=members if n else None, n_items=len(docs))
    return SpacyEntities(table=table, doc=doc_i, start=start, end=end, label_names=labels)


class EntityConfidence:
    """The ``"structcal"`` pipeline component (see the module docstring).

    Parameters
    ----------
    nlp : spacy.Language
    name : str
    recalibrator : str or None
        Path of a saved :class:`~structcal.StructuredRecalibrator` fit on
        :func:`spacy_entity_events` tables (None: ``confidence`` is the raw score).
    ner : str or None, default="beam_ner"
        Name of the beam NER component whose scores are read.
    spans_key : str or None
        Instead of ``ner``: the span categorizer's spans key.
    guarantee : str or None
        Path of a saved :class:`~structcal.guarantees.PrecisionGuarantee`; sets
        ``Span._.accepted``.
    drop_rejected : bool, default=False
        With a guarantee, keep in ``doc.ents`` only the accepted entities (and those it
        cannot score).
    labels : list of str or None
        The labels in the order used when fitting (default: the NER's labels).
    """

    def __init__(self, nlp, name, *, recalibrator=None, ner="beam_ner", spans_key=None,
                 guarantee=None, drop_rejected=False, labels=None):
        self.nlp, self.name = nlp, name
        self.ner_name, self.spans_key = (None if spans_key else ner), spans_key
        # not `labels`: spaCy reads a component's `labels` as the labels it predicts
        self.label_order = None if labels is None else [str(x) for x in labels]
        if not isinstance(drop_rejected, (bool, np.bool_)):
            raise ParameterTypeError(f"`drop_rejected` must be True or False; got {drop_rejected!r}")
        self.drop_rejected = bool(drop_rejected)
        self.recalibrator = self.guarantee = None
        if recalibrator:
            self._load_recalibrator(recalibrator)
        if guarantee:
            self._load_guarantee(guarantee)
        if self.drop_rejected and not guarantee:
            raise ParameterError("`drop_rejected` needs a `guarantee` (which entities pass)")

    def _load_recalibrator(self, path):
        from ..recalibration import StructuredRecalibrator

        self.recalibrator = StructuredRecalibrator.load(path)

    def _load_guarantee(self, path):
        from ..guarantees import PrecisionGuarantee

        self.guarantee = PrecisionGuarantee.load(path)

    def __call__(self, doc):
        """Annotate one doc (no shift test: one doc is one group)."""
        return next(iter(self.pipe([doc])))

    def pipe(self, docs, batch_size=256):
        """Annotate a stream of docs in batches (each batch tested for shift from 5 docs)."""
        batch = []
        for doc in docs:
            batch.append(doc)
            if len(batch) >= batch_size:
                yield from self._annotate(batch)
                batch = []
        if batch:
            yield from self._annotate(batch)

    def _annotate(self, docs):
        from ..guarantees import accept_events

        ner = self.nlp.get_pipe(self.ner_name) if self.ner_name else None
        ents = spacy_entity_events(docs, ner=ner, spans_key=self.spans_key,
                                   labels=self.label_order)
        t = ents.table
        conf = t.raw
        accepted = None
        if len(t) and self.recalibrator is not None:
            # a batch of docs is tested for shift like any batch (from 5 docs up)
            out = self.recalibrator.predict_events(t)
            conf = out.forecast
            if self.guarantee is not None:
                accepted = accept_events(self.guarantee, out)
        elif len(t) and self.guarantee is not None:
            raise ParameterError("a `guarantee` needs the `recalibrator` it was certified with")
        found = {}
        for r in range(len(t)):
            found[(int(ents.doc[r]), int(ents.start[r]), int(ents.end[r]),
                   ents.label_names[int(t.label[r])])] = r
        for i, doc in enumerate(docs):
            keep = []
            for e in doc.ents:
                r = found.get((i, e.start, e.end, e.label_))
                if r is None:
                    e._.confidence = e._.raw_confidence = e._.accepted = None
                    keep.append(e)
                    continue
                e._.raw_confidence = float(t.raw[r])
                e._.confidence = float(conf[r])
                e._.accepted = None if accepted is None else bool(accepted[r])
                if not (self.drop_rejected and accepted is not None and not accepted[r]):
                    keep.append(e)
            if self.drop_rejected and len(keep) != len(doc.ents):
                doc.ents = keep   # extension values live in the doc, keyed by the span
        return docs

    # spaCy serialisation: the fitted recalibrator and guarantee travel with the pipeline
    def to_disk(self, path, *, exclude=()):
        """Save the recalibrator and guarantee into the pipeline's folder (no pickle)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.recalibrator is not None:
            self.recalibrator.save(path / "recalibrator")
        if self.guarantee is not None:
            self.guarantee.save(path / "guarantee")

    def from_disk(self, path, *, exclude=()):
        """Load what :meth:`to_disk` saved."""
        path = Path(path)
        if (path / "recalibrator.npz").exists():
            self._load_recalibrator(path / "recalibrator")
        if (path / "guarantee.npz").exists():
            self._load_guarantee(path / "guarantee")
        return self


def make_structcal_component(nlp, name, recalibrator, ner, spans_key, guarantee,
                             drop_rejected, labels):
    """Make the ``"structcal"`` spaCy component (:class:`EntityConfidence`)."""
    return EntityConfidence(nlp, name, recalibrator=recalibrator, ner=ner, spans_key=spans_key,
                            guarantee=guarantee, drop_rejected=drop_rejected, labels=labels)


def _register():
    try:
        from spacy.language import Language
        from spacy.tokens import Span
    except ImportError:
        return
    for attr in ("confidence", "raw_confidence", "accepted"):
        if not Span.has_extension(attr):
            Span.set_extension(attr, default=None)
    if not Language.has_factory("structcal"):
        Language.factory(
            "structcal",
            default_config={"recalibrator": None, "ner": "beam_ner", "spans_key": None,
                            "guarantee": None, "drop_rejected": False, "labels": None},
            func=make_structcal_component,
        )


_register()
