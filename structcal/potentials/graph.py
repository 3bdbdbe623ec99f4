"""Batches of pairwise graphical models (graph CRFs) as flat arrays.

:class:`GraphPotentials` holds a batch of graphs: one ``(n_nodes, n_states)`` array of
unary log-potentials with node ``offsets``, the ``edges`` of every graph as one
``(n_edges, 2)`` array of *global* node indices with ``edge_offsets``, and pairwise
log-potentials in one of three forms:

* a matrix shared by every edge, ``(n_states, n_states)``;
* one matrix per edge type, ``(n_types, n_states, n_states)`` plus ``edge_type``
  ``(n_edges,)`` (one matrix per edge is the case ``edge_type = arange(n_edges)``, which
  is what a ``(n_edges, n_states, n_states)`` array without ``edge_type`` means);
* Potts weights per edge, ``(n_edges,)``: ``pairwise_e[a, b] = potts[e] * [a == b]``, kept
  as one number per edge (never a matrix).

Shared and typed matrices are never broadcast to one matrix per edge. The CSR adjacency
the kernels walk (:class:`GraphAdjacency`) is built once, when the object is created.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import MAX_LOG_POTENTIAL, as_float_array, as_int_array, check_int, check_offsets, describe
from ..exceptions import ParameterError, ParameterTypeError
from .chain import ChainPotentials, _offsets_from_lengths, _owned, _readonly

__all__ = ["GraphPotentials", "GraphAdjacency", "GridLayout"]

#: Kernel codes for the pairwise form (see ``structcal.inference._graph``).
KIND_MATRIX = 0
KIND_POTTS = 1


@dataclass(frozen=True)
class GraphAdjacency:
    """Compressed sparse row (CSR) adjacency of a batch of graphs.

    Node ``i``'s neighbours are ``neighbors[indptr[i]:indptr[i + 1]]`` in increasing
    order; each such *slot* ``k`` also records the edge it comes from and its
    orientation. Graphs occupy contiguous slot ranges because their nodes are contiguous.

    Attributes
    ----------
    indptr : ndarray of shape (n_nodes + 1,), dtype int64
        Slot range of each node.
    neighbors : ndarray of shape (2 * n_edges,), dtype int64
        Global index of the neighbour in each slot.
    edge_id : ndarray of shape (2 * n_edges,), dtype int64
        Edge joining the slot's node and its neighbour.
    reversed : ndarray of shape (2 * n_edges,), dtype bool
        True when the slot's node is the *second* endpoint ``edges[e, 1]`` of its edge, so
        that the pairwise matrix is read transposed from its point of view.
    twin : ndarray of shape (2 * n_edges,), dtype int64
        Slot of the same edge seen from the neighbour (``twin[twin[k]] == k``).
    """

    indptr: np.ndarray
    neighbors: np.ndarray
    edge_id: np.ndarray
    reversed: np.ndarray
    twin: np.ndarray

    @property
    def degrees(self) -> np.ndarray:
        """Number of neighbours of each node, shape (n_nodes,)."""
        return np.diff(self.indptr)

    def neighbors_of(self, node: int) -> np.ndarray:
        """Global indices of the neighbours of one node (a read-only view)."""
        node = check_int(node, "node", low=0, high=self.indptr.shape[0] - 2)
        return self.neighbors[self.indptr[node] : self.indptr[node + 1]]


@dataclass(frozen=True)
class GridLayout:
    """The pixel-grid structure of a batch built by :meth:`GraphPotentials.from_grid`.

    Graph ``g`` is a ``shapes[g, 0] x shapes[g, 1]`` grid of row-major pixels whose edges
    are those of :func:`~structcal.potentials.grid_edges` (grouped by direction) in that
    order.

    Attributes
    ----------
    shapes : ndarray of shape (n_graphs, 2), dtype int64
        Height and width of each grid.
    connectivity : int
        4 or 8.
    """

    shapes: np.ndarray
    connectivity: int


def _build_adjacency(n_nodes: int, edges: np.ndarray) -> GraphAdjacency:
    m = edges.shape[0]
    owner = np.concatenate([edges[:, 0], edges[:, 1]])
    other = np.concatenate([edges[:, 1], edges[:, 0]])
    eid = np.concatenate([np.arange(m), np.arange(m)]).astype(np.int64)
    rev = np.concatenate([np.zeros(m, bool), np.ones(m, bool)])
    order = np.lexsort((other, owner))  # by node, then neighbour
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n_nodes), out=indptr[1:])
    # slot of each directed copy: position in the sorted order
    slot = np.empty(2 * m, dtype=np.int64)
    slot[order] = np.arange(2 * m)
    twin = np.empty(2 * m, dtype=np.int64)
    # the copy at input position p (p < m forward, p >= m backward) has twin p +/- m
    twin[slot] = slot[np.concatenate([np.arange(m, 2 * m), np.arange(m)])]
    return GraphAdjacency(
        indptr=_readonly(indptr),
        neighbors=_readonly(np.ascontiguousarray(other[order])),
        edge_id=_readonly(np.ascontiguousarray(eid[order])),
        reversed=_readonly(np.ascontiguousarray(rev[order])),
        twin=_readonly(twin),
    )


def _grid_adjacency(shapes, connectivity, offsets, edge_offsets) -> GraphAdjacency:
    """The CSR adjacency of a batch of grids, by index arithmetic (no sort)."""
    from ._grid_kernels import grid_csr, grid_degrees

    shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 2)
    n = int(offsets[-1])
    degree = np.empty(n, dtype=np.int64)
    grid_degrees(shapes, connectivity, degree)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    m2 = int(indptr[-1])
    nbr, eid, twin = (np.empty(m2, dtype=np.int64) for _ in range(3))
    rev = np.empty(m2, dtype=bool)
    grid_csr(shapes, connectivity, offsets, edge_offsets, indptr, nbr, eid, rev, twin)
    return GraphAdjacency(indptr=_readonly(indptr), neighbors=_readonly(nbr),
                          edge_id=_readonly(eid), reversed=_readonly(rev), twin=_readonly(twin))


def _forest_flags(n_nodes, offsets, edges, edge_offsets) -> np.ndarray:
    """Whether each graph is a forest: n_edges == n_nodes - n_components."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n_graphs = offsets.shape[0] - 1
    if n_nodes == 0:
        return np.ones(n_graphs, dtype=bool)
    adj = coo_matrix(
        (np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes)
    )
    _, comp = connected_components(adj, directed=False)
    graph_of_node = np.repeat(np.arange(n_graphs), np.diff(offsets))
    # components never span graphs (edges do not cross): count each at its first node
    _, first = np.unique(comp, return_index=True)
    n_comp = np.bincount(graph_of_node[first], minlength=n_graphs)
    return np.diff(edge_offsets) == np.diff(offsets) - n_comp


class GraphPotentials:
    """Log-potentials of a batch of pairwise graph CRFs.

    The score of a labeling ``y`` of graph ``g`` is
    ``sum_i unary[i, y_i] + sum_e pairwise_e[y_{edges[e, 0]}, y_{edges[e, 1]}]`` over its
    nodes and edges, and its probability is ``exp(score - log_partition)``. ``-inf`` marks
    a forbidden label or pair; NaN and ``+inf`` are rejected.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Unary log-potentials, graphs laid end to end.
    offsets : array-like of shape (n_graphs + 1,)
        Graph ``g`` is nodes ``offsets[g]:offsets[g + 1]``.
    edges : array-like of shape (n_edges, 2), int
        Edges as pairs of *global* node indices, graphs laid end to end. No self-loops,
        no edge listed twice (in either orientation), both endpoints in the edge's graph.
    edge_offsets : array-like of shape (n_graphs + 1,)
        Graph ``g``'s edges are ``edges[edge_offsets[g]:edge_offsets[g + 1]]``.
    pairwise : array-like of shape (n_states, n_states), (n_edges, n_states, n_states) or (n_types, n_states, n_states), optional
        Pairwise log-potentials ``pairwise[a, b]`` for the first endpoint labelled ``a``
        and the second ``b``: one matrix shared by every edge, one per edge, or one per
        edge type (with ``edge_type``). Exactly one of ``pairwise`` and ``potts`` is given.
    edge_type : array-like of shape (n_edges,), int, optional
        Index into a 3-d ``pairwise`` for each edge.
    potts : float or array-like of shape (n_edges,), optional
        Potts weights: ``pairwise_e[a, b] = potts[e]`` if ``a == b`` else 0. A scalar is
        shared by every edge. ``-inf`` (neighbours must differ) is allowed.

    Attributes
    ----------
    unary : ndarray of shape (n_nodes, n_states), read-only
    offsets : ndarray of shape (n_graphs + 1,), read-only
    edges : ndarray of shape (n_edges, 2), read-only
    edge_offsets : ndarray of shape (n_graphs + 1,), read-only
    pairwise : ndarray of shape (n_states, n_states) or (n_mats, n_states, n_states), or None
        As given (``None`` for Potts potentials).
    edge_type : ndarray of shape (n_edges,) or None
        As given (``None`` unless typed matrices were given).
    potts : ndarray of shape (n_edges,) or None
        Potts weights (``None`` for matrix potentials).
    adjacency : GraphAdjacency
        CSR adjacency, built once.
    is_forest : ndarray of shape (n_graphs,), dtype bool
        Whether each graph is a tree or forest (inference is then exact).
    grid : GridLayout or None
        Set by :meth:`from_grid` (and kept by :meth:`subset` and :meth:`with_unary`): every
        graph is a pixel grid whose edges are those of
        :func:`~structcal.potentials.grid_edges`, so inference can find neighbours by index
        arithmetic instead of through ``adjacency`` (see
        :mod:`structcal.inference.graph`). ``None`` otherwise.

    Notes
    -----
    Graphs with no nodes, isolated nodes and disconnected graphs are all valid. Edges are
    oriented only through the pairwise matrix: reversing an edge and transposing its
    matrix describes the same model.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.potentials import GraphPotentials
    >>> p = GraphPotentials.from_list(
    ...     [np.zeros((3, 2)), np.zeros((2, 2))],
    ...     [[(0, 1), (1, 2), (2, 0)], [(0, 1)]], potts=1.0)
    >>> p.n_graphs, p.n_nodes, p.n_edges, p.is_forest.tolist()
    (2, 5, 4, [False, True])
    >>> p.edges.tolist()
    [[0, 1], [1, 2], [2, 0], [3, 4]]
    >>> p.adjacency.neighbors_of(1).tolist()
    [0, 2]
    """

    __slots__ = (
        "unary",
        "offsets",
        "edges",
        "edge_offsets",
        "pairwise",
        "edge_type",
        "potts",
        "adjacency",
        "is_forest",
        "grid",
        "_kernel_cache",
        "_derived",
    )

    def __init__(
        self, unary, offsets, edges, edge_offsets, pairwise=None, *, edge_type=None, potts=None
    ):
        given = (unary, offsets, edges, edge_offsets, pairwise, edge_type, potts)
        unary = as_float_array(unary, "unary", ndim=2, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        n_nodes, K = unary.shape
        if K < 1:
            raise ParameterError(
                f"`unary` must have at least one state (column); got shape {unary.shape}"
            )
        offsets = check_offsets(offsets, "offsets", n_nodes)
        n_graphs = offsets.shape[0] - 1
        edges = as_int_array(edges, "edges", ndim=2, shape=(None, 2), low=0, high=max(n_nodes, 1))
        if n_nodes == 0 and edges.shape[0]:
            raise ParameterError(
                f"`edges` must be empty when there are no nodes; got {edges.shape[0]}"
            )
        m = edges.shape[0]
        edge_offsets = check_offsets(edge_offsets, "edge_offsets", m)
        if edge_offsets.shape[0] != n_graphs + 1:
            raise ParameterError(
                f"`edge_offsets` must have n_graphs + 1 = {n_graphs + 1} entries like "
                f"`offsets`; got {edge_offsets.shape[0]}"
            )
        _check_edges(edges, offsets, edge_offsets)
        pairwise, edge_type, potts = _check_pairwise(pairwise, edge_type, potts, m, K)
        self.unary = _readonly(_owned(unary, given[0]))
        self.offsets = _readonly(_owned(offsets, given[1]))
        self.edges = _readonly(_owned(edges, given[2]))
        self.edge_offsets = _readonly(_owned(edge_offsets, given[3]))
        self.pairwise = None if pairwise is None else _readonly(_owned(pairwise, given[4]))
        self.edge_type = None if edge_type is None else _readonly(_owned(edge_type, given[5]))
        self.potts = None if potts is None else _readonly(_owned(potts, given[6]))
        self.adjacency = _build_adjacency(n_nodes, edges)
        self.is_forest = _readonly(_forest_flags(n_nodes, offsets, edges, edge_offsets))
        self.grid = None
        self._kernel_cache = None
        self._derived = {}  # arrays derived by the inference layer (see there)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_list(
        cls, unaries, edges, pairwise=None, *, edge_type=None, potts=None
    ) -> "GraphPotentials":
        """Build a batch from per-graph arrays with *local* node indices.

        Parameters
        ----------
        unaries : sequence of array-like of shape (n_nodes_g, n_states)
            Unary log-potentials of each graph.
        edges : sequence of array-like of shape (n_edges_g, 2)
            Edges of each graph, as pairs of node indices within that graph.
        pairwise : array-like of shape (n_states, n_states) or (n_types, n_states, n_states), or sequence of array-like of shape (n_edges_g, n_states, n_states), optional
            One shared matrix, the matrices of the edge types (with ``edge_type``), or the
            per-edge matrices of each graph.
        edge_type : sequence of array-like of shape (n_edges_g,), optional
            Edge types of each graph (with a 3-d ``pairwise`` array).
        potts : float or sequence of array-like of shape (n_edges_g,), optional
            A shared Potts weight, or the Potts weights of each graph's edges.

        Returns
        -------
        GraphPotentials
        """
        unary_list = _as_list(unaries, "unaries")
        n = len(unary_list)
        arrays = []
        for g, u in enumerate(unary_list):
            u = as_float_array(u, f"unaries[{g}]", ndim=2, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            if arrays and u.shape[1] != arrays[0].shape[1]:
                raise ParameterError(
                    f"every graph must have the same number of states; unaries[0] has "
                    f"{arrays[0].shape[1]} and unaries[{g}] has {u.shape[1]}"
                )
            arrays.append(u)
        edge_list = _as_list(edges, "edges", length=n)
        sizes = [a.shape[0] for a in arrays]
        offsets = _offsets_from_lengths(sizes)
        parts = []
        for g, e in enumerate(edge_list):
            e = np.asarray(e) if not isinstance(e, np.ndarray) else e
            if e.size == 0:
                e = np.zeros((0, 2), np.int64)
            e = as_int_array(e, f"edges[{g}]", ndim=2, shape=(None, 2))
            if e.size and (e.min() < 0 or e.max() >= sizes[g]):
                bad = int(np.argmax((e < 0).any(axis=1) | (e >= sizes[g]).any(axis=1)))
                raise ParameterError(
                    f"`edges[{g}]` holds local node indices in [0, {sizes[g]}); got edge "
                    f"{bad} = {e[bad].tolist()}"
                )
            parts.append(e + offsets[g])
        flat_edges = np.concatenate(parts, axis=0) if parts else np.zeros((0, 2), np.int64)
        edge_offsets = _offsets_from_lengths([p.shape[0] for p in parts])
        K = arrays[0].shape[1] if arrays else 1
        unary = np.concatenate(arrays, axis=0) if arrays else np.zeros((0, K))
        unary.flags.writeable = flat_edges.flags.writeable = False  # ours: not copied again
        if isinstance(pairwise, (list, tuple)):
            pw_list = _as_list(pairwise, "pairwise", length=n)
            mats = [
                as_float_array(pw, f"pairwise[{g}]", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
                for g, pw in enumerate(pw_list)
            ]
            for g, (pw, e) in enumerate(zip(mats, parts)):
                if pw.shape != (e.shape[0], K, K):
                    raise ParameterError(
                        f"`pairwise[{g}]` must have shape (n_edges_g, n_states, n_states)="
                        f"{(e.shape[0], K, K)}; got {pw.shape}"
                    )
            pairwise = np.concatenate(mats, axis=0) if mats else np.zeros((0, K, K))
        if edge_type is not None:
            et = _as_list(edge_type, "edge_type", length=n)
            edge_type = (
                np.concatenate(
                    [
                        as_int_array(t, f"edge_type[{g}]", ndim=1, shape=(parts[g].shape[0],))
                        for g, t in enumerate(et)
                    ]
                )
                if et
                else np.zeros(0, np.int64)
            )
        if isinstance(potts, (list, tuple)):
            pl = _as_list(potts, "potts", length=n)
            potts = (
                np.concatenate(
                    [
                        as_float_array(
                            w, f"potts[{g}]", ndim=1, shape=(parts[g].shape[0],),
                            allow_neginf=True, max_abs=MAX_LOG_POTENTIAL,
                        )
                        for g, w in enumerate(pl)
                    ]
                )
                if pl
                else np.zeros(0)
            )
        return cls(
            unary, offsets, flat_edges, edge_offsets, pairwise, edge_type=edge_type, potts=potts
        )

    @classmethod
    def from_networkx(
        cls, graphs, *, unary="unary", pairwise=None, potts=None
    ) -> "GraphPotentials":
        """Build a batch from networkx graphs with unary potentials as a node attribute.

        Nodes are taken in ``G.nodes`` order and edges in ``G.edges`` order; an edge
        ``(u, v)`` as yielded by ``G.edges`` has ``u`` as its first endpoint. The graphs are
        converted immediately: nothing networkx reaches the kernels.

        Parameters
        ----------
        graphs : networkx.Graph or sequence of networkx.Graph
            The graphs (``Graph`` or ``DiGraph``; multigraphs are rejected).
        unary : str, default="unary"
            Node attribute holding each node's unary log-potentials, shape (n_states,).
        pairwise : array-like of shape (n_states, n_states) or str, optional
            A matrix shared by every edge, or the name of an edge attribute holding each
            edge's (n_states, n_states) matrix.
        potts : float or str, optional
            A shared Potts weight, or the name of an edge attribute holding each edge's
            Potts weight.

        Returns
        -------
        GraphPotentials

        Examples
        --------
        >>> import networkx as nx, numpy as np
        >>> from structcal.potentials import GraphPotentials
        >>> G = nx.path_graph(["a", "b", "c"])
        >>> nx.set_node_attributes(G, {n: np.zeros(2) for n in G}, "unary")
        >>> p = GraphPotentials.from_networkx(G, potts=0.5)
        >>> p.n_nodes, p.edges.tolist(), p.potts.tolist()
        (3, [[0, 1], [1, 2]], [0.5, 0.5])
        """
        import networkx as nx

        if isinstance(graphs, nx.Graph):
            graphs = [graphs]
        graphs = _as_list(graphs, "graphs")
        unaries, edges, pw_list, potts_list = [], [], [], []
        for g, G in enumerate(graphs):
            if not isinstance(G, nx.Graph):
                raise ParameterTypeError(
                    f"`graphs[{g}]` must be a networkx graph; got {describe(G)}"
                )
            if G.is_multigraph():
                raise ParameterError(
                    f"`graphs[{g}]` is a multigraph; parallel edges must be merged into one "
                    "pairwise potential first"
                )
            index = {node: i for i, node in enumerate(G.nodes)}
            rows = []
            for node, data in G.nodes(data=True):
                if unary not in data:
                    raise ParameterError(
                        f"node {node!r} of `graphs[{g}]` has no {unary!r} attribute (its unary "
                        "log-potentials)"
                    )
                rows.append(
                    as_float_array(
                        data[unary],
                        f"unary of node {node!r} of graphs[{g}]",
                        ndim=1,
                        allow_neginf=True,
                        max_abs=MAX_LOG_POTENTIAL,
                    )
                )
            if rows and len({r.shape[0] for r in rows}) != 1:
                raise ParameterError(f"the {unary!r} attributes of `graphs[{g}]` differ in length")
            unaries.append(np.stack(rows) if rows else np.zeros((0, 1)))
            e = [(index[u], index[v]) for u, v in G.edges()]
            edges.append(np.asarray(e, dtype=np.int64).reshape(-1, 2))
            if isinstance(pairwise, str):
                pw_list.append(_edge_attr(G, pairwise, g))
            if isinstance(potts, str):
                potts_list.append(np.asarray(_edge_attr(G, potts, g), dtype=np.float64).reshape(-1))
        K = max((u.shape[1] for u in unaries if u.shape[0]), default=1)
        unaries = [u if u.shape[0] else np.zeros((0, K)) for u in unaries]
        if isinstance(pairwise, str):
            pairwise = [np.asarray(p, dtype=np.float64).reshape(-1, K, K) for p in pw_list]
        if isinstance(potts, str):
            potts = potts_list
        return cls.from_list(unaries, edges, pairwise, potts=potts)

    @classmethod
    def from_grid(
        cls, unaries, *, potts=None, pairwise=None, connectivity: int = 4
    ) -> "GraphPotentials":
        """Build a batch of pixel-grid CRFs directly from image-shaped arrays.

        Nodes are the pixels of each image in row-major order, edges those of
        :func:`~structcal.potentials.grid_edges` (grouped by direction). Nothing goes
        through networkx or per-edge Python code; the edges are valid by construction,
        so only the values are checked.

        Parameters
        ----------
        unaries : array-like of shape (height, width, n_states) or (n_images, height, width, n_states), or list of array-like of shape (height_g, width_g, n_states)
            Unary log-potentials of each pixel; images in a list may differ in size.
        potts : float, array-like of shape (n_images, n_edges_g), or list of array-like of shape (n_edges_g,), optional
            Potts weights: one shared weight, or one per edge of each image in the order
            of ``grid_edges(height_g, width_g, connectivity)``.
        pairwise : array-like of shape (n_states, n_states) or (n_directions, n_states, n_states), optional
            One matrix shared by every edge, or one per direction (2 directions for
            4-connectivity, 4 for 8; see :data:`~structcal.potentials.GRID_DIRECTIONS`).
            Exactly one of ``potts`` and ``pairwise`` is given.
        connectivity : {4, 8}, default=4
            Pixel neighbourhood.

        Returns
        -------
        GraphPotentials
            ``offsets`` follow the images; node ``offsets[g] + r * width_g + c`` is pixel
            ``(r, c)`` of image ``g``.

        Examples
        --------
        >>> import numpy as np
        >>> from structcal.potentials import GraphPotentials
        >>> p = GraphPotentials.from_grid(np.zeros((2, 3, 2)), potts=1.0)
        >>> p.n_nodes, p.n_edges, p.edges[:3].tolist(), p.is_forest.tolist()
        (6, 7, [[0, 1], [1, 2], [3, 4]], [False])
        """
        from .grid import check_connectivity, grid_edges

        connectivity = check_connectivity(connectivity)
        if isinstance(unaries, (list, tuple)):
            if not unaries:
                raise ParameterError("`unaries` must hold at least one image; got an empty list")
            arrays = [
                as_float_array(u, f"unaries[{g}]", ndim=3, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
                for g, u in enumerate(unaries)
            ]
        else:
            u = as_float_array(unaries, "unaries", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            if u.ndim not in (3, 4):
                raise ParameterError(
                    "`unaries` must have shape (height, width, n_states), (n_images, height, "
                    f"width, n_states) or be a list of images; got shape {u.shape}"
                )
            arrays = [u] if u.ndim == 3 else list(u)
        K = arrays[0].shape[2]
        if K < 1:
            raise ParameterError(
                f"`unaries` must have at least one state; got shape {arrays[0].shape}"
            )
        for g, u in enumerate(arrays):
            if u.shape[2] != K:
                raise ParameterError(
                    f"every image must have the same number of states; image 0 has {K} and "
                    f"image {g} has {u.shape[2]}"
                )
        shapes = [u.shape[:2] for u in arrays]
        structure = {}
        for shape in set(shapes):
            structure[shape] = grid_edges(*shape, connectivity) if min(shape) > 0 else (
                np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
        sizes = [h * w for h, w in shapes]
        counts = [structure[s][0].shape[0] for s in shapes]
        offsets = _offsets_from_lengths(sizes)
        edge_offsets = _offsets_from_lengths(counts)
        edges = np.empty((int(edge_offsets[-1]), 2), dtype=np.int64)
        direction = np.empty(int(edge_offsets[-1]), dtype=np.int64)
        for g, s in enumerate(shapes):
            e, d = structure[s]
            np.add(e, offsets[g], out=edges[edge_offsets[g] : edge_offsets[g + 1]])
            direction[edge_offsets[g] : edge_offsets[g + 1]] = d
        unary = (
            np.concatenate([u.reshape(-1, K) for u in arrays])
            if arrays
            else np.zeros((0, K))
        )
        if (pairwise is None) == (potts is None):
            raise ParameterError(
                "give exactly one of `pairwise` (matrices) and `potts` (Potts weights); got "
                + ("neither" if pairwise is None else "both")
            )
        edge_type = None
        if potts is not None:
            if isinstance(potts, (list, tuple)):
                if len(potts) != len(arrays):
                    raise ParameterError(
                        f"`potts` must hold one array per image ({len(arrays)}); got {len(potts)}"
                    )
                potts = np.concatenate([
                    as_float_array(w, f"potts[{g}]", ndim=1, shape=(counts[g],), allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
                    for g, w in enumerate(potts)
                ]) if potts else np.zeros(0)
            elif np.ndim(potts) == 0:
                potts = np.full(edges.shape[0], float(
                    as_float_array(np.reshape(potts, 1), "potts", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)[0]))
            else:
                w = as_float_array(potts, "potts", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
                if w.ndim == 1 and len(arrays) == 1:
                    w = w[None]
                if w.ndim != 2 or w.shape[0] != len(arrays) or (
                    w.shape[0] and w.shape[1] != counts[0]
                ):
                    raise ParameterError(
                        f"`potts` must be a scalar, a list of per-image arrays or have shape "
                        f"(n_images, n_edges)=({len(arrays)}, {counts[0]}); got {w.shape}"
                    )
                potts = w.reshape(-1)
        else:
            pairwise = as_float_array(pairwise, "pairwise", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            n_dir = 2 if connectivity == 4 else 4
            if pairwise.shape == (n_dir, K, K):
                edge_type = direction
            elif pairwise.shape != (K, K):
                raise ParameterError(
                    f"`pairwise` must have shape (n_states, n_states)=({K}, {K}) or one matrix "
                    f"per direction {(n_dir, K, K)}; got {pairwise.shape}"
                )
        is_forest = np.array([min(s) <= 1 for s in shapes], dtype=bool)
        grid = GridLayout(np.asarray(shapes, dtype=np.int64).reshape(-1, 2), connectivity)
        adjacency = _grid_adjacency(shapes, connectivity, offsets, edge_offsets)
        return cls._trusted(
            unary, offsets, edges, edge_offsets, pairwise, edge_type, potts, is_forest=is_forest,
            grid=grid, adjacency=adjacency,
        )

    @classmethod
    def from_chain(cls, chain: ChainPotentials) -> "GraphPotentials":
        """Return the same model as a batch of path graphs (edges ``(t, t + 1)`` in chain order).

        Parameters
        ----------
        chain : ChainPotentials
            The chains.

        Returns
        -------
        GraphPotentials
        """
        if not isinstance(chain, ChainPotentials):
            raise ParameterTypeError(f"`chain` must be a ChainPotentials; got {describe(chain)}")
        starts = np.repeat(chain.offsets[:-1], np.maximum(chain.lengths - 1, 0))
        local = np.arange(chain.n_edges) - np.repeat(
            chain.edge_offsets[:-1], np.maximum(chain.lengths - 1, 0)
        )
        first = starts + local
        edges = np.stack([first, first + 1], axis=1).astype(np.int64).reshape(-1, 2)
        return cls(chain.unary, chain.offsets, edges, chain.edge_offsets, chain.pairwise)

    @classmethod
    def _trusted(
        cls,
        unary,
        offsets,
        edges,
        edge_offsets,
        pairwise=None,
        edge_type=None,
        potts=None,
        adjacency=None,
        is_forest=None,
        grid=None,
    ) -> "GraphPotentials":
        """Build without validation (for producers inside structcal that guarantee validity).

        ``adjacency``, ``is_forest`` and ``grid`` may be passed to reuse the structure of an
        existing batch with the same edges (e.g. a CRF re-scoring fixed graphs).
        """
        self = object.__new__(cls)
        self.unary = _readonly(np.ascontiguousarray(unary, dtype=np.float64))
        self.offsets = _readonly(np.ascontiguousarray(offsets, dtype=np.int64))
        self.edges = _readonly(np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2))
        self.edge_offsets = _readonly(np.ascontiguousarray(edge_offsets, dtype=np.int64))
        self.pairwise = (
            None
            if pairwise is None
            else _readonly(np.ascontiguousarray(pairwise, dtype=np.float64))
        )
        self.edge_type = (
            None
            if edge_type is None
            else _readonly(np.ascontiguousarray(edge_type, dtype=np.int64))
        )
        self.potts = (
            None if potts is None else _readonly(np.ascontiguousarray(potts, dtype=np.float64))
        )
        self.adjacency = (
            adjacency
            if adjacency is not None
            else _build_adjacency(self.unary.shape[0], self.edges)
        )
        self.is_forest = _readonly(
            np.asarray(
                is_forest
                if is_forest is not None
                else _forest_flags(
                    self.unary.shape[0], self.offsets, self.edges, self.edge_offsets
                ),
                dtype=bool,
            )
        )
        self.grid = grid
        self._kernel_cache = None
        self._derived = {}  # arrays derived by the inference layer (see there)
        return self

    # ------------------------------------------------------------------ properties

    @property
    def n_graphs(self) -> int:
        """Number of graphs in the batch."""
        return int(self.offsets.shape[0] - 1)

    @property
    def n_nodes(self) -> int:
        """Total number of nodes over all graphs."""
        return int(self.unary.shape[0])

    @property
    def n_states(self) -> int:
        """Number of labels each node can take."""
        return int(self.unary.shape[1])

    @property
    def n_edges(self) -> int:
        """Total number of edges over all graphs."""
        return int(self.edges.shape[0])

    @property
    def sizes(self) -> np.ndarray:
        """Number of nodes of each graph, shape (n_graphs,)."""
        return np.diff(self.offsets)

    @property
    def edge_counts(self) -> np.ndarray:
        """Number of edges of each graph, shape (n_graphs,)."""
        return np.diff(self.edge_offsets)

    @property
    def pairwise_kind(self) -> str:
        """``"shared"``, ``"typed"`` (includes one matrix per edge) or ``"potts"``."""
        if self.potts is not None:
            return "potts"
        return "shared" if self.pairwise.ndim == 2 else "typed"

    @property
    def graph_index(self) -> np.ndarray:
        """Graph of each node, shape (n_nodes,)."""
        return np.repeat(np.arange(self.n_graphs, dtype=np.int64), self.sizes)

    @property
    def edge_graph_index(self) -> np.ndarray:
        """Graph of each edge, shape (n_edges,)."""
        return np.repeat(np.arange(self.n_graphs, dtype=np.int64), self.edge_counts)

    def edge_matrices(self, edges=None) -> np.ndarray:
        """Materialise the pairwise matrix of the given edges (all by default).

        Parameters
        ----------
        edges : array-like of int, optional
            Edge indices.

        Returns
        -------
        ndarray of shape (n_selected, n_states, n_states)
        """
        idx = (
            np.arange(self.n_edges)
            if edges is None
            else as_int_array(edges, "edges", ndim=1, low=0, high=max(self.n_edges, 1))
        )
        K = self.n_states
        if self.potts is not None:
            out = np.zeros((idx.shape[0], K, K))
            with np.errstate(invalid="ignore"):
                out[:, np.arange(K), np.arange(K)] = self.potts[idx, None]
            return out
        if self.pairwise.ndim == 2:
            return np.broadcast_to(self.pairwise, (idx.shape[0], K, K)).copy()
        if self.edge_type is None:
            return self.pairwise[idx].copy()
        return self.pairwise[self.edge_type[idx]].copy()

    def _kernel_args(self):
        """``(kind, pw, pwT, emat, potts)`` in the layout of ``inference._graph``."""
        if self._kernel_cache is None:
            m, K = self.n_edges, self.n_states
            if self.potts is not None:
                kind = KIND_POTTS
                pw = np.zeros((1, K, K))
                emat = np.zeros(m, dtype=np.int64)
                potts = np.ascontiguousarray(self.potts)
            else:
                kind = KIND_MATRIX
                potts = np.zeros(m)
                if self.pairwise.ndim == 2:
                    pw = np.ascontiguousarray(self.pairwise[None])
                    emat = np.zeros(m, dtype=np.int64)
                elif self.edge_type is None:
                    pw = np.ascontiguousarray(self.pairwise)
                    emat = np.arange(m, dtype=np.int64)
                else:
                    pw = np.ascontiguousarray(self.pairwise)
                    emat = np.ascontiguousarray(self.edge_type)
                if pw.shape[0] == 0:
                    pw = np.zeros((1, K, K))
            pwT = np.ascontiguousarray(pw.transpose(0, 2, 1))
            # all read-only, so that every pairwise form gives the kernels the same types
            # (Numba compiles one specialisation per combination of array types)
            self._kernel_cache = (
                kind,
                _readonly(pw),
                _readonly(pwT),
                _readonly(emat),
                _readonly(potts),
            )
        return self._kernel_cache

    # ------------------------------------------------------------------ batches

    def graph(self, g: int) -> "GraphPotentials":
        """Return graph ``g`` alone as a batch of one (local node indices)."""
        return self.subset([g])

    def subset(self, graphs) -> "GraphPotentials":
        """Return the graphs selected by an index array (in that order).

        Parameters
        ----------
        graphs : array-like of int
            Graph indices, each in ``[0, n_graphs)``.

        Returns
        -------
        GraphPotentials
        """
        graphs = as_int_array(graphs, "graphs", ndim=1, low=0, high=self.n_graphs)
        sizes = self.sizes[graphs]
        offsets = _offsets_from_lengths(sizes)
        rows = np.repeat(self.offsets[:-1][graphs] - offsets[:-1], sizes) + np.arange(offsets[-1])
        counts = self.edge_counts[graphs]
        e_off = _offsets_from_lengths(counts)
        erows = np.repeat(self.edge_offsets[:-1][graphs] - e_off[:-1], counts) + np.arange(
            e_off[-1]
        )
        shift = np.repeat(offsets[:-1] - self.offsets[:-1][graphs], counts)
        edges = self.edges[erows] + shift[:, None]
        pairwise, edge_type, potts = self.pairwise, self.edge_type, self.potts
        if potts is not None:
            potts = potts[erows]
        elif pairwise.ndim == 3 and edge_type is None:
            pairwise = pairwise[erows]
        elif edge_type is not None:
            edge_type = edge_type[erows]
        return GraphPotentials._trusted(
            self.unary[rows],
            offsets,
            edges,
            e_off,
            pairwise,
            edge_type,
            potts,
            is_forest=self.is_forest[graphs],
            grid=None if self.grid is None else GridLayout(self.grid.shapes[graphs],
                                                          self.grid.connectivity),
        )

    def split_nodes(self, values) -> list[np.ndarray]:
        """Split a per-node array (first axis ``n_nodes``) into a list of per-graph views."""
        values = np.asarray(values)
        if values.shape[:1] != (self.n_nodes,):
            raise ParameterError(
                f"`values` must have n_nodes={self.n_nodes} rows; got shape {values.shape}"
            )
        return [values[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def with_unary(self, unary) -> "GraphPotentials":
        """Return the same graphs and pairwise potentials with other unary potentials.

        Parameters
        ----------
        unary : array-like of shape (n_nodes, n_states)
            The new unary log-potentials.

        Returns
        -------
        GraphPotentials
        """
        unary = as_float_array(unary, "unary", ndim=2, shape=self.unary.shape, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        return GraphPotentials._trusted(
            unary,
            self.offsets,
            self.edges,
            self.edge_offsets,
            self.pairwise,
            self.edge_type,
            self.potts,
            adjacency=self.adjacency,
            is_forest=self.is_forest,
            grid=self.grid,
        )

    def __repr__(self) -> str:
        return (
            f"GraphPotentials(n_graphs={self.n_graphs}, n_nodes={self.n_nodes}, "
            f"n_edges={self.n_edges}, n_states={self.n_states}, pairwise={self.pairwise_kind})"
        )


# ---------------------------------------------------------------------------- validation


def _as_list(values, name, length=None):
    if isinstance(values, np.ndarray) or not isinstance(values, (list, tuple)):
        raise ParameterTypeError(
            f"`{name}` must be a list with one entry per graph; got {describe(values)}"
        )
    if length is None and len(values) == 0:
        raise ParameterError(f"`{name}` must hold at least one graph; got an empty list")
    if length is not None and len(values) != length:
        raise ParameterError(
            f"`{name}` must hold one entry per graph ({length}); got {len(values)}"
        )
    return list(values)


def _edge_attr(G, attr, g):
    vals = []
    for u, v, data in G.edges(data=True):
        if attr not in data:
            raise ParameterError(f"edge {(u, v)!r} of `graphs[{g}]` has no {attr!r} attribute")
        vals.append(np.asarray(data[attr], dtype=np.float64))
    return np.asarray(vals, dtype=np.float64)


def _check_edges(edges, offsets, edge_offsets):
    m = edges.shape[0]
    if m == 0:
        return
    loops = edges[:, 0] == edges[:, 1]
    if loops.any():
        e = int(np.argmax(loops))
        raise ParameterError(
            f"`edges` must not contain self-loops; edge {e} = {edges[e].tolist()} joins node "
            f"{edges[e, 0]} to itself"
        )
    graph_of_edge = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(edge_offsets))
    lo = offsets[graph_of_edge]
    hi = offsets[graph_of_edge + 1]
    outside = (edges < lo[:, None]) | (edges >= hi[:, None])
    if outside.any():
        e = int(np.argmax(outside.any(axis=1)))
        g = int(graph_of_edge[e])
        raise ParameterError(
            f"`edges` must join nodes of the same graph; edge {e} = {edges[e].tolist()} is "
            f"listed in graph {g} (by `edge_offsets`), whose nodes are {lo[e]}..{hi[e] - 1}"
        )
    key = np.sort(edges, axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    sk = key[order]
    dup = (sk[1:] == sk[:-1]).all(axis=1)
    if dup.any():
        i = int(np.argmax(dup))
        a, b = sorted((int(order[i]), int(order[i + 1])))
        raise ParameterError(
            f"`edges` must not list an edge twice (in either orientation); edges {a} = "
            f"{edges[a].tolist()} and {b} = {edges[b].tolist()} join the same nodes"
        )


def _check_pairwise(pairwise, edge_type, potts, m, K):
    if (pairwise is None) == (potts is None):
        raise ParameterError(
            "give exactly one of `pairwise` (matrices) and `potts` (Potts weights); got "
            + ("neither" if pairwise is None else "both")
        )
    if potts is not None:
        if edge_type is not None:
            raise ParameterError(
                "`edge_type` applies to matrix `pairwise` potentials, not to `potts`"
            )
        if np.ndim(potts) == 0:
            arr = np.full(
                m, float(as_float_array(np.reshape(potts, 1), "potts", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)[0])
            )
        else:
            arr = as_float_array(potts, "potts", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        if arr.ndim == 0:
            arr = np.full(m, float(arr))
        elif arr.shape != (m,):
            raise ParameterError(
                f"`potts` must be a scalar or have shape (n_edges,)=({m},); got {arr.shape}"
            )
        return None, None, np.ascontiguousarray(arr)
    pairwise = as_float_array(pairwise, "pairwise", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
    if pairwise.ndim == 2:
        if pairwise.shape != (K, K):
            raise ParameterError(
                f"`pairwise` must have shape (n_states, n_states)=({K}, {K}), or be 3-d; got "
                f"{pairwise.shape}"
            )
        if edge_type is not None:
            raise ParameterError("`edge_type` needs a 3-d `pairwise` (one matrix per type)")
        return pairwise, None, None
    if pairwise.ndim != 3 or pairwise.shape[1:] != (K, K):
        raise ParameterError(
            f"`pairwise` must have shape (n_states, n_states) or (n, n_states, n_states) with "
            f"n_states={K}; got {pairwise.shape}"
        )
    if edge_type is None:
        if pairwise.shape[0] != m:
            raise ParameterError(
                f"per-edge `pairwise` must have shape (n_edges, n_states, n_states)="
                f"{(m, K, K)} (or give `edge_type`); got {pairwise.shape}"
            )
        return pairwise, None, None
    n_types = pairwise.shape[0]
    edge_type = as_int_array(
        edge_type, "edge_type", ndim=1, shape=(m,), low=0, high=max(n_types, 1)
    )
    if m and n_types == 0:
        raise ParameterError("`pairwise` holds no edge-type matrix but there are edges")
    return pairwise, edge_type, None
