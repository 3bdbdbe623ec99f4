"""Events produced by an outside model: the same event table structcal's own kinds build.

A model structcal does not run (a transformer tagger, a spaCy pipeline, an instance
segmenter) still asks the same questions about its output: *is this entity right? is
this object a real nucleus? is this field of the record right?* :func:`external_events`
takes its candidate events as plain arrays - per event its input (``item``), its kind,
the model's raw score, optional features and, for fitting, the outcome - and returns an
:class:`~structcal.events.EventTable`, the same table :func:`~structcal.events.build_events`
builds for structcal's own kinds. Everything downstream reads tables:
:meth:`StructuredRecalibrator.fit_events <structcal.StructuredRecalibrator.fit_events>`
and ``predict_events`` (the same selection of a map per kind, prior, groups and shift
test), the reports, the guarantees, saving, and the command line (``structcal fit
events.csv``). Conversely, a table of structcal's own events goes through the same
``fit_events``.

Outcomes can also be derived from gold structures: :func:`span_outcomes` matches entity
spans exactly (conlleval), :func:`object_outcomes` matches objects given as pixel sets to
gold objects of the same class at IoU >= 0.5.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int_array, describe
from ..exceptions import ParameterError, ParameterTypeError
from .kinds import EventKind
from .table import EventTable

__all__ = ["ExternalKind", "external_events", "span_outcomes", "object_outcomes"]


class ExternalKind(EventKind):
    """The kind of events an outside model produced (a name; the events come as data).

    It stands for its events in a fitted recalibrator (``kinds_``); it cannot build events
    from a :class:`~structcal.StructuredPrediction`.
    """

    scope = "external"
    contains_map = False

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ParameterTypeError(f"`name` must be a non-empty str; got {describe(name)}")
        self.name = name

    def instances(self, pred):
        """Refuse: the events of an outside model come as a table, not from ``pred``."""
        raise ParameterTypeError(
            f"event kind {self.name!r} comes from an outside model: give its events as a "
            "table (structcal.events.external_events) and use fit_events / predict_events"
        )

    def __repr__(self):
        return f"ExternalKind({self.name!r})"


def _float_column(values, what):
    from .._validation import as_numeric

    return as_numeric(values, what)


def external_events(item, *, kind=None, raw=None, features=None, outcome=None, label=None,
                    members=None, n_items=None, kinds=None) -> EventTable:
    """Build the event table of events an outside model produced.

    Parameters
    ----------
    item : array-like of shape (n_events,), int
        The input each event is about (a sentence, an image, a record), as 0-based
        indices (one per input of the batch).
    kind : array-like of shape (n_events,) of str, or str, optional
        The kind of each event (``"entity"``, ``"nucleus"``, ``"field"``; default
        ``"event"``): one recalibration map per kind.
    raw : array-like of shape (n_events,), optional
        The model's own score of each event as a probability in [0, 1] (NaN for every
        event of a kind that has none). It becomes the ``raw`` feature as well.
    features : dict of str to array-like of shape (n_events,), optional
        More features of the events (span length, entity type one-hot, ...). NaN marks a
        feature a kind does not have: NaN for all of the kind's events or for none.
    outcome : array-like of shape (n_events,), bool, optional
        Whether each event holds (for fitting and evaluation).
    label : array-like of shape (n_events,), int, optional
        A class per event (entity type, object class; -1 for none), for per-class
        reports and guarantees.
    members : sequence of array-like of int, optional
        The nodes (token positions, pixel indices) each event covers, local to its input.
    n_items : int, optional
        Number of inputs of the batch (default: ``max(item) + 1``).
    kinds : sequence of str, optional
        The kinds in table order (default: sorted kind names).

    Returns
    -------
    EventTable
        With ``kind_scopes`` ``"external"``; feature columns ``raw`` (if given) and the
        ``features``.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.events import external_events
    >>> t = external_events([0, 0, 1], kind="entity", raw=[0.9, 0.4, 0.7],
    ...                     features={"length": [1, 3, 2]}, outcome=[1, 0, 1])
    >>> t.kind_names, t.feature_names, t.outcome.tolist()
    (('entity',), ('raw', 'length'), [True, False, True])
    """
    item = as_int_array(np.asarray(item), "item", ndim=1, low=0)
    n = item.shape[0]
    if n_items is None:
        n_items = int(item.max()) + 1 if n else 0
    elif n and item.max() >= n_items:
        raise ParameterError(f"`item` holds {int(item.max())}, beyond n_items={n_items}")
    if kind is None or isinstance(kind, str):
        kind_of = np.full(n, kind or "event", dtype=object)
    else:
        kind_of = np.asarray(kind, dtype=object)
        if kind_of.shape != (n,) or not all(isinstance(k, str) and k for k in kind_of.tolist()):
            raise ParameterError(f"`kind` must be a str or one non-empty str per event ({n})")
    names = sorted(set(kind_of.tolist())) if kinds is None else list(kinds)
    unknown = sorted(set(kind_of.tolist()) - set(names))
    if unknown:
        raise ParameterError(f"events of kinds {unknown} not in `kinds` {names}")
    code = np.array([names.index(k) for k in kind_of.tolist()], dtype=np.int64)
    columns, names_x = [], []
    if raw is not None:
        r = _float_column(raw, "raw")
        if r.shape != (n,):
            raise ParameterError(f"`raw` must have shape ({n},) (one per event of `item`); "
                                 f"got {r.shape}")
        finite = np.isfinite(r)
        if (r[finite] < 0).any() or (r[finite] > 1).any() or np.isinf(r).any():
            raise ParameterError("`raw` must hold probabilities in [0, 1] (NaN: none)")
        columns.append(r)
        names_x.append("raw")
    for name, values in (features or {}).items():
        if not isinstance(name, str) or name in names_x:
            raise ParameterError(f"feature names must be distinct str; got {name!r}")
        v = _float_column(values, f"features[{name!r}]")
        if v.shape != (n,):
            raise ParameterError(f"feature {name!r} must have shape ({n},) (one per event of "
                                 f"`item`); got {v.shape}")
        if np.isinf(v).any():
            raise ParameterError(f"feature {name!r} holds infinite values")
        columns.append(v)
        names_x.append(name)
    X = np.column_stack(columns) if columns else np.zeros((n, 0))
    defined = np.zeros((len(names), X.shape[1]), dtype=bool)
    for k in range(len(names)):
        rows = code == k
        nan = np.isnan(X[rows])
        partial = nan.any(axis=0) & ~nan.all(axis=0)
        if partial.any():
            j = int(np.flatnonzero(partial)[0])
            what = "`raw`" if names_x[j] == "raw" and raw is not None else f"feature {names_x[j]!r}"
            raise ParameterError(
                f"{what} is NaN for {int(nan[:, j].sum())} of the {int(rows.sum())} events of "
                f"kind {names[k]!r}: NaN marks a column a kind does not have, so it must be "
                "NaN for all of the kind's events or none (drop those events, impute them, or "
                "give them a kind of their own)")
        defined[k] = ~nan.any(axis=0) if rows.any() else np.ones(X.shape[1], bool)
    X = np.where(np.isnan(X), 0.0, X)
    out = None
    if outcome is not None:
        o = np.asarray(outcome)
        if o.shape != (n,) or o.dtype.kind not in "biuf" or not np.isin(o, (0, 1)).all():
            raise ParameterError(f"`outcome` must hold one 0/1 (bool) per event of `item` "
                                 f"({n}); got {describe(outcome)}")
        out = o.astype(bool)
    if label is not None and np.shape(label) != (n,):
        raise ParameterError(f"`label` must have shape ({n},) (one per event of `item`); got "
                             f"{np.shape(label)}")
    lab = np.full(n, -1, dtype=np.int64) if label is None else as_int_array(
        np.asarray(label), "label", ndim=1, shape=(n,), low=-1)
    sizes = np.zeros(n, dtype=np.int64)
    mem = np.zeros(0, dtype=np.int64)
    lengths = np.zeros(n_items, dtype=np.int64)
    if members is not None:
        if len(members) != n:
            raise ParameterError(f"`members` must hold one node set per event ({n})")
        parts = [as_int_array(np.asarray(m, dtype=np.int64) if len(m) else np.zeros(0, np.int64),
                              f"members[{i}]", ndim=1, low=0) for i, m in enumerate(members)]
        sizes = np.array([p.shape[0] for p in parts], dtype=np.int64)
        for i, p in zip(item.tolist(), parts):
            if p.size:
                lengths[i] = max(lengths[i], int(p.max()) + 1)
        first = np.concatenate([[0], np.cumsum(lengths)])[:-1]
        mem = np.concatenate([p + first[i] for i, p in zip(item.tolist(), parts)]) if n else mem
    from .._ragged import offsets_from_lengths

    return EventTable(
        kind_names=tuple(names), kind_scopes=tuple("external" for _ in names), kind=code,
        item=item, node=np.full(n, -1, dtype=np.int64), position=np.full(n, -1, dtype=np.int64),
        label=lab, X=X, feature_names=tuple(names_x), defined=defined, outcome=out,
        raw=None if raw is None else columns[0].copy(), item_lengths=lengths,
        members=mem, member_offsets=offsets_from_lengths(sizes),
    )


def span_outcomes(item, start, end, type_, gold_item, gold_start, gold_end, gold_type):
    """Whether each predicted span is exactly a gold span of the same type (conlleval).

    All arguments are arrays of equal length per side (``end`` exclusive); returns a bool
    array, one per predicted span.
    """
    def side(arrays, names):
        first = as_int_array(arrays[0], names[0], ndim=1)
        cols = [first] + [as_int_array(a, n, ndim=1, shape=first.shape)
                          for a, n in zip(arrays[1:], names[1:])]
        if (cols[2] < cols[1]).any():
            i = int(np.argmax(cols[2] < cols[1]))
            raise ParameterError(f"`{names[2]}` must be >= `{names[1]}` (end exclusive); got "
                                 f"{names[1]}[{i}]={cols[1][i]}, {names[2]}[{i}]={cols[2][i]}")
        return list(zip(*(c.tolist() for c in cols)))

    pred = side((item, start, end, type_), ("item", "start", "end", "type_"))
    gold = set(side((gold_item, gold_start, gold_end, gold_type),
                    ("gold_item", "gold_start", "gold_end", "gold_type")))
    return np.array([p in gold for p in pred], dtype=bool)


def object_outcomes(members, classes, item, gold_labels, *, iou_threshold=0.5, background=0):
    """Whether each predicted object matches a gold object of its class at IoU >= threshold.

    Parameters
    ----------
    members : sequence of array-like of int
        Pixel indices of each predicted object in its image (flattened, row-major).
    classes : array-like of int
        Class of each predicted object.
    item : array-like of int
        Image of each predicted object.
    gold_labels : sequence of 2-d int arrays
        A label image per image: 0 background, else the class of the pixel; gold objects
        are the 4-connected components of each class.
    iou_threshold : float, default=0.5
    background : int, default=0

    Returns
    -------
    ndarray of bool
    """
    from scipy import ndimage as ndi

    n = len(members)
    classes = as_int_array(classes, "classes", ndim=1, shape=(n,))
    gold_labels = [as_int_array(g, f"gold_labels[{i}]", ndim=2) for i, g in enumerate(gold_labels)]
    item = as_int_array(item, "item", ndim=1, shape=(n,), low=0, high=max(len(gold_labels), 1))
    if n and len(gold_labels) == 0:
        raise ParameterError("`gold_labels` must hold a label image per image of `item`; got none")
    members = [as_int_array(m, f"members[{r}]", ndim=1, low=0, high=gold_labels[item[r]].size)
               for r, m in enumerate(members)]
    out = np.zeros(n, dtype=bool)
    for img, gold in enumerate(gold_labels):
        flat = gold.reshape(-1)
        rows = np.flatnonzero(item == img)
        if not rows.size:
            continue
        comps, sizes = {}, {}
        for c in np.unique(flat):
            if c == background:
                continue
            lab, _ = ndi.label(gold == c)
            comps[int(c)] = lab.reshape(-1)
            sizes[int(c)] = np.bincount(comps[int(c)])   # pixels of each gold object
        for r in rows:
            px = np.asarray(members[r], dtype=np.int64)
            c = int(classes[r])
            if c not in comps or not px.size:
                continue
            ids, counts = np.unique(comps[c][px], return_counts=True)
            best = 0.0
            for gid, inter in zip(ids.tolist(), counts.tolist()):
                if gid == 0:
                    continue
                size_g = int(sizes[c][gid])
                best = max(best, inter / (px.size + size_g - inter))
            out[r] = best >= iou_threshold
    return out
