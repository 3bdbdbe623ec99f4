"""structcal: calibrated confidence for structured predictions.

Numba chain and graph CRFs, events and features, region forecasters and calibration
metrics, after Kuleshov & Liang, *Calibrated Structured Prediction* (NIPS 2015).
"""

from .exceptions import InfeasibleError, ParameterError, ParameterTypeError, StructcalError
from .potentials import ChainPotentials

__version__ = "0.1.0"

__all__ = [
    "ChainPotentials",
    "InfeasibleError",
    "ParameterError",
    "ParameterTypeError",
    "StructcalError",
    "__version__",
]
