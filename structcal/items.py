"""Flat results back to items, and per-node results onto networkx graphs.

Per-token/per-node arrays split per chain or graph, per-event values split per item,
per-node values written onto networkx graphs as attributes.

structcal returns results flat (one row per token, node or event of the whole batch) with
offsets saying where each item starts; these helpers undo that for display and export.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_offsets, describe
from .exceptions import ParameterError, ParameterTypeError

__all__ = ["split_items", "split_events", "to_networkx"]


def split_items(values, offsets):
    """Split a flat per-token (or per-node) array into one array per item.

    Parameters
    ----------
    values : array-like of shape (n_tokens, ...)
        One row per token or node of the batch, e.g. ``infer(p).marginals``.
    offsets : array-like of int, shape (n_items + 1,)
        Where each item starts (``potentials.offsets``).

    Returns
    -------
    list of ndarray
        ``values[offsets[i]:offsets[i + 1]]`` for each item (views, not copies).

    Examples
    --------
    >>> import numpy as np
    >>> [a.tolist() for a in split_items(np.arange(5), [0, 2, 2, 5])]
    [[0, 1], [], [2, 3, 4]]
    """
    values = np.asarray(values)
    if values.ndim == 0:
        raise ParameterError(f"`values` must have one row per token; got a scalar {values!r}")
    offsets = check_offsets(offsets, "offsets", values.shape[0])
    return [values[offsets[i]:offsets[i + 1]] for i in range(offsets.shape[0] - 1)]


def split_events(table, values, kind):
    """Split per-event values of one event kind into one array per item, by position.

    Parameters
    ----------
    table : EventTable
        The events (e.g. ``rec.predict(pred).table``).
    values : array-like of shape (n_events,)
        One value per event of ``table`` (e.g. calibrated probabilities).
    kind : str
        The event kind, e.g. ``"marginal"`` (one event per position: item ``i`` gets an
        array of its length) or ``"map"`` (one event per item: arrays of length 1).

    Returns
    -------
    list of ndarray
        For each item, the values of its events of ``kind`` ordered by position (events
        without a position keep their table order).
    """
    from .events import EventTable

    if not isinstance(table, EventTable):
        raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
    values = np.asarray(values)
    if values.shape[:1] != (table.n_events,):
        raise ParameterError(
            f"`values` must have one entry per event ({table.n_events}); got shape {values.shape}"
        )
    if kind not in table.kind_names:
        raise ParameterError(f"unknown event kind {kind!r}; the table has {list(table.kind_names)}")
    rows = np.flatnonzero(table.kind == table.kind_names.index(kind))
    order = np.lexsort((table.position[rows], table.item[rows]))
    rows = rows[order]
    counts = np.bincount(table.item[rows], minlength=table.n_items)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return split_items(values[rows], offsets)


def to_networkx(graphs, offsets, **node_values):
    """Write per-node results onto networkx graphs as node attributes.

    Parameters
    ----------
    graphs : sequence of networkx.Graph
        The graphs the potentials were built from
        (:meth:`GraphPotentials.from_networkx <structcal.GraphPotentials.from_networkx>`),
        in the same order; nodes are matched in ``G.nodes`` order.
    offsets : array-like of int, shape (n_graphs + 1,)
        Where each graph's nodes start (``potentials.offsets``).
    **node_values : array-like of shape (n_nodes, ...)
        Attribute name mapped to one row per node of the batch, e.g.
        ``marginals=mf.marginals, label=best.map_labels``.

    Returns
    -------
    list of networkx.Graph
        Copies of ``graphs`` with the attributes set (rows as Python scalars or arrays).
    """
    graphs = list(graphs)
    n_nodes = sum(g.number_of_nodes() for g in graphs)
    offsets = check_offsets(offsets, "offsets", n_nodes)
    if offsets.shape[0] - 1 != len(graphs):
        raise ParameterError(
            f"`offsets` describes {offsets.shape[0] - 1} graphs but {len(graphs)} were given"
        )
    out = [g.copy() for g in graphs]
    for name, values in node_values.items():
        values = np.asarray(values)
        if values.ndim == 0 or values.shape[0] != n_nodes:
            raise ParameterError(
                f"`{name}` must have one row per node ({n_nodes}); got shape {values.shape}"
            )
        parts = split_items(values, offsets)
        for g, part in zip(out, parts):
            if part.shape[0] != g.number_of_nodes():
                raise ParameterError(
                    f"graph with {g.number_of_nodes()} nodes has {part.shape[0]} rows of "
                    f"`{name}` between its offsets"
                )
            for node, row in zip(g.nodes, part):
                g.nodes[node][name] = row.item() if row.ndim == 0 else row
    return out
