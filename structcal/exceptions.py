"""Exceptions and warnings raised by structcal.

Every error raised for bad user input derives from :class:`StructcalError` and from the
builtin exception a generic handler would expect (``ValueError`` or ``TypeError``), so
``except ValueError`` keeps working.
"""

__all__ = [
    "StructcalError",
    "ParameterError",
    "ParameterTypeError",
    "InfeasibleError",
    "DistributionShiftWarning",
    "PrecisionWarning",
    "UnknownAttributeWarning",
    "SingleGroupWarning",
    "ConvergenceWarning",
    "NotFittedError",
]


class StructcalError(Exception):
    """Root of the exceptions structcal raises for invalid input."""


class ParameterError(StructcalError, ValueError):
    """An argument has the right type but an invalid value, shape or range."""


class ParameterTypeError(StructcalError, TypeError):
    """An argument has the wrong type (e.g. a float array where labels are expected)."""


class InfeasibleError(ParameterError):
    """A problem has no labeling of non-zero probability (every labeling scores ``-inf``)."""


class DistributionShiftWarning(UserWarning):
    """New inputs look unlike the data a recalibrator was fit on (its mapping may not transfer).

    ``cli_text`` (when set) is the same message with advice in the terms of the command
    line rather than of the Python API.
    """

    cli_text = None


class PrecisionWarning(UserWarning):
    """A result is a valid probability but less accurate than usual.

    Issued when the log-partition of a chain is so large (huge potentials on likely
    labelings, or very long chains) that float64 rounding of the sums behind it limits
    the accuracy of probabilities derived from it; the message gives the estimated error.
    """


class SingleGroupWarning(UserWarning):
    """Recalibration data from a single group: nothing can be checked on held-out data."""


class UnknownAttributeWarning(UserWarning):
    """Most tokens given to a tagger adapter match no attribute (feature) of its model."""


def __getattr__(name):
    # scikit-learn's warning and error classes, re-exported so that sklearn's filters and
    # handlers see structcal's; imported lazily to keep ``import structcal`` light
    if name in ("ConvergenceWarning", "NotFittedError"):
        from sklearn import exceptions

        return getattr(exceptions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
