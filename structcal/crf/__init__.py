"""Trainable CRF models that produce potentials (one producer among many)."""

from .chain import ChainCRF
from .features import ImageFeatures
from .graph import GraphCRF

__all__ = ["ChainCRF", "GraphCRF", "ImageFeatures"]
