"""EventTable: the pooled events of a batch, one row per event, and how to build it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import features as _features
from .._ragged import offsets_from_lengths, ragged_rows
from .._validation import (
    as_ids, as_int_array, check_offsets, describe, nodes_outside_items,
)
from ..exceptions import ParameterError, ParameterTypeError
from .kinds import EventKind

__all__ = ["EventTable", "build_events"]


@dataclass(frozen=True)
class EventTable:
    """Events of a batch with their features, outcomes and raw model probabilities.

    The pooled data of Algorithm 1: one row per event ``E`` of each input ``x``. Pooling,
    grouping (by kind, position or label) and splitting (by input) are array operations.

    Attributes
    ----------
    kind_names : tuple of str
        Name of each event kind; ``kind`` indexes into it.
    kind_scopes : tuple of str
        ``"item"`` or ``"node"`` for each kind.
    kind : ndarray of shape (n_events,), int64
        Kind of each event.
    item : ndarray of shape (n_events,), int64
        Input (example) of each event.
    node : ndarray of shape (n_events,), int64
        Global node of per-node events, ``-1`` otherwise.
    position : ndarray of shape (n_events,), int64
        Position of per-node events within their input, ``-1`` otherwise.
    label : ndarray of shape (n_events,), int64
        Target label of per-node events (the MAP label for marginal events), ``-1``
        otherwise.
    X : ndarray of shape (n_events, n_features)
        Feature values; a column a kind does not define holds 0 for that kind's rows
        (see ``defined``).
    feature_names : tuple of str
        Name of each column of ``X``.
    defined : ndarray of shape (n_kinds, n_features), bool
        Which columns each kind defines.
    outcome : ndarray of shape (n_events,), bool, or None
        ``I[y in E]`` when true labelings were given.
    raw : ndarray of shape (n_events,) or None
        The model's own probability ``P_theta(E | x)`` (NaN where it has none), when
        requested.
    item_lengths : ndarray of shape (n_items,)
        Number of nodes of every input of the batch.
    members : ndarray of shape (n_members,), int64
        Global nodes covered by each node-set event (entities, objects), laid end to end;
        events of other scopes cover none.
    member_offsets : ndarray of shape (n_events + 1,), int64
        Event ``r`` covers ``members[member_offsets[r]:member_offsets[r + 1]]``.
    """

    kind_names: tuple
    kind_scopes: tuple
    kind: np.ndarray
    item: np.ndarray
    node: np.ndarray
    position: np.ndarray
    label: np.ndarray
    X: np.ndarray
    feature_names: tuple
    defined: np.ndarray
    outcome: np.ndarray | None
    raw: np.ndarray | None
    item_lengths: np.ndarray
    members: np.ndarray | None = None
    member_offsets: np.ndarray | None = None

    def __post_init__(self):
        if self.member_offsets is None:  # tables built without node-set events
            object.__setattr__(self, "members", np.zeros(0, dtype=np.int64))
            object.__setattr__(self, "member_offsets", np.zeros(self.n_events + 1, dtype=np.int64))
        self._check_shapes()

    def _check_shapes(self):
        """Every column has one row per event, and the kinds, features and items agree (a
        table assembled by hand cannot misalign its columns)."""
        n = int(np.shape(self.kind)[0]) if np.ndim(self.kind) == 1 else -1
        n_kinds, n_features = len(self.kind_names), len(self.feature_names)
        expected = {"kind": (n,), "item": (n,), "node": (n,), "position": (n,), "label": (n,),
                    "X": (n, n_features), "defined": (n_kinds, n_features),
                    "member_offsets": (n + 1,)}
        if self.outcome is not None:
            expected["outcome"] = (n,)
        if self.raw is not None:
            expected["raw"] = (n,)
        for name, shape in expected.items():
            got = np.shape(getattr(self, name))
            if n < 0 or got != shape:
                raise ParameterError(f"EventTable column `{name}` must have shape {shape} (from "
                                     f"{n} events, {n_kinds} kinds, {n_features} features); "
                                     f"got {got}")
        if len(self.kind_scopes) != n_kinds:
            raise ParameterError(f"EventTable has {n_kinds} kind names but "
                                 f"{len(self.kind_scopes)} kind scopes")
        if n and (self.kind.min() < 0 or self.kind.max() >= n_kinds):
            raise ParameterError(f"EventTable column `kind` must index the {n_kinds} kinds")
        if n and (self.item.min() < 0 or self.item.max() >= np.shape(self.item_lengths)[0]):
            raise ParameterError(f"EventTable column `item` must index the "
                                 f"{np.shape(self.item_lengths)[0]} items of `item_lengths`")
        if self.member_offsets[-1] != np.shape(self.members)[0]:
            raise ParameterError("EventTable `member_offsets` must end at the number of members")

    def members_of(self, row: int) -> np.ndarray:
        """Global nodes covered by event ``row`` (empty unless it is a node-set event)."""
        return self.members[self.member_offsets[row] : self.member_offsets[row + 1]]

    @property
    def n_events(self) -> int:
        """Number of rows."""
        return int(self.kind.shape[0])

    @property
    def n_items(self) -> int:
        """Number of inputs of the batch the events come from."""
        return int(self.item_lengths.shape[0])

    def __len__(self) -> int:
        return self.n_events

    def _repr_html_(self, max_rows: int = 10) -> str:
        """Show a summary per kind, then the first ``max_rows`` events (notebook display)."""
        from .._html import html_table

        summary = []
        for k, name in enumerate(self.kind_names):
            rows = self.kind == k
            holds = "" if self.outcome is None or not rows.any() else f"{self.outcome[rows].mean():.3f}"
            summary.append([name, self.kind_scopes[k], int(rows.sum()), holds,
                            ", ".join(n for n, d in zip(self.feature_names, self.defined[k]) if d)])
        html = html_table(["kind", "scope", "events", "holds", "features"], summary,
                          caption=f"EventTable: {self.n_events} events of {self.n_items} items")
        header = ["kind", "item", "position", "label", *self.feature_names]
        if self.outcome is not None:
            header.append("outcome")
        if self.raw is not None:
            header.append("raw")
        first = []
        for i in range(min(max_rows, self.n_events)):
            row = [self.kind_names[self.kind[i]], self.item[i], self.position[i], self.label[i],
                   *(f"{v:.4g}" for v in self.X[i])]
            if self.outcome is not None:
                row.append(bool(self.outcome[i]))
            if self.raw is not None:
                row.append(f"{self.raw[i]:.4g}")
            first.append(row)
        return html + html_table(header, first, caption=f"first {len(first)} events")

    def select(self, rows) -> "EventTable":
        """The events selected by a boolean mask or an index array (same columns)."""
        rows = np.asarray(rows)
        if rows.dtype == np.bool_:
            if rows.shape != (self.n_events,):
                raise ParameterError(f"a boolean mask must have shape ({self.n_events},); got {rows.shape}")
            rows = np.flatnonzero(rows)
        rows = as_int_array(rows, "rows", ndim=1, low=0, high=max(self.n_events, 1))
        member_rows, member_offsets = ragged_rows(self.member_offsets, rows)
        return replace(
            self,
            kind=self.kind[rows], item=self.item[rows], node=self.node[rows],
            position=self.position[rows], label=self.label[rows], X=self.X[rows],
            outcome=None if self.outcome is None else self.outcome[rows],
            raw=None if self.raw is None else self.raw[rows],
            members=self.members[member_rows], member_offsets=member_offsets,
        )

    def columns(self, names) -> np.ndarray:
        """The columns of ``X`` with the given names (a multi-column feature by its base name)."""
        names = [names] if isinstance(names, str) else list(names)
        idx = []
        for name in names:
            hit = [i for i, f in enumerate(self.feature_names) if f == name or f.startswith(name + "[")]
            if not hit:
                raise ParameterError(f"no feature column {name!r}; columns: {list(self.feature_names)}")
            idx.extend(hit)
        return self.X[:, idx]

    def group_codes(self, by) -> tuple[np.ndarray, list]:
        """Group of each event and the group names.

        Parameters
        ----------
        by : {'kind', 'position', 'label', 'length'} or array-like of shape (n_events,)
            ``length`` is the length of the event's input.
        """
        if isinstance(by, str):
            if by == "kind":
                return self.kind, list(self.kind_names)
            if by in ("position", "label"):
                values = getattr(self, by)
            elif by == "length":
                values = self.item_lengths[self.item]
            else:
                raise ParameterError(
                    f"`by` must be 'kind', 'position', 'label', 'length' or an array; got {by!r}"
                )
        else:
            values = as_ids(by, "by", self.n_events, "one group per event")
            if values.dtype == object:
                values = values.astype(str)
        names, codes = np.unique(values, return_inverse=True)
        return codes.astype(np.int64), names.tolist()

    def group_by(self, by) -> dict:
        """Split into one table per group (see :meth:`group_codes`).

        Grouping by kind also drops the columns a kind does not define.
        """
        codes, names = self.group_codes(by)
        out = {}
        for g, name in enumerate(names):
            sub = self.select(codes == g)
            if isinstance(by, str) and by == "kind":
                sub = sub._only_kind(g)
            if sub.n_events:
                out[name] = sub
        return out

    def _only_kind(self, k: int) -> "EventTable":
        keep = np.flatnonzero(self.defined[k])
        return replace(
            self, X=self.X[:, keep],
            feature_names=tuple(self.feature_names[i] for i in keep),
            defined=self.defined[:, keep],
        )

    def split_items(self, items) -> tuple["EventTable", "EventTable"]:
        """``(events of the given inputs, events of the other inputs)``."""
        items = as_int_array(np.asarray(items), "items", ndim=1, low=0, high=max(self.n_items, 1))
        mask = np.zeros(self.n_items, dtype=bool)
        mask[items] = True
        inside = mask[self.item]
        return self.select(inside), self.select(~inside)

    @staticmethod
    def concat(tables) -> "EventTable":
        """Stack tables built from the same batch with the same kinds and features."""
        tables = list(tables)
        if not tables:
            raise ParameterError("`tables` must not be empty")
        first = tables[0]
        for t in tables[1:]:
            if t.kind_names != first.kind_names or t.feature_names != first.feature_names:
                raise ParameterError("tables must have the same kinds and feature columns to be concatenated")
        cat = lambda name: np.concatenate([getattr(t, name) for t in tables])  # noqa: E731
        has = lambda name: all(getattr(t, name) is not None for t in tables)  # noqa: E731
        return replace(
            first, kind=cat("kind"), item=cat("item"), node=cat("node"),
            position=cat("position"), label=cat("label"), X=np.concatenate([t.X for t in tables]),
            outcome=cat("outcome") if has("outcome") else None,
            raw=cat("raw") if has("raw") else None,
            members=cat("members"),
            member_offsets=offsets_from_lengths(np.concatenate([np.diff(t.member_offsets) for t in tables])),
        )

    def __repr__(self) -> str:
        counts = np.bincount(self.kind, minlength=len(self.kind_names))
        kinds = ", ".join(f"{n}: {c}" for n, c in zip(self.kind_names, counts))
        return (
            f"EventTable(n_events={self.n_events} ({kinds}), n_features={self.X.shape[1]}, "
            f"outcome={'yes' if self.outcome is not None else 'no'})"
        )


def _y_true_iv(pred, y_true) -> np.ndarray:
    if isinstance(y_true, (list, tuple)) and (len(y_true) == 0 or not np.isscalar(y_true[0])):
        if len(y_true) != pred.n_items:
            raise ParameterError(
                f"`y_true` must hold one labeling per input ({pred.n_items}); got {len(y_true)}"
            )
        parts = []
        for i, (lab, L) in enumerate(zip(y_true, pred.lengths)):
            lab = as_int_array(np.asarray(lab), f"y_true[{i}]", ndim=1, low=0, high=pred.n_states)
            if lab.shape[0] != L:
                raise ParameterError(f"`y_true[{i}]` must have length {L}; got {lab.shape[0]}")
            parts.append(lab)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return as_int_array(
        y_true, "y_true", ndim=1, shape=(pred.n_nodes,), low=0, high=pred.n_states
    )


def _feature_plan(kinds, features, pred, lexicon):
    """For each kind, the list of Feature objects to compute."""
    plans = []
    if isinstance(features, dict):
        unknown = sorted(set(features) - {kind.name for kind in kinds})
        if unknown:
            raise ParameterError(
                f"`features` names event kinds {unknown} that are not in `kinds` "
                f"({[kind.name for kind in kinds]})"
            )
    for kind in kinds:
        if isinstance(features, dict):
            if kind.name not in features:
                raise ParameterError(f"`features` has no entry for event kind {kind.name!r}")
            names = features[kind.name]
        elif isinstance(features, str):
            groups = _features.FEATURE_GROUPS[kind.scope]
            if features == "table1":
                # Table 1 describes the input and its MAP; for the paper's MAP and marginal
                # events that describes the event, for any other kind it does not without
                # I[MAP in E]
                names = groups["all"] + ([] if kind.contains_map else ["map_in_event"])
            elif features == "all":
                names = groups["all"] + ["map_in_event"] + (["raw"] if kind.has_probability else [])
            elif features == "auto":
                # every Table 1 feature, I[MAP in E] where it is informative, and the raw
                # probability
                names = groups["all"] + ([] if kind.contains_map else ["map_in_event"]) + ["raw"]
            else:
                raise ParameterError(
                    "`features` must be 'auto', 'all', 'table1', a list of names or a dict; "
                    f"got {features!r}"
                )
            # a named set keeps the features the inputs support (each feature's declared
            # requirements: phi_no1/phi_no2 need unstructured scores, phi_mp2 a lexicon)
            names = [
                n for n in names
                if not _features.resolve(n, kind.scope).missing(pred, kind, lexicon)
            ]
        else:
            names = list(features)
        plan = [f for f in (_features.resolve(n, kind.scope) for n in names) if f is not None]
        plans.append(plan)
    if not isinstance(features, (str, dict)):
        used = {f.name for plan in plans for f in plan}
        for n in features:
            if _features.base_name(n) not in used:
                raise ParameterError(
                    f"feature {n!r} applies to none of the event kinds "
                    f"{[k.name for k in kinds]} (scopes {[k.scope for k in kinds]})"
                )
    for kind, plan in zip(kinds, plans):
        if not plan:
            raise ParameterError(f"no feature applies to event kind {kind.name!r}")
    return plans


#: ``build_events`` computes a kind's features on the items that have events when they are
#: at most this fraction of the batch (entity spans: the sentences with a predicted entity)
_SUBSET_BELOW = 0.5


def _on_event_items(pred, events, y_true):
    """The prediction, events and true labels restricted to the items that have events.

    Kinds such as entity spans have events on few items; their features, outcomes and
    probabilities then need inference on those items only. Done only when the
    prediction's items are independent (chains: an item's inference results do not depend
    on the rest of the batch), so every value equals the one on the whole batch; the
    results computed so far (the MAP, at least) are carried over.
    """
    if not pred.independent_items or pred.n_items == 0:
        return pred, events, y_true
    items = np.flatnonzero(np.bincount(events.item, minlength=pred.n_items))
    if items.shape[0] > _SUBSET_BELOW * pred.n_items:
        return pred, events, y_true
    sub = pred.subset(items, keep_computed=True)
    item = np.searchsorted(items, events.item)
    shift = sub.item_offsets[:-1] - pred.item_offsets[:-1][items]  # node index change per item
    moved = {"item": item, "node": np.where(events.node >= 0, events.node + shift[item], -1)}
    if events.members is not None:
        moved["members"] = events.members + shift[item][events.member_event]
    y = None if y_true is None else y_true[ragged_rows(pred.item_offsets, items)[0]]
    return sub, replace(events, **moved), y


def _check_instances(events, pred, kind) -> EventInstances:
    """The events a kind returned, checked against the batch (custom kinds included): one
    item, node and label per event, ids in range, node sets inside their items."""
    from .kinds import EventInstances

    what = f"the {kind.name!r} events"
    if not isinstance(events, EventInstances):
        raise ParameterTypeError(f"{what} must be EventInstances; got {describe(events)}")
    n = events.item.shape[0] if np.ndim(events.item) == 1 else -1
    cols = {}
    for name in ("item", "node", "label"):
        cols[name] = as_int_array(getattr(events, name), f"{name} of {what}", ndim=1,
                                  shape=(n,) if n >= 0 else None)
    item, node, label = cols["item"], cols["node"], cols["label"]
    offs = pred.item_offsets
    if item.size and (item.min() < 0 or item.max() >= pred.n_items):
        raise ParameterError(f"{what}: `item` must lie in [0, {pred.n_items}) (the batch's "
                             f"items); got values in [{item.min()}, {item.max()}]")
    wrong = (node < -1) | ((node >= 0) & nodes_outside_items(node, item, offs))
    if wrong.any():
        bad = int(np.argmax(wrong))
        raise ParameterError(f"{what}: event {bad} has node {int(node[bad])}, which is not a "
                             f"node of its item {int(item[bad])} (nor -1)")
    if label.size and (label.min() < -1 or label.max() >= pred.n_states):
        raise ParameterError(f"{what}: `label` must lie in [-1, {pred.n_states}); got values "
                             f"in [{label.min()}, {label.max()}]")
    if events.members is not None:
        members = as_int_array(events.members, f"members of {what}", ndim=1, low=0,
                               high=pred.n_nodes)
        check_offsets(events.member_offsets, f"member_offsets of {what}", members.shape[0])
        if np.shape(events.member_offsets) != (n + 1,):
            raise ParameterError(f"{what}: `member_offsets` must have one entry per event plus "
                                 f"one ({n + 1}); got shape {np.shape(events.member_offsets)}")
        owner = np.repeat(item, np.diff(events.member_offsets))
        outside = nodes_outside_items(members, owner, offs)
        if outside.any():
            m = int(np.flatnonzero(outside)[0])
            raise ParameterError(f"{what}: member node {int(members[m])} is not a node of its "
                                 f"event's item {int(owner[m])}")
        if events.member_labels is not None:
            as_int_array(events.member_labels, f"member_labels of {what}", ndim=1,
                         shape=members.shape, low=0, high=pred.n_states)
    return events


def build_events(
    pred,
    kinds,
    *,
    y_true=None,
    features="all",
    lexicon=None,
    label_set=None,
    label_names=None,
    raw: bool = True,
) -> EventTable:
    """Build the events ``I(x)`` of every input of a prediction, with features and outcomes.

    Parameters
    ----------
    pred : StructuredPrediction
        Potentials of the batch with lazily computed inference.
    kinds : sequence of EventKind
        The event set ``I(x)``, e.g. ``[MAPEvent(), MarginalEvent()]``.
    y_true : array-like of shape (n_nodes,) or list of array-like, optional
        True labelings; fills the ``outcome`` column.
    features : 'auto', 'all', 'table1', list of str or Feature, or dict, default='all'
        ``'table1'``: every Table 1 feature of each kind's scope (plus ``map_in_event``
        for kinds other than the MAP and marginal events, whose outcome the Table 1
        features alone do not describe); ``'all'``: those plus ``raw`` and
        ``map_in_event``; ``'auto'``: ``'table1'`` plus ``raw``. A named set keeps only
        the features whose requirements the inputs meet (no unstructured scores: no
        ``phi_no*``; no lexicon: no ``phi_mp2``; no model probability for the kind: no
        ``raw``); a list or a dict names features explicitly, and a requirement they
        miss is an error. A list is applied to every kind where a feature's scope fits (a
        name that fits no kind is an error); a dict maps kind names to lists.
    lexicon : Lexicon, optional
        Admissible labelings G (needed by ``phi_mp2``).
    label_set : array-like of int, optional
        Confusable labels L for ``phi_mp6`` (default: every label).
    label_names : sequence of str, optional
        Display names of labels, used in the names of ``phi_mp6`` columns.
    raw : bool, default=True
        Also fill the ``raw`` column (the model's probability of each event; needs
        marginals for most kinds).

    Returns
    -------
    EventTable

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials, StructuredPrediction
    >>> from structcal.events import MAPEvent, MarginalEvent, build_events
    >>> p = ChainPotentials.from_list([np.log([[0.6, 0.4], [0.3, 0.7]])], np.zeros((2, 2)))
    >>> t = build_events(StructuredPrediction(p), [MAPEvent(), MarginalEvent()],
    ...                  y_true=[0, 0], features=["phi_mp1", "phi_mg2"])
    >>> t.feature_names, t.outcome.tolist(), np.round(t.raw, 2).tolist()
    (('phi_mp1', 'phi_mg2'), [False, True, False], [0.42, 0.6, 0.7])
    """
    from ..prediction import StructuredPrediction

    if not isinstance(pred, StructuredPrediction):
        raise ParameterTypeError(f"`pred` must be a StructuredPrediction; got {describe(pred)}")
    if isinstance(kinds, EventKind):
        kinds = [kinds]
    kinds = list(kinds)
    if not kinds:
        raise ParameterError("`kinds` must list at least one event kind")
    for k in kinds:
        if not isinstance(k, EventKind):
            raise ParameterTypeError(f"event kinds must be EventKind instances; got {describe(k)}")
    names = [k.name for k in kinds]
    if len(set(names)) != len(names):
        raise ParameterError(f"event kind names must be unique; got {names}")
    if label_set is not None:
        label_set = as_int_array(np.asarray(label_set), "label_set", ndim=1, low=0, high=pred.n_states)
    if label_names is not None:
        if isinstance(label_names, bytes) or not hasattr(label_names, "__len__") or not all(
                isinstance(n, (str, np.str_)) for n in label_names):
            raise ParameterTypeError(
                f"`label_names` must be a sequence of str (one per label); got "
                f"{type(label_names).__name__}"
            )
        if len(label_names) != pred.n_states:
            raise ParameterError(
                f"`label_names` must name the {pred.n_states} labels; got {len(label_names)}"
            )
    if y_true is not None:
        y_true = _y_true_iv(pred, y_true)
    plans = _feature_plan(kinds, features, pred, lexicon)
    for kind, plan in zip(kinds, plans):
        for f in plan:
            missing = f.missing(pred, kind, lexicon)
            if missing:
                raise ParameterError(
                    f"feature {f.name!r} (event kind {kind.name!r}) needs {missing[0]}"
                )

    blocks = []
    columns: list[str] = []
    for k, (kind, plan) in enumerate(zip(kinds, plans)):
        events = _check_instances(kind.instances(pred), pred, kind)
        # features, outcomes and probabilities on the items that have events (same values)
        kpred, kevents, ky = _on_event_items(pred, events, y_true)
        ctx = _features.FeatureContext(kpred, kind, kevents, lexicon, label_set, label_names)
        values, names_k = [], []
        for f in plan:
            v = np.asarray(f.func(ctx), dtype=np.float64)
            cols = f.column_names(ctx)
            # (no events: no values to infer the column count from)
            v = v.reshape(len(events), -1 if len(events) else len(cols))
            if v.shape[1] != len(cols):
                raise ParameterError(
                    f"feature {f.name!r} returned {v.shape[1]} columns but declares {len(cols)}"
                )
            bad = ~np.isfinite(v)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                why = " (this event kind has no model probability)" if f.name == "raw" else ""
                raise ParameterError(
                    f"feature {cols[c]!r} is not finite ({v[r, c]}) for event {r} of kind "
                    f"{kind.name!r} (item {events.item[r]}){why}"
                )
            values.append(v)
            names_k.extend(cols)
        for c in names_k:
            if c not in columns:
                columns.append(c)
        blocks.append((kind, events, ctx, ky, np.hstack(values) if values else np.zeros((len(events), 0)), names_k))

    n_total = sum(len(b[1]) for b in blocks)
    X = np.zeros((n_total, len(columns)))
    defined = np.zeros((len(kinds), len(columns)), dtype=bool)
    parts = {key: [] for key in ("kind", "item", "node", "label", "outcome", "raw", "members", "sizes")}
    row = 0
    for k, (kind, events, ctx, ky, values, names_k) in enumerate(blocks):
        n = len(events)
        idx = [columns.index(c) for c in names_k]
        X[row : row + n, idx] = values
        defined[k, idx] = True
        parts["kind"].append(np.full(n, k, dtype=np.int64))
        parts["item"].append(events.item)
        parts["node"].append(events.node)
        parts["label"].append(events.label)
        if events.members is not None:
            parts["members"].append(events.members)
            parts["sizes"].append(np.diff(events.member_offsets))
        else:
            parts["sizes"].append(np.zeros(n, dtype=np.int64))
        if y_true is not None:
            parts["outcome"].append(np.asarray(kind.outcomes(ctx.pred, ctx.events, ky), dtype=bool))
        if raw and kind.has_probability_for(pred):
            parts["raw"].append(np.asarray(ctx.memo("raw", lambda: kind.probabilities(ctx.pred, ctx.events)), dtype=np.float64))
        elif raw:  # no model probability for this kind on these potentials
            parts["raw"].append(np.full(n, np.nan))
        row += n
    node = np.concatenate(parts["node"])
    item = np.concatenate(parts["item"])
    position = np.where(node >= 0, node - pred.item_offsets[:-1][item], -1)
    return EventTable(
        kind_names=tuple(names),
        kind_scopes=tuple(k.scope for k in kinds),
        kind=np.concatenate(parts["kind"]),
        item=item,
        node=node,
        position=position,
        label=np.concatenate(parts["label"]),
        X=X,
        feature_names=tuple(columns),
        defined=defined,
        outcome=np.concatenate(parts["outcome"]) if y_true is not None else None,
        raw=np.concatenate(parts["raw"]) if raw else None,
        item_lengths=pred.lengths.copy(),
        members=np.concatenate(parts["members"]) if parts["members"] else np.zeros(0, np.int64),
        member_offsets=offsets_from_lengths(np.concatenate(parts["sizes"])),
    )
