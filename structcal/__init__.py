"""structcal: calibrated confidence for structured predictions.

Numba chain and graph CRFs, events and features, region forecasters and calibration
metrics, after Kuleshov & Liang, *Calibrated Structured Prediction* (NIPS 2015).

The main names are available from the top level (``structcal.ChainCRF``,
``structcal.StructuredRecalibrator``, ...); they are imported on first use, so
``import structcal`` stays cheap (no Numba, no scikit-learn).
"""

from .exceptions import InfeasibleError, ParameterError, ParameterTypeError, StructcalError
from .potentials import ChainPotentials, GraphPotentials

__version__ = "0.1.0"

# public name -> submodule that defines it (imported lazily, PEP 562)
_LAZY = {
    "ChainCRF": "crf",
    "GraphCRF": "crf",
    "ImageFeatures": "crf",
    "StructuredPrediction": "prediction",
    "EventTable": "events",
    "build_events": "events",
    "MAPEvent": "events",
    "MarginalEvent": "events",
    "LabelAt": "events",
    "SpanEquals": "events",
    "InLexicon": "events",
    "AnyLabel": "events",
    "Predicate": "events",
    "EntitySpans": "events",
    "Lexicon": "events",
    "KNNRegionForecaster": "forecasters",
    "TreeRegionForecaster": "forecasters",
    "StructuredRecalibrator": "recalibration",
    "CalibrationReport": "recalibration",
    "evaluate_events": "recalibration",
    "OnlineRecalibrator": "online",
    "recalibrate_online": "online",
    "brier_decomposition": "metrics",
    "calibration_error": "metrics",
    "reliability_curve": "metrics",
    "IsotonicCalibration": "calibrators",
    "PlattScaling": "calibrators",
    "SplineCalib": "calibrators",
    "TemperatureScaling": "calibrators",
    "load_ocr": "datasets",
    "load_scene": "datasets",
    "load_snakes": "datasets",
    "load_wnut17": "datasets",
    "load_gum": "datasets",
    "split_items": "items",
    "split_events": "items",
    "to_networkx": "items",
}

__all__ = [
    "ChainPotentials",
    "GraphPotentials",
    "InfeasibleError",
    "ParameterError",
    "ParameterTypeError",
    "StructcalError",
    "__version__",
    *sorted(_LAZY),
]


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'structcal' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
