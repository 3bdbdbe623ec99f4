"""Trainable CRF models that produce potentials (one producer among many)."""

__all__: list[str] = []
