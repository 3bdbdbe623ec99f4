"""Saving and loading fitted models as ``.npz`` arrays plus a JSON manifest (never pickle).

A model saved at ``path`` is two files: ``path.npz`` (its arrays, loaded with
``allow_pickle=False``) and ``path.json`` (class name, ``format_version``, structcal
version, hyperparameters, free-form metadata and the array names). Classes opt in by
implementing ``_to_state() -> (params, arrays)`` and a classmethod
``_from_state(params, arrays)`` and registering with :func:`register`; :func:`load`
dispatches by class name through that allow-list only (no imports driven by file
content). Writes are atomic: both files are written to temporary names and renamed, so a
failed save leaves nothing behind.

Every file that cannot be read as a structcal model (missing, empty, truncated, corrupt,
not a zip archive, arrays that do not fit the manifest) makes :func:`load` raise
:class:`~structcal.exceptions.ParameterError` naming the file, never a lower-level error.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = ["SaveLoadMixin", "save", "load", "register", "read_manifest", "model_paths", "pretrained_path"]

_REGISTRY: dict[str, tuple[type, int]] = {}
_MAGIC = "structcal-model"


def register(format_version: int):
    """Class decorator: allow ``load`` to build this class; ``format_version`` is current."""

    def deco(cls):
        _REGISTRY[cls.__name__] = (cls, int(format_version))
        return cls

    return deco


def model_paths(path) -> tuple[Path, Path]:
    """Return ``(npz_path, json_path)`` for a model stem, or for either of its files."""
    path = Path(path)
    if path.suffix in (".npz", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".npz"), path.with_name(path.name + ".json")


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        raise ParameterTypeError("arrays belong in the .npz part, not in params/metadata")
    return value


def save(model, path, *, metadata: dict | None = None) -> tuple[Path, Path]:
    """Save ``model`` to ``path.npz`` + ``path.json`` atomically.

    Parameters
    ----------
    model : estimator
        An instance of a registered class.
    path : str or path-like
        The model's stem (``.npz``/``.json`` suffixes are accepted and stripped).
    metadata : dict, optional
        JSON-serialisable information stored with the model (training data, accuracy, ...).

    Returns
    -------
    (Path, Path)
        The paths written.
    """
    name = type(model).__name__
    if name not in _REGISTRY:
        raise ParameterTypeError(f"{name} cannot be saved: it is not a registered structcal model")
    _, version = _REGISTRY[name]
    params, arrays = model._to_state()
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    for key, arr in arrays.items():
        if arr.dtype.hasobject:
            raise ParameterTypeError(f"array {key!r} of {name} has dtype object: it cannot be saved without pickle")
    from . import __version__

    manifest = {
        "format": _MAGIC,
        "class": name,
        "format_version": version,
        "structcal_version": __version__,
        "params": _jsonable(params),
        "metadata": _jsonable(metadata or {}),
        "arrays": sorted(arrays),
    }
    npz_path, json_path = model_paths(path)
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_files = []
    try:
        fd, tmp_npz = tempfile.mkstemp(dir=npz_path.parent, suffix=".npz.tmp")
        tmp_files.append(tmp_npz)
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        fd, tmp_json = tempfile.mkstemp(dir=npz_path.parent, suffix=".json.tmp")
        tmp_files.append(tmp_json)
        with os.fdopen(fd, "w") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True, allow_nan=True)
            fh.write("\n")
        for tmp in tmp_files:  # mkstemp creates 0600 files; saved models are ordinary files
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp_npz, npz_path)
        os.replace(tmp_json, json_path)
    finally:
        for tmp in tmp_files:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return npz_path, json_path


class SaveLoadMixin:
    """``save`` / ``load`` methods for models registered with :func:`register`.

    The class defines ``_to_state`` and ``_from_state`` (see :func:`register`).
    """

    def save(self, path, *, metadata=None):
        """Save the fitted model to ``path.npz`` + ``path.json`` (atomic; no pickle).

        Parameters
        ----------
        path : str or path-like
            The model's stem (``.npz``/``.json`` suffixes are stripped).
        metadata : dict, optional
            JSON-serialisable information stored with the model.

        Returns
        -------
        (Path, Path)
            The two files written.
        """
        return save(self, path, metadata=metadata)

    @classmethod
    def load(cls, path):
        """Load a model written by :meth:`save` (``allow_pickle=False``).

        Parameters
        ----------
        path : str or path-like
            The model's stem, or its ``.npz``/``.json`` file.

        Returns
        -------
        model
            An instance of this class, with ``metadata_`` holding the saved metadata.
        """
        return load(path, expected_class=cls)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_manifest(path) -> dict:
    """Read and check the JSON manifest of a saved model."""
    _, json_path = model_paths(path)
    if not json_path.exists():
        raise ParameterError(f"no structcal model at {str(json_path)!r}: the JSON manifest is missing")
    try:
        manifest = json.loads(json_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{str(json_path)!r} is not a structcal model manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _MAGIC:
        raise ParameterError(f"{str(json_path)!r} is not a structcal model manifest")
    return manifest


def load(path, *, expected_class: type | None = None):
    """Load a model saved by :func:`save`.

    Parameters
    ----------
    path : str or path-like
        The model's stem, or its ``.npz``/``.json`` file.
    expected_class : type, optional
        Raise unless the file holds an instance of this class.

    Returns
    -------
    estimator

    Raises
    ------
    ParameterError
        For any file that cannot be read as a model of a registered class (missing,
        empty, truncated or corrupt, another class than ``expected_class``, another
        format version).
    """
    npz_path, json_path = model_paths(path)
    manifest = read_manifest(path)
    name = manifest.get("class")
    if name not in _REGISTRY:
        raise ParameterError(f"{str(json_path)!r} holds an unknown model class {name!r}")
    cls, version = _REGISTRY[name]
    if expected_class is not None and cls is not expected_class:
        raise ParameterError(
            f"{str(json_path)!r} holds a {name}, not a {expected_class.__name__}"
        )
    got = manifest.get("format_version")
    if got != version:
        raise ParameterError(
            f"{str(json_path)!r} has format_version {got!r}; this structcal reads {name} "
            f"format_version {version}"
        )
    if not npz_path.exists():
        raise ParameterError(f"the arrays of model {str(json_path)!r} are missing ({npz_path})")
    try:
        # (our own handle: np.load leaves its file open when the archive is unreadable)
        with open(npz_path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001  (EOFError, BadZipFile, zlib.error, header errors...)
        raise ParameterError(
            f"cannot read model arrays {str(npz_path)!r} (empty, truncated or corrupt file?): "
            f"{type(exc).__name__}: {exc}"
        ) from None
    missing = set(manifest.get("arrays", [])) - set(arrays)
    if missing:
        raise ParameterError(f"model arrays {sorted(missing)} are missing from {str(npz_path)!r}")
    try:
        model = cls._from_state(manifest["params"], arrays)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise ParameterError(
            f"the arrays {str(npz_path)!r} and manifest {str(json_path)!r} do not describe a "
            f"valid {name}: {type(exc).__name__}: {exc}"
        ) from None
    model.metadata_ = manifest.get("metadata", {})
    return model


def _pretrained_root() -> Path:
    """Folder of the shipped models: the installed package, else the checkout's models/."""
    from importlib import resources

    try:
        return Path(str(resources.files("structcal.pretrained")))
    except ModuleNotFoundError:  # running from a source checkout that is not installed
        return Path(__file__).resolve().parent.parent / "models"


def pretrained_path(name: str) -> Path:
    """Path stem of a model shipped with structcal (the top-level ``models/`` folder).

    Parameters
    ----------
    name : str
        Model name, e.g. ``"ocr_chain_crf"``.

    Returns
    -------
    Path
        Pass it to the model class's ``load`` or to :func:`load`.
    """
    root = _pretrained_root()
    npz_path, json_path = model_paths(root / name)
    if not json_path.exists():
        available = sorted(p.stem for p in root.glob("*.json"))
        raise ParameterError(f"no shipped model named {name!r}; available: {available}")
    return root / name
