"""Event kinds: which probability questions are asked about each structured input.

An event ``E`` is a set of labelings; a user asks ``P(y in E | x)``. An *event kind*
generates the events of one family for every input of a batch (the paper's ``I(x)`` is a
list of kinds). Each kind says, for a :class:`~structcal.StructuredPrediction`:

- its instances: the item (input) of each event and, for per-node events, the node and
  the *target label* the event asks about;
- the outcome ``I[y in E]`` given the true labelings;
- the raw model probability ``P_theta(E | x)`` where the model can compute it (exactly on
  chains), else NaN;
- whether the MAP labeling lies in the event (``I[MAP in E]``, a cheap MAP feature).

Item-scope events (one per input: MAP, lexicon, span, any-label, predicates) are described
by the MAP-recalibration features of Table 1; node-scope events (one per position: marginal,
label-at) by the marginal-recalibration features.

**Empty items.** An input with no nodes (a 0-length chain, a graph with no nodes) has no
events of any kind: there is nothing to predict, so nothing to calibrate (its only
labeling, the empty one, is certain). Such items are accepted and simply contribute no
rows; ``on_short="error"`` does not fire for them. A batch (or a kind) with no events gives
empty results, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int_array, check_int, check_option, describe
from ..exceptions import ParameterError, ParameterTypeError
from ..potentials import ChainPotentials

__all__ = [
    "EventKind",
    "EventInstances",
    "MAPEvent",
    "MarginalEvent",
    "LabelAt",
    "SpanEquals",
    "InLexicon",
    "AnyLabel",
    "Predicate",
]


@dataclass(frozen=True)
class EventInstances:
    """The events of one kind over a batch.

    Attributes
    ----------
    item : ndarray of shape (n_events,), int64
        Input (chain or graph) of each event.
    node : ndarray of shape (n_events,), int64
        Global node of each per-node event, ``-1`` for per-item events.
    label : ndarray of shape (n_events,), int64
        Target label of each per-node event (for marginal events: the MAP label); the
        class of a node-set event (an entity's type, an object's label); ``-1`` for
        per-item events.
    members : ndarray of shape (n_members,), int64, optional
        For events covering a set of nodes (scope ``"set"`` and its refinements such as
        ``"span"``): the global nodes of every event's set, laid end to end.
    member_offsets : ndarray of shape (n_events + 1,), int64, optional
        Event ``e`` covers ``members[member_offsets[e]:member_offsets[e + 1]]``.
    member_labels : ndarray of shape (n_members,), int64, optional
        Target label of each member (e.g. the MAP tags of an entity).

    See Also
    --------
    structcal.events.nodesets : constraints, probabilities and features of node-set events.
    """

    item: np.ndarray
    node: np.ndarray
    label: np.ndarray
    members: np.ndarray | None = None
    member_offsets: np.ndarray | None = None
    member_labels: np.ndarray | None = None

    @property
    def member_event(self) -> np.ndarray:
        """Event of each member, shape (n_members,)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.member_offsets))

    def __len__(self) -> int:
        return int(self.item.shape[0])


def _kind_name(name, default):
    """A kind's name: a non-empty str (``default`` when None and a default exists)."""
    if name is None and default is not None:
        return default
    if not isinstance(name, str):
        raise ParameterTypeError(f"`name` must be a str; got {describe(name)}")
    if not name:
        if default is not None:
            return default
        raise ParameterError("`name` must not be empty (it names the kind's events)")
    return name


def _per_item(pred) -> EventInstances:
    """One event per non-empty item (an empty item has no events, see the module notes)."""
    items = np.flatnonzero(pred.lengths > 0).astype(np.int64)
    minus = np.full(items.shape[0], -1, dtype=np.int64)
    return EventInstances(items, minus, minus.copy())


def _count_per_item(pred, flags) -> np.ndarray:
    """Number of true ``flags`` (one per node) in each item."""
    return np.bincount(pred.item_index, weights=flags, minlength=pred.n_items).astype(np.int64)


def _require_chain(pred, what):
    if not isinstance(pred.potentials, ChainPotentials):
        raise ParameterTypeError(
            f"{what} has an exact probability only on chains; on graphs use Predicate(...) "
            "(its probability comes from the forecaster)"
        )


def _resolve_positions(pred, position, on_short, what):
    """Global node of ``position`` in every item (negative counts from the end)."""
    lengths = pred.lengths
    pos = np.where(position < 0, lengths + position, position)
    ok = (pos >= 0) & (pos < lengths)
    if not ok[lengths > 0].all() and on_short == "error":
        bad = int(np.flatnonzero(~ok & (lengths > 0))[0])
        raise ParameterError(
            f"{what}: position {position} is past the end of item {bad} (length "
            f"{lengths[bad]}); pass on_short='skip' to leave such items out"
        )
    items = np.flatnonzero(ok).astype(np.int64)
    return items, pred.item_offsets[:-1][items] + pos[items]


class EventKind:
    """Base class of event kinds.

    Subclasses set ``scope`` and ``name`` and implement :meth:`instances`,
    :meth:`outcomes`, :meth:`probabilities` and :meth:`map_in_event`. Scopes: ``"item"``
    (one event per input), ``"node"`` (per position), ``"set"`` (an event covering a set
    of nodes, described by ``EventInstances.members``; item features apply too) and its
    refinement ``"span"`` (a contiguous set of a chain: set and item features apply).
    """

    scope = "item"
    name = "event"
    #: inference needed by :meth:`probabilities` (for the cost taxonomy)
    probability_needs = "marginals"
    #: whether the model can compute the probability of these events
    has_probability = True
    #: whether the MAP labeling lies in every event of this kind (``I[MAP in E]`` is
    #: constant 1, as for the paper's MAP and marginal events)
    contains_map = False
    #: structures on which :meth:`probabilities` computes the model's probability
    probability_structures = ("chain", "graph")

    def instances(self, pred) -> EventInstances:
        """The events of this kind for every input of ``pred``."""
        return _per_item(pred)

    def outcomes(self, pred, events: EventInstances, y_true: np.ndarray) -> np.ndarray:
        """``I[y in E]`` of each event given the true labelings laid end to end."""
        raise ParameterTypeError(f"{type(self).__name__} does not define outcomes")

    def probabilities(self, pred, events: EventInstances) -> np.ndarray:
        """Raw model probability of each event (NaN where the model cannot say)."""
        return np.full(len(events), np.nan)

    def map_in_event(self, pred, events: EventInstances) -> np.ndarray:
        """``I[MAP in E]`` of each event."""
        raise ParameterTypeError(f"{type(self).__name__} does not define map_in_event")

    def has_probability_for(self, pred) -> bool:
        """Whether :meth:`probabilities` gives the model's probability of these events on ``pred``."""
        structure = "chain" if isinstance(pred.potentials, ChainPotentials) else "graph"
        return bool(self.has_probability) and structure in self.probability_structures

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _check_loaded(self):
        """An event kind read from a file: a name, and parameters as its constructor checks."""
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{type(self).__name__}.name must be a non-empty str")
        self._check_parameters()

    def _check_parameters(self):
        """Check the kind's own parameters (subclasses with parameters override this)."""


class _TokenKind(EventKind):
    """A kind whose outcome compares the labels position by position, optionally in a
    tag scheme whose gold sequences must be valid (see :class:`MAPEvent`)."""

    tag_scheme = None  # (kinds saved before the parameter existed load with None)

    def __init__(self, tag_scheme=None):
        self.tag_scheme = tag_scheme
        self._check_parameters()

    def _check_parameters(self):
        from ..adapters.tagging import TagScheme

        if self.tag_scheme is not None and not isinstance(self.tag_scheme, TagScheme):
            raise ParameterTypeError(
                f"`tag_scheme` must be a TagScheme or None; got {describe(self.tag_scheme)}")

    def _gold(self, pred, y_true):
        if self.tag_scheme is None:
            return y_true
        from .spans import _check_states, _gold  # the entity kinds' checks (spans imports us)

        _check_states(self, pred)
        return _gold(self, pred, y_true)

    def __repr__(self) -> str:
        scheme = "" if self.tag_scheme is None else f"tag_scheme={self.tag_scheme!r}"
        return f"{type(self).__name__}({scheme})"


_TOKEN_SCHEME_DOC = """
    Parameters
    ----------
    tag_scheme : TagScheme, optional
        When the labels are entity tags, the model's tag scheme: gold labelings must then
        be valid in it. The outcome compares tags position by position, so gold tags in
        another scheme (IOB1 gold for a BIO model: ``I-PER`` where the model says
        ``B-PER``) would count right predictions as wrong; with ``tag_scheme`` they are
        refused, with a note on how to convert them. Entity kinds always check their gold.
"""


class MAPEvent(_TokenKind):
    __doc__ = """``E = {MAP(x)}``: "the whole predicted labeling is correct" (one per input).
""" + _TOKEN_SCHEME_DOC

    scope = "item"
    name = "map"
    contains_map = True

    def outcomes(self, pred, events, y_true):
        y_true = self._gold(pred, y_true)
        return (_count_per_item(pred, y_true != pred.map_labels) == 0)[events.item]

    def probabilities(self, pred, events):
        return pred.map_probability[events.item]

    def map_in_event(self, pred, events):
        return np.ones(len(events), dtype=bool)


class MarginalEvent(_TokenKind):
    __doc__ = """``E_j = {y : y_j = MAP(x)_j}``: "position j is correct" (one per position).
""" + _TOKEN_SCHEME_DOC

    scope = "node"
    name = "marginal"
    probability_needs = "marginals"
    contains_map = True

    def instances(self, pred):
        node = np.arange(pred.n_nodes, dtype=np.int64)
        return EventInstances(pred.item_index, node, pred.map_labels.copy())

    def outcomes(self, pred, events, y_true):
        y_true = self._gold(pred, y_true)
        return y_true[events.node] == events.label

    def probabilities(self, pred, events):
        return pred.marginals[events.node, events.label]

    def map_in_event(self, pred, events):
        return np.ones(len(events), dtype=bool)


class LabelAt(EventKind):
    """``E = {y : y_position = label}``, e.g. "the first letter is 'l'" (one per input).

    Parameters
    ----------
    position : int
        Position within each item; negative values count from the end (-1 = last).
    label : int
        The label asked about.
    on_short : {'error', 'skip'}, default='error'
        What to do with items too short to have ``position``: raise, or leave them out.
    name : str, optional
        Group name of these events in the table (default ``"label_at[position]=label"``).
    """

    scope = "node"
    probability_needs = "marginals"

    def __init__(self, position: int, label: int, *, on_short: str = "error", name: str | None = None):
        self.position = check_int(position, "position")
        self.label = check_int(label, "label", low=0)
        self.on_short = check_option(on_short, "on_short", ("error", "skip"))
        self.name = _kind_name(name, f"label_at[{self.position}]={self.label}")

    def _check_parameters(self):
        check_int(self.position, "position")
        check_int(self.label, "label", low=0)
        check_option(self.on_short, "on_short", ("error", "skip"))

    def instances(self, pred):
        if self.label >= pred.n_states:
            raise ParameterError(f"LabelAt: `label` must be < n_states={pred.n_states}; got {self.label}")
        items, nodes = _resolve_positions(pred, self.position, self.on_short, "LabelAt")
        return EventInstances(items, nodes, np.full(items.shape[0], self.label, dtype=np.int64))

    def outcomes(self, pred, events, y_true):
        return y_true[events.node] == events.label

    def probabilities(self, pred, events):
        return pred.marginals[events.node, events.label]

    def map_in_event(self, pred, events):
        return pred.map_labels[events.node] == events.label

    def __repr__(self):
        return f"LabelAt(position={self.position}, label={self.label}, on_short={self.on_short!r})"


class SpanEquals(EventKind):
    """``E = {y : y[start:start + m] = labels}``, e.g. "letters 2-4 read 'ing'" (one per input).

    Exact probability on chains by a constrained forward pass.

    Parameters
    ----------
    start : int
        First position of the span; negative values count from the end.
    labels : sequence of int
        The labels the span must take.
    on_short : {'error', 'skip'}, default='error'
        Items too short to hold the span: raise, or leave them out.
    name : str, optional
        Group name (default ``"span[start]=..."``).
    """

    scope = "item"
    probability_structures = ("chain",)

    def __init__(self, start: int, labels, *, on_short: str = "error", name: str | None = None):
        self.start = check_int(start, "start")
        if hasattr(labels, "__len__") and len(labels) == 0:
            raise ParameterError("`labels` must name at least one label (the span's labels, "
                                 "position by position); got an empty sequence")
        self.labels = as_int_array(labels, "labels", ndim=1, low=0, allow_empty=False)
        self.on_short = check_option(on_short, "on_short", ("error", "skip"))
        labels = "-".join(map(str, self.labels.tolist()))
        self.name = _kind_name(name, f"span[{self.start}]={labels}")

    def _check_parameters(self):
        check_int(self.start, "start")
        if not isinstance(self.labels, np.ndarray):
            raise ValueError("SpanEquals.labels must be an array")
        as_int_array(self.labels, "labels", ndim=1, low=0, allow_empty=False)
        check_option(self.on_short, "on_short", ("error", "skip"))

    def _span_nodes(self, pred):
        m = self.labels.shape[0]
        lengths = pred.lengths
        first = np.where(self.start < 0, lengths + self.start, self.start)
        ok = (first >= 0) & (first + m <= lengths)
        if not ok[lengths > 0].all() and self.on_short == "error":
            bad = int(np.flatnonzero(~ok & (lengths > 0))[0])
            raise ParameterError(
                f"SpanEquals: the span of length {m} at {self.start} does not fit in item {bad} "
                f"(length {lengths[bad]}); pass on_short='skip' to leave such items out"
            )
        items = np.flatnonzero(ok).astype(np.int64)
        return items, first[items]

    def instances(self, pred):
        if self.labels.max() >= pred.n_states:
            raise ParameterError(f"SpanEquals: labels must be < n_states={pred.n_states}")
        items, _ = self._span_nodes(pred)
        minus = np.full(items.shape[0], -1, dtype=np.int64)
        return EventInstances(items, minus, minus.copy())

    def _matches(self, pred, events, labels):
        _, first = self._span_nodes(pred)
        pos = pred.item_offsets[:-1][events.item][:, None] + first[:, None] + np.arange(self.labels.shape[0])
        return (labels[pos] == self.labels).all(axis=1) if pos.size else np.zeros(0, bool)

    def outcomes(self, pred, events, y_true):
        return self._matches(pred, events, y_true)

    def map_in_event(self, pred, events):
        return self._matches(pred, events, pred.map_labels)

    def probabilities(self, pred, events):
        from ..inference.chain import constrained_log_partition

        _require_chain(pred, "SpanEquals")
        _, first = self._span_nodes(pred)
        m = self.labels.shape[0]
        n = len(events)
        positions = (first[:, None] + np.arange(m)).ravel()
        allowed = np.zeros((n * m, pred.n_states), dtype=bool)
        allowed[np.arange(n * m), np.tile(self.labels, n)] = True
        logz = constrained_log_partition(
            pred.potentials, events.item, np.arange(n + 1) * m, positions, allowed
        )
        return np.exp(np.minimum(logz - pred.log_partition[events.item], 0.0))

    def __repr__(self):
        return f"SpanEquals(start={self.start}, labels={self.labels.tolist()}, on_short={self.on_short!r})"


class InLexicon(EventKind):
    """``E = G``: "the labeling is an admissible word" (one per input).

    Parameters
    ----------
    lexicon : Lexicon
        The admissible labelings.
    name : str, default='in_lexicon'
    """

    scope = "item"
    probability_structures = ("chain",)

    def __init__(self, lexicon, *, name: str = "in_lexicon"):
        from .lexicon import Lexicon

        if not isinstance(lexicon, Lexicon):
            raise ParameterTypeError(f"`lexicon` must be a Lexicon; got {describe(lexicon)}")
        self.lexicon = lexicon
        self.name = _kind_name(name, None)

    def _check_parameters(self):
        from .lexicon import Lexicon

        if not isinstance(self.lexicon, Lexicon):
            raise ValueError("InLexicon.lexicon must be a Lexicon")

    def outcomes(self, pred, events, y_true):
        return self.lexicon.contains(y_true, pred.item_offsets)[events.item]

    def map_in_event(self, pred, events):
        return self.lexicon.contains(pred.map_labels, pred.item_offsets)[events.item]

    def probabilities(self, pred, events):
        _require_chain(pred, "InLexicon")
        logm = self.lexicon.log_mass(pred.potentials)
        return np.exp(np.minimum(logm - pred.log_partition, 0.0))[events.item]

    def __repr__(self):
        return f"InLexicon({self.lexicon!r})"


class AnyLabel(EventKind):
    """``E = {y : y_j = label for some j}``, e.g. "some region is labelled person" (one per input).

    Exact on chains: one minus the probability that ``label`` is absent everywhere (a
    constrained forward pass). On graphs the model's probability is approximated from the
    node marginals as if the nodes were independent, ``1 - prod_j (1 - p(y_j = label))``
    (exact for the mean-field distribution itself); recalibration corrects what this
    misses, and ``map_in_event`` and the MAP features carry the structure.

    Parameters
    ----------
    label : int
        The label asked about.
    name : str, optional
        Group name (default ``"any_label=label"``).
    """

    scope = "item"

    def __init__(self, label: int, *, name: str | None = None):
        self.label = check_int(label, "label", low=0)
        self.name = _kind_name(name, f"any_label={self.label}")

    def _check_parameters(self):
        check_int(self.label, "label", low=0)

    def _any(self, pred, labels):
        return _count_per_item(pred, labels == self.label) > 0

    def instances(self, pred):
        if self.label >= pred.n_states:
            raise ParameterError(f"AnyLabel: `label` must be < n_states={pred.n_states}; got {self.label}")
        return _per_item(pred)

    def outcomes(self, pred, events, y_true):
        return self._any(pred, y_true)[events.item]

    def map_in_event(self, pred, events):
        return self._any(pred, pred.map_labels)[events.item]

    def probabilities(self, pred, events):
        items = events.item
        if not isinstance(pred.potentials, ChainPotentials):
            q = np.minimum(pred.marginals[:, self.label], 1.0)  # rounding can exceed 1
            with np.errstate(divide="ignore"):
                log_absent = np.bincount(pred.item_index, weights=np.log1p(-q), minlength=pred.n_items)
            return -np.expm1(log_absent[items])
        from ..inference.chain import constrained_log_partition

        lengths = pred.lengths[items]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        positions = np.concatenate([np.arange(L) for L in lengths]) if len(items) else np.zeros(0, np.int64)
        allowed = np.ones((positions.shape[0], pred.n_states), dtype=bool)
        allowed[:, self.label] = False
        logz = constrained_log_partition(pred.potentials, items, offsets, positions, allowed)
        absent = np.exp(np.minimum(logz - pred.log_partition[items], 0.0))
        return np.clip(1.0 - absent, 0.0, 1.0)

    def __repr__(self):
        return f"AnyLabel(label={self.label})"


class Predicate(EventKind):
    """A user-defined event ``E = {y : func(y)}`` given by a Python predicate (one per input).

    Its outcome (and whether the MAP satisfies it) is computed by calling ``func``; the
    model cannot say how probable it is (``probabilities`` is NaN), so its calibrated
    probability comes from the forecaster, fed with the MAP features and ``I[func(MAP)]``.

    Parameters
    ----------
    func : callable
        ``func(labels) -> bool`` for one item's labels (a 1-d int array).
    name : str
        Group name of these events.
    """

    scope = "item"
    probability_needs = "none"
    has_probability = False

    def __init__(self, func, name: str):
        if not callable(func):
            raise ParameterTypeError(f"`func` must be callable; got {describe(func)}")
        self.func = func
        self.name = _kind_name(name, None)

    def _apply(self, pred, labels, items):
        off = pred.item_offsets
        out = np.empty(items.shape[0], dtype=bool)
        for k, i in enumerate(items):
            value = self.func(labels[off[i] : off[i + 1]])
            if not isinstance(value, (bool, np.bool_)):
                raise ParameterTypeError(
                    f"predicate {self.name!r} must return a bool; got {describe(value)} for item {i}"
                )
            out[k] = value
        return out

    def outcomes(self, pred, events, y_true):
        return self._apply(pred, y_true, events.item)

    def map_in_event(self, pred, events):
        return self._apply(pred, pred.map_labels, events.item)

    def __repr__(self):
        return f"Predicate({self.func!r}, name={self.name!r})"
