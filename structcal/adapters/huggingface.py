"""Hugging Face token classifiers: exact, calibrated entity probabilities.

A ``pipeline("token-classification", aggregation_strategy=...)`` reports, per entity, the
mean (or first, or max) of its subword scores: not the probability of anything one can
check. :func:`hf_potentials` turns a tokenizer's ``BatchEncoding`` and the model's logits
into word-level chain potentials: the subword logits of each word (its first subword by
default), log-softmaxed, under the tag scheme's validity transitions (``I-X`` only after
``B-X``/``I-X`` in BIO) - the classifier's own per-token distribution restricted to valid
tag sequences - or under a CRF head's own transitions. Entities then get the exact
probability that the gold labeling has exactly this entity. :func:`hf_entities` is the
drop-in answer to the pipeline's ``aggregation_strategy``: per text, its entities with
word and character offsets, type, exact and (with a fitted recalibrator) calibrated
probability.

``transformers`` itself is not needed: the functions read the ``BatchEncoding``'s
``word_ids`` and ``offset_mapping`` and the logits (torch tensors or arrays).
"""

from __future__ import annotations

import numpy as np

from .._validation import describe
from ..exceptions import ParameterError, ParameterTypeError
from .tagging import TagScheme, word_scores

__all__ = ["hf_potentials", "hf_entities", "hf_tag_names"]


def _numpy(x, name):
    if hasattr(x, "detach"):  # a torch tensor, on any device
        x = x.detach().cpu().float().numpy() if x.dtype.is_floating_point else x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception:  # noqa: BLE001
        raise ParameterTypeError(f"`{name}` must be an array or tensor; got {describe(x)}") from None


def hf_tag_names(id2label) -> tuple:
    """The tag names in label-id order from a model's ``config.id2label``."""
    if not isinstance(id2label, dict) or not id2label:
        raise ParameterTypeError(f"`id2label` must be a non-empty dict id -> tag; got "
                                 f"{describe(id2label)}")
    try:
        ids = sorted(int(k) for k in id2label)
    except (TypeError, ValueError):
        raise ParameterError("`id2label` keys must be label ids") from None
    if ids != list(range(len(ids))):
        raise ParameterError(f"`id2label` must name the labels 0..{len(ids) - 1}; got ids {ids}")
    table = {int(k): v for k, v in id2label.items()}
    bad = [v for v in table.values() if not isinstance(v, str) or not v]
    if bad:
        raise ParameterTypeError(f"`id2label` must map every id to a tag name (a non-empty "
                                 f"str); got {describe(bad[0])}")
    return tuple(table[i] for i in ids)


def _word_ids(encoding, i):
    if hasattr(encoding, "word_ids"):
        try:
            return encoding.word_ids(i)
        except (TypeError, ValueError) as exc:
            raise ParameterError(
                "`encoding` has no word ids: tokenize with a fast tokenizer "
                f"(use_fast=True) and is_split_into_words or text input ({exc})") from None
    raise ParameterTypeError(
        f"`encoding` must be a tokenizer's BatchEncoding (with word_ids); got {describe(encoding)}")


def _n_sequences(encoding):
    """Number of sequences of a BatchEncoding (None when it does not say)."""
    try:
        if hasattr(encoding, "encodings") and encoding.encodings is not None:
            return len(encoding.encodings)
        if hasattr(encoding, "get") and encoding.get("input_ids") is not None:
            ids = encoding["input_ids"]
            return len(ids)
    except (TypeError, KeyError):
        return None
    return None


def _word_starts(words):
    """Character offset of each word in ``" ".join(words)``."""
    starts, pos = [], 0
    for w in words:
        starts.append(pos)
        pos += len(w) + 1
    return starts


def hf_potentials(encoding, logits, id2label, *, scheme: str = "BIO", reduce: str = "first",
                  transitions=None, start=None, end=None):
    """Word-level :class:`~structcal.ChainPotentials` of a token classifier's outputs.

    Parameters
    ----------
    encoding : transformers.BatchEncoding
        The tokenizer's output for a batch (a fast tokenizer: ``word_ids(i)`` gives the word
        of each subword, None for special tokens and padding).
    logits : array-like or torch.Tensor of shape (batch, n_subwords, n_labels)
        The model's logits (``model(**encoding).logits``).
    id2label : dict
        ``model.config.id2label``.
    scheme : {'BIO', 'IOB1', 'BIOES', 'BILOU'}, default='BIO'
        The tag scheme the labels follow (for the validity transitions and entities).
    reduce : {'first', 'mean', 'max'}, default='first'
        How a word's subword logits are combined (the first subword's: the usual
        training convention).
    transitions : array-like of shape (n_labels, n_labels), optional
        A CRF head's transition scores: then the chain is that CRF (emissions + these
        transitions, ``start``/``end`` scores if given) instead of the softmax classifier
        restricted to valid sequences.
    start, end : array-like of shape (n_labels,), optional

    Returns
    -------
    ChainPotentials
        One chain per sequence of the batch, one position per word, with ``label_names``.
    """
    from ..potentials import ChainPotentials
    from .emissions import emission_potentials
    from .tagging import token_classifier_potentials

    names = hf_tag_names(id2label)
    L = _numpy(logits, "logits")
    if L.ndim != 3 or L.shape[2] != len(names):
        raise ParameterError(f"`logits` must have shape (batch, n_subwords, {len(names)}); "
                             f"got {L.shape}")
    if L.dtype.kind not in "biuf":
        raise ParameterTypeError(f"`logits` must hold numbers; got dtype {L.dtype}")
    if np.isnan(L).any() or np.isposinf(L).any():
        raise ParameterError("`logits` holds NaN or +inf")
    n_enc = _n_sequences(encoding)
    if n_enc is not None and n_enc != L.shape[0]:
        raise ParameterError(f"`logits` holds {L.shape[0]} sequences but `encoding` holds "
                             f"{n_enc}: pass the logits of every encoded sequence, in order")
    rows, lengths = [], []
    for i in range(L.shape[0]):
        ids = _word_ids(encoding, i)
        if len(ids) != L.shape[1]:
            raise ParameterError(f"sequence {i}: {len(ids)} word ids for {L.shape[1]} logits")
        w = word_scores(L[i], ids, reduce=reduce)
        rows.append(w)
        lengths.append(w.shape[0])
    scores = np.concatenate(rows) if rows else np.zeros((0, len(names)))
    if transitions is None:
        pot = token_classifier_potentials(scores, lengths, list(names), scheme=scheme)
    else:
        TagScheme(list(names), scheme)  # the tags must read under the scheme
        pot = emission_potentials(scores, transitions, lengths=lengths, start=start, end=end)
    return ChainPotentials(pot.unary, pot.offsets, pot.pairwise, label_names=names)


def hf_entities(encoding, logits, id2label, *, recalibrator=None, scheme: str = "BIO",
                reduce: str = "first", transitions=None, words=None):
    """The entities of each sequence with exact (and calibrated) probabilities.

    The answer to ``pipeline(..., aggregation_strategy="first")``: entities are the chunks
    of the most probable valid tag sequence (conlleval's rules), each with the exact
    probability that the gold labeling has exactly this entity and, given a
    :class:`~structcal.StructuredRecalibrator` fitted on such entities (``EntitySpans``
    events), its calibrated probability.

    Parameters
    ----------
    encoding, logits, id2label, scheme, reduce, transitions
        As :func:`hf_potentials`. Character offsets need the encoding's
        ``offset_mapping`` (tokenize with ``return_offsets_mapping=True``).
    recalibrator : StructuredRecalibrator, optional
        Fitted on ``EntitySpans`` events of this model (kind named ``"entity"``).
    words : sequence of sequence of str, optional
        The words of each sequence, when the encoding was made from pre-split words
        (``is_split_into_words=True``): entities then get their ``word`` (the words
        joined by spaces) and character offsets into ``" ".join(words[i])``. The offsets
        a tokenizer gives for pre-split words are relative to each word, so without
        ``words`` such an encoding gives no character offsets.

    Returns
    -------
    list of list of dict
        Per sequence, its entities: ``entity_group`` (the type), ``start_word``,
        ``end_word`` (exclusive), ``start``/``end`` (character offsets into the text, or
        into ``" ".join(words[i])``, when known), ``word`` (given ``words``), ``exact``
        and ``score`` (the calibrated probability if a recalibrator is given, else the
        exact one).
    """
    from ..events import EntitySpans, build_events, entity_table
    from ..prediction import StructuredPrediction

    pot = hf_potentials(encoding, logits, id2label, scheme=scheme, reduce=reduce,
                        transitions=transitions)
    if words is not None:
        if isinstance(words, (str, bytes)) or len(words) != pot.n_chains or any(
                isinstance(w, (str, bytes)) or not all(isinstance(x, str) for x in w)
                for w in words):
            raise ParameterError(f"`words` must hold one list of str per sequence "
                                 f"({pot.n_chains}); got {describe(words)}")
        lengths = np.diff(pot.offsets)
        bad = [i for i, w in enumerate(words) if len(w) != lengths[i]]
        if bad:
            i = bad[0]
            raise ParameterError(f"`words[{i}]` has {len(words[i])} words but the encoding of "
                                 f"sequence {i} has {int(lengths[i])}")
    pred = StructuredPrediction(pot)
    tags = TagScheme(list(pot.label_names), scheme)
    if recalibrator is not None:
        out = recalibrator.predict(pred)
        table, score = out.table, out.forecast
        kinds = [k.name for k in recalibrator.kinds_]
        if "entity" not in kinds:
            raise ParameterError("`recalibrator` has no 'entity' kind (EntitySpans events)")
        rows = table.kind == table.kind_names.index("entity")
        table, score = table.select(rows), score[rows]
    else:
        table = build_events(pred, [EntitySpans(tags)], features=["raw"])
        score = table.raw
    spans = entity_table(table, "entity", tags) if table.n_events else None
    offsets = None
    if hasattr(encoding, "get") and encoding.get("offset_mapping") is not None:
        offsets = _numpy(encoding["offset_mapping"], "offset_mapping")
    out = [[] for _ in range(pot.n_chains)]
    if spans is None:
        return out
    per_word = {}
    for r in range(table.n_events):
        i, s, e = int(spans["item"][r]), int(spans["start"][r]), int(spans["end"][r])
        ent = {"entity_group": spans["type_name"][r], "start_word": s, "end_word": e,
               "exact": float(table.raw[r]), "score": float(score[r])}
        if words is not None:
            ent["word"] = " ".join(words[i][s:e])
            starts = _word_starts(words[i])
            ent["start"], ent["end"] = starts[s], starts[e - 1] + len(words[i][e - 1])
        elif offsets is not None:
            ids = _word_ids(encoding, i)
            if i not in per_word:
                per_word[i] = _offsets_per_word(ids, offsets[i])
            if not per_word[i]:
                sub = [k for k, w in enumerate(ids) if w is not None and s <= w < e]
                ent["start"], ent["end"] = (int(offsets[i][sub[0]][0]),
                                            int(offsets[i][sub[-1]][1]))
        out[i].append(ent)
    return out


def _offsets_per_word(ids, offsets) -> bool:
    """Whether a sequence's offsets restart at every word (pre-split input), so that they
    are not offsets into one text: two words whose first subword starts at 0."""
    first = {}
    for k, w in enumerate(ids):
        if w is not None and w not in first:
            first[w] = int(offsets[k][0])
    return sum(v == 0 for v in first.values()) >= 2
