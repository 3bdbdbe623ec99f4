"""Exact inference by enumerating every labeling (the tests' oracle, for tiny problems).

Works on any pairwise model given as ``(unary, edges, pairwise)``: ``unary`` (n_nodes, K),
``edges`` (n_edges, 2) and one ``(K, K)`` log-potential matrix per edge. Cost is
``K ** n_nodes``; :func:`enumerate_model` refuses more than ``max_labelings`` labelings.
:func:`exact_chain` and :func:`exact_graph` apply it to one problem of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .._validation import as_float_array, as_int_array, check_int
from ..exceptions import ParameterError
from ..potentials import ChainPotentials, GraphPotentials

__all__ = ["ExactResult", "enumerate_model", "exact_chain", "exact_graph"]


@dataclass(frozen=True)
class ExactResult:
    """Everything about a tiny model, by enumeration.

    Attributes
    ----------
    labelings : ndarray of shape (K ** n_nodes, n_nodes)
        Every labeling, sorted by decreasing score (ties in lexicographic order).
    scores : ndarray of shape (K ** n_nodes,)
        Their unnormalised log-scores.
    log_partition : float
        ``logsumexp(scores)`` (``-inf`` if every labeling is forbidden).
    marginals : ndarray of shape (n_nodes, K)
        Node marginals (NaN if the model is infeasible).
    edge_marginals : ndarray of shape (n_edges, K, K)
        Pairwise marginals of each edge (NaN if the model is infeasible).
    """

    labelings: np.ndarray
    scores: np.ndarray
    log_partition: float
    marginals: np.ndarray
    edge_marginals: np.ndarray

    @property
    def map_score(self) -> float:
        """Highest score."""
        return float(self.scores[0])

    def probability(self, mask: np.ndarray) -> float:
        """Total probability of the labelings selected by a boolean mask over ``labelings``."""
        if self.log_partition == -np.inf:
            return np.nan
        sel = self.scores[mask]
        return float(np.exp(logsumexp(sel) - self.log_partition)) if sel.size else 0.0


def enumerate_model(unary, edges, pairwise, *, max_labelings: int = 1 << 20) -> ExactResult:
    """Enumerate every labeling of a pairwise model.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, K)
        Unary log-potentials (``-inf`` allowed).
    edges : array-like of shape (n_edges, 2)
        Node pairs.
    pairwise : array-like of shape (n_edges, K, K)
        ``pairwise[e, a, b]`` scores node ``edges[e, 0]`` = a and ``edges[e, 1]`` = b.
    max_labelings : int, default=1048576
        Refuse problems with more labelings than this.

    Returns
    -------
    ExactResult
    """
    unary = as_float_array(unary, "unary", ndim=2, allow_neginf=True)
    n, K = unary.shape
    edges = as_int_array(edges, "edges", ndim=2, shape=(None, 2), low=0, high=max(n, 1))
    pairwise = as_float_array(
        pairwise, "pairwise", ndim=3, shape=(edges.shape[0], K, K), allow_neginf=True
    )
    check_int(max_labelings, "max_labelings", low=1)
    if K**n > max_labelings:
        raise ParameterError(f"{K}**{n} labelings exceed max_labelings={max_labelings}")
    # all labelings in lexicographic order
    labelings = np.indices((K,) * n).reshape(n, -1).T.astype(np.int64) if n else np.zeros((1, 0), np.int64)
    scores = np.zeros(labelings.shape[0])
    with np.errstate(invalid="ignore"):
        for i in range(n):
            scores = scores + unary[i, labelings[:, i]]
        for e, (i, j) in enumerate(edges):
            scores = scores + pairwise[e, labelings[:, i], labelings[:, j]]
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    labelings, scores = labelings[order], scores[order]
    logz = float(logsumexp(scores)) if scores.size else 0.0
    if logz == -np.inf:
        marg = np.full((n, K), np.nan)
        emarg = np.full((edges.shape[0], K, K), np.nan)
    else:
        prob = np.exp(scores - logz)
        marg = np.zeros((n, K))
        for i in range(n):
            np.add.at(marg[i], labelings[:, i], prob)
        emarg = np.zeros((edges.shape[0], K, K))
        for e, (i, j) in enumerate(edges):
            np.add.at(emarg[e], (labelings[:, i], labelings[:, j]), prob)
    return ExactResult(labelings, scores, logz, marg, emarg)


def exact_chain(potentials: ChainPotentials, chain: int, **kwargs) -> ExactResult:
    """Enumerate every labeling of one chain of a :class:`ChainPotentials` batch."""
    chain = check_int(chain, "chain", low=0, high=potentials.n_chains - 1)
    s, t = potentials.offsets[chain], potentials.offsets[chain + 1]
    L = t - s
    unary = potentials.unary[s:t]
    edges = np.stack([np.arange(L - 1), np.arange(1, L)], axis=1) if L > 1 else np.zeros((0, 2), np.int64)
    if potentials.shared_pairwise:
        pw = np.broadcast_to(potentials.pairwise, (edges.shape[0],) + potentials.pairwise.shape)
    else:
        e0, e1 = potentials.edge_offsets[chain], potentials.edge_offsets[chain + 1]
        pw = potentials.pairwise[e0:e1]
    return enumerate_model(unary, edges, pw, **kwargs)


def exact_graph(potentials: GraphPotentials, graph: int, **kwargs) -> ExactResult:
    """Enumerate every labeling of one graph of a :class:`GraphPotentials` batch.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    graph : int
        Index of the graph.
    **kwargs
        Passed to :func:`enumerate_model` (e.g. ``max_labelings``).

    Returns
    -------
    ExactResult
        Labelings use the graph's local node indices (``0 .. n_nodes_g - 1``); edge
        marginals follow the graph's edges in batch order.
    """
    if not isinstance(potentials, GraphPotentials):
        raise ParameterError(f"`potentials` must be a GraphPotentials; got {type(potentials).__name__}")
    graph = check_int(graph, "graph", low=0, high=potentials.n_graphs - 1)
    n0, n1 = potentials.offsets[graph], potentials.offsets[graph + 1]
    e0, e1 = potentials.edge_offsets[graph], potentials.edge_offsets[graph + 1]
    edges = potentials.edges[e0:e1] - n0
    pw = potentials.edge_matrices(np.arange(e0, e1))
    return enumerate_model(potentials.unary[n0:n1], edges, pw, **kwargs)
