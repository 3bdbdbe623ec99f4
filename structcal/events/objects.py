"""Object events of segmentations: connected components of a predicted class.

A *predicted object* is a connected component of the nodes that the MAP labeling gives
one (non-background) class: two nodes are in the same object when a path of edges joins
them through nodes of that class. :class:`ObjectEvents` asks, for every predicted object,
"does it match a gold object (a connected component of the same class in the true
labeling) with intersection-over-union at least ``iou_threshold``?". Per image,
:class:`AllObjectsFound` asks "is every gold object matched by a predicted one?" and
:class:`ObjectCountCorrect` "is the number of predicted objects right?".

Components come from the graph itself (``scipy.sparse.csgraph.connected_components`` on
the edges joining two nodes of the same class), not from image arrays: the same code
serves any graph, and on a pixel grid the objects are those of ``scipy.ndimage.label``
with the structuring element of the CRF's connectivity (4 or 8), so the objects are
connected in exactly the sense the CRF's pairwise terms see. Object events are node-set
events (:mod:`structcal.events.nodesets`): each carries its ``members``.

The raw model probability of an object event
--------------------------------------------
Under a loopy CRF no probability of "matches a gold object with IoU >= t" is tractable.
:class:`ObjectEvents` reports, by default (``raw="factorised"``), the probability under
the factorised marginals ``q`` (mean field, or BP's beliefs) that the true labeling has
*exactly* this object: every member takes the class and every node of the outer boundary
does not, ``prod_i q_i(c) prod_{j in boundary} (1 - q_j(c))``. It is cheap (one pass over
the members and their boundary), deterministic, and a lower bound on the probability of
the event under ``q`` (an exact copy of the object matches it with IoU 1). It is known
to be far too low for large objects with uncertain rims - which is what recalibration
corrects. The two Monte Carlo estimates count the fraction of ``n_samples`` labelings in
which the event holds (the same outcome code as for the gold labeling; one
connected-components pass per sample): ``raw="sampled"`` draws the labelings node by node
from ``q`` (independent pixels: the event's probability under ``q``), ``raw="gibbs"``
from the CRF itself by Gibbs sampling (:func:`~structcal.inference.graph.gibbs_sample`,
started at the MAP labeling, 20 burn-in sweeps, a sample every 2 sweeps), which keeps
the correlations between neighbouring pixels that ``q`` drops. The per-image kinds
always estimate by sampling, from ``q`` or (``raw="gibbs"``) from the CRF. Kinds with the
same ``random_state`` (an int) and sample source share their samples. Each image draws
from its own random stream, seeded by ``random_state`` and the image's own potentials
(:mod:`structcal._random`): an image's sampled probabilities are the same alone, in any
batch, in any partition of a distributed run.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import numpy as np

from .._ragged import offsets_from_lengths
from .._validation import (
    as_float_array, as_int_array, check_csr_graph, check_float, check_int, check_option, describe,
)
from ..exceptions import ParameterError, ParameterTypeError
from ..features import FEATURE_GROUPS, register_feature
from .kinds import EventInstances, EventKind, _per_item
from .nodesets import NodeSetKind, member_values, outer_boundary, segment_reduce


def _kernels():
    """The Numba kernels of this module (imported on first use: importing Numba costs
    about 0.2 s, which ``import structcal`` does not pay)."""
    from . import _kernels as kernels

    return kernels

__all__ = [
    "ObjectEvents",
    "AllObjectsFound",
    "ObjectCountCorrect",
    "label_components",
    "match_objects",
    "object_table",
]


# ---------------------------------------------------------------------------- components


def _edges_from_csr(indptr, indices):
    """Each undirected edge once, as ``(src, dst)`` with ``src < dst``."""
    src = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    keep = src < indices
    return src[keep], indices[keep]


def label_components(labels, indptr, indices, background=0) -> tuple[np.ndarray, int]:
    """Find the connected components of the nodes of each non-background class.

    Parameters
    ----------
    labels : ndarray of shape (n_nodes,), int
        A labeling of every node.
    indptr, indices : ndarray
        CSR neighbour lists of every node (e.g. ``StructuredPrediction.neighbors()``).
    background : int or None, default=0
        Label whose nodes belong to no object (None: every label forms objects).

    Returns
    -------
    component : ndarray of shape (n_nodes,), int64
        Component of each node (``-1`` for background nodes), numbered in the order of
        their smallest node (so by item, then by first pixel in row-major order).
    n_components : int

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.events.objects import label_components
    >>> # a path 0-1-2-3-4 labelled 1 1 0 1 2: objects {0, 1}, {3} and {4}
    >>> indptr = np.array([0, 1, 3, 5, 7, 8]); indices = np.array([1, 0, 2, 1, 3, 2, 4, 3])
    >>> label_components(np.array([1, 1, 0, 1, 2]), indptr, indices)
    (array([ 0,  0, -1,  1,  2]), 3)
    """
    labels = as_int_array(labels, "labels", ndim=1)
    n = labels.shape[0]
    indptr, indices = check_csr_graph(indptr, indices, n)
    background = -1 if background is None else check_int(background, "background")
    component = np.empty(n, dtype=np.int64)
    n_comp = _kernels().components(labels, indptr, indices, background, component,
                                   np.empty(n, dtype=np.int64))
    return component, int(n_comp)


def _sets(component, n_components):
    """Members of every component laid end to end (increasing nodes), and offsets."""
    nodes = np.flatnonzero(component >= 0)
    order = np.argsort(component[nodes], kind="stable")
    members = nodes[order].astype(np.int64)
    offsets = offsets_from_lengths(np.bincount(component[nodes], minlength=n_components))
    return members, offsets


def match_objects(component, n_components, gold_component, n_gold, labels=None,
                  gold_labels=None) -> tuple[np.ndarray, np.ndarray]:
    """Best IoU of every predicted object with a gold object of the same class, and vice versa.

    A predicted and a gold object overlap on the nodes they share *with the same class in
    both labelings*; objects of different classes never match, however much they overlap.

    Parameters
    ----------
    component, gold_component : ndarray of shape (n_nodes,), int64
        Predicted and gold components (``-1`` outside objects), e.g. from
        :func:`label_components` on the MAP and on the true labeling.
    n_components, n_gold : int
    labels, gold_labels : ndarray of shape (n_nodes,), int, optional
        The two labelings the components come from (their classes). Both or neither:
        without them every object is taken to be of one class (a binary segmentation).

    Returns
    -------
    best_iou : ndarray of shape (n_components,)
        Largest IoU of each predicted object with any gold object (0 if none overlaps).
    gold_best_iou : ndarray of shape (n_gold,)
        Largest IoU of each gold object with any predicted object.
    """
    n_components = check_int(n_components, "n_components", low=0)
    n_gold = check_int(n_gold, "n_gold", low=0)
    component = as_int_array(component, "component", ndim=1, low=-1, high=n_components)
    gold_component = as_int_array(gold_component, "gold_component", ndim=1, low=-1, high=n_gold)
    if component.shape != gold_component.shape:
        raise ParameterError(
            f"`component` and `gold_component` must cover the same nodes; got shapes "
            f"{component.shape} and {gold_component.shape}"
        )
    if (labels is None) != (gold_labels is None):
        raise ParameterError("pass both `labels` and `gold_labels`, or neither")
    if labels is None:
        labels = gold_labels = np.zeros(component.shape[0], dtype=np.int64)
    labels = as_int_array(labels, "labels", ndim=1)
    gold_labels = as_int_array(gold_labels, "gold_labels", ndim=1)
    if labels.shape != component.shape or gold_labels.shape != component.shape:
        raise ParameterError(
            f"`labels` and `gold_labels` must have one class per node {component.shape}; got "
            f"{labels.shape} and {gold_labels.shape}"
        )
    best = np.empty(n_components)
    gold_best = np.empty(n_gold)
    _kernels().match(component, int(n_components), gold_component, int(n_gold), labels,
                     gold_labels, best, gold_best)
    return best, gold_best


def _components_of(pred, labels, background, key=None):
    """Components of a labeling of ``pred``'s nodes (cached on ``pred`` under ``key``)."""
    indptr, indices = pred.neighbors()
    compute = lambda: label_components(labels, indptr, indices, background)  # noqa: E731
    return compute() if key is None else pred._get(key, compute)


def _sample_labelings(marginals, offsets, seeds, sample):
    """Labeling number ``sample`` drawn node by node from the rows of ``marginals``, each
    item from its own stream (``seeds``, :func:`structcal._random.item_seeds`)."""
    out = np.empty(marginals.shape[0], dtype=np.int64)
    _kernels().sample_rows(np.ascontiguousarray(marginals), np.ascontiguousarray(offsets),
                           seeds, int(sample), out)
    return out


def _match(pred, background, labels):
    """The MAP objects matched against the objects of another labeling (gold, a sample).

    Returns ``(best, gold_best, gold_item, gold_per_item)``: each MAP object's best IoU
    with an object of ``labels``, each of those objects' best IoU with a MAP object, its
    item, and the number of objects of ``labels`` in each item.
    """
    component, n_comp = _components_of(pred, pred.map_labels, background,
                                       key=("_objects", background))
    gold, n_gold = _components_of(pred, labels, background)
    best, gold_best = match_objects(component, n_comp, gold, n_gold, pred.map_labels, labels)
    gold_item = pred.item_index[_first_nodes(gold, n_gold)]
    return best, gold_best, gold_item, np.bincount(gold_item, minlength=pred.n_items)


#: Gibbs chains of ``raw="gibbs"``: sweeps discarded, then sweeps between samples.
GIBBS_BURN_IN = 20
GIBBS_THIN = 2


def _sample_matches(pred, background, n_samples, random_state, source):
    """:func:`_match` for each of ``n_samples`` labelings (what every sampled probability
    of this module needs): drawn node by node from the marginals (``source="sampled"``)
    or from the CRF by Gibbs sampling from the MAP labeling (``source="gibbs"``).

    Cached on ``pred`` when ``random_state`` is an int, so that kinds with the same seed
    and source (e.g. :class:`AllObjectsFound` and :class:`ObjectCountCorrect`) share the
    samples.
    """
    def compute():
        if source == "gibbs":
            from ..inference.graph import _gibbs_chain
            from ..potentials import ChainPotentials, GraphPotentials

            p = pred.potentials
            if isinstance(p, ChainPotentials):
                p = GraphPotentials.from_chain(p)
            draws = _gibbs_chain(p, n_samples, GIBBS_BURN_IN, GIBBS_THIN,
                                 np.asarray(pred.map_labels, dtype=np.int64), random_state)
        else:
            from .._random import item_seeds

            q = pred.marginals
            seeds = item_seeds(pred.potentials.unary, pred.item_offsets, random_state)
            draws = (_sample_labelings(q, pred.item_offsets, seeds, k) for k in range(n_samples))
        return [_match(pred, background, y) for y in draws]

    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        key = ("_sample_matches", source, background, int(n_samples), int(random_state))
        return pred._get(key, compute)
    return compute()


def _first_nodes(component, n_components):
    """The smallest node of each component."""
    out = np.full(n_components, -1, dtype=np.int64)
    _kernels().first_nodes(np.ascontiguousarray(component, dtype=np.int64), out)
    return out


def _check_seed(random_state):
    """A saved kind's seed: None or a non-negative int (Generators are saved exactly)."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or \
            random_state < 0:
        raise ValueError(f"random_state must be None, a non-negative int or a Generator; got "
                         f"{random_state!r}")


def _check_common(background, iou_threshold):
    if background is not None:
        background = check_int(background, "background", low=0)
    iou_threshold = check_float(iou_threshold, "iou_threshold", low=0.0, high=1.0,
                                low_inclusive=False)
    return background, iou_threshold


# ---------------------------------------------------------------------------- kinds


class ObjectEvents(NodeSetKind):
    """One event per predicted object: "it matches a gold object with IoU >= iou_threshold".

    Parameters
    ----------
    background : int or None, default=0
        The label that forms no objects (None: every label does).
    iou_threshold : float, default=0.5
        In (0, 1]. At 0.5 or above a predicted object can match at most one gold object.
    raw : {"factorised", "sampled", "gibbs"}, default="factorised"
        The raw model probability (see the module docstring).
    n_samples : int, default=32
        Samples of ``raw="sampled"`` and ``raw="gibbs"``.
    random_state : int, Generator or None, default=0
        Seed of the samples.
    class_names : sequence of str, optional
        Names of the labels (for the ``set_class`` feature columns).
    name : str, default="object"

    Notes
    -----
    Events carry their object: ``members`` (its nodes, increasing), ``member_labels``
    and ``label`` (its class). The MAP labeling always lies in the event (its object
    matches itself with IoU 1). An image with no predicted object of any class gives no
    event; a class absent from an image is not an error.
    """

    scope = "object"
    contains_map = True

    probability_structures = ("chain", "graph")

    def __init__(self, *, background=0, iou_threshold=0.5, raw="factorised", n_samples=32,
                 random_state=0, class_names=None, name="object"):
        self.background, self.iou_threshold = _check_common(background, iou_threshold)
        self.raw = check_option(raw, "raw", ("factorised", "sampled", "gibbs"))
        self.n_samples = check_int(n_samples, "n_samples", low=1)
        self.random_state = random_state
        self.class_names = None if class_names is None else tuple(str(c) for c in class_names)
        self.name = str(name)

    def _check_parameters(self):
        _check_common(self.background, self.iou_threshold)
        check_option(self.raw, "raw", ("factorised", "sampled", "gibbs"))
        check_int(self.n_samples, "n_samples", low=1)
        _check_seed(self.random_state)
        if self.class_names is not None and not (
                isinstance(self.class_names, tuple) and all(isinstance(c, str) for c in self.class_names)):
            raise ValueError("ObjectEvents.class_names must be None or a tuple of str")

    def _map_components(self, pred):
        return _components_of(pred, pred.map_labels, self.background,
                              key=("_objects", self.background))

    def instances(self, pred):
        """One event per predicted object, with its members and class."""
        if self.background is not None and self.background >= pred.n_states:
            raise ParameterError(
                f"ObjectEvents: `background` must be < n_states={pred.n_states}; got "
                f"{self.background}"
            )
        component, n_comp = self._map_components(pred)
        members, offsets = _sets(component, n_comp)
        first = members[offsets[:-1]] if n_comp else np.zeros(0, np.int64)
        cls = pred.map_labels[first].astype(np.int64)
        return EventInstances(
            item=pred.item_index[first], node=np.full(n_comp, -1, dtype=np.int64), label=cls,
            members=members, member_offsets=offsets,
            member_labels=pred.map_labels[members].astype(np.int64),
        )

    def best_iou(self, pred, events, labels) -> np.ndarray:
        """Largest IoU of each event's object with an object of ``labels`` (e.g. gold)."""
        _, n_comp = self._map_components(pred)
        if len(events) != n_comp:
            raise ParameterError("`events` are not this kind's events of `pred`")
        return _match(pred, self.background, labels)[0]

    def outcomes(self, pred, events, y_true):
        """Whether each object matches an object of ``y_true`` at IoU >= the threshold."""
        return self.best_iou(pred, events, y_true) >= self.iou_threshold

    def map_in_event(self, pred, events):
        """Return all true: the MAP's object matches itself."""
        return np.ones(len(events), dtype=bool)

    def probabilities(self, pred, events):
        """Raw probability of each object event (see the module docstring)."""
        if self.raw != "factorised":
            matches = _sample_matches(pred, self.background, self.n_samples, self.random_state,
                                      self.raw)
            return np.mean([m[0] >= self.iou_threshold for m in matches], axis=0).reshape(-1)
        q = pred.marginals
        indptr, indices = pred.neighbors()
        boundary, b_off = outer_boundary(events.members, events.member_offsets, indptr, indices)
        b_cls = np.repeat(events.label, np.diff(b_off))
        with np.errstate(divide="ignore"):
            inside = segment_reduce(np.log(member_values(events, q, labels=True)),
                                    events.member_offsets, "sum")
            outside = segment_reduce(np.log1p(-np.minimum(q[boundary, b_cls], 1.0)), b_off, "sum")
        return np.exp(np.minimum(inside + outside, 0.0))

    def __repr__(self):
        return (f"ObjectEvents(background={self.background}, iou_threshold={self.iou_threshold}, "
                f"raw={self.raw!r})")


class _ImageObjectKind(EventKind, metaclass=ABCMeta):
    """Per-image events about the objects of a segmentation (raw probability sampled)."""

    scope = "item"
    contains_map = True

    def __init__(self, *, background=0, iou_threshold=0.5, raw="sampled", n_samples=32,
                 random_state=0, name):
        self.background, self.iou_threshold = _check_common(background, iou_threshold)
        self.raw = check_option(raw, "raw", ("sampled", "gibbs"))
        self.n_samples = check_int(n_samples, "n_samples", low=1)
        self.random_state = random_state
        self.name = str(name)

    def _check_parameters(self):
        _check_common(self.background, self.iou_threshold)
        check_option(self.raw, "raw", ("sampled", "gibbs"))
        check_int(self.n_samples, "n_samples", low=1)
        _check_seed(self.random_state)

    def instances(self, pred):
        if self.background is not None and self.background >= pred.n_states:
            raise ParameterError(
                f"{type(self).__name__}: `background` must be < n_states={pred.n_states}; got "
                f"{self.background}"
            )
        return _per_item(pred)

    @abstractmethod
    def _holds(self, pred, match):
        """Whether the event holds in each image, given the :func:`_match` of the MAP
        objects with the objects of the true labeling."""

    def outcomes(self, pred, events, y_true):
        return self._holds(pred, _match(pred, self.background, y_true))[events.item]

    def map_in_event(self, pred, events):
        return np.ones(len(events), dtype=bool)

    def probabilities(self, pred, events):
        matches = _sample_matches(pred, self.background, self.n_samples, self.random_state,
                                  self.raw)
        return np.mean([self._holds(pred, m)[events.item] for m in matches], axis=0).reshape(-1)

    def __repr__(self):
        return f"{type(self).__name__}(background={self.background}, raw={self.raw!r})"


def _objects_per_item(pred, component, n_comp):
    return np.bincount(pred.item_index[_first_nodes(component, n_comp)], minlength=pred.n_items)


class AllObjectsFound(_ImageObjectKind):
    """Per image: "every gold object is matched by a predicted object with IoU >= threshold".

    Holds vacuously for an image without gold objects. Parameters as
    :class:`ObjectEvents` (``name`` defaults to ``"all_found"``), except ``raw``: the raw
    probability is the fraction of sampled labelings in which the event holds, labelings
    drawn node by node from the marginals (``raw="sampled"``, the default) or from the
    CRF by Gibbs sampling (``raw="gibbs"``).
    """

    def __init__(self, *, background=0, iou_threshold=0.5, raw="sampled", n_samples=32,
                 random_state=0, name="all_found"):
        super().__init__(background=background, iou_threshold=iou_threshold, raw=raw,
                         n_samples=n_samples, random_state=random_state, name=name)

    def _holds(self, pred, match):
        _, gold_best, gold_item, _ = match
        missed = np.bincount(gold_item, weights=gold_best < self.iou_threshold,
                             minlength=pred.n_items)
        return missed == 0


class ObjectCountCorrect(_ImageObjectKind):
    """Per image: "the number of predicted objects equals the number of gold objects".

    Objects of every non-background class are counted together. Parameters as
    :class:`AllObjectsFound` (``iou_threshold`` is not used; ``name`` defaults to
    ``"count"``).
    """

    def __init__(self, *, background=0, raw="sampled", n_samples=32, random_state=0,
                 name="count"):
        super().__init__(background=background, raw=raw, n_samples=n_samples,
                         random_state=random_state, name=name)

    def _holds(self, pred, match):
        component, n_comp = _components_of(pred, pred.map_labels, self.background,
                                           key=("_objects", self.background))
        return _objects_per_item(pred, component, n_comp) == match[3]


def object_table(pred, kind: ObjectEvents | None = None) -> dict:
    """Return the predicted objects of a batch as plain arrays (for plots and reports).

    Returns
    -------
    dict with ``item``, ``label`` (class), ``size``, ``members``, ``member_offsets`` and
    ``component`` (the object of every node, ``-1`` outside objects).
    """
    from ..prediction import StructuredPrediction

    if not isinstance(pred, StructuredPrediction):
        raise ParameterTypeError(f"`pred` must be a StructuredPrediction; got {describe(pred)}")
    kind = ObjectEvents() if kind is None else kind
    if not isinstance(kind, ObjectEvents):
        raise ParameterTypeError(f"`kind` must be an ObjectEvents; got {describe(kind)}")
    ev = kind.instances(pred)
    component, _ = kind._map_components(pred)
    return {"item": ev.item, "label": ev.label, "size": np.diff(ev.member_offsets),
            "members": ev.members, "member_offsets": ev.member_offsets, "component": component}


# ---------------------------------------------------------------------------- features


def _node_data(ctx, key, feature):
    """``node_data[key]`` of the prediction, checked: finite numbers, ``coords`` of shape
    ``(n_nodes, 2)`` and ``intensity`` of shape ``(n_nodes,)``."""
    data = ctx.pred.node_data.get(key)
    if data is None:
        raise ParameterError(
            f"feature {feature!r} needs node_data[{key!r}] on the StructuredPrediction "
            f"(e.g. pixel coordinates from structcal.potentials.grid_coordinates)"
        )
    n = ctx.pred.n_nodes
    two = key == "coords"
    return as_float_array(data, f"node_data[{key!r}]", ndim=2 if two else 1,
                          shape=(n, 2) if two else (n,))


def _boundary(ctx):
    def compute():
        indptr, indices = ctx.pred.neighbors()
        return outer_boundary(ctx.events.members, ctx.events.member_offsets, indptr, indices)
    return ctx.memo("object_boundary", compute)


@register_feature("object_log_size", scope="object",
                  description="log of the number of nodes of the object")
def _object_log_size(ctx):
    return np.log(np.diff(ctx.events.member_offsets).astype(np.float64))


@register_feature("object_eccentricity", scope="object", requires=["node_coords"],
                  description="eccentricity of the ellipse with the object's second moments")
def _object_eccentricity(ctx):
    xy = _node_data(ctx, "coords", "object_eccentricity")
    ev = ctx.events
    r, c = xy[ev.members, 0], xy[ev.members, 1]
    off = ev.member_offsets
    mr, mc = segment_reduce(r, off, "mean", empty=0.0), segment_reduce(c, off, "mean", empty=0.0)
    owner = ev.member_event
    dr, dc = r - mr[owner], c - mc[owner]
    a = segment_reduce(dr * dr, off, "mean", empty=0.0)
    b = segment_reduce(dr * dc, off, "mean", empty=0.0)
    d = segment_reduce(dc * dc, off, "mean", empty=0.0)
    half = np.sqrt(((a - d) / 2) ** 2 + b * b)
    l1, l2 = (a + d) / 2 + half, (a + d) / 2 - half
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(l1 > 0, np.sqrt(np.clip(1.0 - l2 / l1, 0.0, 1.0)), 0.0)


@register_feature("object_solidity", scope="object", requires=["node_coords"],
                  description="pixels / area of the convex hull of the object's pixel squares")
def _object_solidity(ctx):
    xy = _node_data(ctx, "coords", "object_solidity")
    ev = ctx.events
    area = np.empty(len(ev))
    _kernels().pixel_hull_areas(np.ascontiguousarray(xy[ev.members, 0]),
                              np.ascontiguousarray(xy[ev.members, 1]),
                              np.ascontiguousarray(ev.member_offsets, dtype=np.int64), area)
    return np.diff(ev.member_offsets) / area


@register_feature("object_boundary_marginal", scope="object", needs=["marginals"],
                  description="mean marginal of the object's class on its outer boundary")
def _object_boundary_marginal(ctx):
    boundary, off = _boundary(ctx)
    cls = np.repeat(ctx.events.label, np.diff(off))
    return segment_reduce(ctx.pred.marginals[boundary, cls], off, "mean", empty=0.0)


@register_feature("object_rim_marginal", scope="object", needs=["marginals"],
                  description="mean marginal of the class over members with a neighbour outside")
def _object_rim_marginal(ctx):
    ev = ctx.events
    indptr, indices = ctx.pred.neighbors()
    inside = np.zeros(ctx.pred.n_nodes, dtype=bool)
    inside[ev.members] = True
    # a member is on the rim when one of its neighbours is outside its object (objects
    # of one class never touch, so "outside every object" and "outside its own" agree
    # except where objects of two classes touch: both count as outside)
    comp_of = np.full(ctx.pred.n_nodes, -1, dtype=np.int64)
    comp_of[ev.members] = ev.member_event
    deg = np.diff(indptr)
    src = np.repeat(np.arange(ctx.pred.n_nodes), deg)
    outside = comp_of[indices] != comp_of[src]
    rim_node = np.bincount(src, weights=outside, minlength=ctx.pred.n_nodes) > 0
    rim = rim_node[ev.members]
    q = member_values(ev, ctx.pred.marginals, labels=True)
    total = np.bincount(ev.member_event, weights=q * rim, minlength=len(ev))
    count = np.bincount(ev.member_event, weights=rim, minlength=len(ev))
    return np.where(count > 0, total / np.maximum(count, 1), 1.0)


@register_feature("object_mean_pseudo_margin", scope="object", needs=["map"],
                  description="mean over the object of the pseudomargin (phi_mp7)")
def _object_mean_pseudo_margin(ctx):
    from ..features import _margin_rows

    margins = ctx.memo("pseudo_margin", lambda: _margin_rows(ctx.pred.pseudo_marginals))
    return segment_reduce(margins[ctx.events.members], ctx.events.member_offsets, "mean",
                          empty=1.0)


@register_feature("object_contrast", scope="object", requires=["node_intensity"],
                  description="mean node_data['intensity'] inside minus on the outer boundary")
def _object_contrast(ctx):
    value = _node_data(ctx, "intensity", "object_contrast")
    boundary, off = _boundary(ctx)
    inside = segment_reduce(value[ctx.events.members], ctx.events.member_offsets, "mean",
                            empty=0.0)
    outside = segment_reduce(value[boundary], off, "mean", empty=np.nan)
    return np.where(np.isnan(outside), 0.0, inside - np.nan_to_num(outside))


#: Object features: shape and size, marginals inside / on the rim / outside, pseudomargin,
#: contrast (needs ``node_data["intensity"]``); shape features need ``node_data["coords"]``.
OBJECT_FEATURES = [
    "object_log_size", "object_eccentricity", "object_solidity", "set_mean_marginal",
    "set_min_marginal", "object_rim_marginal", "object_boundary_marginal",
    "object_mean_pseudo_margin", "object_contrast",
]
FEATURE_GROUPS["object"] = {
    "object": OBJECT_FEATURES,
    "all": FEATURE_GROUPS["set"]["all"] + OBJECT_FEATURES[:3] + OBJECT_FEATURES[5:],
}
