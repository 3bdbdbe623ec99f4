"""Tagging schemes (BIO/IOB2, IOB1, BIOES/BILOU): chunks, validity transitions, subwords.

Chunk semantics (:meth:`TagScheme.chunks`) are conlleval's, for every scheme and for tags
that break the scheme's rules alike: reading left to right with an ``O`` before the first
and after the last token, a tag *continues* the previous tag's chunk only when it is an
``I-X`` or ``E-X`` (``L-X``) following a ``B-X`` or ``I-X`` of the same type; every other
non-``O`` tag starts a new chunk. So an ``I-X`` after ``O`` or after a tag of another type
starts a chunk (conlleval's rule for invalid BIO), ``B-X`` always starts one, and an
``E-X`` after ``O`` is a one-token chunk. IOB1 and BIO then decode identically; they
differ in which sequences are *valid* (:meth:`TagScheme.transitions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, as_int_array, describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["TagScheme", "Chunks", "word_scores", "token_classifier_potentials"]

# prefix classes
_O, _B, _I, _E, _S = 0, 1, 2, 3, 4
_SCHEMES = {
    "BIO": {"B": _B, "I": _I},
    "IOB2": {"B": _B, "I": _I},
    "IOB1": {"B": _B, "I": _I},
    "BIOES": {"B": _B, "I": _I, "E": _E, "S": _S},
    "IOBES": {"B": _B, "I": _I, "E": _E, "S": _S},
    "BILOU": {"B": _B, "I": _I, "L": _E, "U": _S},
}
_CANONICAL = {"IOB2": "BIO", "IOBES": "BIOES"}


@dataclass(frozen=True)
class Chunks:
    """Entity chunks of a batch of tag sequences.

    Attributes
    ----------
    item : ndarray of shape (n_chunks,), int64
        Sequence of each chunk.
    start, end : ndarray of shape (n_chunks,), int64
        Global token range ``[start, end)`` of each chunk (tokens laid end to end).
    type : ndarray of shape (n_chunks,), int64
        Entity type, an index into ``TagScheme.types``.
    """

    item: np.ndarray
    start: np.ndarray
    end: np.ndarray
    type: np.ndarray

    def __len__(self) -> int:
        return int(self.item.shape[0])


class TagScheme:
    """A tag set read under a tagging scheme.

    Parameters
    ----------
    tag_names : sequence of str, or a tagger model
        The tags, in label-index order: ``'O'`` and ``PREFIX-TYPE`` names such as
        ``'B-person'`` (the type may itself contain ``-``). A model with a ``labels``
        attribute (:class:`~structcal.adapters.CRFsuiteModel`) gives its own tags in its
        own order, the order its potentials use: prefer it to a list typed by hand
        (``sorted(model.labels)`` would silently misread every label).
    scheme : {'BIO', 'IOB2', 'IOB1', 'BIOES', 'IOBES', 'BILOU'}, default='BIO'
        Which prefixes are allowed (``B``/``I``; plus ``E``/``S``, or ``L``/``U`` for
        BILOU) and which sequences are valid.

    Attributes
    ----------
    tag_names : tuple of str
    scheme : str
        Canonical name (``'BIO'``, ``'IOB1'``, ``'BIOES'`` or ``'BILOU'``).
    types : tuple of str
        Entity types in order of first appearance in ``tag_names``.
    outside : int
        Index of the ``'O'`` tag.
    prefix : ndarray of shape (n_tags,), int64
        Prefix class of each tag: 0 O, 1 B, 2 I, 3 E (or L), 4 S (or U).
    tag_type : ndarray of shape (n_tags,), int64
        Type of each tag (``-1`` for O).
    continues : ndarray of shape (n_tags, n_tags), bool
        ``continues[a, b]``: tag ``b`` after tag ``a`` continues ``a``'s chunk.

    Examples
    --------
    >>> from structcal.adapters import TagScheme
    >>> s = TagScheme(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    >>> c = s.chunks([1, 2, 0, 2, 3, 4], [0, 6])
    >>> c.start.tolist(), c.end.tolist(), [s.types[t] for t in c.type]
    ([0, 3, 4], [2, 4, 6], ['PER', 'PER', 'LOC'])
    """

    def __init__(self, tag_names, scheme: str = "BIO"):
        if hasattr(tag_names, "labels") and not isinstance(tag_names, (list, tuple, np.ndarray)):
            tag_names = list(tag_names.labels)  # a tagger model: its own label order
        if isinstance(tag_names, str) or not hasattr(tag_names, "__len__"):
            raise ParameterTypeError(
                f"`tag_names` must be a sequence of str; got {describe(tag_names)}"
            )
        if not isinstance(scheme, str) or scheme.upper() not in _SCHEMES:
            raise ParameterError(f"`scheme` must be one of {sorted(_SCHEMES)}; got {scheme!r}")
        scheme = scheme.upper()
        prefixes = _SCHEMES[scheme]
        names = []
        for t in tag_names:
            if not isinstance(t, (str, np.str_)):
                raise ParameterTypeError(f"`tag_names` must hold str; got {describe(t)}")
            names.append(str(t))
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ParameterError(f"`tag_names` has duplicates: {dup}")
        if "O" not in names:
            raise ParameterError(f"`tag_names` must include the outside tag 'O'; got {names}")
        prefix = np.zeros(len(names), dtype=np.int64)
        tag_type = np.full(len(names), -1, dtype=np.int64)
        types: list[str] = []
        for i, n in enumerate(names):
            if n == "O":
                continue
            head, sep, typ = n.partition("-")
            if not sep or head not in prefixes or not typ:
                raise ParameterError(
                    f"unknown tag name {n!r} in `tag_names` for scheme {scheme}: expected 'O' or "
                    f"'<prefix>-<type>' with prefix in {sorted(prefixes)}"
                )
            if typ not in types:
                types.append(typ)
            prefix[i] = prefixes[head]
            tag_type[i] = types.index(typ)
        canonical = _CANONICAL.get(scheme, scheme)
        if canonical in ("BIOES", "BILOU") and types and not np.isin(prefix, (_E, _S)).any():
            # BIO names read as BIOES: no entity could ever end, so none would be found
            end, single = ("E", "S") if canonical == "BIOES" else ("L", "U")
            raise ParameterError(
                f"`tag_names` read as {canonical} need {end}- or {single}- tags, and these have "
                f"none ({names}): with only B- and I- prefixes they are BIO (or IOB1), so "
                "pass scheme='BIO'")
        self.tag_names = tuple(names)
        self.scheme = canonical
        self.types = tuple(types)
        self.outside = names.index("O")
        self.prefix = prefix
        self.tag_type = tag_type
        same = (tag_type[:, None] == tag_type[None, :]) & (tag_type[:, None] >= 0)
        self.continues = (
            same & np.isin(prefix, (_B, _I))[:, None] & np.isin(prefix, (_I, _E))[None, :]
        )

    def _check_loaded(self):
        """A tag scheme read from a file: its derived arrays must be those of its tags."""
        fresh = TagScheme(list(self.tag_names), self.scheme)
        for name in ("types", "outside"):
            if getattr(self, name) != getattr(fresh, name):
                raise ValueError(f"TagScheme.{name} does not match its tag names")
        for name in ("prefix", "tag_type", "continues"):
            mine = getattr(self, name, None)
            if not isinstance(mine, np.ndarray) or mine.shape != getattr(fresh, name).shape or \
                    not np.array_equal(mine, getattr(fresh, name)):
                raise ValueError(f"TagScheme.{name} does not match its tag names")

    @property
    def n_tags(self) -> int:
        """Number of tags."""
        return len(self.tag_names)

    def __repr__(self) -> str:
        return f"TagScheme({list(self.tag_names)!r}, scheme={self.scheme!r})"

    # ------------------------------------------------------------------ tag sets per type

    def type_masks(self) -> dict:
        """Per type, boolean masks over tags, each of shape (n_types, n_tags).

        ``'any'``: tags of the type; ``'continuable'``: B-/I- of the type (a chunk goes on
        after them if the next tag continues); ``'continuing'``: I-/E- of the type.
        """
        t = np.arange(len(self.types))[:, None]
        of_type = self.tag_type[None, :] == t
        return {
            "any": of_type,
            "continuable": of_type & np.isin(self.prefix, (_B, _I))[None, :],
            "continuing": of_type & np.isin(self.prefix, (_I, _E))[None, :],
        }

    # ------------------------------------------------------------------ conversion

    def encode(self, tags) -> np.ndarray:
        """Tag indices of tag strings (a flat sequence or a list of sentences, flattened).

        Raises
        ------
        ParameterError
            For a tag that is not in ``tag_names`` (named with its position).
        """
        lookup = {n: i for i, n in enumerate(self.tag_names)}
        flat = tags
        if len(tags) and not isinstance(tags[0], (str, np.str_)):
            flat = [t for sent in tags for t in sent]
        out = np.empty(len(flat), dtype=np.int64)
        for i, t in enumerate(flat):
            k = lookup.get(t)
            if k is None:
                raise ParameterError(
                    f"unknown tag {t!r} at token {i}; known tags: {list(self.tag_names)}"
                )
            out[i] = k
        return out

    def labels_iv(self, labels, offsets) -> tuple[np.ndarray, np.ndarray]:
        """Return validated int labels and offsets."""
        labels = as_int_array(np.asarray(labels), "labels", ndim=1, low=0, high=self.n_tags)
        offsets = as_int_array(np.asarray(offsets), "offsets", ndim=1, low=0)
        if (
            offsets.shape[0] < 1
            or offsets[0] != 0
            or offsets[-1] != labels.shape[0]
            or np.any(np.diff(offsets) < 0)
        ):
            raise ParameterError(
                f"`offsets` must start at 0, be non-decreasing and end at len(labels)={labels.shape[0]}"
            )
        return labels, offsets

    # ------------------------------------------------------------------ chunks

    def chunk_starts(self, labels, offsets) -> np.ndarray:
        """Whether each token starts a chunk (conlleval semantics), shape (n_tokens,)."""
        labels, offsets = self.labels_iv(labels, offsets)
        n = labels.shape[0]
        first = np.zeros(n, dtype=bool)
        first[offsets[:-1][np.diff(offsets) > 0]] = True
        prev = np.empty(n, dtype=np.int64)
        prev[1:] = labels[:-1]
        prev[first] = self.outside
        return (labels != self.outside) & ~self.continues[prev, labels] if n else np.zeros(0, bool)

    def chunks(self, labels, offsets) -> Chunks:
        """Entity chunks of tag sequences laid end to end (conlleval semantics).

        Parameters
        ----------
        labels : array-like of shape (n_tokens,)
            Tag indices.
        offsets : array-like of shape (n_sequences + 1,)
            Sequence ``i`` is tokens ``offsets[i]:offsets[i + 1]``.

        Returns
        -------
        Chunks
        """
        labels, offsets = self.labels_iv(labels, offsets)
        starts = np.flatnonzero(self.chunk_starts(labels, offsets))
        n = labels.shape[0]
        # a chunk runs until the next token that does not continue it
        last = np.zeros(n, dtype=bool)
        if n:
            nxt_cont = np.zeros(n, dtype=bool)
            nxt_cont[:-1] = self.continues[labels[:-1], labels[1:]]
            seq_last = np.zeros(n, dtype=bool)
            seq_last[offsets[1:][np.diff(offsets) > 0] - 1] = True
            last = (labels != self.outside) & (~nxt_cont | seq_last)
        ends = np.flatnonzero(last) + 1
        item = np.searchsorted(offsets, starts, side="right") - 1
        return Chunks(
            item.astype(np.int64),
            starts.astype(np.int64),
            ends.astype(np.int64),
            self.tag_type[labels[starts]],
        )

    def from_chunks(self, chunks: Chunks, n_tokens: int) -> np.ndarray:
        """Tag indices in this scheme that encode the given chunks (O elsewhere).

        Adjacent chunks of the same type are separated as the scheme requires (``B-`` in
        BIO/IOB1, ``E-``/``B-`` in BIOES); every encoded sequence is valid.
        """
        out = np.full(n_tokens, self.outside, dtype=np.int64)
        lookup = {(int(p), int(t)): i for i, (p, t) in enumerate(zip(self.prefix, self.tag_type))}

        def tag(p, t):
            if (p, t) not in lookup:
                name = {_B: "B", _I: "I", _E: "E", _S: "S"}[p]
                raise ParameterError(
                    f"scheme {self.scheme} needs tag {name}-{self.types[t]}, which is not in `tag_names`"
                )
            return lookup[(p, t)]

        prev_end, prev_type, prev_item = -1, -1, -1
        for i, s, e, t in zip(
            chunks.item.tolist(), chunks.start.tolist(), chunks.end.tolist(), chunks.type.tolist()
        ):
            if self.scheme in ("BIO",):
                out[s] = tag(_B, t)
                out[s + 1 : e] = tag(_I, t) if e - s > 1 else out[s + 1 : e]
            elif self.scheme == "IOB1":
                adjacent = prev_end == s and prev_type == t and prev_item == i
                out[s] = tag(_B if adjacent else _I, t)
                if e - s > 1:
                    out[s + 1 : e] = tag(_I, t)
            else:
                if e - s == 1:
                    out[s] = tag(_S, t)
                else:
                    out[s] = tag(_B, t)
                    out[s + 1 : e - 1] = tag(_I, t) if e - s > 2 else out[s + 1 : e - 1]
                    out[e - 1] = tag(_E, t)
            prev_end, prev_type, prev_item = e, t, i
        return out

    def convert(self, labels, offsets, target: "TagScheme") -> np.ndarray:
        """Re-encode tag sequences of this scheme in ``target``'s scheme and tag indices.

        The chunks (conlleval semantics) are kept; types are matched by name.
        """
        if not isinstance(target, TagScheme):
            raise ParameterTypeError(f"`target` must be a TagScheme; got {describe(target)}")
        c = self.chunks(labels, offsets)
        missing = sorted(set(self.types[t] for t in np.unique(c.type)) - set(target.types))
        if missing:
            raise ParameterError(f"entity types {missing} are not in the target tag set")
        remap = np.array(
            [target.types.index(t) if t in target.types else -1 for t in self.types], dtype=np.int64
        )
        return target.from_chunks(
            Chunks(c.item, c.start, c.end, remap[c.type] if len(c) else c.type),
            int(np.asarray(labels).shape[0]),
        )

    # ------------------------------------------------------------------ validity

    def transitions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the validity of moves under the scheme: 0 where allowed, ``-inf`` where not.

        Returns
        -------
        pairwise : ndarray of shape (n_tags, n_tags)
            ``pairwise[a, b]`` for tag ``b`` right after tag ``a``.
        start : ndarray of shape (n_tags,)
            For the first tag of a sequence.
        end : ndarray of shape (n_tags,)
            For the last tag of a sequence.

        Notes
        -----
        BIO: ``I-X`` only after ``B-X``/``I-X`` (so not after ``O``, another type, or at the
        start). IOB1: ``B-X`` only right after ``I-X``/``B-X`` (it separates adjacent
        chunks of one type), never first; ``I-X`` anywhere. BIOES/BILOU: ``I-X``/``E-X``
        only after ``B-X``/``I-X``, and ``B-X``/``I-X`` must be followed by ``I-X``/``E-X``
        (so they cannot end a sequence); ``S-X``/``E-X`` and ``O`` are followed by
        anything that may start a chunk.
        """
        p, t = self.prefix, self.tag_type
        same = (t[:, None] == t[None, :]) & (t[:, None] >= 0)
        a_cont = np.isin(p, (_B, _I))[:, None]
        if self.scheme == "BIO":
            ok = ~(p[None, :] == _I) | (same & a_cont)
            start_ok = p != _I
            end_ok = np.ones(self.n_tags, dtype=bool)
        elif self.scheme == "IOB1":
            ok = ~(p[None, :] == _B) | (same & a_cont)
            start_ok = p != _B
            end_ok = np.ones(self.n_tags, dtype=bool)
        else:
            b_cont = np.isin(p, (_I, _E))[None, :]
            ok = np.where(a_cont, same & b_cont, ~b_cont)
            start_ok = ~np.isin(p, (_I, _E))
            end_ok = ~np.isin(p, (_B, _I))
        as_log = lambda m: np.where(m, 0.0, -np.inf)  # noqa: E731
        return as_log(ok), as_log(start_ok), as_log(end_ok)

    def check_gold(self, labels, offsets, *, name: str = "y_true") -> None:
        """Refuse gold tag sequences that are not valid in this scheme.

        Gold data in another scheme (IOB1 tags read as BIO, BIO read as BIOES) decode to
        other entities, and every outcome built on them would be silently wrong. Event
        kinds call this on their gold labels unless told to read invalid sequences by
        conlleval's rules (``invalid_gold="conlleval"``).

        Raises
        ------
        ParameterError
            Naming how many sequences break the scheme, the first of them, and how to
            convert them (:meth:`convert`).
        """
        labels, offsets = self.labels_iv(labels, offsets)
        valid = self.is_valid(labels, offsets)
        if valid.all():
            return
        bad = np.flatnonzero(~valid)
        first = int(bad[0])
        tags = [self.tag_names[t] for t in labels[offsets[first]:offsets[first + 1]]]
        shown = " ".join(tags[:12]) + (" ..." if len(tags) > 12 else "")
        others = [s for s in ("BIO", "IOB1", "BIOES", "BILOU") if s != self.scheme]
        raise ParameterError(
            f"`{name}`: {bad.shape[0]} of {valid.shape[0]} gold sequences are not valid "
            f"{self.scheme} (the first, sequence {first}: {shown}). Gold tags in another scheme "
            f"({', '.join(others)}?) must be converted first, e.g. TagScheme(tags, "
            f"'{others[0] if self.scheme == 'BIO' else 'BIO'}').convert(labels, offsets, "
            f"TagScheme(tags, '{self.scheme}')); to read "
            "invalid sequences by conlleval's rules instead, build the event kind with "
            "invalid_gold='conlleval'"
        )

    def is_valid(self, labels, offsets) -> np.ndarray:
        """Whether each sequence is valid under the scheme, shape (n_sequences,)."""
        labels, offsets = self.labels_iv(labels, offsets)
        pw, st, en = self.transitions()
        n_seq = offsets.shape[0] - 1
        bad = np.zeros(n_seq, dtype=np.int64)
        if labels.shape[0]:
            item = np.repeat(np.arange(n_seq), np.diff(offsets))
            same_seq = item[:-1] == item[1:]
            bad_pair = same_seq & np.isinf(pw[labels[:-1], labels[1:]])
            bad += np.bincount(item[:-1][bad_pair], minlength=n_seq)
            nz = np.diff(offsets) > 0
            bad[nz] += np.isinf(st[labels[offsets[:-1][nz]]]) + np.isinf(
                en[labels[offsets[1:][nz] - 1]]
            )
        return bad == 0


def word_scores(subword_scores, word_ids, *, reduce: str = "first") -> np.ndarray:
    """Word-level scores from the per-subword scores of one sequence.

    Parameters
    ----------
    subword_scores : array-like of shape (n_subwords, n_tags)
        Per-subword logits or log-probabilities of a token classifier.
    word_ids : array-like of shape (n_subwords,)
        Word of each subword (``-1`` or None for special tokens such as [CLS]/[SEP] and
        padding), as given by Hugging Face tokenizers' ``word_ids()``. The words present
        must be ``0..n_words-1``.
    reduce : {'first', 'mean', 'max'}, default='first'
        How subwords of a word are combined: the first subword's scores (the usual
        training convention), their mean, or their maximum.

    Returns
    -------
    ndarray of shape (n_words, n_tags)
    """
    scores = as_float_array(subword_scores, "subword_scores", ndim=2, allow_neginf=True)
    ids = np.asarray(word_ids, dtype=object)
    if ids.ndim != 1:
        raise ParameterError(f"`word_ids` must be one id (or None) per subword, a 1-d sequence; "
                             f"got shape {ids.shape}")
    ids = np.array([-1 if w is None else w for w in ids])
    ids = as_int_array(ids, "word_ids", ndim=1, shape=(scores.shape[0],), low=-1)
    if reduce not in ("first", "mean", "max"):
        raise ParameterError(f"`reduce` must be 'first', 'mean' or 'max'; got {reduce!r}")
    keep = ids >= 0
    ids_k, sc = ids[keep], scores[keep]
    n_words = int(ids_k.max()) + 1 if ids_k.size else 0
    if np.unique(ids_k).shape[0] != n_words:
        raise ParameterError(f"`word_ids` must cover every word 0..{n_words - 1}; some are missing")
    if reduce == "first":
        _, first = np.unique(ids_k, return_index=True)
        return sc[first]
    if reduce == "mean":
        out = np.zeros((n_words, scores.shape[1]))
        np.add.at(out, ids_k, sc)
        return out / np.bincount(ids_k, minlength=n_words)[:, None]
    out = np.full((n_words, scores.shape[1]), -np.inf)
    np.maximum.at(out, ids_k, sc)
    return out


def token_classifier_potentials(
    scores, lengths, tag_names, *, scheme: str = "BIO", logits: bool = True
):
    """Turn a softmax token classifier into a constrained chain (scores + scheme validity).

    The chain's distribution is the classifier's per-token distribution restricted to
    sequences valid under the scheme (and renormalised), so entities get exact
    probabilities and the MAP labeling is the best valid tag sequence.

    Parameters
    ----------
    scores : array-like of shape (n_tokens, n_tags)
        Word-level logits (e.g. from :func:`word_scores`), sequences laid end to end.
    lengths : array-like of shape (n_sequences,)
        Number of tokens of each sequence.
    tag_names : sequence of str
    scheme : str, default='BIO'
    logits : bool, default=True
        ``scores`` are logits (log-softmax is applied per token); False if they already
        are log-probabilities (or any log-potentials).

    Returns
    -------
    ChainPotentials
    """
    from .emissions import emission_potentials

    s = TagScheme(tag_names, scheme)
    scores = as_float_array(scores, "scores", ndim=2, allow_neginf=True)
    if scores.shape[1] != s.n_tags:
        raise ParameterError(
            f"`scores` must have {s.n_tags} columns (one per tag); got {scores.shape[1]}"
        )
    if logits:
        m = scores.max(axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            scores = scores - (m + np.log(np.exp(scores - m).sum(axis=1, keepdims=True)))
    pw, start, end = s.transitions()
    return emission_potentials(scores, pw, lengths=lengths, start=start, end=end)
