"""Trainable CRF models that produce potentials (one producer among many)."""

from .graph import GraphCRF

__all__ = ["GraphCRF"]
