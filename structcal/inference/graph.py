"""Inference on batches of pairwise graph CRFs (exact on forests, approximate on loops).

Every function takes a :class:`~structcal.potentials.GraphPotentials` and runs one Numba
kernel over all graphs in parallel (``prange`` over graphs; each graph is processed
serially, so results do not depend on the number of threads). The API mirrors
:mod:`structcal.inference.chain`: :func:`infer` returns a :class:`GraphInference` with
``map_labels`` (n_nodes,), ``map_score`` (n_graphs,) and ``marginals`` (n_nodes, K), and
:func:`score_labelings`, :func:`pseudo_marginals` take the same arguments as their chain
counterparts.

Which routine is exact
----------------------
On trees and forests (``potentials.is_forest``) belief propagation runs the exact
two-pass schedule: sum-product gives the exact marginals and log-partition, max-product
the exact MAP labeling. On graphs with cycles loopy BP, mean field and max-product + ICM
are approximations (see each function's Notes).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import (
    as_float_array,
    as_int_array,
    check_float,
    check_int,
    check_option,
    check_random_state,
    describe,
)
from .. import exceptions
from ..exceptions import InfeasibleError, ParameterError, ParameterTypeError
from ..potentials import GraphPotentials
from ..potentials.chain import _readonly
from .._tier import LazyModule, current

# the Numba kernels, imported on first use
_graph = LazyModule("structcal.inference._graph")
_grid = LazyModule("structcal.inference._grid")
_chain = LazyModule("structcal.inference._chain")

__all__ = [
    "GraphInference",
    "SecondBest",
    "infer",
    "mean_field",
    "belief_propagation",
    "max_product",
    "map_inference",
    "icm",
    "score_labelings",
    "pseudo_marginals",
    "second_best",
    "gibbs_sample",
]


def _steps(p, iterations=1):
    """``steps=`` of the graph drivers: nodes and edges x labels x labels x iterations,
    what a run in Python costs (:meth:`structcal._numba.BatchKernel._interpreted_tier`)."""
    return (p.n_nodes + p.n_edges) * p.n_states * p.n_states * iterations


def _helper(kernel, driver, steps, *args):
    """Call ``kernel`` (a plain kernel a routine calls besides its batch driver), or its
    Python copy where the driver would run as Python for ``steps`` steps (so that a
    small first run compiles neither)."""
    if driver._interpreted_tier(steps):
        from .. import _interpreted

        return _interpreted.run(kernel, args)
    return kernel(*args)


def _grid_kernel(grid_driver, general_driver, steps):
    """Whether a two-dimensional grid runs its pixel-grid driver rather than the general one.

    The grid drivers make the general drivers' operations in the same order (mean field and
    TRW-S bit for bit, BP to rounding; ``tests/test_grid.py``). Small work that the general
    driver would run as Python source (nothing compiled) does so unless the grid driver is
    compiled: a small image compiles nothing on a first run.
    """
    if not general_driver._interpreted_tier(steps):
        return True
    return current() == "auto" and grid_driver.compiled()


def _rented_sweeps(driver, general_driver, p, max_iter):
    """Sweeps of an iterative method to run as the general driver's Python source before
    ``driver`` (compiled) continues from their state; 0 to run it one way throughout.

    Rent-or-buy over iterations: where ``max_iter`` sweeps are too much work to run as
    Python but the sweeps that fit the interpreter's time limit are not, and ``driver`` is
    compiled nowhere, those sweeps run as Python first. A method that converges within
    them (most runs of mean field) compiles nothing; one that does not pays the rent on
    top of the compilation, at most :data:`structcal._numba.INTERPRET_MAX_SECONDS`.
    """
    if general_driver._interpreted_tier(_steps(p, max_iter)) or driver.compiled():
        return 0
    from .._numba import INTERPRET_MAX_SECONDS, INTERPRET_SECONDS_PER_STEP

    sweeps = min(int(INTERPRET_MAX_SECONDS / (INTERPRET_SECONDS_PER_STEP * max(_steps(p), 1))),
                 max_iter - 1)
    if sweeps < 1 or not general_driver._interpreted_tier(_steps(p, sweeps)):
        return 0
    return sweeps


def _runs(mask):
    """``[(start, stop), ...]`` of the runs of true entries of a boolean vector."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _scaled_exponentials(pw):
    """``(E, colmax)`` of :func:`structcal.inference._chain.scaled_exponentials`, without
    compiling: the NumPy tier's tables (:func:`structcal.inference._chain_numpy._scaled_matrix`)
    with the kernels' exponential, interpreted, so the same values bit for bit."""
    from .. import _interpreted, _numba
    from ._chain_numpy import _scaled_matrix

    n, K = pw.shape[0], pw.shape[2]
    exp = np.vectorize(_interpreted.interpreted(_numba.exp_nonpositive), otypes=[np.float64])
    E, colmax = np.zeros((n, K, K)), np.zeros((n, K))
    with np.errstate(all="ignore"):
        for m in range(n):
            E[m], colmax[m], _ = _scaled_matrix(pw[m], exp)
    return E, colmax


def _batch_work(p):
    """``work=`` of the graph drivers (``prange`` over graphs): 0 for one graph, which
    runs on the calling thread whatever its size, else ``n_nodes * K * K`` (the serial
    copy below :data:`structcal._numba.PARALLEL_MIN_WORK`; see ``BatchKernel``)."""
    return 0 if p.n_graphs < 2 else p.n_nodes * p.n_states * p.n_states


@dataclass(frozen=True)
class GraphInference:
    """MAP labeling and/or (approximate) marginals of a batch of graphs.

    Fields that were not computed are ``None``.

    Attributes
    ----------
    map_labels : ndarray of shape (n_nodes,), dtype int64, or None
        A high-scoring labeling of each graph, laid end to end (exact MAP on forests).
    map_score : ndarray of shape (n_graphs,) or None
        Unnormalised log-score of ``map_labels`` (0 for a graph without nodes).
    marginals : ndarray of shape (n_nodes, n_states) or None
        Node marginals ``p(y_i = a | x)`` (exact on forests with belief propagation,
        approximate otherwise); rows sum to one.
    edge_marginals : ndarray of shape (n_edges, n_states, n_states) or None
        Pairwise marginals ``p(y_s = a, y_t = b | x)`` of each edge ``(s, t)``: BP's
        pairwise beliefs, or ``q_s q_t^T`` for mean field.
    log_partition : ndarray of shape (n_graphs,) or None
        Estimate of ``log sum_y exp(score(y))``: the Bethe free energy for BP (exact on
        forests), the evidence lower bound for mean field (a lower bound).
    n_iter : ndarray of shape (n_graphs,), dtype int64, or None
        Iterations (sweeps) used by the iterative routine.
    converged : ndarray of shape (n_graphs,), dtype bool, or None
        Whether each graph met the tolerance within ``max_iter`` (always true on forests
        with BP).
    delta : ndarray of shape (n_graphs,) or None
        The last sweep's largest change (the stopping criterion).
    method : str
        The routine that produced the result.
    """

    map_labels: np.ndarray | None
    map_score: np.ndarray | None
    marginals: np.ndarray | None
    edge_marginals: np.ndarray | None = None
    log_partition: np.ndarray | None = None
    n_iter: np.ndarray | None = None
    converged: np.ndarray | None = None
    delta: np.ndarray | None = None
    method: str = ""


@dataclass(frozen=True)
class SecondBest:
    """The best single-node change of a labeling of each graph (an approximate 2nd best).

    Attributes
    ----------
    labels : ndarray of shape (n_nodes,), dtype int64
        The labeling of each graph with one node changed (unchanged where no change
        exists).
    score : ndarray of shape (n_graphs,)
        Its unnormalised log-score (``-inf`` when no other feasible labeling is reachable
        by one change, e.g. one-state problems or graphs without nodes).
    node : ndarray of shape (n_graphs,), dtype int64
        Global index of the changed node (-1 if none).
    label : ndarray of shape (n_graphs,), dtype int64
        Its new label (-1 if none).
    margin : ndarray of shape (n_graphs,)
        ``map_score - score``: the MAP margin (``inf`` where no change exists). Never
        negative when the labeling is a local optimum such as ICM's output.
    """

    labels: np.ndarray
    score: np.ndarray
    node: np.ndarray
    label: np.ndarray
    margin: np.ndarray


# ---------------------------------------------------------------------------- boundary


def _check_potentials(potentials) -> GraphPotentials:
    if not isinstance(potentials, GraphPotentials):
        raise ParameterTypeError(
            f"`potentials` must be a GraphPotentials; got {describe(potentials)}"
        )
    return potentials


def _labels_iv(p: GraphPotentials, labels, name="labels") -> np.ndarray:
    """Accept a flat (n_nodes,) integer array or a list of per-graph integer arrays."""
    if isinstance(labels, (list, tuple)) and (len(labels) == 0 or not np.isscalar(labels[0])):
        if len(labels) != p.n_graphs:
            raise ParameterError(
                f"`{name}` must hold one labeling per graph ({p.n_graphs}); got {len(labels)}"
            )
        parts = []
        for g, (lab, n) in enumerate(zip(labels, p.sizes)):
            lab = np.asarray(lab)
            if lab.size == 0:
                lab = lab.astype(np.int64).reshape(0)
            lab = as_int_array(lab, f"{name}[{g}]", ndim=1, low=0, high=p.n_states)
            if lab.shape[0] != n:
                raise ParameterError(
                    f"`{name}[{g}]` must have the graph's {n} nodes; got {lab.shape[0]}"
                )
            parts.append(lab)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    labels = as_int_array(labels, name, ndim=1, low=0, high=p.n_states)
    if not labels.flags.writeable:  # one array type for the kernels (see _kernel_args)
        labels = labels.copy()
    if labels.shape[0] != p.n_nodes:
        raise ParameterError(
            f"`{name}` must have one label per node (n_nodes={p.n_nodes}); got length "
            f"{labels.shape[0]}"
        )
    return labels


def _structure(p: GraphPotentials):
    a = p.adjacency
    return a.indptr, a.neighbors, a.edge_id, a.reversed, a.twin


def _colour_order(p: GraphPotentials) -> np.ndarray:
    """Visiting order of the checkerboard schedule (cached on ``p``).

    Graph by graph, the nodes of greedy colour 0 in index order, then colour 1, ...
    """
    if "colour_order" not in p._derived:
        colour = np.empty(p.n_nodes, dtype=np.int64)
        _helper(_graph.greedy_colours, _graph.gibbs_batch, _steps(p), p.n_nodes,
                p.adjacency.indptr, p.adjacency.neighbors, colour)
        order = np.lexsort((colour, p.graph_index)).astype(np.int64)  # stable: index order
        order.flags.writeable = False
        p._derived["colour_order"] = order
    return p._derived["colour_order"]


def _grid_planes(p: GraphPotentials):
    """``(starts, U, W, M, bad)``: the potentials of a grid batch with finite Potts weights
    in the layout of the grid mean-field kernel (computed once, cached on ``p``)."""
    if "grid_planes" not in p._derived:
        sizes = np.empty(p.n_graphs, dtype=np.int64)
        _grid.plane_sizes(p.grid.shapes, sizes)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        P, K, Dh = int(starts[-1]), p.n_states, p.grid.connectivity // 2
        U, W, M = np.empty(K * P), np.empty(Dh * P), np.empty(P)
        bad = np.empty(p.n_graphs, dtype=np.int64)
        _grid.grid_planes_batch(p.offsets, p.edge_offsets, p.grid.shapes, p.grid.connectivity,
                                p.unary, p.potts, starts, U, W, M, bad, work=p.n_nodes)
        for x in (starts, U, W, M, bad):
            x.flags.writeable = False
        p._derived["grid_planes"] = (starts, U, W, M, bad)
    return p._derived["grid_planes"]


def _iter_iv(damping, tol, max_iter):
    damping = check_float(damping, "damping", low=0.0, high=1.0, high_inclusive=False)
    tol = check_float(tol, "tol", low=0.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    return damping, tol, max_iter


def _warn_unconverged(converged, method, max_iter):
    bad = np.flatnonzero(~converged)
    if bad.size:
        warnings.warn(
            f"{method} did not converge within max_iter={max_iter} on {bad.size} graph(s) "
            f"(first: {bad[:5].tolist()}); increase max_iter or damping, or loosen tol",
            exceptions.ConvergenceWarning,  # scikit-learn's class: imported only when warning
            stacklevel=3,
        )


def _raise_forbidden_unary(nodes):
    if nodes.size:
        raise InfeasibleError(
            f"node {int(nodes[0])} has every label forbidden (its unary is all -inf)"
        )


def _raise_infeasible(status, what):
    bad = np.flatnonzero(status == _graph.STATUS_INFEASIBLE)
    if bad.size:
        raise InfeasibleError(
            f"graph(s) {bad[:10].tolist()}{'...' if bad.size > 10 else ''}: {what}"
        )


# ---------------------------------------------------------------------------- scores


def score_labelings(potentials: GraphPotentials, labels) -> np.ndarray:
    """Unnormalised log-score of one labeling per graph.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    labels : array-like of shape (n_nodes,), or list of array-like
        The labelings, laid end to end or one array per graph.

    Returns
    -------
    ndarray of shape (n_graphs,)
        ``-inf`` where a labeling uses a forbidden label or pair.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import score_labelings
    >>> p = GraphPotentials.from_list([[[1.0, 0.0], [0.0, 2.0]]], [[(0, 1)]], potts=0.5)
    >>> score_labelings(p, [1, 1]).tolist(), score_labelings(p, [0, 1]).tolist()
    ([2.5], [3.0])
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels)
    kind, pw, _, emat, potts = p._kernel_args()
    out = np.empty(p.n_graphs)
    _graph.score_batch(
        p.offsets, p.edge_offsets, p.unary, p.edges, kind, pw, emat, potts, labels, out,
        work=_batch_work(p), steps=_steps(p),
    )
    return out


def _conditional_logits(p: GraphPotentials, labels: np.ndarray) -> np.ndarray:
    """``unary[i, a] + sum_j psi_ij(a, labels[j])`` for every node (labels validated)."""
    kind, pw, pwT, emat, potts = p._kernel_args()
    out = np.empty((p.n_nodes, p.n_states))
    _graph.conditional_logits_batch(
        p.offsets, p.unary, kind, pw, pwT, emat, potts, *_structure(p)[:4], labels, out,
        work=_batch_work(p), steps=_steps(p),
    )
    return out


def pseudo_marginals(potentials: GraphPotentials, labels) -> np.ndarray:
    """Pseudo-marginals ``p(y_j = a | y_N(j) = labels_N(j), x)`` around a given labeling.

    Each node's conditional distribution when its neighbours are clamped to ``labels``
    (e.g. the MAP labeling): a softmax of its unary plus the pairwise scores towards the
    clamped neighbours. Needs no marginal inference.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    labels : array-like of shape (n_nodes,), or list of array-like
        The labeling to condition on.

    Returns
    -------
    ndarray of shape (n_nodes, n_states)
        Rows sum to one.

    Raises
    ------
    InfeasibleError
        If at some node every label is forbidden given the clamped neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import pseudo_marginals
    >>> p = GraphPotentials.from_list([np.zeros((3, 2))], [[(0, 1), (0, 2)]], potts=np.log(3.0))
    >>> pseudo_marginals(p, [0, 0, 1]).round(3).tolist()
    [[0.5, 0.5], [0.75, 0.25], [0.75, 0.25]]
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels)
    # read-only, as mean field passes unary: the flag is part of Numba's array type, and a
    # writable array would compile softmax_rows a second time
    logits = _readonly(_conditional_logits(p, labels))
    out = np.empty_like(logits)
    _helper(_graph.softmax_rows, _graph.conditional_logits_batch, _steps(p), logits, out)
    bad = np.flatnonzero(np.isnan(out[:, 0]))
    if bad.size:
        raise InfeasibleError(
            f"pseudo-marginals are undefined at node {int(bad[0])}: every label is forbidden "
            "given the clamped neighbours in `labels`"
        )
    return out


def second_best(potentials: GraphPotentials, labels, map_score=None) -> SecondBest:
    """Approximate second-best labeling: the best single-node change of ``labels``.

    For the MAP-margin feature (φmp3 of Kuleshov & Liang 2015) on graphs, where the exact
    second-best labeling is as hard as MAP itself. Every labeling differing from
    ``labels`` at one node is scored in ``O(degree)`` from the conditional logits, so the
    cost is that of :func:`pseudo_marginals`.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    labels : array-like of shape (n_nodes,), or list of array-like
        The (approximate) MAP labeling.
    map_score : array-like of shape (n_graphs,), optional
        Scores of ``labels`` if already known (computed otherwise).

    Returns
    -------
    SecondBest

    Notes
    -----
    The exact second-best labeling of a pairwise model may differ from the MAP at
    several nodes (e.g. a whole region flipping together when couplings are strong), so
    the margin reported here is an *upper bound* on the true margin to the best labeling
    other than ``labels``. When ``labels`` is a local optimum (ICM output, or the exact
    MAP) the margin is non-negative.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import second_best
    >>> p = GraphPotentials.from_list([[[2.0, 0.0], [0.0, 1.0]]], [[(0, 1)]], potts=0.0)
    >>> r = second_best(p, [0, 1])
    >>> r.labels.tolist(), r.score.tolist(), r.margin.tolist()
    ([0, 0], [2.0], [1.0])
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels)
    if map_score is None:
        map_score = score_labelings(p, labels)
    else:
        map_score = as_float_array(
            map_score, "map_score", ndim=1, shape=(p.n_graphs,), allow_neginf=True
        )
    kind, pw, pwT, emat, potts = p._kernel_args()
    node = np.empty(p.n_graphs, dtype=np.int64)
    label = np.empty(p.n_graphs, dtype=np.int64)
    score = np.empty(p.n_graphs)
    _graph.second_best_batch(
        p.offsets,
        p.unary,
        kind,
        pw,
        pwT,
        emat,
        potts,
        *_structure(p)[:4],
        labels,
        map_score,
        node,
        label,
        score,
        work=_batch_work(p),
        steps=_steps(p, p.n_states),
    )
    out = labels.copy()
    has = node >= 0
    out[node[has]] = label[has]
    with np.errstate(invalid="ignore"):
        margin = np.where(has, map_score - score, np.inf)
    return SecondBest(labels=out, score=score, node=node, label=label, margin=margin)


# ---------------------------------------------------------------------------- mean field


def mean_field(
    potentials: GraphPotentials,
    *,
    schedule: str = "auto",
    damping: float = 0.0,
    tol: float = 1e-6,
    max_iter: int = 200,
    init=None,
    edge_marginals: bool = False,
    log_partition: bool = False,
    warn: bool = True,
) -> GraphInference:
    """Naive mean-field marginals of every graph.

    Finds a fully factorised ``q(y) = prod_i q_i(y_i)`` at a stationary point of the
    evidence lower bound ``E_q[score] + H(q)`` by the fixed-point updates
    ``q_i ∝ exp(unary_i + sum_j E_{q_j}[psi_ij(., y_j)])``.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    schedule : {"auto", "sequential", "checkerboard", "synchronous"}, default="auto"
        ``"sequential"`` updates one node at a time in index order, each seeing its
        neighbours' latest ``q`` (coordinate ascent: the bound never decreases when
        ``damping == 0``). ``"checkerboard"`` is the same coordinate ascent in another
        order: one colour class after the other of the greedy colouring of the graph (each
        node takes the smallest colour none of its lower-numbered neighbours has), nodes
        of a class in index order; on pixel grids the classes are those of a checkerboard
        (4-connected) or of 2 x 2 blocks (8-connected). Nodes of one class are never
        neighbours, so on grids built by :meth:`GraphPotentials.from_grid` a whole class
        is updated at once, vectorised over pixels, with the same result.
        ``"synchronous"`` updates every node from the previous sweep's ``q`` (parallel
        updates, which can oscillate: use damping, e.g. 0.5). ``"auto"``:
        ``"checkerboard"`` for batches built by :meth:`GraphPotentials.from_grid`,
        ``"sequential"`` otherwise.
    damping : float, default=0.0
        ``q_i <- (1 - damping) * update + damping * q_i``; in ``[0, 1)``.
    tol : float, default=1e-6
        Stop when a sweep's largest ``|update - q_i|`` is at most ``tol`` (``tol=0`` runs
        ``max_iter`` sweeps unless an exact fixed point is reached).
    max_iter : int, default=200
        Maximum number of sweeps.
    init : array-like of shape (n_nodes, n_states), optional
        Initial distributions (rows are normalised). By default ``softmax(unary)``.
    edge_marginals : bool, default=False
        Also return ``q_s q_t^T`` for every edge.
    log_partition : bool, default=False
        Also return the evidence lower bound at the final ``q`` (a lower bound on the
        log-partition).
    warn : bool, default=True
        Emit a :class:`~structcal.exceptions.ConvergenceWarning` if some graph did not
        converge.

    Returns
    -------
    GraphInference
        With ``marginals``, ``n_iter``, ``converged``, ``delta`` (and the optional fields).

    Raises
    ------
    InfeasibleError
        If some node has every label forbidden under its neighbours' distributions.

    Notes
    -----
    The cost of a sweep is ``O(n_edges K^2)`` with one matrix per edge (or per edge
    type), ``O(n_nodes K^2 + n_edges K)`` with one shared matrix (each node's
    distribution is projected through the matrix once per sweep) and ``O(n_edges K)``
    for Potts potentials. Mean field is exact without pairwise potentials and otherwise
    tends to be over-confident.

    Grids built by :meth:`GraphPotentials.from_grid` with finite Potts weights run the
    ``"checkerboard"`` and ``"synchronous"`` schedules in a kernel that knows the grid
    (:mod:`structcal.inference._grid`): neighbours by index arithmetic, label planes
    laid out so that a colour class of a row is contiguous, 4 pixels per vector
    operation. It computes the same numbers as the general kernel, bit for bit
    (``tests/test_grid.py``); ``benchmarks/bench_grid.py`` compares its speed with
    pydensecrf2's ``DenseCRF2D``.

    References
    ----------
    M. J. Wainwright and M. I. Jordan, *Graphical Models, Exponential Families, and
    Variational Inference*, Found. Trends Mach. Learn. 1(1-2), 2008, section 5.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import mean_field
    >>> p = GraphPotentials.from_list([np.log([[0.8, 0.2], [0.5, 0.5]])], [[(0, 1)]], potts=0.0)
    >>> r = mean_field(p)
    >>> r.marginals.round(3).tolist(), r.converged.tolist()
    ([[0.8, 0.2], [0.5, 0.5]], [True])
    """
    p = _check_potentials(potentials)
    schedule = check_option(
        schedule, "schedule", ("auto", "sequential", "checkerboard", "synchronous")
    )
    if schedule == "auto":
        schedule = "checkerboard" if p.grid is not None else "sequential"
    damping, tol, max_iter = _iter_iv(damping, tol, max_iter)
    K = p.n_states
    kind, pw, pwT, emat, potts = p._kernel_args()
    # no -inf pairwise entry: the kernels may skip the 0 * -inf guards
    finite = bool(not np.isneginf(potts if kind == _graph.KIND_POTTS else pw).any())
    on_grid = (
        p.grid is not None and kind == _graph.KIND_POTTS and finite and schedule != "sequential"
        and _grid_kernel(_grid.mean_field_grid_batch, _graph.mean_field_batch,
                         _steps(p, max_iter))
    )
    # sweeps rented as Python source before a compiled driver takes over (0: none)
    rented = _rented_sweeps(
        _grid.mean_field_grid_batch if on_grid else _graph.mean_field_batch,
        _graph.mean_field_batch, p, max_iter,
    )
    first = rented or max_iter
    grid_later = on_grid  # the driver that continues after rented sweeps
    if rented:  # the rented sweeps run the general driver's source
        on_grid = False
    if init is None:
        q = np.empty((p.n_nodes, K))
        if not on_grid:  # (the grid kernel starts from softmax(unary) itself)
            _helper(_graph.softmax_rows, _graph.mean_field_batch, _steps(p, first), p.unary,
                    q)
            _raise_forbidden_unary(np.flatnonzero(np.isnan(q[:, 0])))
    else:
        q = as_float_array(init, "init", ndim=2, shape=(p.n_nodes, K)).copy()
        if (q < 0).any():
            raise ParameterError("`init` must hold non-negative weights")
        if p.n_nodes and (q.sum(axis=1) <= 0).any():
            i = int(np.flatnonzero(q.sum(axis=1) <= 0)[0])
            raise ParameterError(f"`init` row {i} has no positive weight")
        if p.n_nodes:
            q /= q.sum(axis=1, keepdims=True)
        q = np.ascontiguousarray(q)
    n_iter = np.zeros(p.n_graphs, dtype=np.int64)
    delta = np.zeros(p.n_graphs)
    status = np.zeros(p.n_graphs, dtype=np.int64)
    shared = kind == _graph.KIND_MATRIX and pw.shape[0] == 1
    PF = np.empty((p.n_nodes if shared else 0, K))
    PR = np.empty_like(PF)
    order = _colour_order(p) if schedule == "checkerboard" else np.arange(p.n_nodes)
    qnew = np.empty_like(q) if schedule == "synchronous" else np.empty((0, K))

    def sweep(graphs, iterations, grid, started, steps):
        """``iterations`` sweeps of the graphs ``graphs`` (a slice) from ``q``."""
        offsets = p.offsets[graphs.start : graphs.stop + 1]
        if grid:  # (with finite weights only a node whose unary is all -inf is infeasible)
            starts, U, W, M, bad = _grid_planes(p)
            _raise_forbidden_unary(bad[bad >= 0])
            _grid.mean_field_grid_batch(
                offsets, p.grid.shapes[graphs], p.grid.connectivity,
                starts[graphs.start : graphs.stop + 1], U, W, M, schedule == "checkerboard",
                damping, tol, iterations, started, q, n_iter[graphs], delta[graphs],
                work=(offsets[-1] - offsets[0]) * iterations,
            )
            return
        _graph.mean_field_batch(
            offsets, finite, p.unary, kind, pw, pwT, emat, potts, *_structure(p)[:4], order,
            schedule != "synchronous", damping, tol, iterations, q, qnew, PF, PR,
            n_iter[graphs], delta[graphs], status[graphs], work=_batch_work(p), steps=steps,
        )

    sweep(slice(0, p.n_graphs), first, on_grid, init is not None, _steps(p, first))
    if rented:  # the graphs still moving continue in the compiled driver, from their q
        todo = (status == _graph.STATUS_OK) & (delta > tol) & (n_iter == first)
        for g0, g1 in _runs(todo):
            sweep(slice(g0, g1), max_iter - first, grid_later, True, None)
        n_iter[todo] += first
    _raise_infeasible(
        status,
        "a node has every label forbidden under mean field (hard "
        "constraints that mean field cannot represent)",
    )
    elbo = np.zeros(p.n_graphs)
    if log_partition:
        _graph.mean_field_elbo_batch(
            p.offsets, finite, p.unary, kind, pw, pwT, emat, potts, *_structure(p)[:4], q, PF,
            PR, elbo, work=p.n_nodes, steps=_steps(p),
        )
    converged = delta <= tol
    if warn:
        _warn_unconverged(converged, f"mean field ({schedule})", max_iter)
    emarg = None
    if edge_marginals:
        emarg = q[p.edges[:, 0], :, None] * q[p.edges[:, 1], None, :]
    return GraphInference(
        map_labels=None,
        map_score=None,
        marginals=q,
        edge_marginals=emarg,
        log_partition=elbo if log_partition else None,
        n_iter=n_iter,
        converged=converged,
        delta=delta,
        method=f"mean_field_{schedule}",
    )


# ---------------------------------------------------------------------------- belief propagation


def _run_bp(p, mode, damping, tol, max_iter, do_edge):
    kind, pw, pwT, emat, potts = p._kernel_args()
    K = p.n_states
    if (mode == _graph.MODE_SUM and p.grid is not None and kind == _graph.KIND_POTTS and K == 2
            and not p.is_forest.any()
            and _grid_kernel(_grid.bp2_grid_batch, _graph.bp_batch, _steps(p, max_iter))):
        return _run_bp_grid(p, damping, tol, max_iter, do_edge)
    if mode == _graph.MODE_SUM and kind == _graph.KIND_MATRIX:
        if _graph.bp_batch._interpreted_tier(_steps(p, max_iter)):  # compile nothing
            (EF, cF), (ER, cR) = _scaled_exponentials(pwT), _scaled_exponentials(pw)
        else:
            EF, _, cF, _ = _chain.scaled_exponentials(pwT)
            ER, _, cR, _ = _chain.scaled_exponentials(pw)
    else:
        EF = ER = np.empty((0, K, K))
        cF = cR = np.empty((0, K))
    # read-only, as TRW-S passes _msg_matrix its tables (one specialisation for both)
    EF, cF, ER, cR = (_readonly(a) for a in (EF, cF, ER, cR))
    n, m, G = p.n_nodes, p.n_edges, p.n_graphs
    msg = np.empty((2 * m, K))
    belief = np.empty((n, K))
    order = np.empty(n, dtype=np.int64)
    parent_slot = np.empty(n, dtype=np.int64)
    labels = np.zeros(n, dtype=np.int64)
    marg = np.empty((n, K)) if mode == _graph.MODE_SUM else np.empty((0, K))
    emarg = np.empty((m, K, K)) if do_edge else np.empty((0, K, K))
    n_iter = np.zeros(G, dtype=np.int64)
    delta = np.zeros(G)
    status = np.zeros(G, dtype=np.int64)
    logz = np.zeros(G)
    scores = np.zeros(G)
    indptr, nbr, eid, rev, twin = _structure(p)
    _graph.bp_batch(
        mode,
        p.offsets,
        p.edge_offsets,
        np.ascontiguousarray(p.is_forest),
        p.unary,
        p.edges,
        kind,
        pw,
        pwT,
        emat,
        potts,
        indptr,
        nbr,
        eid,
        rev,
        twin,
        EF,
        cF,
        ER,
        cR,
        damping,
        tol,
        max_iter,
        bool(do_edge),
        msg,
        belief,
        order,
        parent_slot,
        labels,
        marg,
        emarg,
        n_iter,
        delta,
        status,
        logz,
        scores,
        work=_batch_work(p),
        steps=_steps(p, max_iter),
    )
    converged = np.asarray(p.is_forest, dtype=bool) | (delta <= tol)
    return labels, scores, marg, emarg, logz, n_iter, converged, delta, status


def _run_bp_grid(p, damping, tol, max_iter, do_edge):
    """Loopy sum-product BP on two-label Potts grids (``_grid.bp2_grid_batch``)."""
    kind, pw, _, emat, potts = p._kernel_args()
    n, m, G = p.n_nodes, p.n_edges, p.n_graphs
    marg = np.empty((n, 2))
    emarg = np.empty((m, 2, 2)) if do_edge else np.empty((0, 2, 2))
    n_iter = np.zeros(G, dtype=np.int64)
    delta = np.zeros(G)
    status = np.zeros(G, dtype=np.int64)
    logz = np.zeros(G)
    _grid.bp2_grid_batch(
        p.offsets, p.edge_offsets, p.grid.shapes, p.grid.connectivity, p.unary, p.edges, kind,
        pw, emat, potts, p.adjacency.indptr, p.adjacency.neighbors, damping, tol, max_iter,
        bool(do_edge), marg, emarg, n_iter, delta, status, logz,
        np.empty((n if do_edge else 0, 2)), np.zeros((2 * m if do_edge else 0, 2)),
        work=n * max_iter,
    )
    converged = delta <= tol
    labels = np.zeros(n, dtype=np.int64)
    return labels, np.zeros(G), marg, emarg, logz, n_iter, converged, delta, status


def belief_propagation(
    potentials: GraphPotentials,
    *,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    edge_marginals: bool = False,
    log_partition: bool = False,
    warn: bool = True,
) -> GraphInference:
    """Sum-product belief propagation: exact marginals on forests, loopy BP otherwise.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    damping : float, default=0.5
        Loopy schedule only: each new log-message is ``(1 - damping) * new + damping *
        old``; in ``[0, 1)``.
    tol : float, default=1e-6
        Loopy schedule only: stop when a sweep changes no log-message entry by more than
        ``tol``.
    max_iter : int, default=100
        Loopy schedule only: maximum number of sweeps (each sends every message once).
    edge_marginals : bool, default=False
        Also return the pairwise beliefs of every edge.
    log_partition : bool, default=False
        Also return the Bethe approximation of the log-partition (exact on forests).
        Needs the pairwise beliefs, so it costs as much as ``edge_marginals``.
    warn : bool, default=True
        Emit a :class:`~structcal.exceptions.ConvergenceWarning` if some loopy graph did
        not converge.

    Returns
    -------
    GraphInference
        With ``marginals``, ``n_iter``, ``converged``, ``delta`` (and the optional fields).

    Raises
    ------
    InfeasibleError
        If some node ends with every label forbidden.

    Notes
    -----
    Graphs that are trees or forests (``potentials.is_forest``) use the exact two-pass
    schedule (leaves to roots, then back), whatever ``damping``, ``tol`` and ``max_iter``.
    Other graphs use a sequential schedule: nodes are visited in index order and each
    sends all its messages from its current belief. Messages are log-space, normalised to
    a maximum of zero, and computed in probability space with pre-scaled exponentials
    (with an exact log-space fallback per entry when potentials span hundreds of nats), so
    a sweep costs ``O(n_edges K^2)`` multiply-adds plus ``O(n_edges K)`` ``exp``/``log``
    calls (``O(n_edges K)`` in all for Potts potentials).

    References
    ----------
    - J. Pearl, *Probabilistic Reasoning in Intelligent Systems*, Morgan Kaufmann, 1988.
    - K. P. Murphy, Y. Weiss and M. I. Jordan, *Loopy belief propagation for approximate
      inference: an empirical study*, UAI 1999 (damping).
    - J. S. Yedidia, W. T. Freeman and Y. Weiss, *Constructing free-energy approximations
      and generalized belief propagation algorithms*, IEEE Trans. Inf. Theory 51(7), 2005.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import belief_propagation
    >>> p = GraphPotentials.from_list(
    ...     [np.log([[3.0, 1.0], [1.0, 1.0]])], [[(0, 1)]], potts=np.log(2.0))
    >>> r = belief_propagation(p, log_partition=True)
    >>> r.marginals.round(4).tolist(), round(float(np.exp(r.log_partition[0])), 9)
    ([[0.75, 0.25], [0.5833, 0.4167]], 12.0)
    """
    p = _check_potentials(potentials)
    damping, tol, max_iter = _iter_iv(damping, tol, max_iter)
    do_edge = bool(edge_marginals or log_partition)
    _, _, marg, emarg, logz, n_iter, converged, delta, status = _run_bp(
        p, _graph.MODE_SUM, damping, tol, max_iter, do_edge
    )
    _raise_infeasible(status, "a node has every label forbidden after belief propagation")
    if warn:
        _warn_unconverged(converged, "loopy belief propagation", max_iter)
    return GraphInference(
        map_labels=None,
        map_score=None,
        marginals=marg,
        edge_marginals=emarg if edge_marginals else None,
        log_partition=logz if log_partition else None,
        n_iter=n_iter,
        converged=converged,
        delta=delta,
        method="belief_propagation",
    )


_TRWS_PATIENCE = 10


def _run_trws(p, tol, max_iter):
    kind, pw, pwT, emat, potts = p._kernel_args()
    K, n, m, G = p.n_states, p.n_nodes, p.n_edges, p.n_graphs
    if (p.grid is not None and kind == _graph.KIND_POTTS and K == 2
            and _grid_kernel(_grid.trws2_grid_batch, _graph.trws_batch, _steps(p, max_iter))):
        labels = np.zeros(n, dtype=np.int64)
        best = np.zeros(n, dtype=np.int64)
        n_iter = np.zeros(G, dtype=np.int64)
        delta = np.zeros(G)
        _grid.trws2_grid_batch(
            p.offsets, p.edge_offsets, p.grid.shapes, p.grid.connectivity, p.unary, p.edges,
            kind, pw, emat, potts, tol, max_iter, _TRWS_PATIENCE, labels, best, n_iter, delta,
            np.zeros(G), work=n * max_iter,
        )
        return best, n_iter, delta
    msg = np.empty((2 * m, K))
    belief = np.empty((n, K))
    labels = np.zeros(n, dtype=np.int64)
    best = np.zeros(n, dtype=np.int64)
    n_iter = np.zeros(G, dtype=np.int64)
    delta = np.zeros(G)
    scores = np.zeros(G)
    indptr, nbr, eid, rev, twin = _structure(p)
    _graph.trws_batch(
        p.offsets,
        p.edge_offsets,
        p.unary,
        p.edges,
        kind,
        pw,
        pwT,
        emat,
        potts,
        indptr,
        nbr,
        eid,
        rev,
        twin,
        tol,
        max_iter,
        _TRWS_PATIENCE,
        msg,
        belief,
        labels,
        best,
        n_iter,
        delta,
        scores,
        work=_batch_work(p),
        steps=_steps(p, max_iter),
    )
    return best, n_iter, delta


def max_product(
    potentials: GraphPotentials,
    *,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    warn: bool = True,
) -> GraphInference:
    """Max-product belief propagation and decoding: exact MAP on forests.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    damping : float, default=0.5
        Loopy schedule only: log-message damping in ``[0, 1)``.
    tol : float, default=1e-6
        Loopy schedule only: stop when no log-message entry changes by more than ``tol``.
    max_iter : int, default=100
        Loopy schedule only: maximum number of sweeps.
    warn : bool, default=True
        Emit a :class:`~structcal.exceptions.ConvergenceWarning` if some loopy graph did
        not converge.

    Returns
    -------
    GraphInference
        With ``map_labels``, ``map_score``, ``n_iter``, ``converged``, ``delta``.

    Notes
    -----
    Labels are decoded in breadth-first order: each node takes the label maximising its
    unary, the pairwise scores towards neighbours already decoded and the messages of
    the others. On a forest this is exact backtracking (ties included); on graphs with
    cycles the result is a heuristic, usually improved by :func:`icm` (see
    :func:`map_inference`).

    References
    ----------
    Y. Weiss and W. T. Freeman, *On the optimality of solutions of the max-product
    belief-propagation algorithm in arbitrary graphs*, IEEE Trans. Inf. Theory 47(2),
    2001.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import max_product
    >>> p = GraphPotentials.from_list(
    ...     [[[1.0, 0.0], [0.0, 0.5], [0.0, 0.0]]], [[(0, 1), (1, 2)]], potts=1.0)
    >>> r = max_product(p)
    >>> r.map_labels.tolist(), r.map_score.tolist()
    ([0, 0, 0], [3.0])
    """
    p = _check_potentials(potentials)
    damping, tol, max_iter = _iter_iv(damping, tol, max_iter)
    labels, scores, _, _, _, n_iter, converged, delta, status = _run_bp(
        p, _graph.MODE_MAX, damping, tol, max_iter, False
    )
    _raise_infeasible(status, "no feasible label at some node after max-product decoding")
    if warn:
        _warn_unconverged(converged, "loopy max-product", max_iter)
    return GraphInference(
        map_labels=labels,
        map_score=scores,
        marginals=None,
        n_iter=n_iter,
        converged=converged,
        delta=delta,
        method="max_product",
    )


def icm(
    potentials: GraphPotentials, labels, *, max_iter: int = 100, warn: bool = True
) -> GraphInference:
    """Polish labelings by iterated conditional modes: by greedy single-node moves.

    Nodes are visited in index order; each moves to its best label given its neighbours
    when that strictly increases the score. Stops at a labeling no single-node change
    improves (a local optimum) or after ``max_iter`` sweeps. The score never decreases.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    labels : array-like of shape (n_nodes,), or list of array-like
        Starting labelings (not modified).
    max_iter : int, default=100
        Maximum number of sweeps.
    warn : bool, default=True
        Emit a :class:`~structcal.exceptions.ConvergenceWarning` if some graph was still
        changing after ``max_iter`` sweeps.

    Returns
    -------
    GraphInference
        With ``map_labels``, ``map_score``, ``n_iter`` (sweeps) and ``converged``.

    References
    ----------
    J. Besag, *On the statistical analysis of dirty pictures*, J. R. Stat. Soc. B 48(3),
    1986.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import icm
    >>> p = GraphPotentials.from_list([[[1.0, 0.0], [0.0, 0.5]]], [[(0, 1)]], potts=1.0)
    >>> r = icm(p, [1, 0])
    >>> r.map_labels.tolist(), r.map_score.tolist()
    ([0, 0], [2.0])
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels).copy()
    max_iter = check_int(max_iter, "max_iter", low=1)
    kind, pw, pwT, emat, potts = p._kernel_args()
    sweeps = np.zeros(p.n_graphs, dtype=np.int64)
    converged = np.zeros(p.n_graphs, dtype=bool)
    _graph.icm_batch(
        p.offsets,
        p.unary,
        kind,
        pw,
        pwT,
        emat,
        potts,
        *_structure(p)[:4],
        labels,
        max_iter,
        sweeps,
        converged,
        work=_batch_work(p),
        steps=_steps(p, max_iter),
    )
    if warn:
        _warn_unconverged(converged, "ICM", max_iter)
    return GraphInference(
        map_labels=labels,
        map_score=score_labelings(p, labels),
        marginals=None,
        n_iter=sweeps,
        converged=converged,
        delta=None,
        method="icm",
    )


def map_inference(
    potentials: GraphPotentials,
    *,
    method: str = "trws",
    polish: bool = True,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    warn: bool = True,
) -> GraphInference:
    """Approximate MAP labeling of every graph (exact on forests).

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    method : {"trws", "max_product", "unary"}, default="trws"
        Starting labeling: the best labeling decoded during sequential tree-reweighted
        message passing (TRW-S), decoded max-product beliefs (:func:`max_product`), or
        each node's best unary label.
    polish : bool, default=True
        Polish the starting labeling with :func:`icm` (never lowers its score; on forests
        max-product is already optimal and ICM leaves it unchanged).
    damping : float, default=0.5
        Message damping of :func:`max_product` (TRW-S needs none).
    tol : float, default=1e-6
        Stop message passing when no log-message entry changes by more than ``tol``.
    max_iter : int, default=100
        Maximum number of message-passing sweeps (TRW-S: forward + backward pass), and
        of ICM sweeps.
    warn : bool, default=True
        Emit a :class:`~structcal.exceptions.ConvergenceWarning` for loopy graphs on which
        message passing did not settle (the best decoded labeling is still used).

    Returns
    -------
    GraphInference
        With ``map_labels``, ``map_score`` and, unless ``method="unary"``, ``n_iter``,
        ``converged``, ``delta`` of the message passing.

    Notes
    -----
    TRW-S (Kolmogorov 2006) visits nodes in index order, forwards then backwards; each
    node decodes its label given the neighbours already visited in the pass and sends
    tree-reweighted max-product messages (weight ``1 / max(#earlier, #later
    neighbours)``) to the neighbours ahead. The best labeling decoded over all passes is
    kept. It stops when no log-message entry changes by more than ``tol``, or when the
    best decoded score has not improved for 10 iterations (messages of TRW-S can take
    thousands of iterations to settle on frustrated graphs while the decoded labeling
    stopped improving long before); ``converged`` is False only for graphs stopped by
    ``max_iter``. It is exact on forests, and on random small loopy graphs it found the exact
    optimum more often than loopy max-product (see ``tests/test_graph_inference.py``).
    No optimality certificate (dual bound) is reported.

    References
    ----------
    V. Kolmogorov, *Convergent tree-reweighted message passing for energy minimization*,
    IEEE Trans. PAMI 28(10), 2006.
    J. Besag, *On the statistical analysis of dirty pictures*, J. R. Stat. Soc. B 48(3),
    1986 (ICM).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import map_inference
    >>> p = GraphPotentials.from_list(
    ...     [[[1.0, 0.0], [0.0, 0.4], [0.0, 0.4]]], [[(0, 1), (1, 2), (2, 0)]], potts=0.5)
    >>> r = map_inference(p)
    >>> r.map_labels.tolist(), r.map_score.tolist()
    ([0, 0, 0], [2.5])
    """
    p = _check_potentials(potentials)
    method = check_option(method, "method", ("trws", "max_product", "unary"))
    if method == "max_product":
        r = max_product(p, damping=damping, tol=tol, max_iter=max_iter, warn=warn)
        labels, n_iter, converged, delta = r.map_labels, r.n_iter, r.converged, r.delta
    elif method == "trws":
        _, tol, max_iter = _iter_iv(damping, tol, max_iter)
        labels, n_iter, delta = _run_trws(p, tol, max_iter)
        converged = np.asarray(p.is_forest, dtype=bool) | (delta <= tol) | (n_iter < max_iter)
        if warn:
            _warn_unconverged(converged, "TRW-S", max_iter)
    else:
        _iter_iv(damping, tol, max_iter)
        labels = p.unary.argmax(axis=1) if p.n_nodes else np.zeros(0, np.int64)
        n_iter = converged = delta = None
    if polish:
        labels = icm(p, labels, max_iter=max_iter, warn=False).map_labels
    return GraphInference(
        map_labels=labels,
        map_score=score_labelings(p, labels),
        marginals=None,
        n_iter=n_iter,
        converged=converged,
        delta=delta,
        method=method + ("+icm" if polish else ""),
    )


def infer(
    potentials: GraphPotentials,
    *,
    map: bool = True,
    marginals: bool = True,
    marginal_method: str = "belief_propagation",
    edge_marginals: bool = False,
    warn: bool = True,
) -> GraphInference:
    """MAP labeling and/or marginals of every graph, with default settings.

    The graph counterpart of :func:`structcal.inference.infer`: exact on forests,
    approximate on graphs with cycles.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs.
    map : bool, default=True
        Compute a MAP labeling and its score (:func:`map_inference`).
    marginals : bool, default=True
        Compute node marginals.
    marginal_method : {"belief_propagation", "mean_field"}, default="belief_propagation"
        How marginals are computed (:func:`belief_propagation` or :func:`mean_field`,
        with their default settings).
    edge_marginals : bool, default=False
        Also compute pairwise marginals (implies ``marginals``).
    warn : bool, default=True
        Emit :class:`~structcal.exceptions.ConvergenceWarning` on non-convergence.

    Returns
    -------
    GraphInference
        ``n_iter``, ``converged`` and ``delta`` describe the marginal computation when
        there is one, else the MAP computation.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import infer
    >>> p = GraphPotentials.from_list([np.log([[0.5, 0.5], [0.9, 0.1]])], [[(0, 1)]], potts=0.0)
    >>> r = infer(p)
    >>> r.map_labels.tolist(), np.round(r.marginals, 3).tolist()
    ([0, 0], [[0.5, 0.5], [0.9, 0.1]])
    """
    p = _check_potentials(potentials)
    marginal_method = check_option(
        marginal_method, "marginal_method", ("belief_propagation", "mean_field")
    )
    marginals = bool(marginals or edge_marginals)
    m = map_inference(p, warn=warn) if map else None
    r = None
    if marginals:
        if marginal_method == "belief_propagation":
            r = belief_propagation(p, edge_marginals=edge_marginals, warn=warn)
        else:
            r = mean_field(p, edge_marginals=edge_marginals, warn=warn)
    src = r if r is not None else m
    return GraphInference(
        map_labels=m.map_labels if m is not None else None,
        map_score=m.map_score if m is not None else None,
        marginals=r.marginals if r is not None else None,
        edge_marginals=r.edge_marginals if r is not None else None,
        n_iter=src.n_iter if src is not None else None,
        converged=src.converged if src is not None else None,
        delta=src.delta if src is not None else None,
        method="+".join(x.method for x in (m, r) if x is not None),
    )


# ---------------------------------------------------------------------------- sampling


def _gibbs_chain(p: GraphPotentials, n_samples, burn_in, thin, init, random_state):
    """Yield ``n_samples`` labelings of a Gibbs chain (validated arguments; see
    :func:`gibbs_sample`). Each is a new array."""
    from .._random import item_seeds

    seeds = item_seeds(p.unary, p.offsets, random_state)
    labels = init.copy() if init is not None else (
        p.unary.argmax(axis=1) if p.n_nodes else np.zeros(0, np.int64))
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    kind, pw, pwT, emat, potts = p._kernel_args()
    order = _colour_order(p)
    status = np.zeros(p.n_graphs, dtype=np.int64)
    sweep = 0

    def run(n_sweeps):
        nonlocal sweep
        if n_sweeps:
            _graph.gibbs_batch(p.offsets, order, p.unary, kind, pw, pwT, emat, potts,
                               *_structure(p)[:4], labels, seeds, sweep, n_sweeps, status,
                               work=p.n_nodes * n_sweeps,
                               steps=_steps(p, n_sweeps))
            sweep += n_sweeps
            _raise_infeasible(status, "a node has no allowed label given its neighbours in the "
                                      "Gibbs chain (start it from a feasible labeling)")

    run(burn_in)
    for k in range(n_samples):
        run(thin if k else 1)
        yield labels.copy()


def gibbs_sample(
    potentials: GraphPotentials,
    n_samples: int,
    *,
    burn_in: int = 20,
    thin: int = 2,
    init=None,
    random_state=0,
) -> np.ndarray:
    """Labelings drawn from the CRF itself by Gibbs sampling.

    A sweep updates every node once: colour class after colour class of the greedy
    colouring used by the ``"checkerboard"`` mean-field schedule (on pixel grids the
    checkerboard, or 2 x 2 blocks when 8-connected), each node drawing its label from its
    conditional distribution given its neighbours' current labels,
    ``p(y_i | y_N(i)) ∝ exp(unary_i + sum_j psi_ij(., y_j))``. Nodes of one class are never
    neighbours, so the order within a class does not matter, and the chain leaves the
    CRF's distribution invariant: after burn-in its labelings are (correlated) draws from
    ``p(y | x)``, correlations between nodes included, unlike labelings drawn node by node
    from (mean-field) marginals.

    Parameters
    ----------
    potentials : GraphPotentials
        The batch of graphs (each graph runs its own chain).
    n_samples : int
        Number of labelings returned.
    burn_in : int, default=20
        Sweeps discarded before the first sample (from ``init``).
    thin : int, default=2
        Sweeps between consecutive samples (1 keeps every sweep).
    init : array-like of shape (n_nodes,), optional
        Starting labeling (e.g. the MAP); by default each node's best unary label. It must
        be feasible (no forbidden label or pair).
    random_state : int, Generator or None, default=0
        Seeds the chains. Each graph's seed is a hash of ``random_state`` and of the
        graph's own unary potentials, and the uniform number of its node ``i`` at sweep
        ``t`` a hash of ``(seed, t, i)``: with an int ``random_state`` a graph's samples do
        not depend on the other graphs of the batch, its position in it, or the number of
        threads.

    Returns
    -------
    ndarray of shape (n_samples, n_nodes), dtype int64
        The labelings after sweeps ``burn_in + 1``, ``burn_in + 1 + thin``, ... (laid end
        to end over the graphs, like ``map_labels``).

    Raises
    ------
    InfeasibleError
        If some node has no allowed label given its neighbours.

    Notes
    -----
    Each sweep costs as much as one pseudo-marginals pass. Gibbs sampling mixes slowly
    when couplings are strong (large regions flip only through many single-node moves);
    ``burn_in`` and ``thin`` trade time for that. The samples are used by the object
    events' ``raw="gibbs"`` (:class:`~structcal.events.ObjectEvents`).

    References
    ----------
    S. Geman and D. Geman, *Stochastic relaxation, Gibbs distributions, and the Bayesian
    restoration of images*, IEEE Trans. PAMI 6(6), 1984.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> from structcal.inference.graph import gibbs_sample
    >>> p = GraphPotentials.from_grid(np.zeros((2, 2, 2)), potts=3.0)
    >>> y = gibbs_sample(p, 200, random_state=0)
    >>> y.shape, bool(np.mean((y == y[:, :1]).all(axis=1)) > 0.9)  # strongly coupled
    ((200, 4), True)
    """
    p = _check_potentials(potentials)
    n_samples = check_int(n_samples, "n_samples", low=1)
    burn_in = check_int(burn_in, "burn_in", low=0)
    thin = check_int(thin, "thin", low=1)
    if init is not None:
        init = _labels_iv(p, init, "init")
    out = np.empty((n_samples, p.n_nodes), dtype=np.int64)
    for k, y in enumerate(_gibbs_chain(p, n_samples, burn_in, thin, init, random_state)):
        out[k] = y
    return out
