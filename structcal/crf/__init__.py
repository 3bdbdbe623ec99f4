"""Trainable CRF models that produce potentials (one producer among many)."""

from .chain import ChainCRF
from .features import ImageFeatures

__all__ = ["ChainCRF", "ImageFeatures"]
