"""Graph CRF with linear unary and edge-feature pairwise scores.

Trained by pseudo-likelihood or by approximate likelihood (mean field, Bethe).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp

from .. import exceptions, io
from .._estimator import ParamsMixin, check_fitted
from .._validation import (
    as_float_array,
    as_int_array,
    check_float,
    check_int,
    check_option,
    describe,
)
from ..datasets.graphs import GraphDataset
from ..exceptions import ParameterError, ParameterTypeError
from ..inference.graph import (
    belief_propagation,
    infer,
    map_inference,
    mean_field,
    score_labelings,
)
from ..potentials import GraphPotentials

__all__ = ["GraphCRF"]

_METHODS = ("pseudo_likelihood", "mean_field", "belief_propagation")
_PAIRWISE = ("full", "symmetric", "potts")
_MARGINALS = ("belief_propagation", "mean_field")


# ---------------------------------------------------------------------------- input


class _Graphs:
    """A validated batch of graphs.

    Stacked node features, global edges, edge features, and the structure (adjacency,
    forest flags, incidence matrices) built once.
    """

    def __init__(self, nodes, offsets, edges, edge_offsets, efeat, as_list):
        self.nodes = nodes
        self.offsets = offsets
        self.edges = edges
        self.edge_offsets = edge_offsets
        self.efeat = efeat
        self.as_list = as_list
        # one-hot edge features select one matrix per edge: keep them as edge types
        m, d = efeat.shape
        onehot = m > 0 and bool(
            np.all((efeat == 0) | (efeat == 1)) and np.all(efeat.sum(axis=1) == 1)
        )
        self.edge_type = np.ascontiguousarray(efeat.argmax(axis=1)) if onehot else None
        if m == 0:
            self.edge_type = np.zeros(0, np.int64)
        dummy = GraphPotentials(np.zeros((offsets[-1], 1)), offsets, edges, edge_offsets, potts=0.0)
        self.adjacency = dummy.adjacency
        self.is_forest = dummy.is_forest
        n = int(offsets[-1])
        ones = np.ones(m)
        # node-by-edge incidence of the first and second endpoints (for scatter-adds)
        self.S = sp.csr_matrix((ones, (edges[:, 0], np.arange(m))), shape=(n, m))
        self.T = sp.csr_matrix((ones, (edges[:, 1], np.arange(m))), shape=(n, m))

    @property
    def n_nodes(self):
        return int(self.offsets[-1])

    def potentials(self, unary, pairwise, potts_weights):
        """GraphPotentials with the batch's structure (no re-validation of the edges)."""
        if potts_weights is not None:
            w = self.efeat @ potts_weights if self.efeat.shape[0] else np.zeros(0)
            return GraphPotentials._trusted(
                unary,
                self.offsets,
                self.edges,
                self.edge_offsets,
                potts=w,
                adjacency=self.adjacency,
                is_forest=self.is_forest,
            )
        if self.edge_type is not None:
            pw = pairwise[0] if pairwise.shape[0] == 1 else pairwise
            et = None if pairwise.shape[0] == 1 else self.edge_type
            return GraphPotentials._trusted(
                unary,
                self.offsets,
                self.edges,
                self.edge_offsets,
                pw,
                edge_type=et,
                adjacency=self.adjacency,
                is_forest=self.is_forest,
            )
        pw = np.einsum("ef,fab->eab", self.efeat, pairwise)
        return GraphPotentials._trusted(
            unary,
            self.offsets,
            self.edges,
            self.edge_offsets,
            pw,
            adjacency=self.adjacency,
            is_forest=self.is_forest,
        )

    def split(self, values):
        return [values[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]


def _graphs_iv(X, name="X") -> _Graphs:
    """Validate ``X``: a GraphDataset, or a list of (node_features, edges[, edge_features])."""
    if isinstance(X, GraphDataset):
        nodes = X.node_features
        if sp.issparse(nodes):
            nodes = sp.csr_matrix(nodes, dtype=np.float64)
            if nodes.nnz and not np.isfinite(nodes.data).all():
                raise ParameterError(f"`{name}.node_features` must be finite")
        else:
            nodes = as_float_array(nodes, f"{name}.node_features", ndim=2)
        n = nodes.shape[0]
        offsets = np.asarray(X.offsets, dtype=np.int64)
        if offsets[-1] != n:
            raise ParameterError(f"`{name}.offsets` must end at the number of nodes ({n})")
        edges = as_int_array(X.edges, f"{name}.edges", ndim=2, shape=(None, 2))
        efeat = as_float_array(
            X.edge_features, f"{name}.edge_features", ndim=2, shape=(edges.shape[0], None)
        )
        _check_structure(edges, offsets, np.asarray(X.edge_offsets, dtype=np.int64), name)
        return _Graphs(
            nodes, offsets, edges, np.asarray(X.edge_offsets, dtype=np.int64), efeat, False
        )
    if isinstance(X, np.ndarray) or sp.issparse(X):
        # a plain 2-d array: every row is a graph of one node (multinomial logistic regression)
        if sp.issparse(X):
            nodes = sp.csr_matrix(X, dtype=np.float64)
            if nodes.nnz and not np.isfinite(nodes.data).all():
                raise ParameterError(f"`{name}` must be finite")
        else:
            nodes = as_float_array(X, name, ndim=2)
        n = nodes.shape[0]
        return _Graphs(
            nodes,
            np.arange(n + 1, dtype=np.int64),
            np.zeros((0, 2), np.int64),
            np.zeros(n + 1, dtype=np.int64),
            np.zeros((0, 1)),
            False,
        )
    if not isinstance(X, (list, tuple)):
        raise ParameterTypeError(
            f"`{name}` must be a list of (node_features, edges[, edge_features]) tuples or a "
            f"GraphDataset; got {describe(X)}"
        )
    if len(X) == 0:
        raise ParameterError(f"`{name}` must hold at least one graph; got an empty list")
    blocks, edge_parts, feat_parts, sizes, counts = [], [], [], [], []
    d = d_e = None
    sparse = False
    for g, item in enumerate(X):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ParameterTypeError(
                f"`{name}[{g}]` must be a (node_features, edges) or (node_features, edges, "
                f"edge_features) tuple; got {describe(item)}"
            )
        feats = item[0]
        if sp.issparse(feats):
            feats = sp.csr_matrix(feats, dtype=np.float64)
            if feats.ndim != 2:
                raise ParameterError(f"node features of `{name}[{g}]` must be 2-d")
            if feats.nnz and not np.isfinite(feats.data).all():
                raise ParameterError(f"node features of `{name}[{g}]` must be finite")
            sparse = True
        else:
            feats = as_float_array(feats, f"node features of {name}[{g}]", ndim=2)
        if d is None:
            d = feats.shape[1]
        elif feats.shape[1] != d:
            raise ParameterError(
                f"every graph must have the same number of node features; `{name}[0]` has {d} "
                f"and `{name}[{g}]` has {feats.shape[1]}"
            )
        n_g = feats.shape[0]
        e = np.asarray(item[1]) if not isinstance(item[1], np.ndarray) else item[1]
        if e.size == 0:
            e = np.zeros((0, 2), np.int64)
        e = as_int_array(
            e, f"edges of {name}[{g}]", ndim=2, shape=(None, 2), low=0, high=max(n_g, 1)
        )
        if n_g == 0 and e.shape[0]:
            raise ParameterError(f"edges of `{name}[{g}]` must be empty: the graph has no nodes")
        if len(item) == 3 and item[2] is not None:
            f = as_float_array(
                item[2], f"edge features of {name}[{g}]", ndim=2, shape=(e.shape[0], None)
            )
        else:
            f = np.ones((e.shape[0], 1))
        if d_e is None:
            d_e = f.shape[1]
        elif f.shape[1] != d_e:
            raise ParameterError(
                f"every graph must have the same number of edge features; `{name}[0]` has {d_e} "
                f"and `{name}[{g}]` has {f.shape[1]}"
            )
        blocks.append(feats)
        edge_parts.append(e)
        feat_parts.append(f)
        sizes.append(n_g)
        counts.append(e.shape[0])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    edge_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    shift = np.repeat(offsets[:-1], counts)
    edges = (np.concatenate(edge_parts) + shift[:, None]).astype(np.int64).reshape(-1, 2)
    nodes = sp.vstack(blocks, format="csr") if sparse else np.concatenate(blocks)
    if sparse:
        nodes = sp.csr_matrix(nodes, dtype=np.float64)
    efeat = np.ascontiguousarray(np.concatenate(feat_parts), dtype=np.float64).reshape(-1, d_e)
    _check_structure(edges, offsets, edge_offsets, name)
    return _Graphs(nodes, offsets, edges, edge_offsets, efeat, True)


def _check_structure(edges, offsets, edge_offsets, name):
    """Self-loops and duplicate edges, reported with the graph and its local indices."""
    if edges.shape[0] == 0:
        return
    graph_of_edge = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(edge_offsets))
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if loops.size:
        e = int(loops[0])
        g = int(graph_of_edge[e])
        k = e - int(edge_offsets[g])
        raise ParameterError(
            f"edges of `{name}[{g}]` must not contain self-loops; edge {k} joins node "
            f"{edges[e, 0] - offsets[g]} to itself"
        )
    key = np.sort(edges, axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    dup = (key[order][1:] == key[order][:-1]).all(axis=1)
    if dup.any():
        i = int(np.argmax(dup))
        a, b = sorted((int(order[i]), int(order[i + 1])))
        g = int(graph_of_edge[a])
        raise ParameterError(
            f"edges of `{name}[{g}]` must not list an edge twice (in either orientation); edges "
            f"{a - edge_offsets[g]} and {b - edge_offsets[g]} join nodes "
            f"{sorted((edges[a] - offsets[g]).tolist())}"
        )


def _labels_iv(y, graphs: _Graphs, n_states=None, name="y") -> np.ndarray:
    n = graphs.n_nodes
    high = n_states if n_states is not None else None
    if isinstance(y, (list, tuple)) and (len(y) == 0 or not np.isscalar(y[0])):
        G = graphs.offsets.shape[0] - 1
        if len(y) != G:
            raise ParameterError(f"`{name}` must hold one labeling per graph ({G}); got {len(y)}")
        parts = []
        for g, lab in enumerate(y):
            lab = np.asarray(lab)
            if lab.size == 0:
                lab = lab.astype(np.int64).reshape(0)
            lab = as_int_array(lab, f"{name}[{g}]", ndim=1, low=0, high=high)
            want = int(graphs.offsets[g + 1] - graphs.offsets[g])
            if lab.shape[0] != want:
                raise ParameterError(
                    f"`{name}[{g}]` must have one label per node ({want}); got {lab.shape[0]}"
                )
            parts.append(lab)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    lab = as_int_array(y, name, ndim=1, low=0, high=high)
    if lab.shape[0] != n:
        raise ParameterError(
            f"`{name}` must have one label per node ({n}); got length {lab.shape[0]}"
        )
    return lab


# ---------------------------------------------------------------------------- parameters


class _Layout:
    """Flat parameter vector ``theta = [coef (K*d), intercept (K), pairwise]``."""

    def __init__(self, K, d, d_e, pairwise):
        self.K, self.d, self.d_e, self.pairwise = K, d, d_e, pairwise
        if pairwise == "potts":
            self.n_pw = d_e
        elif pairwise == "symmetric":
            self.iu = np.triu_indices(K)
            self.n_pw = d_e * self.iu[0].shape[0]
        else:
            self.n_pw = d_e * K * K
        self.size = K * d + K + self.n_pw

    def unpack(self, theta):
        K, d = self.K, self.d
        W = theta[: K * d].reshape(K, d)
        b = theta[K * d : K * d + K]
        rest = theta[K * d + K :]
        if self.pairwise == "potts":
            return W, b, None, rest
        if self.pairwise == "symmetric":
            P = np.zeros((self.d_e, K, K))
            vals = rest.reshape(self.d_e, -1)
            P[:, self.iu[0], self.iu[1]] = vals
            P[:, self.iu[1], self.iu[0]] = vals
            return W, b, P, None
        return W, b, rest.reshape(self.d_e, K, K), None

    def pack_pairwise_grad(self, G):
        """Gradient w.r.t. the pairwise parameters from the gradient w.r.t. full matrices."""
        if self.pairwise == "symmetric":
            S = G + G.transpose(0, 2, 1)
            diag = np.arange(self.K)
            S[:, diag, diag] = G[:, diag, diag]
            return S[:, self.iu[0], self.iu[1]].ravel()
        return G.ravel()


def _onehot(labels, K):
    m = labels.shape[0]
    return sp.csr_matrix((np.ones(m), (np.arange(m), labels)), shape=(m, K))


def _pl_logits(graphs: _Graphs, unary, P, w, labels):
    """Conditional logits ``unary[i] + sum_j psi_ij(., y_j)`` from the parameters.

    Costs ``O(n_edges n_edge_features K)``, no per-edge matrix): the same numbers as
    :func:`structcal.inference.graph.pseudo_marginals` computes from potentials.
    """
    F = graphs.efeat
    ys = labels[graphs.edges[:, 0]]
    yt = labels[graphs.edges[:, 1]]
    logits = unary.copy()
    if w is not None:
        we = F @ w
        K = unary.shape[1]
        logits += graphs.S @ _onehot(yt, K).multiply(we[:, None]).toarray()
        logits += graphs.T @ _onehot(ys, K).multiply(we[:, None]).toarray()
        return logits
    to_s = np.einsum("ef,fae->ea", F, P[:, :, yt])  # psi_e(., y_t) seen from s
    to_t = np.einsum("ef,feb->eb", F, P[:, ys, :])  # psi_e(y_s, .) seen from t
    logits += graphs.S @ to_s
    logits += graphs.T @ to_t
    return logits


def _pl_pairwise_grad(graphs: _Graphs, layout: _Layout, labels, R):
    """Gradient of the pseudo-likelihood w.r.t. the pairwise parameters.

    Given the residuals ``R = softmax(logits) - onehot(y)``: edge ``e = (s, t)`` adds ``R[s]`` to
    column ``y_t`` and ``R[t]`` to row ``y_s`` of its matrix, weighted by ``f_e``.
    """
    F = graphs.efeat
    m, d_e = F.shape
    K = layout.K
    ys = labels[graphs.edges[:, 0]]
    yt = labels[graphs.edges[:, 1]]
    Rs = graphs.S.T @ R
    Rt = graphs.T.T @ R
    if layout.pairwise == "potts":
        g = Rs[np.arange(m), yt] + Rt[np.arange(m), ys]
        return F.T @ g
    Zs = (F[:, :, None] * Rs[:, None, :]).reshape(m, d_e * K)
    Zt = (F[:, :, None] * Rt[:, None, :]).reshape(m, d_e * K)
    G = np.asarray(_onehot(yt, K).T @ Zs).reshape(K, d_e, K).transpose(1, 2, 0)  # [f, a, c]
    G += np.asarray(_onehot(ys, K).T @ Zt).reshape(K, d_e, K).transpose(1, 0, 2)  # [f, c, b]
    return layout.pack_pairwise_grad(G)


# ---------------------------------------------------------------------------- the model


@io.register(format_version=1)
class GraphCRF(io.SaveLoadMixin, ParamsMixin):
    r"""Pairwise graph CRF with linear unary scores and edge-feature pairwise scores.

    The score of a labeling ``y`` of a graph with node features ``x_i`` and edge features
    ``f_e`` is

    .. math::

        s(x, y) = \sum_i \big(\langle w_{y_i}, x_i\rangle + b_{y_i}\big)
                  + \sum_{e = (s, t)} \sum_k f_{e,k}\, P_k[y_s, y_t]

    and ``p(y | x) = exp(s(x, y)) / Z(x)``. With the default edge features (a constant
    1) every edge shares one matrix ``P_0``; one-hot edge features give one matrix per
    edge *type* (e.g. horizontal/vertical, or each pair of labels in a multi-label
    problem); real-valued ones, such as a colour contrast, modulate the matrices per edge.

    Parameters
    ----------
    method : {'pseudo_likelihood', 'mean_field', 'belief_propagation'}, default='pseudo_likelihood'
        Training objective, each minimised with L-BFGS (scipy) plus ``alpha/2
        ||theta||^2`` (intercepts not penalised), averaged over graphs:
        ``'pseudo_likelihood'``: ``-sum_i log p(y_i | y_N(i), x)`` (Besag), a convex
        objective with an exact gradient and no inference; ``'mean_field'``: the
        approximate negative log-likelihood ``log Z_MF(x) - s(x, y)`` with the mean-field
        lower bound of ``log Z`` and its gradient at the mean-field fixed point;
        ``'belief_propagation'``: the same with the Bethe approximation (exact on trees
        and forests). Caveats: the mean-field bound under-estimates ``log Z`` most for
        strong couplings, so ``'mean_field'`` training can inflate them (regularise);
        pseudo-likelihood sees the true neighbour labels during training and can learn
        couplings too strong for prediction when the unary features are weak.
    pairwise : {'full', 'symmetric', 'potts'}, default='full'
        Form of each ``P_k``: any matrix (edges are oriented: ``P[a, b]`` scores the
        first endpoint labelled ``a``), a symmetric matrix (for undirected graphs), or
        ``P_k = w_k I`` (Potts: a bonus ``sum_k w_k f_{e,k}`` when both ends agree).
    alpha : float, default=1e-3
        L2 regularisation strength (> 0).
    n_states : int, optional
        Number of labels; labels must be in ``[0, n_states)``. By default ``1 + max(y)``.
    max_iter : int, default=500
        L-BFGS iterations; a :class:`ConvergenceWarning` is raised when reached before
        ``tol``.
    tol : float, default=1e-5
        Stop when the largest gradient entry falls below ``tol``.
    inference_max_iter : int, default=50
        Sweeps of mean field or loopy BP per objective evaluation (approximate
        likelihood training) and for :meth:`predict_proba`.
    marginals : {'belief_propagation', 'mean_field'}, default='belief_propagation'
        Inference used by :meth:`predict_proba`.
    verbose : int, default=0
        Print the objective every ``verbose`` iterations (0: silent).

    Attributes
    ----------
    coef_ : ndarray of shape (n_states, n_features)
        Unary weights.
    intercept_ : ndarray of shape (n_states,)
    pairwise_coef_ : ndarray of shape (n_edge_features, n_states, n_states) or (n_edge_features,)
        The matrices ``P_k`` (or the Potts weights ``w_k``).
    n_states_ : int
    classes_ : ndarray of shape (n_states,)
        ``arange(n_states_)``: labels are state indices.
    n_features_in_ : int
        Number of node features.
    n_edge_features_ : int
        Number of edge features.
    n_iter_ : int
        L-BFGS iterations run.
    converged_ : bool
        Whether ``tol`` was met.
    objective_ : float
        Final training objective.
    fit_time_ : float
        Seconds spent in :meth:`fit`.

    Notes
    -----
    ``X`` is a list of ``(node_features, edges)`` or ``(node_features, edges,
    edge_features)`` tuples -- node features of shape (n_nodes_g, n_features) (dense or
    scipy.sparse), edges of shape (n_edges_g, 2) with local node indices, edge features
    of shape (n_edges_g, n_edge_features) -- or a
    :class:`~structcal.datasets.GraphDataset` (flat arrays), or a 2-d array in which
    every row is a graph of one node (the model is then a multinomial logistic
    regression). Outputs follow the input: a list in, a list of per-graph arrays out; a
    GraphDataset or an array in, flat arrays out.
    Predictions use :func:`~structcal.inference.graph.map_inference` (TRW-S + ICM, exact
    on forests).

    References
    ----------
    J. Besag, *Statistical analysis of non-lattice data*, The Statistician 24(3), 1975
    (pseudo-likelihood).
    J. Lafferty, A. McCallum, F. Pereira, *Conditional random fields*, ICML 2001.
    M. J. Wainwright, *Estimating the "wrong" graphical model: benefits in the
    computation-limited setting*, JMLR 7, 2006 (training with approximate inference).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.crf import GraphCRF
    >>> X = [(np.array([[1.0, 0.0], [0.0, 1.0], [0.2, 0.1]]), np.array([[0, 1], [1, 2]]))]
    >>> y = [np.array([0, 1, 1])]
    >>> crf = GraphCRF(pairwise="potts", alpha=0.1).fit(X, y)
    >>> [p.tolist() for p in crf.predict(X)]
    [[0, 1, 1]]
    """

    def __init__(
        self,
        *,
        method="pseudo_likelihood",
        pairwise="full",
        alpha=1e-3,
        n_states=None,
        max_iter=500,
        tol=1e-5,
        inference_max_iter=50,
        marginals="belief_propagation",
        verbose=0,
    ):
        self.method = method
        self.pairwise = pairwise
        self.alpha = alpha
        self.n_states = n_states
        self.max_iter = max_iter
        self.tol = tol
        self.inference_max_iter = inference_max_iter
        self.marginals = marginals
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # node features may be scipy.sparse
        return tags

    # ------------------------------------------------------------------ validation

    def _params_iv(self):
        method = check_option(self.method, "method", _METHODS)
        pairwise = check_option(self.pairwise, "pairwise", _PAIRWISE)
        alpha = check_float(self.alpha, "alpha", low=0.0, low_inclusive=False)
        n_states = None if self.n_states is None else check_int(self.n_states, "n_states", low=1)
        max_iter = check_int(self.max_iter, "max_iter", low=1)
        tol = check_float(self.tol, "tol", low=0.0)
        check_int(self.inference_max_iter, "inference_max_iter", low=1)
        check_option(self.marginals, "marginals", _MARGINALS)
        verbose = check_int(self.verbose, "verbose", low=0)
        return method, pairwise, alpha, n_states, max_iter, tol, verbose

    def _graphs(self, X) -> _Graphs:
        check_fitted(self, "coef_")
        graphs = _graphs_iv(X)
        if graphs.nodes.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"X has {graphs.nodes.shape[1]} features, but GraphCRF is expecting "
                f"{self.n_features_in_} features as input (node features, as in fit)"
            )
        if graphs.efeat.shape[1] != self.n_edge_features_:
            raise ParameterError(
                f"`X` must have {self.n_edge_features_} edge features (as in fit); got "
                f"{graphs.efeat.shape[1]}"
            )
        return graphs

    # ------------------------------------------------------------------ fit

    def fit(self, X, y=None):
        """Fit the model to labelled graphs.

        Parameters
        ----------
        X : list of tuple, GraphDataset, or array-like of shape (n_graphs, n_features)
            The graphs (see Notes of the class).
        y : list of array-like of shape (n_nodes_g,), or array-like of shape (n_nodes,)
            Integer labels in ``[0, n_states)``. Optional when ``X`` is a GraphDataset
            (its ``labels`` are used).

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        method, pairwise, alpha, n_states, max_iter, tol, verbose = self._params_iv()
        graphs = _graphs_iv(X)
        if y is None:
            if not isinstance(X, GraphDataset):
                raise ParameterError("`y` is required unless `X` is a GraphDataset")
            y = X.labels
        labels = _labels_iv(y, graphs, n_states)
        if graphs.n_nodes == 0:
            raise ParameterError("`X` must hold at least one node; every graph is empty")
        if graphs.nodes.shape[1] == 0:
            raise ParameterError("`X` must have at least one node feature; got 0")
        K = n_states if n_states is not None else int(labels.max()) + 1
        layout = _Layout(K, graphs.nodes.shape[1], graphs.efeat.shape[1], pairwise)
        n_graphs = graphs.offsets.shape[0] - 1
        penalised = np.ones(layout.size)
        penalised[K * layout.d : K * layout.d + K] = 0.0
        Y = _onehot(labels, K).toarray()
        state = {"it": 0, "unconverged": 0}

        def objective(theta):
            W, b, P, w = layout.unpack(theta)
            unary = graphs.nodes @ W.T + b
            unary = np.ascontiguousarray(unary, dtype=np.float64)
            if method == "pseudo_likelihood":
                logits = _pl_logits(graphs, unary, P, w, labels)
                lse = logsumexp(logits, axis=1)
                loss = float(np.sum(lse - logits[np.arange(labels.shape[0]), labels]))
                R = np.exp(logits - lse[:, None]) - Y
                g_pw = _pl_pairwise_grad(graphs, layout, labels, R)
            else:
                p = graphs.potentials(unary, P, w)
                if method == "mean_field":
                    r = mean_field(
                        p,
                        max_iter=self.inference_max_iter,
                        edge_marginals=True,
                        log_partition=True,
                        warn=False,
                    )
                else:
                    r = belief_propagation(
                        p,
                        max_iter=self.inference_max_iter,
                        edge_marginals=True,
                        log_partition=True,
                        warn=False,
                    )
                state["unconverged"] = int(np.count_nonzero(~r.converged))
                ys, yt = labels[graphs.edges[:, 0]], labels[graphs.edges[:, 1]]
                loss = float(np.sum(r.log_partition) - np.sum(score_labelings(p, labels)))
                R = r.marginals - Y
                Gm = r.edge_marginals.copy()
                Gm[np.arange(ys.shape[0]), ys, yt] -= 1.0
                if layout.pairwise == "potts":
                    g_pw = graphs.efeat.T @ np.trace(Gm, axis1=1, axis2=2)
                else:
                    g_pw = layout.pack_pairwise_grad(np.einsum("ef,eab->fab", graphs.efeat, Gm))
            gW = np.asarray((graphs.nodes.T @ R)).T
            grad = np.concatenate([gW.ravel(), R.sum(axis=0), g_pw]) / n_graphs
            reg = penalised * theta
            return loss / n_graphs + 0.5 * alpha * float(reg @ theta), grad + alpha * reg

        def callback(intermediate_result):
            state["it"] += 1
            if verbose and state["it"] % verbose == 0:
                print(f"GraphCRF iteration {state['it']}: objective {intermediate_result.fun:.6g}")

        res = minimize(
            objective,
            np.zeros(layout.size),
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": max_iter, "gtol": tol, "ftol": 1e3 * np.finfo(float).eps},
        )
        converged = bool(res.success)
        if res.nit >= max_iter and not converged:
            warnings.warn(
                f"GraphCRF training stopped at max_iter={max_iter} before the gradient fell "
                f"below tol={tol}; increase max_iter",
                exceptions.ConvergenceWarning,  # scikit-learn's class: imported when warning
                stacklevel=2,
            )
        if state["unconverged"]:
            warnings.warn(
                f"{method.replace('_', ' ')} did not converge within inference_max_iter="
                f"{self.inference_max_iter} on {state['unconverged']} training graph(s) at the "
                "last objective evaluation",
                exceptions.ConvergenceWarning,  # scikit-learn's class: imported when warning
                stacklevel=2,
            )
        W, b, P, w = layout.unpack(res.x)
        self.coef_ = np.ascontiguousarray(W)
        self.intercept_ = b.copy()
        self.pairwise_coef_ = w.copy() if pairwise == "potts" else np.ascontiguousarray(P)
        self.n_states_ = K
        self.classes_ = np.arange(K)
        self.n_features_in_ = graphs.nodes.shape[1]
        self.n_edge_features_ = graphs.efeat.shape[1]
        self.n_iter_ = int(res.nit)
        self.converged_ = converged
        self.objective_ = float(res.fun)
        self.fit_time_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------------ prediction

    def _potentials(self, graphs: _Graphs) -> GraphPotentials:
        unary = np.ascontiguousarray(
            graphs.nodes @ self.coef_.T + self.intercept_, dtype=np.float64
        )
        if self.pairwise == "potts":
            return graphs.potentials(unary, None, self.pairwise_coef_)
        return graphs.potentials(unary, self.pairwise_coef_, None)

    def potentials(self, X) -> GraphPotentials:
        """Graph potentials of the given graphs (the input to every inference routine).

        Parameters
        ----------
        X : list of tuple, or GraphDataset
            The graphs.

        Returns
        -------
        GraphPotentials
            Unary ``(n_nodes, n_states)`` and pairwise potentials: shared or one matrix
            per edge type when the edge features are one-hot, Potts weights for
            ``pairwise='potts'``, one matrix per edge otherwise.
        """
        return self._potentials(self._graphs(X))

    def predict(self, X):
        """Approximate MAP labeling of each graph (TRW-S + ICM; exact on forests).

        Parameters
        ----------
        X : list of tuple, or GraphDataset

        Returns
        -------
        list of ndarray of shape (n_nodes_g,), or ndarray of shape (n_nodes,)
            Same layout as ``X``.
        """
        graphs = self._graphs(X)
        labels = map_inference(
            self._potentials(graphs), max_iter=self.inference_max_iter, warn=False
        ).map_labels
        return graphs.split(labels) if graphs.as_list else labels

    def predict_proba(self, X):
        """Node marginals ``p(y_i = k | x)`` (by ``marginals``; exact on forests with BP).

        Parameters
        ----------
        X : list of tuple, or GraphDataset

        Returns
        -------
        list of ndarray of shape (n_nodes_g, n_states), or ndarray of shape (n_nodes, n_states)
            Rows sum to one. Same layout as ``X``.
        """
        graphs = self._graphs(X)
        p = self._potentials(graphs)
        if self.marginals == "mean_field":
            marg = mean_field(p, max_iter=self.inference_max_iter).marginals
        else:
            marg = belief_propagation(p, max_iter=self.inference_max_iter).marginals
        return graphs.split(marg) if graphs.as_list else marg

    predict_marginals = predict_proba

    def score(self, X, y=None):
        """Per-node (Hamming) accuracy of :meth:`predict`.

        Parameters
        ----------
        X : list of tuple, or GraphDataset
        y : list of array-like, or array-like of shape (n_nodes,)
            True labels (optional for a GraphDataset).

        Returns
        -------
        float
        """
        graphs = self._graphs(X)
        if y is None:
            if not isinstance(X, GraphDataset):
                raise ParameterError("`y` is required unless `X` is a GraphDataset")
            y = X.labels
        labels = _labels_iv(y, graphs, self.n_states_)
        if labels.size == 0:
            raise ParameterError("`X` must hold at least one node to score; got none")
        pred = map_inference(
            self._potentials(graphs), max_iter=self.inference_max_iter, warn=False
        ).map_labels
        return float(np.mean(pred == labels))

    def infer(self, X, **kwargs):
        """Run :func:`structcal.inference.graph.infer` on the potentials of ``X``.

        Parameters
        ----------
        X : list of tuple, or GraphDataset
        **kwargs
            Passed to :func:`~structcal.inference.graph.infer`.

        Returns
        -------
        GraphInference
        """
        return infer(self.potentials(X), **kwargs)

    # ------------------------------------------------------------------ persistence

    def _to_state(self):
        check_fitted(self, "coef_")
        fitted = {
            "n_states_": self.n_states_,
            "n_features_in_": self.n_features_in_,
            "n_edge_features_": self.n_edge_features_,
            "n_iter_": self.n_iter_,
            "converged_": self.converged_,
            "objective_": self.objective_,
            "fit_time_": self.fit_time_,
        }
        arrays = {
            "coef": self.coef_,
            "intercept": self.intercept_,
            "pairwise_coef": self.pairwise_coef_,
        }
        return {"params": self.get_params(deep=False), "fitted": fitted}, arrays

    @classmethod
    def _from_state(cls, state, arrays):
        try:
            self = cls(**state["params"])
            self._params_iv()
            fitted = state["fitted"]
            K = int(fitted["n_states_"])
            self.n_states_ = K
            self.classes_ = np.arange(K)
            self.n_features_in_ = int(fitted["n_features_in_"])
            self.n_edge_features_ = int(fitted["n_edge_features_"])
            self.n_iter_ = int(fitted["n_iter_"])
            self.converged_ = bool(fitted["converged_"])
            self.objective_ = float(fitted["objective_"])
            self.fit_time_ = float(fitted["fit_time_"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise ParameterError(f"malformed GraphCRF manifest: {exc!r}") from None
        d, d_e = self.n_features_in_, self.n_edge_features_
        shapes = {
            "coef": (K, d),
            "intercept": (K,),
            "pairwise_coef": (d_e,) if self.pairwise == "potts" else (d_e, K, K),
        }
        for key, shape in shapes.items():
            arr = arrays.get(key)
            if arr is None or arr.shape != shape or not np.issubdtype(arr.dtype, np.floating):
                raise ParameterError(
                    f"saved array {key!r} must be a float array of shape {shape}; got "
                    f"{None if arr is None else describe(arr)}"
                )
            if not np.isfinite(arr).all():
                raise ParameterError(f"saved array {key!r} contains NaN or inf")
        self.coef_ = np.ascontiguousarray(arrays["coef"], dtype=np.float64)
        self.intercept_ = np.asarray(arrays["intercept"], dtype=np.float64)
        self.pairwise_coef_ = np.ascontiguousarray(arrays["pairwise_coef"], dtype=np.float64)
        return self
