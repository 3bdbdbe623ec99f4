"""Entity (span) events of sequence taggers, with exact probabilities under the chain.

:class:`EntitySpans` asks, for every entity chunk of the MAP labeling, "does the gold
labeling have exactly this chunk, with this type?" Chunks follow conlleval's semantics in
every scheme (see :mod:`structcal.adapters.tagging`): a tag continues the previous chunk
only when it is ``I-X``/``E-X`` after ``B-X``/``I-X``; anything else non-``O`` starts a
chunk (so ``I-X`` after ``O`` starts one). The same rule decodes the MAP labeling, the gold
labeling and defines the event, so tags that break the scheme are handled consistently.

Under that rule "chunk ``[s, e)`` of type X" is the set of labelings with

- ``y_s, ..., y_{e-1}`` of type X, each consecutive pair continuing (``y_i`` in B-X/I-X for
  ``i < e - 1``, ``y_i`` in I-X/E-X for ``i > s``);
- a start at ``s``: ``y_s`` is not a continuing tag (I-X/E-X), or it is and ``y_{s-1}`` is
  not B-X/I-X (or ``s`` is the first token);
- an end at ``e``: ``y_{e-1}`` is not B-X/I-X, or it is and ``y_e`` is not I-X/E-X (or
  ``e`` is the end of the sentence).

Splitting the start and end conditions each into their two disjoint cases writes the
event as at most four disjoint products of per-token label sets (for BIO two: ``B-X`` or
``I-X`` after a non-X tag at the start), whose probabilities are constrained forward
passes (:class:`~structcal.events.nodesets.NodeSetConstraints`). The probability is exact
and counts every labeling pattern of the chunk.
"""

from __future__ import annotations

import numpy as np

from .._ragged import ragged_rows
from .._validation import describe
from ..adapters.tagging import TagScheme
from ..exceptions import ParameterError, ParameterTypeError
from ..potentials import ChainPotentials
from .kinds import EventInstances, EventKind
from .nodesets import NodeSetConstraints, NodeSetKind, constraints_probability

__all__ = ["EntitySpans", "ContainsEntity", "AllEntitiesCorrect", "entity_table"]


def _scheme(tag_names, scheme) -> TagScheme:
    if isinstance(tag_names, TagScheme):
        return tag_names
    return TagScheme(tag_names, scheme)


def _check_states(kind, pred):
    if pred.n_states != kind.tag_scheme.n_tags:
        raise ParameterError(
            f"{type(kind).__name__}: the prediction has {pred.n_states} states but the tag set has "
            f"{kind.tag_scheme.n_tags} tags ({list(kind.tag_scheme.tag_names)})"
        )
    if not isinstance(pred.potentials, ChainPotentials):
        raise ParameterTypeError(f"{type(kind).__name__} needs chain potentials (sequences)")
    names = pred.potentials.label_names
    if names is not None and tuple(names) != tuple(kind.tag_scheme.tag_names):
        raise ParameterError(
            f"{type(kind).__name__}: its tag set {list(kind.tag_scheme.tag_names)} is not in the "
            f"order of the model's labels {list(names)}: label i of the potentials would be "
            "read as another tag. Build the kind from the model itself (e.g. "
            "EntitySpans(model), TagScheme(model)) or from its labels in their order"
        )


def _gold(kind, pred, y_true):
    """The gold labels, checked to be in the kind's tag scheme (see TagScheme.check_gold)."""
    y = np.asarray(y_true)
    if getattr(kind, "invalid_gold", "raise") == "raise":
        kind.tag_scheme.check_gold(y, pred.item_offsets)
    return y



def _check_entity_kind(kind):
    if not isinstance(kind.tag_scheme, TagScheme):
        raise ValueError(f"{type(kind).__name__}.tag_scheme must be a TagScheme")
    _invalid_gold(getattr(kind, "invalid_gold", "raise"))


def _invalid_gold(value):
    from .._validation import check_option

    return check_option(value, "invalid_gold", ("raise", "conlleval"))


class EntitySpans(NodeSetKind):
    """One event per entity chunk of the MAP labeling: "the gold labeling has exactly this chunk".

    Events carry their span: ``members`` are the chunk's tokens, ``label`` its entity type
    (an index into ``class_names``); :func:`entity_table` lists ``(item, start, end, type)``.
    A sentence whose MAP labeling has no entity has no events.

    Parameters
    ----------
    tag_names : sequence of str, TagScheme or a tagger model
        The model's tags in label order (``'O'``, ``'B-PER'``, ...); a model with a
        ``labels`` attribute (e.g. :class:`~structcal.adapters.CRFsuiteModel`) gives its
        own, in its order.
    scheme : {'BIO', 'IOB2', 'IOB1', 'BIOES', 'IOBES', 'BILOU'}, default='BIO'
        Ignored when ``tag_names`` is a TagScheme.
    name : str, default='entity'
    invalid_gold : {'raise', 'conlleval'}, default='raise'
        Gold sequences that are not valid in the scheme (e.g. IOB1 data read as BIO) are
        refused (``'raise'``, see :meth:`~structcal.adapters.TagScheme.check_gold`), or
        read by conlleval's rules (``'conlleval'``).
    candidates : int, default=1
        The events are the chunks of the ``candidates`` highest-scoring labelings of each
        sentence (each distinct chunk once): 1 gives the MAP's entities; more give a
        candidate set that can also hold the entities the MAP misses (for
        :class:`~structcal.guarantees.MissControl`). Every event's probability is still
        the exact probability of its chunk, and ``map_in_event`` says which are the MAP's.

    Notes
    -----
    Features (scope ``"span"``): ``set_size`` (length), ``set_class`` (type one-hot), ``raw``
    (the exact probability), ``set_min_marginal`` / ``set_mean_marginal`` /
    ``set_prod_marginal`` (of the MAP tag at each token), ``span_boundary`` (exact
    probabilities that the chunk starts at ``s`` / ends at ``e`` with this type),
    ``set_min_pseudo_margin``, and every item feature of the sentence.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials, StructuredPrediction
    >>> from structcal.events import EntitySpans, build_events
    >>> tags = ["O", "B-PER", "I-PER"]
    >>> p = ChainPotentials.from_list([np.log([[.1, .8, .1], [.2, .1, .7], [.9, .05, .05]])],
    ...                               np.zeros((3, 3)))
    >>> t = build_events(StructuredPrediction(p), [EntitySpans(tags)], y_true=[1, 2, 0],
    ...                  features=["raw", "set_size"])
    >>> t.members.tolist(), t.outcome.tolist(), round(float(t.raw[0]), 4)
    ([0, 1], [True], 0.7155)
    """

    scope = "span"

    def __init__(self, tag_names, scheme: str = "BIO", *, name: str = "entity",
                 invalid_gold: str = "raise", candidates: int = 1):
        from .._validation import check_int

        self.tag_scheme = _scheme(tag_names, scheme)
        self.invalid_gold = _invalid_gold(invalid_gold)
        self.class_names = self.tag_scheme.types
        self.name = str(name)
        self.candidates = check_int(candidates, "candidates", low=1)

    def _check_parameters(self):
        from .._validation import check_int

        _check_entity_kind(self)
        if self.class_names != self.tag_scheme.types:
            raise ValueError("EntitySpans.class_names must be the tag scheme's types")
        check_int(getattr(self, "candidates", 1), "candidates", low=1)

    def __repr__(self):
        extra = "" if getattr(self, "candidates", 1) == 1 else f", candidates={self.candidates}"
        return (
            f"EntitySpans({list(self.tag_scheme.tag_names)!r}, "
            f"scheme={self.tag_scheme.scheme!r}{extra})"
        )

    @property
    def contains_map(self):
        """Whether every event is a chunk of the MAP labeling (``candidates == 1``)."""
        return getattr(self, "candidates", 1) == 1

    def _candidate_chunks(self, pred):
        """Chunks of the ``candidates`` best labelings, each distinct one once (sorted), and
        the tags of the labeling each is first found in."""
        k = getattr(self, "candidates", 1)
        if k == 1:
            c = self.tag_scheme.chunks(pred.map_labels, pred.item_offsets)
            return c, pred.map_labels, np.ones(len(c), dtype=bool)
        from ..inference.chain import kbest

        kb = pred._get(("_kbest", k), lambda: kbest(pred.potentials, k))
        from ..adapters.tagging import Chunks

        items, starts, ends, types, ranks = [], [], [], [], []
        for r in range(k):
            lab = kb.labels[r]
            ok = kb.n_found > r
            tokens_ok = np.repeat(ok, pred.lengths)
            lab = np.where(tokens_ok, lab, self.tag_scheme.outside)
            c = self.tag_scheme.chunks(lab, pred.item_offsets)
            keep = ok[c.item]
            items.append(c.item[keep])
            starts.append(c.start[keep])
            ends.append(c.end[keep])
            types.append(c.type[keep])
            ranks.append(np.full(int(keep.sum()), r))
        item, start, end, typ, rank = (np.concatenate(a) for a in (items, starts, ends, types, ranks))
        key = np.stack([item, start, end, typ], axis=1)
        order = np.lexsort((rank, typ, end, start, item))
        key, rank = key[order], rank[order]
        first = np.ones(key.shape[0], dtype=bool)
        first[1:] = (key[1:] != key[:-1]).any(axis=1)
        key, rank = key[first], rank[first]
        chunks = Chunks(key[:, 0], key[:, 1], key[:, 2], key[:, 3])
        # member tags: those of the labeling of the chunk's best rank
        tags = kb.labels[rank[np.repeat(np.arange(len(chunks)), chunks.end - chunks.start)],
                         np.concatenate([np.arange(s, e) for s, e in zip(chunks.start, chunks.end)])
                         if len(chunks) else np.zeros(0, np.int64)]
        return chunks, tags, rank == 0

    def instances(self, pred):
        """Return the events of this kind for every sentence of ``pred``."""
        _check_states(self, pred)
        c, tags, _ = self._candidate_chunks(pred)
        sizes = c.end - c.start
        offsets = np.zeros(len(c) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        members = np.repeat(c.start - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
        member_tags = pred.map_labels[members] if self.contains_map else np.asarray(tags)
        return EventInstances(
            c.item,
            np.full(len(c), -1, dtype=np.int64),
            c.type,
            members,
            offsets,
            member_tags,
        )

    # ------------------------------------------------------------------ constraints

    def _pattern_rows(self, pred, events, start_case, end_case, members=True):
        """Constraint rows of one (start case, end case) pattern for every event.

        ``start_case``: 0 = first tag is not a continuing tag (or the span starts the
        sentence: no condition), 1 = first tag continuing and the previous tag not
        continuable, None = no start condition. ``end_case`` likewise.
        """
        masks = self.tag_scheme.type_masks()
        any_, cable, cing = masks["any"], masks["continuable"], masks["continuing"]
        ev = np.arange(len(events), dtype=np.int64)
        t = events.label
        first = events.members[events.member_offsets[:-1]] if len(events) else np.zeros(0, np.int64)
        last = (
            events.members[events.member_offsets[1:] - 1] if len(events) else np.zeros(0, np.int64)
        )
        item_first = pred.item_offsets[:-1][events.item]
        item_end = pred.item_offsets[1:][events.item]
        has_prev, has_next = first > item_first, last + 1 < item_end
        keep = np.ones(len(events), dtype=bool)
        if start_case == 1:
            keep &= has_prev
        if end_case == 1:
            keep &= has_next
        if not members:
            return self._boundary_rows(
                events, keep, first, last, has_prev, has_next, start_case, end_case
            )
        # member rows: tags of the type, consecutive pairs continuing
        sizes = np.diff(events.member_offsets)
        owner = events.member_event
        rel = np.arange(events.members.shape[0]) - events.member_offsets[:-1][owner]
        allowed = any_[t[owner]].copy()
        allowed[rel < sizes[owner] - 1] &= cable[t[owner]][rel < sizes[owner] - 1]
        allowed[rel > 0] &= cing[t[owner]][rel > 0]
        is_first = rel == 0
        is_last = rel == sizes[owner] - 1
        if start_case == 0:
            sel = is_first & has_prev[owner]
            allowed[sel] &= ~cing[t[owner[sel]]]
        elif start_case == 1:
            allowed[is_first] &= cing[t[owner[is_first]]]
        if end_case == 0:
            sel = is_last & has_next[owner]
            allowed[sel] &= ~cable[t[owner[sel]]]
        elif end_case == 1:
            allowed[is_last] &= cable[t[owner[is_last]]]
        n_extra = int(start_case == 1) + int(end_case == 1)
        # keep only the events this pattern applies to, and add their outside rows
        ev = ev[keep]
        m_keep = keep[owner]
        counts = sizes[keep] + n_extra
        offsets = np.zeros(ev.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        node = np.empty(offsets[-1], dtype=np.int64)
        allow = np.empty((offsets[-1], self.tag_scheme.n_tags), dtype=bool)
        new_owner = np.cumsum(keep) - 1  # event -> row in the kept list
        pos = offsets[new_owner[owner[m_keep]]] + rel[m_keep]
        node[pos] = events.members[m_keep]
        allow[pos] = allowed[m_keep]
        slot = offsets[1:] - n_extra
        if start_case == 1:
            node[slot] = first[keep] - 1
            allow[slot] = ~cable[t[keep]]
            slot = slot + 1
        if end_case == 1:
            node[slot] = last[keep] + 1
            allow[slot] = ~cing[t[keep]]
        return NodeSetConstraints(ev, offsets, node, allow, len(events))

    def _boundary_rows(self, events, keep, first, last, has_prev, has_next, start_case, end_case):
        """Patterns of the start (or end) condition alone, for the boundary probabilities."""
        masks = self.tag_scheme.type_masks()
        any_, cable, cing = masks["any"], masks["continuable"], masks["continuing"]
        t = events.label[keep]
        if start_case is not None:
            tok, other, near = first[keep], first[keep] - 1, has_prev[keep]
            case, own, nb = start_case, cing, cable
        else:
            tok, other, near = last[keep], last[keep] + 1, has_next[keep]
            case, own, nb = end_case, cable, cing
        a = any_[t].copy()
        if case == 0:  # own tag does not link to the neighbour (no condition at the edge)
            a[near] &= ~own[t[near]]
            node, allow = tok[:, None], a[:, None]
        else:  # own tag links, the neighbour does not take the link
            node = np.stack([tok, other], axis=1)
            allow = np.stack([a & own[t], ~nb[t]], axis=1)
        k = node.shape[1]
        ev = np.flatnonzero(keep).astype(np.int64)
        return NodeSetConstraints(
            ev,
            np.arange(ev.shape[0] + 1, dtype=np.int64) * k,
            node.ravel(),
            allow.reshape(-1, self.tag_scheme.n_tags),
            len(events),
        )

    def constraints(self, pred, events) -> NodeSetConstraints:
        """Write each chunk as a union of up to four disjoint product patterns."""
        parts = [self._pattern_rows(pred, events, a, b) for a in (0, 1) for b in (0, 1)]
        c = NodeSetConstraints.concat(parts, len(events))
        # drop patterns that no labeling satisfies (an empty allowed set)
        empty = ~c.allowed.any(axis=1)
        if empty.any():
            per_pattern = np.repeat(np.arange(c.n_patterns), np.diff(c.pattern_offsets))
            bad = np.zeros(c.n_patterns, dtype=bool)
            bad[per_pattern[empty]] = True
            keep = np.flatnonzero(~bad)
            rows, offsets = ragged_rows(c.pattern_offsets, keep)
            c = NodeSetConstraints(
                c.event[keep], offsets, c.node[rows], c.allowed[rows], c.n_events
            )
        return c

    def outcomes(self, pred, events, y_true):
        """``I[the gold labeling has this chunk with this type]`` (gold tags in this tag set)."""
        return self.constraints(pred, events).satisfied(_gold(self, pred, y_true))

    def map_in_event(self, pred, events):
        """Whether each event's chunk is one of the MAP labeling's chunks."""
        if self.contains_map:
            return np.ones(len(events), dtype=bool)
        m = self.tag_scheme.chunks(pred.map_labels, pred.item_offsets)
        map_keys = set(zip(m.item.tolist(), m.start.tolist(), m.end.tolist(), m.type.tolist()))
        first = events.members[events.member_offsets[:-1]] if len(events) else np.zeros(0, np.int64)
        last = events.members[events.member_offsets[1:] - 1] + 1 if len(events) else first
        return np.array([(i, s, e, t) in map_keys for i, s, e, t in zip(
            events.item.tolist(), first.tolist(), last.tolist(), events.label.tolist())],
            dtype=bool)

    def boundary_probabilities(self, pred, events) -> np.ndarray:
        """Exact probabilities that a chunk of the event's type starts at ``s`` / ends at ``e``.

        Returns
        -------
        ndarray of shape (n_events, 2)
            Column 0: ``P(a chunk of type X starts at s)``; column 1: ``P(a chunk of type X
            ends at e - 1)`` (i.e. the last token is of type X and the next tag does not
            continue it).
        """
        out = np.zeros((len(events), 2))
        for col, case in ((0, "start"), (1, "end")):
            parts = [
                self._pattern_rows(
                    pred,
                    events,
                    k if case == "start" else None,
                    k if case == "end" else None,
                    members=False,
                )
                for k in (0, 1)
            ]
            c = NodeSetConstraints.concat(parts, len(events))
            out[:, col] = constraints_probability(pred, c, events.item)
        return out


def entity_table(table, kind_name: str = "entity", tag_scheme: TagScheme | None = None) -> dict:
    """List the spans of the entity events of an event table, as columns.

    Parameters
    ----------
    table : EventTable
    kind_name : str, default='entity'
        Name of the :class:`EntitySpans` kind in the table.
    tag_scheme : TagScheme, optional
        For the ``type_name`` column.

    Returns
    -------
    dict of ndarray
        ``row`` (row in the table), ``item``, ``start`` and ``end`` (positions within the
        sentence, ``end`` exclusive), ``type`` and, with ``tag_scheme``, ``type_name``.
    """
    from .table import EventTable

    if not isinstance(table, EventTable):
        raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
    if tag_scheme is not None and not isinstance(tag_scheme, TagScheme):
        raise ParameterTypeError(f"`tag_scheme` must be a TagScheme; got {describe(tag_scheme)}")
    if kind_name not in table.kind_names:
        raise ParameterError(f"no event kind {kind_name!r}; kinds: {list(table.kind_names)}")
    k = table.kind_names.index(kind_name)
    if table.kind_scopes[k] != "span":
        raise ParameterError(f"event kind {kind_name!r} has scope {table.kind_scopes[k]!r}, not "
                             "'span': its events are not entities")
    rows = np.flatnonzero(table.kind == k)
    first = table.members[table.member_offsets[rows]] if rows.size else np.zeros(0, np.int64)
    size = table.member_offsets[rows + 1] - table.member_offsets[rows]
    item = table.item[rows]
    item_start = np.concatenate([[0], np.cumsum(table.item_lengths)])[item]
    out = {
        "row": rows,
        "item": item,
        "start": first - item_start,
        "end": first - item_start + size,
        "type": table.label[rows],
    }
    if tag_scheme is not None:
        n_types = len(tag_scheme.types)
        if out["type"].size and out["type"].max() >= n_types:
            raise ParameterError(f"`tag_scheme` has {n_types} entity types, but the events' "
                                 f"types reach {int(out['type'].max())}: another tag scheme")
        out["type_name"] = np.array([tag_scheme.types[t] for t in out["type"]], dtype=object)
    return out


class ContainsEntity(EventKind):
    """Events "the sentence contains an entity of type X": one per sentence and type.

    Exact on chains: every tag of type X belongs to a chunk of type X, so the probability is
    one minus the probability that no tag of type X occurs (a constrained forward pass).
    ``label`` is the type.

    Parameters
    ----------
    tag_names : sequence of str or TagScheme
    scheme : str, default='BIO'
    types : sequence of str, optional
        The types asked about (default: all).
    name : str, default='contains_entity'
    invalid_gold : {'raise', 'conlleval'}, default='raise'
        Gold sequences that are not valid in the scheme (e.g. IOB1 data read as BIO) are
        refused (``'raise'``, see :meth:`~structcal.adapters.TagScheme.check_gold`), or
        read by conlleval's rules (``'conlleval'``).
    """

    scope = "item"
    probability_structures = ("chain",)

    def __init__(
        self, tag_names, scheme: str = "BIO", *, types=None, name: str = "contains_entity",
        invalid_gold: str = "raise",
    ):
        self.tag_scheme = _scheme(tag_names, scheme)
        self.invalid_gold = _invalid_gold(invalid_gold)
        if types is None:
            self.types = tuple(range(len(self.tag_scheme.types)))
        else:
            if isinstance(types, str):
                types = [types]
            unknown = [t for t in types if t not in self.tag_scheme.types]
            if unknown:
                raise ParameterError(
                    f"`types` {unknown} are not entity types of the tag set {self.tag_scheme.types}"
                )
            self.types = tuple(self.tag_scheme.types.index(t) for t in types)
        self.name = str(name)

    def _check_parameters(self):
        _check_entity_kind(self)
        n = len(self.tag_scheme.types)
        if not isinstance(self.types, tuple) or not all(
                isinstance(t, int) and not isinstance(t, bool) and 0 <= t < n for t in self.types):
            raise ValueError(f"ContainsEntity.types must be a tuple of type indices 0..{n - 1}")

    def __repr__(self):
        return f"ContainsEntity({list(self.tag_scheme.tag_names)!r}, scheme={self.tag_scheme.scheme!r})"

    def instances(self, pred):
        """Return the events of this kind for every sentence of ``pred``."""
        _check_states(self, pred)
        n_t = len(self.types)
        nonempty = np.flatnonzero(pred.lengths > 0).astype(np.int64)  # empty items: no events
        items = np.repeat(nonempty, n_t)
        labels = np.tile(np.asarray(self.types, dtype=np.int64), nonempty.shape[0])
        return EventInstances(items, np.full(items.shape[0], -1, dtype=np.int64), labels)

    def _present(self, pred, events, labels):
        tt = self.tag_scheme.tag_type
        n_types = len(self.tag_scheme.types)
        hits = np.zeros((pred.n_items, n_types), dtype=bool)
        nz = tt[labels] >= 0
        hits[pred.item_index[nz], tt[labels][nz]] = True
        return hits[events.item, events.label]

    def outcomes(self, pred, events, y_true):
        """Whether the gold labeling has a tag (hence an entity) of the type."""
        return self._present(pred, events, _gold(self, pred, y_true))

    def map_in_event(self, pred, events):
        """Whether the MAP labeling has an entity of the type."""
        return self._present(pred, events, pred.map_labels)

    def probabilities(self, pred, events):
        """Exact ``1 - P(no tag of the type anywhere in the sentence)``."""
        from ..inference.chain import constrained_log_partition

        any_ = self.tag_scheme.type_masks()["any"]
        lengths = pred.lengths[events.item]
        offsets = np.zeros(len(events) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        owner = np.repeat(np.arange(len(events)), lengths)
        positions = np.arange(offsets[-1], dtype=np.int64) - offsets[:-1][owner]
        allowed = ~any_[events.label[owner]]
        logz = constrained_log_partition(pred.potentials, events.item, offsets, positions, allowed)
        absent = np.exp(np.minimum(logz - pred.log_partition[events.item], 0.0))
        return np.clip(1.0 - absent, 0.0, 1.0)


class AllEntitiesCorrect(EventKind):
    """Events "the sentence's entities are exactly the MAP's": one per sentence.

    The gold chunk set (conlleval semantics) equals the MAP labeling's chunk set: every
    predicted entity is right and none is missing. A sentence without predicted entities
    asks "the sentence has no entity". Exact on chains: tokens outside the MAP chunks must
    be ``O``, tokens inside follow the chunk rules, and between two adjacent chunks the
    second must not continue the first (a forbidden transition on that edge), all in one
    constrained forward pass per sentence.

    Parameters
    ----------
    tag_names : sequence of str or TagScheme
    scheme : str, default='BIO'
    name : str, default='all_entities'
    invalid_gold : {'raise', 'conlleval'}, default='raise'
        Gold sequences that are not valid in the scheme (e.g. IOB1 data read as BIO) are
        refused (``'raise'``, see :meth:`~structcal.adapters.TagScheme.check_gold`), or
        read by conlleval's rules (``'conlleval'``).
    """

    scope = "item"
    contains_map = True
    probability_structures = ("chain",)

    def __init__(self, tag_names, scheme: str = "BIO", *, name: str = "all_entities",
                 invalid_gold: str = "raise"):
        self.tag_scheme = _scheme(tag_names, scheme)
        self.invalid_gold = _invalid_gold(invalid_gold)
        self.name = str(name)

    def _check_parameters(self):
        _check_entity_kind(self)

    def __repr__(self):
        return f"AllEntitiesCorrect({list(self.tag_scheme.tag_names)!r}, scheme={self.tag_scheme.scheme!r})"

    def instances(self, pred):
        """Return the events of this kind for every sentence of ``pred``."""
        _check_states(self, pred)
        return super().instances(pred)

    def _chunk_keys(self, pred, labels):
        c = self.tag_scheme.chunks(labels, pred.item_offsets)
        n = max(pred.n_nodes, 1) + 1
        return c.item, (c.start * n + c.end) * (len(self.tag_scheme.types) + 1) + c.type

    def outcomes(self, pred, events, y_true):
        """Whether the gold chunk set equals the MAP chunk set, per sentence."""
        gi, gk = self._chunk_keys(pred, _gold(self, pred, y_true))
        mi, mk = self._chunk_keys(pred, pred.map_labels)
        common = np.isin(mk, gk)
        n = pred.n_items
        same = (np.bincount(gi, minlength=n) == np.bincount(mi, minlength=n)) & (
            np.bincount(mi, weights=common, minlength=n) == np.bincount(mi, minlength=n)
        )
        return same[events.item]

    def map_in_event(self, pred, events):
        """Return all true (the MAP's entities are the MAP's)."""
        return np.ones(len(events), dtype=bool)

    def probabilities(self, pred, events):
        """Exact probability that the gold chunks are the MAP's (per-edge masked forward pass)."""
        from ..inference.chain import constrained_log_partition

        s = self.tag_scheme
        p = pred.potentials
        masks = s.type_masks()
        labels = pred.map_labels
        c = s.chunks(labels, pred.item_offsets)
        n = pred.n_nodes
        allowed = np.zeros((n, s.n_tags), dtype=bool)
        allowed[:, s.outside] = True  # outside the chunks: O
        sizes = c.end - c.start
        owner = np.repeat(np.arange(len(c)), sizes)
        starts = np.zeros(len(c) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        node = np.repeat(c.start - starts[:-1], sizes) + np.arange(starts[-1], dtype=np.int64)
        rel = node - c.start[owner]
        a = masks["any"][c.type[owner]].copy()
        inner_left = rel < sizes[owner] - 1
        a[inner_left] &= masks["continuable"][c.type[owner[inner_left]]]
        a[rel > 0] &= masks["continuing"][c.type[owner[rel > 0]]]
        allowed[node] = a
        # adjacent chunks (end of one = start of the next in the same sentence): the pair
        # (last, first) must not continue; forbid those transitions on that edge
        adjacent = np.flatnonzero((c.end[:-1] == c.start[1:]) & (c.item[:-1] == c.item[1:]))
        pw = p.pairwise
        if adjacent.size:
            if pw.ndim == 2:
                pw = np.broadcast_to(pw, (int(p.edge_offsets[-1]),) + pw.shape).copy()
            else:
                pw = pw.copy()
            last = c.end[adjacent] - 1  # edge last -> last + 1 joins the two chunks
            it = c.item[adjacent]
            edges = p.edge_offsets[it] + last - pred.item_offsets[:-1][it]
            pw[edges] = np.where(s.continues[None], -np.inf, pw[edges])
            p = ChainPotentials(p.unary, p.offsets, pw)
        items = events.item
        lengths = pred.lengths[items]
        offsets = np.zeros(len(events) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        q_owner = np.repeat(np.arange(len(events)), lengths)
        positions = np.arange(offsets[-1], dtype=np.int64) - offsets[:-1][q_owner]
        nodes = pred.item_offsets[:-1][items][q_owner] + positions
        logz = constrained_log_partition(p, items, offsets, positions, allowed[nodes])
        return np.exp(np.minimum(logz - pred.log_partition[items], 0.0))
