"""Calibration metrics: ECE/MCE estimators with bootstrap intervals, reliability curves and
proper-score decompositions.

One implementation of each metric for the whole project (the structured-event evaluation
uses :func:`brier_decomposition`).
"""

from ._inputs import SparseBinsWarning
from ._results import ConfidenceInterval, ReliabilityTable
from .calibration import (
    CalibrationErrorResult,
    LocalCalibration,
    ReliabilityCurve,
    binned_calibration_error,
    calibration_error,
    debiased_calibration_error,
    kde_calibration_error,
    local_calibration_error,
    reliability_curve,
    silverman_bandwidth,
)
from .objects import ObjectCalibration, object_calibration
from .scores import (
    BrierDecomposition,
    LogLossDecomposition,
    brier_decomposition,
    log_loss_decomposition,
)

__all__ = [
    "BrierDecomposition",
    "CalibrationErrorResult",
    "ConfidenceInterval",
    "LocalCalibration",
    "LogLossDecomposition",
    "ObjectCalibration",
    "ReliabilityCurve",
    "ReliabilityTable",
    "SparseBinsWarning",
    "binned_calibration_error",
    "brier_decomposition",
    "calibration_error",
    "debiased_calibration_error",
    "kde_calibration_error",
    "local_calibration_error",
    "log_loss_decomposition",
    "object_calibration",
    "reliability_curve",
    "silverman_bandwidth",
]
