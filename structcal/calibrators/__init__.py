"""Recalibrators: scikit-learn classifiers that map a model's scores to calibrated
probabilities.

Score calibrators (one-dimensional maps, renormalised one-vs-rest for several classes):
:class:`HistogramBinning`, :class:`PlattScaling`, :class:`IsotonicCalibration`,
:class:`SplineCalib`. Logit calibrators (all classes jointly): :class:`TemperatureScaling`,
:class:`VectorScaling`. Wrappers: :class:`NormalizedOneVsRest` (any binary calibrator per
class, renormalised) and :class:`CrossValidatedCalibration` (out-of-fold scores, final
model on all data).

``X`` is a 1-d array (or one column) of scores for a binary problem, or one column per
class; with two columns for two classes the score calibrators use the second column.
"""

# The calibrators are scikit-learn estimators; the package imports them (and so
# scikit-learn) on first use (PEP 562), so that the array maps a fitted recalibrator
# evaluates (``IsotonicMap``, ``InterpolatedMap``) load without scikit-learn.
_WHERE = {
    "BinnedMap": "binning", "HistogramBinning": "binning",
    "CrossValidatedCalibration": "cv",
    "InterpolatedMap": "_isotonic", "IsotonicMap": "_isotonic",
    "IsotonicCalibration": "isotonic",
    "NormalizedOneVsRest": "ovr",
    "PlattScaling": "platt", "SigmoidMap": "platt",
    "TemperatureScaling": "scaling", "VectorScaling": "scaling",
    "SplineCalib": "spline", "SplineMap": "spline", "compact_logit": "spline",
    "compact_logit_epsilon": "spline", "natural_spline_basis": "spline",
}


def __getattr__(name):
    if name in _WHERE:
        from importlib import import_module

        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "BinnedMap",
    "CrossValidatedCalibration",
    "HistogramBinning",
    "InterpolatedMap",
    "IsotonicCalibration",
    "IsotonicMap",
    "NormalizedOneVsRest",
    "PlattScaling",
    "SigmoidMap",
    "SplineCalib",
    "SplineMap",
    "TemperatureScaling",
    "VectorScaling",
    "compact_logit",
    "compact_logit_epsilon",
    "natural_spline_basis",
]
