"""One mechanism for events that cover a set of nodes (entity spans, segmented objects).

An event over a node set is described by three flat arrays on its
:class:`~structcal.events.EventInstances`: ``members`` (global node ids, the events' sets
laid end to end), ``member_offsets`` (event ``e`` covers
``members[member_offsets[e]:member_offsets[e + 1]]``) and ``member_labels`` (the target
label of each member, e.g. the MAP tags of an entity or an object's class).

Which labelings lie in such an event is given by :class:`NodeSetConstraints`: a union of
*patterns*, each a product of per-node allowed-label sets (``node``, ``allowed``).
"The true labels equal the target labels on exactly these nodes" is one pattern (members
restricted to their target label, boundary nodes barred from some labels); an entity chunk
of a tagging scheme is a union of up to four disjoint patterns (see
:mod:`structcal.events.spans`). From the constraints follow

- the outcome ``I[y in E]`` (:meth:`NodeSetConstraints.satisfied`), for any structure;
- the exact probability on chains (:func:`constraints_probability`): one constrained
  forward pass per pattern, summed over the disjoint patterns of each event.

Per-event features are segment reductions of per-node arrays over the members
(:func:`segment_reduce`), vectorised with ``np.minimum.reduceat`` / ``np.add.reduceat``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._ragged import offsets_from_lengths, ragged_rows
from .._validation import (
    as_int_array, as_numeric, check_csr_graph, check_int, check_offsets, describe,
    nodes_outside_items,
)
from ..exceptions import ParameterError, ParameterTypeError
from ..potentials import ChainPotentials
from .kinds import EventKind

__all__ = [
    "NODE_SET_SCOPES",
    "NodeSetKind",
    "NodeSetConstraints",
    "constraints_probability",
    "exact_set_constraints",
    "outer_boundary",
    "segment_reduce",
    "member_values",
]

#: Scopes of node-set event kinds (events that carry ``members``).
NODE_SET_SCOPES = frozenset({"set", "span", "object"})


@dataclass(frozen=True)
class NodeSetConstraints:
    """Which labelings lie in each event: a union of product patterns per event.

    Attributes
    ----------
    event : ndarray of shape (n_patterns,), int64
        Event of each pattern, non-decreasing.
    pattern_offsets : ndarray of shape (n_patterns + 1,), int64
        Pattern ``p`` is constraints ``pattern_offsets[p]:pattern_offsets[p + 1]``.
    node : ndarray of shape (n_constraints,), int64
        Global node each constraint restricts.
    allowed : ndarray of shape (n_constraints, n_states), bool
        Labels allowed at that node. A node not constrained by a pattern is free.
    n_events : int
        Number of events (an event without patterns contains no labeling).

    Notes
    -----
    A labeling is in event ``e`` when it satisfies every constraint of at least one of
    ``e``'s patterns. :func:`constraints_probability` sums the patterns' probabilities, so
    the patterns of one event must be disjoint (no labeling satisfies two of them); the
    builders in this package make them so.
    """

    event: np.ndarray
    pattern_offsets: np.ndarray
    node: np.ndarray
    allowed: np.ndarray
    n_events: int

    @property
    def n_patterns(self) -> int:
        """Number of patterns over all events."""
        return int(self.event.shape[0])

    def satisfied(self, labels: np.ndarray) -> np.ndarray:
        """``I[labels in E]`` of every event, shape (n_events,), given labels of every node."""
        labels = np.asarray(labels)
        ok = self.allowed[np.arange(self.node.shape[0]), labels[self.node]]
        per_pattern = np.repeat(np.arange(self.n_patterns), np.diff(self.pattern_offsets))
        violations = np.bincount(per_pattern, weights=~ok, minlength=self.n_patterns)
        holds = np.bincount(self.event, weights=violations == 0, minlength=self.n_events)
        return holds > 0

    @staticmethod
    def concat(parts, n_events: int) -> "NodeSetConstraints":
        """Join constraint sets whose ``event`` ids already refer to one event numbering.

        The result is sorted by event (the parts' patterns are interleaved as needed).
        """
        parts = list(parts)
        event = np.concatenate([p.event for p in parts])
        lengths = np.concatenate([np.diff(p.pattern_offsets) for p in parts])
        stacked = offsets_from_lengths(lengths)
        order = np.argsort(event, kind="stable")
        rows, offsets = ragged_rows(stacked, order)
        node = np.concatenate([p.node for p in parts])[rows]
        allowed = np.concatenate([p.allowed for p in parts])[rows]
        return NodeSetConstraints(event[order], offsets, node, allowed, int(n_events))


def exact_set_constraints(
    members,
    member_offsets,
    member_labels,
    n_states: int,
    *,
    boundary=None,
    boundary_offsets=None,
    boundary_forbidden=None,
) -> NodeSetConstraints:
    """One pattern per event: members take their target labels, boundary nodes avoid some labels.

    "The true labels equal the target labels on exactly these nodes": with no boundary
    this is ``y[members] == member_labels``; for a segmented object pass its outer
    boundary (:func:`outer_boundary`) and the object's class as ``boundary_forbidden``, so
    the true object is neither smaller nor larger.

    Parameters
    ----------
    members, member_offsets, member_labels : ndarray
        The events' node sets (see the module docstring).
    n_states : int
    boundary : ndarray of int64, optional
        Boundary nodes of the events laid end to end.
    boundary_offsets : ndarray of shape (n_events + 1,), optional
    boundary_forbidden : ndarray of int64, optional
        Label forbidden at each boundary node (same length as ``boundary``).

    Returns
    -------
    NodeSetConstraints
    """
    n_states = check_int(n_states, "n_states", low=1)
    members = as_int_array(members, "members", ndim=1, low=0)
    member_offsets = check_offsets(member_offsets, "member_offsets", members.shape[0])
    member_labels = as_int_array(member_labels, "member_labels", ndim=1,
                                 shape=members.shape, low=0, high=n_states)
    n_events = member_offsets.shape[0] - 1
    allowed = np.zeros((members.shape[0], n_states), dtype=bool)
    allowed[np.arange(members.shape[0]), member_labels] = True
    if boundary is None:
        return NodeSetConstraints(
            np.arange(n_events, dtype=np.int64), member_offsets, members, allowed, n_events
        )
    boundary = as_int_array(boundary, "boundary", ndim=1, low=0)
    boundary_offsets = check_offsets(boundary_offsets, "boundary_offsets", boundary.shape[0])
    boundary_forbidden = as_int_array(boundary_forbidden, "boundary_forbidden", ndim=1,
                                      shape=boundary.shape, low=0, high=n_states)
    if boundary_offsets.shape[0] != n_events + 1:
        raise ParameterError(
            f"`boundary_offsets` must have n_events + 1 = {n_events + 1} entries; got "
            f"{boundary_offsets.shape[0]}"
        )
    b_allowed = np.ones((boundary.shape[0], n_states), dtype=bool)
    b_allowed[np.arange(boundary.shape[0]), boundary_forbidden] = False
    # interleave: each event's members then its boundary
    n_m, n_b = np.diff(member_offsets), np.diff(boundary_offsets)
    offsets = offsets_from_lengths(n_m + n_b)
    owner_m = np.repeat(np.arange(n_events), n_m)
    owner_b = np.repeat(np.arange(n_events), n_b)
    pos_m = offsets[owner_m] + np.arange(members.shape[0]) - member_offsets[owner_m]
    pos_b = (
        offsets[owner_b] + n_m[owner_b] + np.arange(boundary.shape[0]) - boundary_offsets[owner_b]
    )
    node = np.empty(offsets[-1], dtype=np.int64)
    all_allowed = np.empty((offsets[-1], n_states), dtype=bool)
    node[pos_m], node[pos_b] = members, boundary
    all_allowed[pos_m], all_allowed[pos_b] = allowed, b_allowed
    return NodeSetConstraints(
        np.arange(n_events, dtype=np.int64), offsets, node, all_allowed, n_events
    )


def constraints_probability(pred, constraints: NodeSetConstraints, event_items) -> np.ndarray:
    """Exact ``P(y in E | x)`` of every event on chains.

    One constrained forward pass per pattern (all patterns in one batched call), the
    disjoint patterns of each event summed in log space.

    Parameters
    ----------
    pred : StructuredPrediction
        On :class:`~structcal.ChainPotentials`.
    constraints : NodeSetConstraints
    event_items : ndarray of shape (n_events,)
        Item (chain) of each event; a pattern's nodes must lie in its event's item.

    Returns
    -------
    ndarray of shape (n_events,)
    """
    from ..inference.chain import constrained_log_partition

    if not isinstance(pred.potentials, ChainPotentials):
        raise ParameterTypeError("exact node-set probabilities need chain potentials")
    c = constraints
    if not isinstance(c, NodeSetConstraints):
        raise ParameterTypeError(f"`constraints` must be NodeSetConstraints; got {describe(c)}")
    event_items = as_int_array(event_items, "event_items", ndim=1, shape=(c.n_events,), low=0,
                               high=pred.n_items)
    if c.n_patterns == 0:
        return np.zeros(c.n_events)
    chains = event_items[c.event]
    per_constraint_chain = np.repeat(chains, np.diff(c.pattern_offsets))
    positions = c.node - pred.item_offsets[per_constraint_chain]
    outside = nodes_outside_items(c.node, per_constraint_chain, pred.item_offsets)
    if outside.any():
        i = int(np.argmax(outside))
        raise ParameterError(f"`constraints`: node {c.node[i]} is not in item "
                             f"{per_constraint_chain[i]} of its event (`event_items`)")
    logz = constrained_log_partition(
        pred.potentials, chains, c.pattern_offsets, positions, c.allowed
    )
    log_p = logz - pred.log_partition[chains]
    # sum the patterns of each event: exp after subtracting the event's largest term
    top = np.full(c.n_events, -np.inf)
    np.maximum.at(top, c.event, log_p)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(under="ignore"):
        terms = np.exp(log_p - shift[c.event])
    total = np.bincount(c.event, weights=terms, minlength=c.n_events)
    with np.errstate(divide="ignore", under="ignore"):
        out = np.exp(np.minimum(np.log(total) + shift, 0.0))
    return np.where(np.isfinite(top), out, 0.0)


def segment_reduce(values, offsets, op: str, *, empty: float = np.nan) -> np.ndarray:
    """Reduce a flat array over CSR segments: ``op(values[offsets[e]:offsets[e + 1]])``.

    Parameters
    ----------
    values : ndarray of shape (n,)
        Values laid end to end (e.g. ``member_values(events, per_node)``).
    offsets : ndarray of shape (n_segments + 1,)
        Integers from 0, non-decreasing, at most ``n`` (values past the last segment are
        not used).
    op : {'min', 'max', 'sum', 'mean', 'prod', 'size'}
    empty : float, default=nan
        Result for empty segments (``'sum'`` gives 0, ``'prod'`` 1, ``'size'`` 0).

    Returns
    -------
    ndarray of shape (n_segments,)
    """
    values = as_numeric(values, "values")  # NaN stays: a reduction of NaN is NaN
    if values.ndim != 1:
        raise ParameterError(f"`values` must be 1-d (laid end to end); got shape {values.shape}")
    # segments from 0, non-decreasing, within `values` (they may stop before its end)
    offsets = as_int_array(offsets, "offsets", ndim=1, low=0, high=values.shape[0] + 1)
    offsets = check_offsets(offsets, "offsets", int(offsets[-1]) if offsets.size else 0)
    values = values[: offsets[-1]]
    sizes = np.diff(offsets)
    n = sizes.shape[0]
    if op == "size":
        return sizes.astype(np.float64)
    if op in ("sum", "mean"):
        total = np.bincount(np.repeat(np.arange(n), sizes), weights=values, minlength=n)
        if op == "sum":
            return total
        return np.where(sizes > 0, total / np.maximum(sizes, 1), empty)
    if op == "prod":
        out = np.ones(n)
        nz = sizes > 0
        if nz.any():
            out[nz] = np.multiply.reduceat(values, offsets[:-1][nz])
        return out
    ufunc = {"min": np.minimum, "max": np.maximum}.get(op)
    if ufunc is None:
        raise ParameterError(
            f"`op` must be 'min', 'max', 'sum', 'mean', 'prod' or 'size'; got {op!r}"
        )
    out = np.full(n, empty, dtype=np.float64)
    nz = sizes > 0
    if nz.any():
        out[nz] = ufunc.reduceat(values, offsets[:-1][nz])
    return out


def member_values(events, per_node, labels: bool = False) -> np.ndarray:
    """Values of a per-node array at every member of every event, laid end to end.

    Parameters
    ----------
    events : EventInstances
        With ``members`` (and ``member_labels`` when ``labels`` is true).
    per_node : ndarray of shape (n_nodes,) or (n_nodes, n_states)
    labels : bool, default=False
        With a 2-d ``per_node``, take each member's column at its target label
        (e.g. marginals -> ``p(y_j = target_j | x)``).
    """
    if events.members is None:
        raise ParameterTypeError("these events do not cover node sets (no `members`)")
    per_node = np.asarray(per_node)
    if per_node.dtype.kind not in "biuf":
        raise ParameterTypeError(f"`per_node` must hold numbers; got {describe(per_node)}")
    if per_node.ndim not in (1, 2) or (labels and per_node.ndim != 2):
        raise ParameterError(f"`per_node` must be {'2' if labels else '1- or 2'}-d "
                             f"(one row per node{', one column per state' if labels else ''}); "
                             f"got shape {per_node.shape}")
    need = int(events.members.max()) + 1 if events.members.size else 0
    if per_node.shape[0] < need:
        raise ParameterError(f"`per_node` has {per_node.shape[0]} rows, but the events' members "
                             f"reach node {need - 1}: one row per node is needed")
    if labels:
        top = int(events.member_labels.max()) + 1 if events.member_labels.size else 0
        if per_node.shape[1] < top:
            raise ParameterError(f"`per_node` has {per_node.shape[1]} columns, but the members' "
                                 f"labels reach {top - 1}: one column per state is needed")
        return per_node[events.members, events.member_labels]
    return per_node[events.members]


def outer_boundary(members, member_offsets, indptr, indices) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours of each event's node set that are not in the set (each once).

    Parameters
    ----------
    members, member_offsets : ndarray
        The events' node sets.
    indptr, indices : ndarray
        CSR neighbour lists of every node (``StructuredPrediction.neighbors()``).

    Returns
    -------
    boundary : ndarray of int64
        Boundary nodes of the events laid end to end, sorted within each event.
    boundary_offsets : ndarray of shape (n_events + 1,)
    """
    from ._kernels import boundary

    indptr, indices = check_csr_graph(indptr, indices)
    n_nodes = indptr.shape[0] - 1
    members = as_int_array(members, "members", ndim=1, low=0, high=n_nodes)
    member_offsets = check_offsets(member_offsets, "member_offsets", members.shape[0])
    args = [members, member_offsets, indptr, indices]
    n_events = args[1].shape[0] - 1
    mark = np.full(max(args[2].shape[0] - 1, 0), -1, dtype=np.int64)
    counts = np.empty(n_events, dtype=np.int64)
    boundary(*args, mark, counts, np.empty(0, dtype=np.int64))
    out = np.empty(int(counts.sum()), dtype=np.int64)
    boundary(*args, mark, counts, out)
    return out, offsets_from_lengths(counts)


class NodeSetKind(EventKind):
    """Base class of event kinds whose events cover sets of nodes.

    A subclass implements :meth:`instances` (returning
    :class:`~structcal.events.EventInstances` with ``members``, ``member_offsets`` and
    ``member_labels``) and :meth:`constraints`; outcomes, ``I[MAP in E]`` and, on chains, the
    exact probability follow from the constraints. The default :meth:`constraints` is
    "the labels equal the target labels on exactly the members" (no boundary condition).

    Attributes
    ----------
    class_names : tuple of str or None
        Names of the event classes (``EventInstances.label``), used for the ``set_class``
        feature columns.
    """

    scope = "set"
    name = "node_set"
    class_names = None
    #: exact probabilities on chains; a subclass for graphs overrides probabilities()
    probability_structures = ("chain",)

    def constraints(self, pred, events) -> NodeSetConstraints:
        """Which labelings lie in each event (see :class:`NodeSetConstraints`)."""
        return exact_set_constraints(
            events.members, events.member_offsets, events.member_labels, pred.n_states
        )

    def outcomes(self, pred, events, y_true):
        """``I[y in E]`` of each event from the constraints."""
        return self.constraints(pred, events).satisfied(y_true)

    def map_in_event(self, pred, events):
        """``I[MAP in E]`` of each event from the constraints."""
        return self.constraints(pred, events).satisfied(pred.map_labels)

    def probabilities(self, pred, events):
        """Exact ``P(E | x)`` on chains (constrained forward passes)."""
        if not isinstance(pred.potentials, ChainPotentials):
            raise ParameterTypeError(
                f"{type(self).__name__} has an exact probability only on chains; override "
                "probabilities() for graphs"
            )
        return constraints_probability(pred, self.constraints(pred, events), events.item)
