"""Generic state of fitted estimators as a JSON tree plus named arrays (private; used by io).

One mechanism for every estimator on the allow-list below: an estimator is stored as its
hyperparameters (``get_params(deep=False)``) and its fitted attributes (public attributes
ending in ``_``), recursively. Arrays go to the ``.npz`` part under a path-like key;
Python scalars, strings, lists and dicts stay in the JSON tree; nested estimators, event
kinds, lexicons and calibration maps become nested nodes. Anything else (a Python
function, a user ``Predicate``, an object array, a class off the allow-list) is refused
with a :class:`~structcal.exceptions.ParameterTypeError` naming where it was found.

Loading builds classes only from the allow-list (``ALLOWED``: class name -> module); no
name read from a file is imported otherwise, and nothing is unpickled.

Node types of the JSON tree (a dict with a ``"$type"`` key; any other dict is a plain
str-keyed dict):

``array``       ``{"key"}``: an entry of the ``.npz`` file (numeric/bool/str dtypes).
``scalar``      ``{"dtype", "value"}``: a NumPy scalar (bit-exact through JSON).
``tuple``       ``{"items"}``.
``dict``        ``{"items": [[key, value], ...]}``: a dict with non-str or ``$``-keys.
``estimator``   ``{"class", "version", "params", "fitted"}``.
``object``      ``{"class", "version", "attrs"}``: a plain container (its ``__dict__``).
``model``       ``{"class", "version", "state", "prefix"}``: a class with its own
                ``_to_state``/``_from_state`` (the CRFs).
``feature``     ``{"name"}``: a registered event feature, stored by name.
``generator``   ``{"bit_generator", "state"}``: a NumPy ``Generator`` (exact state).
``sklearn_tree`` ``{"n_features", "n_outputs", "max_depth", "node_count", "fields"}``: a
                fitted scikit-learn ``Tree``: its node arrays and values.
"""

from __future__ import annotations

import numbers
from importlib import import_module

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = [
    "ALLOWED", "STATE_VERSIONS", "encode", "decode", "allowed_class", "class_key", "classes_in"
]

#: Classes the generic mechanism saves and loads: name -> defining module. Third-party
#: classes are keyed by their qualified name.
ALLOWED = {
    # estimators (hyperparameters + fitted attributes)
    "StructuredRecalibrator": "structcal.recalibration",
    "KNNRegionForecaster": "structcal.forecasters",
    "TreeRegionForecaster": "structcal.forecasters",
    "KNNRegionMap": "structcal._regions",
    "TreeRegionMap": "structcal._regions",
    "HistogramBinning": "structcal.calibrators",
    "PlattScaling": "structcal.calibrators",
    "IsotonicCalibration": "structcal.calibrators",
    "SplineCalib": "structcal.calibrators",
    "TemperatureScaling": "structcal.calibrators",
    "VectorScaling": "structcal.calibrators",
    "NormalizedOneVsRest": "structcal.calibrators",
    "CrossValidatedCalibration": "structcal.calibrators",
    "sklearn.tree.DecisionTreeRegressor": "sklearn.tree",
    "sklearn.linear_model.LogisticRegression": "sklearn.linear_model",
    "sklearn.svm.LinearSVC": "sklearn.svm",
    # plain containers (their attributes)
    "MAPEvent": "structcal.events",
    "MarginalEvent": "structcal.events",
    "LabelAt": "structcal.events",
    "SpanEquals": "structcal.events",
    "InLexicon": "structcal.events",
    "AnyLabel": "structcal.events",
    "EntitySpans": "structcal.events.spans",
    "ContainsEntity": "structcal.events.spans",
    "AllEntitiesCorrect": "structcal.events.spans",
    "ObjectEvents": "structcal.events.objects",
    "ExternalKind": "structcal.events.external",
    "AllObjectsFound": "structcal.events.objects",
    "ObjectCountCorrect": "structcal.events.objects",
    "PixelCRFSegmenter": "structcal.segmentation",
    "PrecisionGuarantee": "structcal.guarantees",
    "MissControl": "structcal.guarantees",
    "PrecisionCertificate": "structcal.guarantees",
    "TagScheme": "structcal.adapters.tagging",
    "Lexicon": "structcal.events",
    "BinnedMap": "structcal.calibrators",
    "InterpolatedMap": "structcal.calibrators._isotonic",
    "IsotonicMap": "structcal.calibrators._isotonic",
    "SigmoidMap": "structcal.calibrators",
    "SplineMap": "structcal.calibrators",
    "EstimatorMap": "structcal.calibrators.ovr",
    "LinearDecisionMap": "structcal.demos",
}

#: Classes with a layout of their own (``_to_state``/``_from_state``): name ->
#: ``(class, format_version)``, filled by :func:`register`. The generic codec and
#: :mod:`structcal.io` both read it; persistence depends one way: io -> _state.
_REGISTRY: dict[str, tuple[type, int]] = {}

# modules whose classes register themselves with ``register``: imported when a file names
# one of their classes before the module was imported
_REGISTERING_MODULES = {
    "ChainCRF": "structcal.crf",
    "GraphCRF": "structcal.crf.graph",
    "ImageFeatures": "structcal.crf",
    "OnlineRecalibrator": "structcal.online",
}


def register(format_version: int):
    """Class decorator: allow ``load`` to build this class; ``format_version`` is current."""

    def deco(cls):
        _REGISTRY[cls.__name__] = (cls, int(format_version))
        return cls

    return deco


def _registered(name):
    """``(cls, format_version)`` of a registered class, importing its module if needed."""
    if name not in _REGISTRY and name in _REGISTERING_MODULES:
        import_module(_REGISTERING_MODULES[name])
    return _REGISTRY.get(name)


#: Version of each class's stored state; bump it when a class's fitted attributes change
#: incompatibly (files with another version are refused with a clear message).
STATE_VERSIONS: dict[str, int] = {}

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
_SCALAR_KINDS = "biuf"  # bool, signed, unsigned, float


def class_key(cls) -> str:
    """Return the name ``cls`` is stored under (qualified for third-party classes)."""
    module = cls.__module__
    top = module.split(".")[0]
    return cls.__name__ if top == "structcal" else f"{top}.{_public_module(cls)}.{cls.__name__}"


def _public_module(cls) -> str:
    # sklearn.tree._classes -> tree; sklearn.linear_model._logistic -> linear_model
    parts = cls.__module__.split(".")[1:]
    return ".".join(p for p in parts if not p.startswith("_"))


def allowed_class(name: str):
    """Return the class stored under ``name``, imported from its allow-listed module only."""
    module = ALLOWED.get(name) if isinstance(name, str) else None
    if module is None:
        raise ParameterError(
            f"the file refers to class {name!r}, which structcal does not load (not on its "
            "allow-list)"
        )
    cls = getattr(import_module(module), name.rsplit(".", 1)[-1], None)
    if not isinstance(cls, type):
        raise ParameterError(f"class {name!r} is not defined in {module}")
    return cls


def _is_allowed(obj) -> bool:
    key = class_key(type(obj))
    return key in ALLOWED and allowed_class(key) is type(obj)


# ---------------------------------------------------------------- encoding


class _Encoder:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, arr: np.ndarray, path: str) -> dict:
        if arr.dtype.hasobject:
            items = arr.ravel().tolist()
            if all(isinstance(v, str) for v in items):  # e.g. sklearn's feature_names_in_
                return {"$type": "str_array", "items": items, "shape": list(arr.shape)}
            raise ParameterTypeError(
                f"{path} is an object array: it cannot be saved without pickle"
            )
        if arr.dtype.kind not in "biufcUS" or arr.dtype.fields is not None:
            raise ParameterTypeError(f"{path} has dtype {arr.dtype}, which cannot be saved")
        key = path
        n = 1
        while key in self.arrays:
            n += 1
            key = f"{path}~{n}"
        self.arrays[key] = arr
        return {"$type": "array", "key": key}

    def value(self, v, path: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, np.ndarray):
            return self.array(v, path)
        if isinstance(v, np.generic):
            if v.dtype.kind not in _SCALAR_KINDS:
                return self.array(np.asarray(v), path) | {"scalar": True}
            return {"$type": "scalar", "dtype": v.dtype.str, "value": v.item()}
        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, float):
            return v
        if isinstance(v, tuple):
            items = [self.value(x, f"{path}[{i}]") for i, x in enumerate(v)]
            return {"$type": "tuple", "items": items}
        if isinstance(v, list):
            return [self.value(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict):
            if all(isinstance(k, str) and k != "$type" for k in v):
                return {k: self.value(x, f"{path}.{k}") for k, x in v.items()}
            return {"$type": "dict", "items": [
                [self.value(k, f"{path}.<key>"), self.value(x, f"{path}.{k}")] for k, x in v.items()
            ]}
        if isinstance(v, np.random.Generator):
            return self.generator(v, path)
        return self.instance(v, path)

    def generator(self, g, path):
        name = type(g.bit_generator).__name__
        if name not in _BIT_GENERATORS:
            raise ParameterTypeError(f"{path}: a Generator on {name} cannot be saved")
        return {"$type": "generator", "bit_generator": name,
                "state": self.value(g.bit_generator.state, f"{path}.state")}

    def instance(self, obj, path):
        from .features import Feature

        cls = type(obj)
        name = cls.__name__
        if isinstance(obj, Feature):
            from .features import get_feature

            try:
                registered = get_feature(obj.name)
            except (ParameterError, KeyError):
                registered = None
            if registered is not obj:
                raise ParameterTypeError(
                    f"{path}: feature {obj.name!r} is not a registered feature; register it "
                    "with structcal.features.register_feature (and again before loading)"
                )
            return {"$type": "feature", "name": obj.name}
        if name in _REGISTRY and _REGISTRY[name][0] is cls:
            params, arrays = obj._to_state()
            prefix = f"{path}."
            for k, a in arrays.items():
                self.array(np.asarray(a), prefix + k)
            return {"$type": "model", "class": name, "version": _REGISTRY[name][1],
                    "state": self.value(params, path + ".<state>"), "prefix": prefix}
        if name == "Tree" and cls.__module__.startswith("sklearn.tree"):
            return self.sklearn_tree(obj, path)
        if not _is_allowed(obj):
            hint = ""
            if name == "Predicate":
                hint = (" (a Predicate event kind holds a Python function; save the "
                        "recalibrator without it, or express the event with a built-in kind)")
            elif callable(obj):
                hint = " (Python functions cannot be saved without pickle)"
            raise ParameterTypeError(
                f"{path} is a {cls.__module__}.{name}, which structcal cannot save{hint}"
            )
        key = class_key(cls)
        version = STATE_VERSIONS.get(key, 1)
        if hasattr(obj, "get_params"):  # estimators and fitted maps: parameters + fitted state
            params = obj.get_params(deep=False)
            fitted = {k: v for k, v in vars(obj).items()
                      if k.endswith("_") and not k.startswith("_") and k not in params
                      and k != "metadata_"}  # metadata_ is the file's, set by io.load
            return {"$type": "estimator", "class": key, "version": version,
                    "params": self.value(params, f"{path}.<params>"),
                    "fitted": self.value(fitted, path)}
        return {"$type": "object", "class": key, "version": version,
                "attrs": self.value(dict(vars(obj)), path)}

    def sklearn_tree(self, tree, path):
        state = tree.__getstate__()
        nodes = state["nodes"]
        fields = {f: self.array(np.ascontiguousarray(nodes[f]), f"{path}.nodes.{f}")
                  for f in nodes.dtype.names}
        fields["$values"] = self.array(np.asarray(state["values"]), f"{path}.values")
        n_classes = np.asarray(tree.__reduce__()[1][1])
        return {"$type": "sklearn_tree", "n_features": int(tree.n_features),
                "n_outputs": int(tree.n_outputs), "n_classes": n_classes.tolist(),
                "max_depth": int(state["max_depth"]), "node_count": int(state["node_count"]),
                "fields": fields}


def encode(obj, path: str = "model"):
    """``(tree, arrays)``: the JSON-able state of ``obj`` and its named arrays."""
    enc = _Encoder()
    tree = enc.value(obj, path)
    return tree, enc.arrays


# ---------------------------------------------------------------- decoding


class _Decoder:
    def __init__(self, arrays, where):
        self.arrays = arrays
        self.where = where  # the file, for messages

    def fail(self, msg):
        raise ParameterError(f"{self.where}: {msg}")

    def value(self, v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            self.fail(f"unexpected JSON value {v!r}")
        t = v.get("$type")
        if t is None:
            return {k: self.value(x) for k, x in v.items()}
        try:
            method = getattr(self, "t_" + t)
        except (AttributeError, TypeError):
            self.fail(f"unknown node type {t!r}")
        try:
            return method(v)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            self.fail(f"malformed {t!r} node ({type(exc).__name__}: {exc})")

    def t_array(self, v):
        key = v["key"]
        if key not in self.arrays:
            self.fail(f"array {key!r} is missing from the .npz file")
        arr = self.arrays[key]
        return arr[()] if v.get("scalar") else arr

    def t_str_array(self, v):
        return np.array(v["items"], dtype=object).reshape(v["shape"])

    def t_scalar(self, v):
        dtype = np.dtype(v["dtype"])
        if dtype.kind not in _SCALAR_KINDS:
            self.fail(f"bad scalar dtype {v['dtype']!r}")
        return dtype.type(v["value"])

    def t_tuple(self, v):
        return tuple(self.value(x) for x in v["items"])

    def t_dict(self, v):
        return {_hashable(self.value(k)): self.value(x) for k, x in v["items"]}

    def t_generator(self, v):
        name = v["bit_generator"]
        if name not in _BIT_GENERATORS:
            self.fail(f"unknown bit generator {name!r}")
        bg = getattr(np.random, name)()
        bg.state = self.value(v["state"])
        return np.random.Generator(bg)

    def t_feature(self, v):
        from .features import get_feature

        try:
            return get_feature(v["name"])
        except ParameterError:
            self.fail(
                f"feature {v['name']!r} is not registered in this process: register it with "
                "structcal.features.register_feature before loading"
            )

    def _check_version(self, v):
        want = STATE_VERSIONS.get(v["class"], 1)
        if v["version"] != want:
            newer = isinstance(v["version"], int) and v["version"] > want
            self.fail(
                f"{v['class']} was saved with state version {v['version']!r}; this structcal "
                f"reads version {want}"
                + (" (the file is from a newer structcal: upgrade)" if newer else "")
            )

    def t_estimator(self, v):
        cls = allowed_class(v["class"])
        self._check_version(v)
        params = self.value(v["params"])
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            self.fail(f"the parameters of {v['class']} are not a dict of names")
        try:
            obj = cls(**params)
        except (TypeError, ValueError) as exc:
            self.fail(f"cannot rebuild {v['class']} from its saved parameters: {exc}")
        fitted = self.value(v["fitted"])
        if not isinstance(fitted, dict):
            self.fail(f"the fitted state of {v['class']} is not a dict")
        for k, x in fitted.items():
            if not (isinstance(k, str) and k.endswith("_") and not k.startswith("_")):
                self.fail(f"{k!r} is not a fitted attribute name")
            setattr(obj, k, x)
        if not fitted:  # an unfitted template (e.g. a recalibrator's forecaster parameter)
            return obj
        return self._checked(obj, v["class"])

    def t_object(self, v):
        cls = allowed_class(v["class"])
        self._check_version(v)
        obj = object.__new__(cls)
        attrs = self.value(v["attrs"])
        if not isinstance(attrs, dict) or not all(
                isinstance(k, str) and not k.startswith("__") for k in attrs):
            self.fail(f"bad attribute names for {v['class']}")
        obj.__dict__.update(attrs)
        return self._checked(obj, v["class"])

    def _checked(self, obj, name):
        """``obj`` after its class's ``_check_loaded`` (shapes, ranges, consistency)."""
        from ._loadcheck import LoadCheckError

        check = getattr(obj, "_check_loaded", None)
        if check is not None:
            try:
                check()
            except LoadCheckError as exc:
                self.fail(f"the saved {name} is not valid: {exc}")
            except (ParameterError, ParameterTypeError, ValueError, TypeError, KeyError,
                    IndexError, AttributeError) as exc:
                self.fail(f"the saved {name} is not valid: {type(exc).__name__}: {exc}")
        return obj

    def t_model(self, v):
        name = v["class"]
        if _registered(name) is None:
            self.fail(f"unknown model class {name!r}")
        cls, version = _REGISTRY[name]
        if v["version"] != version:
            self.fail(f"{name} has format_version {v['version']!r}; this structcal reads {version}")
        prefix = v["prefix"]
        arrays = {k[len(prefix):]: a for k, a in self.arrays.items() if k.startswith(prefix)}
        return cls._from_state(self.value(v["state"]), arrays)

    def t_sklearn_tree(self, v):
        from sklearn.tree._tree import Tree

        n_classes = np.asarray(v["n_classes"], dtype=np.intp)
        tree = Tree(int(v["n_features"]), n_classes, int(v["n_outputs"]))
        dtype = tree.__getstate__()["nodes"].dtype
        fields = v["fields"]
        nodes = np.zeros(int(v["node_count"]), dtype=dtype)
        for name in dtype.names:
            if name not in fields:
                self.fail(f"the saved decision tree lacks node field {name!r} (another "
                          "scikit-learn version?)")
            col = self.value(fields[name])
            if col.shape != nodes.shape:
                self.fail(f"decision tree field {name!r} has shape {col.shape}; "
                          f"expected {nodes.shape}")
            nodes[name] = col
        values = np.ascontiguousarray(self.value(fields["$values"]), dtype=np.float64)
        try:
            tree.__setstate__({"max_depth": int(v["max_depth"]), "node_count": int(v["node_count"]),
                               "nodes": nodes, "values": values})
        except (ValueError, TypeError) as exc:
            self.fail(f"cannot rebuild the decision tree: {exc}")
        return tree


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def decode(tree, arrays, where: str):
    """Rebuild the object stored by :func:`encode`; errors name ``where`` (the file)."""
    return _Decoder(arrays, where).value(tree)


def classes_in(tree) -> list:
    """Class names a stored tree refers to (for auditing a file before loading it)."""
    found = []

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            if v.get("$type") in ("estimator", "object", "model") and "class" in v:
                found.append(v["class"])
            if v.get("$type") == "feature":
                found.append(f"feature:{v.get('name')}")
            for x in v.values():
                walk(x)

    walk(tree)
    return sorted(set(found))
