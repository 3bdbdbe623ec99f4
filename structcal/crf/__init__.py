"""Trainable CRF models that produce potentials (one producer among many)."""

from .chain import ChainCRF
from .features import ImageFeatures

__all__ = ["ChainCRF", "GraphCRF", "ImageFeatures"]


def __getattr__(name):
    # the graph CRF (and SciPy's sparse and special modules under it) is imported when
    # first asked for: a chain job does not pay for it
    if name == "GraphCRF":
        from .graph import GraphCRF

        return GraphCRF
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
