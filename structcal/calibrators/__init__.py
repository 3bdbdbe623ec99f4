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

from .binning import BinnedMap, HistogramBinning
from .cv import CrossValidatedCalibration
from .isotonic import InterpolatedMap, IsotonicCalibration
from .ovr import NormalizedOneVsRest
from .platt import PlattScaling, SigmoidMap
from .scaling import TemperatureScaling, VectorScaling
from .spline import (
    SplineCalib,
    SplineMap,
    compact_logit,
    compact_logit_epsilon,
    natural_spline_basis,
)

__all__ = [
    "BinnedMap",
    "CrossValidatedCalibration",
    "HistogramBinning",
    "InterpolatedMap",
    "IsotonicCalibration",
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
