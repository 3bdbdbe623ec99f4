"""Trained models shipped with structcal (installed as ``structcal.pretrained``).

Each model is ``NAME.npz`` (arrays) + ``NAME.json`` (manifest); see ``README.md`` here for
how each was trained. Load with :func:`structcal.pretrained_path` or the model class's
``load``.
"""
