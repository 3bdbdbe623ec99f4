"""StructuredPrediction: a batch of potentials and its inference results, computed on demand.

Features ask a :class:`StructuredPrediction` for what they need (MAP, top-2, marginals,
pseudo-marginals); each quantity is computed once, the first time it is asked for, so a
feature set that needs only MAP never runs forward-backward (the paper's cost taxonomy:
unstructured < MAP < marginals). The structure-specific work lives in a small backend
(:class:`ChainBackend` for chains, :class:`GraphBackend` for graphs) so the event and
feature layers never look at the structure type.
"""

from __future__ import annotations

import numpy as np

from ._ragged import ragged_rows
from ._validation import as_float_array, as_int_array, check_option, describe
from .exceptions import ParameterError, ParameterTypeError
from .inference import chain as chain_inference
from .inference import graph as graph_inference
from .potentials import ChainPotentials, GraphPotentials

__all__ = ["StructuredPrediction", "ChainBackend", "GraphBackend", "register_backend"]

_BACKENDS: list[tuple[type, type]] = []


def register_backend(potentials_type: type):
    """Class decorator registering the inference backend used for ``potentials_type``."""

    if not isinstance(potentials_type, type):
        raise ParameterTypeError(
            f"`potentials_type` must be a class; got {describe(potentials_type)}")

    def deco(backend):
        if not isinstance(backend, type):
            raise ParameterTypeError(f"a backend must be a class; got {describe(backend)}")
        _BACKENDS.append((potentials_type, backend))
        return backend

    return deco


class _Backend:
    """What every backend shares: the potentials' node offsets and number of states."""

    potentials = None
    #: Whether an item's results do not depend on the other items of the batch (so that
    #: inference on a subset of the items gives the same results for them, bit for bit).
    independent_items = False

    @property
    def item_offsets(self) -> np.ndarray:
        return self.potentials.offsets

    @property
    def n_states(self) -> int:
        return self.potentials.n_states


@register_backend(ChainPotentials)
class ChainBackend(_Backend):
    """Exact chain inference for :class:`StructuredPrediction` (Viterbi, 2-best, forward-backward)."""

    #: Exact 2-best and marginals: features mean exactly what the paper says.
    exact = True
    #: every kernel treats each chain on its own
    independent_items = True

    def __init__(self, potentials: ChainPotentials, **options):
        if options:
            raise ParameterError(
                f"chain inference takes no options; got {sorted(options)}"
            )
        if not isinstance(potentials, ChainPotentials):
            raise ParameterTypeError(
                f"`potentials` must be ChainPotentials; got {describe(potentials)}")
        self.potentials = potentials

    def map(self):
        r = chain_inference.viterbi(self.potentials)
        return r.map_labels, r.map_score

    def top2(self, pred):
        r = chain_inference.kbest(self.potentials, 2)
        return r.labels, r.scores

    def marginals(self):
        r = chain_inference.forward_backward(self.potentials)
        return r.marginals, r.log_partition

    def pseudo_marginals(self, labels):
        return chain_inference.pseudo_marginals(self.potentials, labels)

    def neighbors(self):
        """CSR neighbour lists of every node (position): ``(indptr, indices)``."""
        p = self.potentials
        n = p.n_tokens
        pos = p.position_index
        lengths = p.lengths[p.chain_index]
        has_left = pos > 0
        has_right = pos < lengths - 1
        counts = has_left.astype(np.int64) + has_right
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        indices = np.empty(indptr[-1], dtype=np.int64)
        node = np.arange(n)
        indices[indptr[:-1][has_left]] = node[has_left] - 1
        indices[indptr[:-1][has_right] + has_left[has_right]] = node[has_right] + 1
        return indptr, indices


@register_backend(GraphPotentials)
class GraphBackend(_Backend):
    """Graph inference for :class:`StructuredPrediction` (exact on forests, approximate on loops).

    Parameters
    ----------
    potentials : GraphPotentials
    marginal_method : {"mean_field", "belief_propagation"}, default="mean_field"
        How node marginals and the log-partition are computed: naive mean field (the
        paper's choice for its scene experiment; the log-partition is the evidence lower
        bound) or sum-product belief propagation (the Bethe approximation; exact on
        forests, which then make the prediction exact).
    map_method : {"trws", "max_product", "unary"}, default="trws"
        Starting labeling of :func:`~structcal.inference.graph.map_inference`, always
        polished by ICM.
    tol, max_iter, damping : optional
        Passed to the marginal routine (their defaults otherwise).
    warn : bool, default=True
        Emit :class:`~structcal.exceptions.ConvergenceWarning` when message passing or
        mean field does not converge.

    Notes
    -----
    The second-best labeling (for the MAP-margin feature ``phi_mp3``) is the best
    single-node change of the MAP labeling (:func:`~structcal.inference.graph.second_best`),
    so ``phi_mp3`` is an upper bound on the exact top-2 margin. ``map_probability`` is
    ``exp(map_score - log_partition)`` with the approximate log-partition, capped at 1.
    """

    def __init__(
        self,
        potentials: GraphPotentials,
        *,
        marginal_method: str = "mean_field",
        map_method: str = "trws",
        tol=None,
        max_iter=None,
        damping=None,
        warn: bool = True,
    ):
        if not isinstance(potentials, GraphPotentials):
            raise ParameterTypeError(
                f"`potentials` must be GraphPotentials; got {describe(potentials)}")
        self.potentials = potentials
        self.marginal_method = check_option(
            marginal_method, "marginal_method", ("mean_field", "belief_propagation")
        )
        self.map_method = check_option(map_method, "map_method", ("trws", "max_product", "unary"))
        self.warn = bool(warn)
        self._marginal_options = {
            k: v for k, v in (("tol", tol), ("max_iter", max_iter), ("damping", damping))
            if v is not None
        }
        #: Exact only when every graph is a forest and BP computes the marginals.
        self.exact = bool(
            marginal_method == "belief_propagation" and np.all(potentials.is_forest)
        )

    def map(self):
        r = graph_inference.map_inference(self.potentials, method=self.map_method, warn=self.warn)
        return r.map_labels, r.map_score

    def top2(self, pred):
        map_labels, map_score = pred.map_labels, pred.map_score
        r = graph_inference.second_best(self.potentials, map_labels, map_score)
        labels = np.stack([map_labels, r.labels])
        labels[1, np.repeat(r.node < 0, self.potentials.sizes)] = -1
        return labels, np.column_stack([map_score, r.score])

    def marginals(self):
        routine = (
            graph_inference.mean_field
            if self.marginal_method == "mean_field"
            else graph_inference.belief_propagation
        )
        r = routine(self.potentials, log_partition=True, warn=self.warn, **self._marginal_options)
        return r.marginals, r.log_partition

    def pseudo_marginals(self, labels):
        return graph_inference.pseudo_marginals(self.potentials, labels)

    def neighbors(self):
        """CSR neighbour lists of every node: ``(indptr, indices)``."""
        adj = self.potentials.adjacency
        return adj.indptr, adj.neighbors


def _node_data_iv(node_data, n_nodes) -> dict:
    if node_data is None:
        return {}
    if not isinstance(node_data, dict):
        raise ParameterTypeError(
            f"`node_data` must be a dict of name -> array; got {describe(node_data)}"
        )
    out = {}
    for key, value in node_data.items():
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.shape[0] != n_nodes:
            raise ParameterError(
                f"`node_data[{key!r}]` must have one row per node (n_nodes={n_nodes}); got "
                f"shape {arr.shape}"
            )
        out[str(key)] = arr
    return out


class StructuredPrediction:
    """The potentials of a batch of structured inputs, with inference results on demand.

    Parameters
    ----------
    potentials : ChainPotentials or GraphPotentials
        Log-potentials of the batch (from a structcal CRF or any other model).
    unstructured_scores : array-like of shape (n_nodes, n_states), optional
        Scores of an unstructured per-position classifier (e.g. a linear SVM on single
        letters); needed only by the ``phi_no*`` features.
    node_data : dict of str to array-like of shape (n_nodes, ...), optional
        Other per-node inputs that features may read, e.g. ``"coords"`` (pixel row and
        column, for the shape features of object events) and ``"intensity"`` (image
        intensity, for their contrast feature).
    **inference_options
        Options for the backend (e.g. mean-field settings for graphs).

    Attributes
    ----------
    potentials : ChainPotentials or GraphPotentials
    n_items : int
        Number of structured inputs (chains or graphs).
    n_nodes : int
        Total number of positions/nodes.
    n_states : int
    item_offsets : ndarray of shape (n_items + 1,)
        Item ``i`` has nodes ``item_offsets[i]:item_offsets[i + 1]``.
    computed : set of str
        Which inference results have been computed so far (``"map"``, ``"top2"``,
        ``"marginals"``, ``"pseudo_marginals"``).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials, StructuredPrediction
    >>> p = ChainPotentials.from_list([np.log([[0.6, 0.4], [0.3, 0.7]])], np.zeros((2, 2)))
    >>> pred = StructuredPrediction(p)
    >>> pred.map_labels.tolist(), sorted(pred.computed)
    ([0, 1], ['map'])
    >>> np.round(pred.map_probability, 2).tolist(), sorted(pred.computed)
    ([0.42], ['map', 'marginals'])
    """

    def __init__(
        self, potentials, *, unstructured_scores=None, node_data=None, **inference_options
    ):
        for ptype, backend in _BACKENDS:
            if isinstance(potentials, ptype):
                self._backend = backend(potentials, **inference_options)
                self._options = dict(inference_options)
                break
        else:
            raise ParameterTypeError(
                f"`potentials` must be a ChainPotentials or GraphPotentials; got "
                f"{describe(potentials)}"
            )
        self.potentials = potentials
        self.item_offsets = np.asarray(self._backend.item_offsets)
        self.n_items = int(self.item_offsets.shape[0] - 1)
        self.n_nodes = int(self.item_offsets[-1])
        self.n_states = int(self._backend.n_states)
        if unstructured_scores is not None:
            unstructured_scores = as_float_array(
                unstructured_scores, "unstructured_scores", ndim=2,
                shape=(self.n_nodes, self.n_states),
            )
        self.unstructured_scores = unstructured_scores
        self.node_data = _node_data_iv(node_data, self.n_nodes)
        self._cache: dict = {}

    # ------------------------------------------------------------------ bookkeeping

    @property
    def computed(self) -> set:
        """Names of the inference results computed so far."""
        return {k for k in ("map", "top2", "marginals", "pseudo_marginals") if k in self._cache}

    @property
    def exact(self) -> bool:
        """Whether marginals and the 2-best list are exact (chains) or approximate (loopy graphs)."""
        return bool(self._backend.exact)

    @property
    def independent_items(self) -> bool:
        """Whether inference on a subset of the items gives the same results for them (chains)."""
        return bool(self._backend.independent_items)

    @property
    def lengths(self) -> np.ndarray:
        """Number of nodes of each item, shape (n_items,)."""
        return np.diff(self.item_offsets)

    @property
    def item_index(self) -> np.ndarray:
        """Item of each node, shape (n_nodes,)."""
        return np.repeat(np.arange(self.n_items, dtype=np.int64), self.lengths)

    @property
    def position_index(self) -> np.ndarray:
        """Position of each node within its item, shape (n_nodes,)."""
        return np.arange(self.n_nodes, dtype=np.int64) - np.repeat(self.item_offsets[:-1], self.lengths)

    def _get(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # ------------------------------------------------------------------ MAP family

    @property
    def map_labels(self) -> np.ndarray:
        """MAP labeling of every item laid end to end, shape (n_nodes,)."""
        return self._get("map", self._backend.map)[0]

    @property
    def map_score(self) -> np.ndarray:
        """Unnormalised log-score of each item's MAP labeling, shape (n_items,)."""
        return self._get("map", self._backend.map)[1]

    @property
    def top2_labels(self) -> np.ndarray:
        """The best and second-best labelings, shape (2, n_nodes) (``-1`` where an item has one labeling)."""
        return self._get("top2", self._top2)[0]

    @property
    def top2_scores(self) -> np.ndarray:
        """Scores of the two best labelings, shape (n_items, 2) (``-inf`` where missing)."""
        return self._get("top2", self._top2)[1]

    def _top2(self):
        # the chain backend finds both best labelings at once; graphs start from the MAP
        return self._backend.top2(self)

    @property
    def pseudo_marginals(self) -> np.ndarray:
        """``p(y_j | y_-j = MAP_-j, x)`` (chains) or given the MAP neighbours (graphs), shape (n_nodes, n_states)."""
        return self._get("pseudo_marginals", lambda: self._backend.pseudo_marginals(self.map_labels))

    def neighbors(self):
        """CSR neighbour lists ``(indptr, indices)`` of every node (structure only, no inference)."""
        return self._get("_neighbors", self._backend.neighbors)

    # ------------------------------------------------------------------ marginal family

    @property
    def marginals(self) -> np.ndarray:
        """Node marginals ``p(y_j = a | x)``, shape (n_nodes, n_states)."""
        return self._get("marginals", self._backend.marginals)[0]

    @property
    def log_partition(self) -> np.ndarray:
        """Log-partition of each item, shape (n_items,) (approximate for loopy graphs)."""
        return self._get("marginals", self._backend.marginals)[1]

    @property
    def marginal_argmax(self) -> np.ndarray:
        """``argmax_a p(y_j = a | x)`` of every node, shape (n_nodes,)."""
        return self._get("_marginal_argmax", lambda: self.marginals.argmax(axis=1))

    @property
    def map_probability(self) -> np.ndarray:
        """Raw model probability ``p(MAP | x)`` of each item, shape (n_items,)."""
        return np.exp(np.minimum(self.map_score - self.log_partition, 0.0))

    def subset(self, items, *, keep_computed: bool = False) -> "StructuredPrediction":
        """A new prediction over the selected items.

        Parameters
        ----------
        items : array-like of int
            The items, in the order wanted.
        keep_computed : bool, default=False
            Carry over the inference results computed so far (MAP, top-2, marginals,
            pseudo-marginals) for those items instead of leaving them to be recomputed.
        """
        if not hasattr(self.potentials, "subset"):
            raise ParameterTypeError("these potentials do not support subset()")
        items = as_int_array(items, "items", ndim=1, low=0, high=self.n_items)
        rows = ragged_rows(self.item_offsets, items)[0]
        scores = None
        if self.unstructured_scores is not None:
            scores = self.unstructured_scores[rows]
        sub = StructuredPrediction(
            self.potentials.subset(items), unstructured_scores=scores,
            node_data={k: v[rows] for k, v in self.node_data.items()}, **self._options
        )
        if keep_computed:
            # (per-node, per-item) parts of each result; top-2 labels are (2, n_nodes)
            for key in ("map", "marginals", "top2"):
                if key in self._cache:
                    per_node, per_item = self._cache[key]
                    per_node = per_node[:, rows] if key == "top2" else per_node[rows]
                    sub._cache[key] = (per_node, per_item[items])
            for key in ("pseudo_marginals", "_marginal_argmax"):
                if key in self._cache:
                    sub._cache[key] = self._cache[key][rows]
        return sub

    def __repr__(self) -> str:
        return (
            f"StructuredPrediction(n_items={self.n_items}, n_nodes={self.n_nodes}, "
            f"n_states={self.n_states}, computed={sorted(self.computed)})"
        )
