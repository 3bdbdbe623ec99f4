r"""Features of events: Table 1 of Kuleshov & Liang (2015) and user-registered ones.

A feature maps each event ``E`` of an input ``x`` to numbers ``phi(x, E)`` that a
forecaster turns into a calibrated probability. Every feature declares

- its *scope*: ``"item"`` features describe per-input events (the MAP event, lexicon
  events, predicates; the paper's MAP-recalibration features) and ``"node"`` features
  describe per-position events (the marginal events; the marginal-recalibration features);
- events covering a set of nodes (entities, segmented objects; scope ``"set"``, and
  ``"span"`` for contiguous sets of a chain) are described by the ``set_*`` features
  (reductions of per-node quantities over the set's members), the ``span_*`` features for
  spans, and every ``"item"`` feature of their input;
- the inference it *needs*: nothing (``"none"``), MAP-based results (``"map"``: MAP,
  2-best, pseudo-marginals) and/or marginals (``"marginals"``). Features only read what they
  declared from the :class:`~structcal.StructuredPrediction`, which computes each result the
  first time it is asked for, so a feature set that needs only MAP never runs
  forward-backward.

Table 1 (``mrg`` is the gap between the two largest values; ``s^SVM`` the scores of an
unstructured per-position classifier; the *target* of a per-node event is the label it asks
about, the MAP label for marginal events):

=========  =====  =========  ==========================================================
name       scope  needs      definition
=========  =====  =========  ==========================================================
phi_no1    item   none       :math:`\min_j \mathrm{mrg}\, s^{SVM}_j` (unstructured margin)
phi_mp1    item   none       :math:`|y^{MAP}|` (length)
phi_mp2    item   map        :math:`I[y^{MAP} \in G]` (admissibility in the lexicon G)
phi_mp3    item   map        :math:`\log p(y^{(1)}|x) - \log p(y^{(2)}|x)` (top-2 margin)
phi_mg1    item   marginals  :math:`\min_j \mathrm{mrg}\, p(y_j | x)`
phi_no2    node   none       :math:`\mathrm{mrg}\, s^{SVM}_j`
phi_mp4    node   map        fraction of positions whose MAP label is the target
phi_mp5    node   map        fraction of neighbours of j whose MAP label is the target
phi_mp6    node   map        :math:`I[\text{target} = a]` for each a in the label set L
phi_mp7    node   map        :math:`\mathrm{mrg}\, p(y_j | y^{MAP}_{-j}, x)` (pseudomargin)
phi_mg2    node   marginals  :math:`\mathrm{mrg}\, p(y_j | x)`
phi_mg3    node   both       :math:`I[\arg\max p(y_j|x) = \text{target}]` (concordance)
=========  =====  =========  ==========================================================

Two more features apply to every event: ``raw`` (the model's own probability of the event,
where it has one) and ``map_in_event`` (:math:`I[y^{MAP} \in E]`).

A feature also declares what it *requires* from the inputs beyond the potentials (names of
:data:`REQUIREMENTS`): ``phi_no*`` the scores of an unstructured classifier, ``phi_mp2`` a
lexicon, ``raw`` an event kind with a model probability on the given potentials.
:meth:`Feature.missing` says what is lacking; ``features='auto'`` in
:func:`~structcal.events.build_events` keeps exactly the features whose requirements hold.

Conventions for degenerate inputs: an item with no nodes has ``phi_no1 = 0`` and
``phi_mg1 = 1``; a node without neighbours has ``phi_mp5 = 0``; with a single state every
margin is 1; ``phi_mp3`` is capped at :data:`MAP_MARGIN_CAP` nats (it is infinite when an
item has a single labeling of finite score).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ._ragged import ragged_rows
from ._validation import describe
from .exceptions import ParameterError, ParameterTypeError

__all__ = [
    "Feature",
    "FeatureContext",
    "register_feature",
    "get_feature",
    "feature_names",
    "FEATURE_GROUPS",
    "MAP_MARGIN_CAP",
    "REQUIREMENTS",
    "Requirement",
]

#: Cap, in nats, of the top-2 margin ``phi_mp3`` (a probability ratio of e^100).
MAP_MARGIN_CAP = 100.0

_NEEDS = frozenset({"map", "marginals"})

#: For events of each scope, the scopes of the features that describe them.
SCOPES = {
    "item": ("item",),
    "node": ("node",),
    "set": ("set", "item"),
    "span": ("span", "set", "item"),
    "object": ("object", "set", "item"),
}


@dataclass(frozen=True)
class Feature:
    """A feature of events.

    Parameters
    ----------
    name : str
        Unique name (the paper's features are ``phi_no1`` ... ``phi_mg3``).
    scope : {'item', 'node', 'set', 'span', 'object'}
        Which events it describes (see :data:`SCOPES`).
    needs : frozenset of {'map', 'marginals'}
        The inference results it reads (empty: none).
    func : callable
        ``func(ctx) -> ndarray`` of shape (n_events,) or (n_events, n_columns), given a
        :class:`FeatureContext`.
    columns : callable, optional
        ``columns(ctx) -> list of str``: names of the columns of a multi-column feature
        (each is reported as ``name[column]``).
    requires : tuple of str
        What the inputs must provide for the feature to be defined: names of
        :data:`REQUIREMENTS` (``"unstructured_scores"``, ``"lexicon"``, ``"probability"``).
    description : str
        One line shown in listings.
    """

    name: str
    scope: str
    needs: frozenset
    func: Callable
    columns: Callable | None = None
    requires: tuple = ()
    description: str = ""

    def missing(self, pred, kind, lexicon=None) -> list[str]:
        """What the inputs lack for this feature: one sentence per unmet requirement.

        Parameters
        ----------
        pred : StructuredPrediction
        kind : EventKind
            The kind of the events the feature would describe.
        lexicon : Lexicon or None

        Returns
        -------
        list of str
            Empty when the feature is defined on these inputs.
        """
        return [
            REQUIREMENTS[r].needs for r in self.requires
            if not REQUIREMENTS[r].check(pred, kind, lexicon)
        ]

    def column_names(self, ctx) -> list[str]:
        """Names of the table columns this feature produces."""
        if self.columns is None:
            return [self.name]
        return [f"{self.name}[{c}]" for c in self.columns(ctx)]


@dataclass
class FeatureContext:
    """What a feature function sees: the prediction, the events and the user's context.

    Attributes
    ----------
    pred : StructuredPrediction
    kind : EventKind
        The kind of the events being described.
    events : EventInstances
        ``item``, ``node`` and target ``label`` of each event.
    lexicon : Lexicon or None
        Admissible labelings G (for ``phi_mp2``).
    label_set : ndarray of int
        The confusable labels L (for ``phi_mp6``; all labels by default).
    label_names : sequence of str or None
        Display names of labels (e.g. an alphabet) used in column names.
    """

    pred: object
    kind: object
    events: object
    lexicon: object = None
    label_set: np.ndarray | None = None
    label_names: object = None
    _memo: dict = field(default_factory=dict, repr=False)

    def memo(self, key, compute):
        """Compute ``compute()`` once per table build (shared between features)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


@dataclass(frozen=True)
class Requirement:
    """Something a feature needs from the inputs, beyond the potentials.

    Attributes
    ----------
    name : str
        The name features list in ``requires``.
    check : callable
        ``check(pred, kind, lexicon) -> bool``: whether the inputs provide it.
    needs : str
        What is missing when the check fails, as the end of a sentence ("needs ...").
    """

    name: str
    check: Callable
    needs: str


def _has_node_coords(pred, kind, lexicon):
    return "coords" in pred.node_data


def _has_node_intensity(pred, kind, lexicon):
    return "intensity" in pred.node_data


def _has_unstructured_scores(pred, kind, lexicon):
    return pred.unstructured_scores is not None


def _has_lexicon(pred, kind, lexicon):
    return lexicon is not None


def _has_probability(pred, kind, lexicon):
    return kind.has_probability_for(pred)


#: The requirements a feature can declare (``Feature.requires``). A feature set like
#: ``features='auto'`` keeps the features whose requirements the inputs meet.
REQUIREMENTS = {
    r.name: r
    for r in (
        Requirement(
            "unstructured_scores", _has_unstructured_scores,
            "the scores of an unstructured classifier: pass unstructured_scores= to "
            "StructuredPrediction",
        ),
        Requirement("lexicon", _has_lexicon, "a `lexicon`"),
        Requirement(
            "node_coords", _has_node_coords,
            "node coordinates: pass node_data={'coords': ...} to StructuredPrediction (e.g. "
            "structcal.potentials.grid_coordinates)",
        ),
        Requirement(
            "node_intensity", _has_node_intensity,
            "an image intensity per node: pass node_data={'intensity': ...} to "
            "StructuredPrediction",
        ),
        Requirement(
            "probability", _has_probability,
            "the model's probability of the events, and this event kind has no model "
            "probability on these potentials",
        ),
    )
}

_REGISTRY: dict[str, Feature] = {}


def register_feature(
    name: str,
    *,
    scope: str,
    needs=(),
    columns: Callable | None = None,
    requires=(),
    description: str = "",
    replace: bool = False,
):
    """Register a feature function (usable as a decorator).

    Parameters
    ----------
    name : str
        Name used to select the feature in :func:`~structcal.events.build_events`.
    scope : {'item', 'node', 'set', 'span', 'object'}
        Describes per-input, per-position, node-set or span events (item features also
        describe node-set and span events; set features also span events).
    needs : iterable of {'map', 'marginals'}, default=()
        Inference results the function reads from ``ctx.pred``.
    columns : callable, optional
        Column names of a multi-column feature.
    requires : iterable of str, default=()
        What the inputs must provide (names of :data:`REQUIREMENTS`):
        ``"unstructured_scores"``, ``"lexicon"``, ``"probability"`` (the event kind has a
        model probability on the given potentials).
    description : str, default=''
    replace : bool, default=False
        Allow replacing an existing feature of the same name.

    Returns
    -------
    callable
        A decorator that registers ``func(ctx) -> ndarray`` and returns it unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.features import register_feature
    >>> @register_feature("first_label_is_zero", scope="item", needs=["map"], replace=True)
    ... def _first_zero(ctx):
    ...     first = ctx.pred.item_offsets[:-1][ctx.events.item]
    ...     return (ctx.pred.map_labels[first] == 0).astype(float)
    """
    if not isinstance(name, str) or not name:
        raise ParameterTypeError(f"`name` must be a non-empty str; got {describe(name)}")
    if scope not in SCOPES:
        raise ParameterError(f"`scope` must be one of {sorted(SCOPES)}; got {scope!r}")
    needs = frozenset(needs)
    if not needs <= _NEEDS:
        raise ParameterError(f"`needs` must be a subset of {sorted(_NEEDS)}; got {sorted(needs)}")
    requires = tuple(requires)
    bad = set(requires) - set(REQUIREMENTS)
    if bad:
        raise ParameterError(
            f"unknown `requires` entries {sorted(bad)}; known: {sorted(REQUIREMENTS)}"
        )

    def deco(func):
        if not callable(func):
            raise ParameterTypeError(f"a feature must be callable; got {describe(func)}")
        if name in _REGISTRY and not replace:
            raise ParameterError(f"a feature named {name!r} is already registered (pass replace=True)")
        _REGISTRY[name] = Feature(name, scope, needs, func, columns, requires, description)
        return func

    return deco


_ALIASES = {}


def get_feature(name) -> Feature:
    """Look up a registered feature by name (``phi_mp3``, ``φmp3`` and ``mp3`` all work)."""
    if isinstance(name, Feature):
        return name
    if not isinstance(name, str):
        raise ParameterTypeError(f"a feature is named by a string; got {describe(name)}")
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise ParameterError(
            f"unknown feature {name!r}; registered features: {sorted(_REGISTRY)}"
        )
    return _REGISTRY[key]


def feature_names(scope: str | None = None) -> list[str]:
    """Names of the registered features (of one scope if given)."""
    if scope is not None and scope not in SCOPES:
        raise ParameterError(f"`scope` must be None or one of {sorted(SCOPES)}; got {scope!r}")
    return sorted(n for n, f in _REGISTRY.items() if scope is None or f.scope == scope)


# --------------------------------------------------------------------------- helpers


def _margin_rows(x: np.ndarray) -> np.ndarray:
    """Gap between the largest and second-largest entry of each row (the whole max if K=1)."""
    if x.shape[1] == 1:
        return np.ones(x.shape[0]) if x.size else np.zeros(0)
    if x.shape[1] == 2:  # (the same numbers, without a partition)
        return np.abs(x[:, 0] - x[:, 1])
    top2 = -np.partition(-x, 1, axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1]


def _min_per_item(ctx, values: np.ndarray, empty: float) -> np.ndarray:
    pred = ctx.pred
    out = np.full(pred.n_items, np.inf)
    np.minimum.at(out, pred.item_index, values)
    out[pred.lengths == 0] = empty
    return out[ctx.events.item]


def _node_margins(ctx, key, matrix_fn):
    return ctx.memo(key, lambda: _margin_rows(matrix_fn()))


def _svm_margins(ctx):
    return _node_margins(ctx, "svm_margin", lambda: ctx.pred.unstructured_scores)


def _marginal_margins(ctx):
    return _node_margins(ctx, "marginal_margin", lambda: ctx.pred.marginals)


# --------------------------------------------------------------------------- generic


def _raw(ctx):
    return ctx.memo("raw", lambda: ctx.kind.probabilities(ctx.pred, ctx.events))


def _map_in_event(ctx):
    return ctx.kind.map_in_event(ctx.pred, ctx.events).astype(np.float64)


for _scope in SCOPES:
    _REGISTRY[f"raw@{_scope}"] = Feature(
        "raw", _scope, frozenset({"marginals"}), _raw, requires=("probability",),
        description="the model's own probability of the event",
    )
    _REGISTRY[f"map_in_event@{_scope}"] = Feature(
        "map_in_event", _scope, frozenset({"map"}), _map_in_event,
        description="I[MAP in E]",
    )

# --------------------------------------------------------------------------- MAP events


@register_feature("phi_no1", scope="item", requires=["unstructured_scores"],
                  description="lowest unstructured (SVM) margin over positions")
def _phi_no1(ctx):
    return _min_per_item(ctx, _svm_margins(ctx), empty=0.0)


@register_feature("phi_mp1", scope="item", description="label length |y^MAP|")
def _phi_mp1(ctx):
    return ctx.pred.lengths[ctx.events.item].astype(np.float64)


@register_feature("phi_mp2", scope="item", needs=["map"], requires=["lexicon"],
                  description="admissibility I[y^MAP in G]")
def _phi_mp2(ctx):
    inside = ctx.memo(
        "map_in_lexicon",
        lambda: ctx.lexicon.contains(ctx.pred.map_labels, ctx.pred.item_offsets),
    )
    return inside[ctx.events.item].astype(np.float64)


@register_feature("phi_mp3", scope="item", needs=["map"],
                  description="log p(MAP) - log p(2nd best), capped at MAP_MARGIN_CAP")
def _phi_mp3(ctx):
    scores = ctx.pred.top2_scores[ctx.events.item]
    with np.errstate(invalid="ignore"):
        gap = scores[:, 0] - scores[:, 1]
    return np.minimum(np.nan_to_num(gap, nan=MAP_MARGIN_CAP, posinf=MAP_MARGIN_CAP), MAP_MARGIN_CAP)


@register_feature("phi_mg1", scope="item", needs=["marginals"],
                  description="lowest marginal margin over positions")
def _phi_mg1(ctx):
    return _min_per_item(ctx, _marginal_margins(ctx), empty=1.0)


# --------------------------------------------------------------------------- marginal events


@register_feature("phi_no2", scope="node", requires=["unstructured_scores"],
                  description="unstructured (SVM) margin at the position")
def _phi_no2(ctx):
    return _svm_margins(ctx)[ctx.events.node]


@register_feature("phi_mp4", scope="node", needs=["map"],
                  description="fraction of positions whose MAP label is the target")
def _phi_mp4(ctx):
    pred = ctx.pred
    K = pred.n_states
    hist = ctx.memo(
        "map_label_hist",
        lambda: np.bincount(pred.item_index * K + pred.map_labels, minlength=pred.n_items * K)
        .reshape(pred.n_items, K),
    )
    items = ctx.events.item
    return hist[items, ctx.events.label] / np.maximum(pred.lengths[items], 1)


@register_feature("phi_mp5", scope="node", needs=["map"],
                  description="fraction of neighbours whose MAP label is the target")
def _phi_mp5(ctx):
    indptr, indices = ctx.pred.neighbors()
    nodes = ctx.events.node
    counts = indptr[nodes + 1] - indptr[nodes]
    # one flat pass over the neighbour lists of the event nodes
    rows, _ = ragged_rows(indptr, nodes)
    owner = np.repeat(np.arange(nodes.shape[0]), counts)
    same = ctx.pred.map_labels[indices[rows]] == ctx.events.label[owner]
    agree = np.bincount(owner, weights=same, minlength=nodes.shape[0])
    return np.where(counts > 0, agree / np.maximum(counts, 1), 0.0)


def _label_set_columns(ctx):
    labels = ctx.label_set if ctx.label_set is not None else np.arange(ctx.pred.n_states)
    if ctx.label_names is not None:
        return [str(ctx.label_names[a]) for a in labels]
    return [str(int(a)) for a in labels]


@register_feature("phi_mp6", scope="node", needs=["map"], columns=_label_set_columns,
                  description="one indicator per label a in L: I[target = a]")
def _phi_mp6(ctx):
    labels = ctx.label_set if ctx.label_set is not None else np.arange(ctx.pred.n_states)
    return (ctx.events.label[:, None] == np.asarray(labels)[None, :]).astype(np.float64)


@register_feature("phi_mp7", scope="node", needs=["map"],
                  description="pseudomargin: margin of p(y_j | y^MAP_-j, x)")
def _phi_mp7(ctx):
    return _node_margins(ctx, "pseudo_margin", lambda: ctx.pred.pseudo_marginals)[ctx.events.node]


@register_feature("phi_mg2", scope="node", needs=["marginals"],
                  description="margin of the marginal p(y_j | x)")
def _phi_mg2(ctx):
    return _marginal_margins(ctx)[ctx.events.node]


@register_feature("phi_mg3", scope="node", needs=["map", "marginals"],
                  description="concordance I[argmax p(y_j|x) = target]")
def _phi_mg3(ctx):
    return (ctx.pred.marginal_argmax[ctx.events.node] == ctx.events.label).astype(np.float64)


for _name in list(_REGISTRY):
    if _name.startswith("phi_"):
        _ALIASES["φ" + _name[4:]] = _name
        _ALIASES[_name[4:]] = _name

# --------------------------------------------------------------------------- node-set events


def _set_reduce(ctx, key, per_node_fn, op, labels=False):
    from .events.nodesets import member_values, segment_reduce

    values = ctx.memo(("members", key), lambda: member_values(ctx.events, per_node_fn(), labels))
    return segment_reduce(values, ctx.events.member_offsets, op, empty=1.0)


def _class_columns(ctx):
    names = getattr(ctx.kind, "class_names", None)
    if names is None:
        return [str(a) for a in range(ctx.pred.n_states)]
    return [str(n) for n in names]


@register_feature("set_size", scope="set", description="number of nodes in the event's set")
def _set_size(ctx):
    return np.diff(ctx.events.member_offsets).astype(np.float64)


@register_feature("set_class", scope="set", columns=_class_columns,
                  description="one indicator per class (entity type, object label)")
def _set_class(ctx):
    n = len(_class_columns(ctx))
    return (ctx.events.label[:, None] == np.arange(n)[None, :]).astype(np.float64)


@register_feature("set_min_marginal", scope="set", needs=["marginals"],
                  description="min over the set of p(y_j = target_j | x)")
def _set_min_marginal(ctx):
    return _set_reduce(ctx, "marginal", lambda: ctx.pred.marginals, "min", labels=True)


@register_feature("set_mean_marginal", scope="set", needs=["marginals"],
                  description="mean over the set of p(y_j = target_j | x)")
def _set_mean_marginal(ctx):
    return _set_reduce(ctx, "marginal", lambda: ctx.pred.marginals, "mean", labels=True)


@register_feature("set_prod_marginal", scope="set", needs=["marginals"],
                  description="product over the set of p(y_j = target_j | x) (the naive estimate)")
def _set_prod_marginal(ctx):
    return _set_reduce(ctx, "marginal", lambda: ctx.pred.marginals, "prod", labels=True)


@register_feature("set_min_pseudo_margin", scope="set", needs=["map"],
                  description="min over the set of the pseudomargin (phi_mp7)")
def _set_min_pseudo_margin(ctx):
    per_node = lambda: _node_margins(ctx, "pseudo_margin", lambda: ctx.pred.pseudo_marginals)  # noqa: E731
    return _set_reduce(ctx, "pseudo_margin", per_node, "min")


@register_feature("set_min_marginal_margin", scope="set", needs=["marginals"],
                  description="min over the set of the marginal margin (phi_mg2)")
def _set_min_marginal_margin(ctx):
    return _set_reduce(ctx, "marginal_margin", lambda: _marginal_margins(ctx), "min")


@register_feature("span_boundary", scope="span", needs=["marginals"],
                  columns=lambda ctx: ["start", "end"],
                  description="exact probability that the span's left / right boundary holds")
def _span_boundary(ctx):
    return ctx.memo("span_boundary", lambda: ctx.kind.boundary_probabilities(ctx.pred, ctx.events))


#: Feature groups of the paper's Figure 3 (and "all" = every Table 1 feature of a scope).
FEATURE_GROUPS = {
    "item": {
        "phi_no1": ["phi_no1"],
        "phi_mp1+phi_mp2": ["phi_mp1", "phi_mp2"],
        "phi_mp3": ["phi_mp3"],
        "phi_mg1": ["phi_mg1"],
        "all": ["phi_no1", "phi_mp1", "phi_mp2", "phi_mp3", "phi_mg1"],
    },
    "node": {
        "phi_no2": ["phi_no2"],
        "phi_mp6": ["phi_mp6"],
        "phi_mg2": ["phi_mg2"],
        "phi_mg2+phi_mg3": ["phi_mg2", "phi_mg3"],
        "all": ["phi_no2", "phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7", "phi_mg2", "phi_mg3"],
    },
}
_SET_FEATURES = [
    "set_size", "set_class", "set_min_marginal", "set_mean_marginal", "set_prod_marginal",
    "set_min_pseudo_margin", "set_min_marginal_margin",
]
FEATURE_GROUPS["set"] = {"set": _SET_FEATURES, "all": FEATURE_GROUPS["item"]["all"] + _SET_FEATURES}
FEATURE_GROUPS["span"] = {
    "set": _SET_FEATURES + ["span_boundary"],
    "all": FEATURE_GROUPS["item"]["all"] + _SET_FEATURES + ["span_boundary"],
}


def base_name(name) -> str:
    """Canonical name of a feature given by name, alias or Feature object."""
    if isinstance(name, Feature):
        return name.name
    if name in ("raw", "map_in_event"):
        return name
    return get_feature(name).name


def resolve(name, scope) -> Feature | None:
    """The feature ``name`` for events of ``scope``, or None if it does not apply."""
    if isinstance(name, Feature):
        return name if name.scope in SCOPES[scope] else None
    if name in ("raw", "map_in_event"):
        return _REGISTRY[f"{name}@{scope}"]
    f = get_feature(name)
    return f if f.scope in SCOPES[scope] else None
