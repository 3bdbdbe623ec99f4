"""Saving and loading fitted models as ``.npz`` arrays plus a JSON manifest (never pickle).

A model saved at ``path`` is two files: ``path.npz`` (its arrays, loaded with
``allow_pickle=False``) and ``path.json`` (the manifest: ``"format":
"structcal-model"``, class name, ``format_version``, structcal version, the model's state,
free-form metadata, the array names and the SHA-256 of the ``.npz`` file).

Two ways in:

* every estimator on the allow-list of :mod:`structcal._state` (the recalibrator, region
  forecasters, calibrators, and what they hold: event kinds, lexicons, calibration maps,
  scikit-learn decision trees) is stored generically: its hyperparameters
  (``get_params``) and fitted attributes (names ending in ``_``), recursively, under
  ``"state"`` (format_version :data:`GENERIC_FORMAT_VERSION`);
* classes with their own layout (the CRFs, the online recalibrator) implement
  ``_to_state() -> (params, arrays)`` and ``_from_state(params, arrays)`` and register
  with :func:`register`.

:func:`load` builds classes only from those two allow-lists (no imports driven by file
content) and refuses foreign, truncated, corrupted and newer-format files with a
:class:`~structcal.exceptions.ParameterError` naming the file. :func:`inspect` lists what
a file contains without building anything. Writes are atomic: both files are written to
temporary names and renamed, so a failed save leaves nothing behind. :func:`dumps` and
:func:`loads` are the same saved form as bytes (an uncompressed zip of the two files), for
sending a model to another process (e.g. Dask workers) with the same checks on arrival.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ._state import _REGISTERING_MODULES, _REGISTRY, _registered, register
from .exceptions import ParameterError, ParameterTypeError

__all__ = [
    "SaveLoadMixin",
    "save",
    "load",
    "dumps",
    "loads",
    "inspect",
    "register",
    "read_manifest",
    "model_paths",
    "pretrained_path",
    "GENERIC_FORMAT_VERSION",
]

_MAGIC = "structcal-model"

#: Version of the generic layout (``"state"`` tree + arrays); files with a larger one come
#: from a newer structcal and are refused.
GENERIC_FORMAT_VERSION = 1


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


def _serialise(model, metadata) -> tuple[dict, bytes]:
    """Return the manifest (with the checksum) and the ``.npz`` bytes of a model: its saved form."""
    from . import __version__
    from ._state import encode

    name = type(model).__name__
    if name in _REGISTRY and _REGISTRY[name][0] is type(model):
        _, version = _REGISTRY[name]
        params, arrays = model._to_state()
        body = {"format_version": version, "params": _jsonable(params)}
    else:
        from ._state import ALLOWED, class_key

        if class_key(type(model)) not in ALLOWED or not hasattr(model, "get_params"):
            raise ParameterTypeError(
                f"{name} cannot be saved: it is not a registered structcal model or an "
                "estimator on structcal's allow-list"
            )
        state, arrays = encode(model, "model")  # refuses what is not on the allow-list
        body = {"format_version": GENERIC_FORMAT_VERSION, "state": state}
        name = state["class"]
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    for key, arr in arrays.items():
        if arr.dtype.hasobject:
            raise ParameterTypeError(
                f"array {key!r} of {name} has dtype object: it cannot be saved without pickle"
            )
    from ._npz import write_npz

    npz = write_npz(arrays)  # no timestamps: the same model, the same bytes
    manifest = {
        "format": _MAGIC,
        "class": name,
        "structcal_version": __version__,
        **body,
        "metadata": _jsonable(metadata or {}),
        "arrays": sorted(arrays),
        "arrays_sha256": hashlib.sha256(npz).hexdigest(),
    }
    manifest["manifest_sha256"] = manifest_digest(manifest)
    return manifest, npz


def manifest_digest(manifest: dict) -> str:
    """SHA-256 of a manifest's content (all but ``manifest_sha256`` and the free-form
    ``metadata``), canonically encoded: a manifest whose fitted state was edited by hand (a
    value changed in range) no longer matches it."""
    body = {k: v for k, v in manifest.items() if k not in ("manifest_sha256", "metadata")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save(model, path, *, metadata: dict | None = None) -> tuple[Path, Path]:
    """Save ``model`` to ``path.npz`` + ``path.json`` atomically.

    Parameters
    ----------
    model : estimator
        A fitted estimator on the allow-list, or an instance of a registered class.
    path : str or path-like
        The model's stem (``.npz``/``.json`` suffixes are accepted and stripped).
    metadata : dict, optional
        JSON-serialisable information stored with the model (training data, accuracy, ...).

    Returns
    -------
    (Path, Path)
        The paths written.
    """
    manifest, npz = _serialise(model, metadata)
    npz_path, json_path = model_paths(path)
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_files = []
    try:
        fd, tmp_npz = tempfile.mkstemp(dir=npz_path.parent, suffix=".npz.tmp")
        tmp_files.append(tmp_npz)
        with os.fdopen(fd, "wb") as fh:
            fh.write(npz)
        fd, tmp_json = tempfile.mkstemp(dir=npz_path.parent, suffix=".json.tmp")
        tmp_files.append(tmp_json)
        with os.fdopen(fd, "w") as fh:
            _write_manifest(fh, manifest)
        for tmp in tmp_files:  # mkstemp creates 0600 files; saved models are ordinary files
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp_npz, npz_path)
        os.replace(tmp_json, json_path)
    finally:
        for tmp in tmp_files:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return npz_path, json_path


def _write_manifest(fh, manifest):
    json.dump(manifest, fh, indent=2, allow_nan=True)
    fh.write("\n")


#: Members of the archive written by :func:`dumps`: the two files :func:`save` writes.
_DUMP_MEMBERS = ("model.json", "model.npz")


def dumps(model, *, metadata: dict | None = None) -> bytes:
    """Return the saved form of ``model`` as bytes (what :func:`save` writes, in one archive).

    The bytes are an uncompressed zip archive of ``model.json`` (the manifest) and
    ``model.npz`` (the arrays), byte for byte the two files :func:`save` writes: the same
    format version, allow-list and checksum apply, and :func:`loads` reads them without
    pickle. Use it to send a fitted model to another process or store it in a database.

    Parameters
    ----------
    model : estimator
        A fitted estimator on the allow-list, or an instance of a registered class.
    metadata : dict, optional
        JSON-serialisable information stored with the model.

    Returns
    -------
    bytes
    """
    from ._npz import zip_member

    manifest, npz = _serialise(model, metadata)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        text = io.StringIO()
        _write_manifest(text, manifest)
        zf.writestr(zip_member(_DUMP_MEMBERS[0]), text.getvalue())
        zf.writestr(zip_member(_DUMP_MEMBERS[1]), npz)
    return buffer.getvalue()


def loads(data, *, expected_class: type | None = None):
    """Build a model from the bytes :func:`dumps` returned (never unpickles).

    Parameters
    ----------
    data : bytes
        The archive.
    expected_class : type, optional
        Raise unless it holds an instance of this class.

    Returns
    -------
    estimator
        With ``metadata_`` holding the saved metadata.

    Raises
    ------
    ParameterError
        As :func:`load`: not a structcal model, corrupted, another format version, or a
        class structcal does not load.
    """
    where = "<bytes>"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ParameterTypeError(
            f"`data` must be bytes from structcal.io.dumps; got {type(data).__name__}"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            if sorted(zf.namelist()) != sorted(_DUMP_MEMBERS):
                raise ParameterError(
                    f"`data` is not a structcal model archive: it holds {zf.namelist()}, "
                    f"not {list(_DUMP_MEMBERS)}"
                )
            text, npz = zf.read(_DUMP_MEMBERS[0]), zf.read(_DUMP_MEMBERS[1])
    except zipfile.BadZipFile as exc:
        raise ParameterError(f"`data` is not a structcal model archive: {exc}") from None
    manifest = _parse_manifest(text, where)
    return _build(manifest, lambda: npz, where, expected_class, npz_where=where)


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
        text = json_path.read_bytes()
    except OSError as exc:
        raise ParameterError(f"{str(json_path)!r} is not a structcal model manifest: {exc}") from None
    return _parse_manifest(text, str(json_path))


def _parse_manifest(text: bytes, where: str) -> dict:
    try:
        manifest = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{where!r} is not a structcal model manifest: {exc}") from None
    except RecursionError:
        raise ParameterError(f"{where!r} is not a structcal model manifest: its JSON is "
                             "nested too deeply") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _MAGIC:
        raise ParameterError(f"{where!r} is not a structcal model manifest")
    return manifest


def _manifest_edited(manifest) -> bool:
    """Whether a manifest's content differs from the SHA-256 it records (files of older
    versions record none)."""
    digest = manifest.get("manifest_sha256")
    if digest is None:
        return False
    try:
        return not (isinstance(digest, str) and manifest_digest(manifest) == digest)
    except (TypeError, ValueError, RecursionError):
        return True


def _check_manifest(manifest, where) -> dict:
    if _manifest_edited(manifest):
        raise ParameterError(
            f"{where!r} was edited after it was saved: its content no longer matches the "
            "SHA-256 it records (manifest_sha256). Change a saved model by loading, changing "
            "and saving it with structcal")
    return manifest


def load(path, *, expected_class: type | None = None):
    """Load a model saved by :func:`save` (arrays with ``allow_pickle=False``).

    Parameters
    ----------
    path : str or path-like
        The model's stem, or its ``.npz``/``.json`` file.
    expected_class : type, optional
        Raise unless the file holds an instance of this class.

    Returns
    -------
    estimator
        With ``metadata_`` holding the saved metadata.

    Raises
    ------
    ParameterError
        The files are missing, not a structcal model, truncated or corrupted (the arrays
        do not match the manifest's checksum), edited by hand (the manifest does not match
        its own checksum), from a newer format version, or refer to a class structcal does
        not load.
    """
    npz_path, json_path = model_paths(path)
    manifest = read_manifest(path)

    def npz_bytes():
        if not npz_path.exists():
            raise ParameterError(f"the arrays of model {str(json_path)!r} are missing ({npz_path})")
        if npz_path.is_dir():
            raise ParameterError(f"the arrays of model {str(json_path)!r} should be a file; "
                                 f"{npz_path} is a folder")
        try:
            return npz_path.read_bytes()
        except OSError as exc:
            raise ParameterError(f"cannot read the arrays of model {str(json_path)!r} "
                                 f"({npz_path}): {exc.strerror or exc}") from None

    return _build(manifest, npz_bytes, str(json_path), expected_class, npz_where=str(npz_path))


def _build(manifest, npz_bytes, where, expected_class, *, npz_where):
    """Build the model a checked manifest describes, its arrays read by ``npz_bytes()``.

    Whatever a damaged or hostile file makes the builders raise becomes a
    :class:`~structcal.exceptions.ParameterError` naming the file.
    """
    try:
        return _build_unchecked(manifest, npz_bytes, where, expected_class, npz_where=npz_where)
    except (ParameterError, ParameterTypeError):
        raise
    except RecursionError:
        raise ParameterError(f"{where!r}: the model's state is nested too deeply") from None
    except (OverflowError, MemoryError, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as exc:
        raise ParameterError(
            f"{where!r} does not describe a valid model: {type(exc).__name__}: {exc}"
        ) from None


def _build_unchecked(manifest, npz_bytes, where, expected_class, *, npz_where):
    name = manifest.get("class")
    generic = "state" in manifest
    if generic:
        from ._state import ALLOWED, allowed_class

        if name not in ALLOWED:
            raise ParameterError(f"{where!r} holds an unknown model class {name!r}")
        version = GENERIC_FORMAT_VERSION
    else:
        if _registered(name) is None:
            raise ParameterError(f"{where!r} holds an unknown model class {name!r}")
        cls, version = _REGISTRY[name]
    got = manifest.get("format_version")
    if got != version:
        newer = isinstance(got, int) and got > version
        raise ParameterError(
            f"{where!r} has format_version {got!r}; this structcal "
            f"reads {name} format_version {version}"
            + (f" (it was written by a newer structcal, {manifest.get('structcal_version')}: "
               "upgrade structcal to load it)" if newer else "")
        )
    if expected_class is not None:
        actual = allowed_class(name) if generic else cls
        if not issubclass(actual, expected_class):
            raise ParameterError(f"{where!r} holds a {name}, not a {expected_class.__name__}")
    # after the version and the class: a file of a newer structcal, or of another model,
    # is named as such rather than as edited
    _check_manifest(manifest, where)
    arrays = _read_arrays(npz_bytes(), manifest, where, npz_where)
    if generic:
        from ._state import decode

        model = decode(manifest["state"], arrays, where)
    else:
        try:
            model = cls._from_state(manifest["params"], arrays)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
            raise ParameterError(
                f"the arrays {npz_where!r} and manifest {where!r} do not describe a "
                f"valid {name}: {type(exc).__name__}: {exc}"
            ) from None
    model.metadata_ = manifest.get("metadata", {})
    return model


def _read_arrays(npz: bytes, manifest, where, npz_where) -> dict:
    digest = manifest.get("arrays_sha256")
    if digest is not None and hashlib.sha256(npz).hexdigest() != digest:
        raise ParameterError(
            f"{npz_where!r} is truncated, corrupted or from another save: its SHA-256 "
            f"differs from the one recorded in {where!r}"
        )
    try:
        with np.load(io.BytesIO(npz), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001  (EOFError, BadZipFile, zlib.error, header errors...)
        raise ParameterError(
            f"cannot read model arrays {npz_where!r} (empty, truncated or corrupt file?): "
            f"{type(exc).__name__}: {exc}"
        ) from None
    missing = set(manifest.get("arrays", [])) - set(arrays)
    if missing:
        raise ParameterError(f"model arrays {sorted(missing)} are missing from {npz_where!r}")
    return arrays


def inspect(path) -> dict:
    """List what a saved model contains, without building any object (an audit).

    Parameters
    ----------
    path : str or path-like
        The model's stem, or its ``.npz``/``.json`` file.

    Returns
    -------
    dict
        ``class``, ``format_version``, ``structcal_version``, ``metadata``; ``classes``:
        every class the file would build (all on structcal's allow-list, else listed in
        ``problems``); ``arrays``: name -> ``{"shape", "dtype"}`` read from the ``.npz``
        headers; ``problems``: why :func:`load` would refuse the file (empty if it
        would load).
    """
    from ._state import ALLOWED, classes_in

    npz_path, json_path = model_paths(path)
    manifest = read_manifest(path)
    name = manifest.get("class")
    generic = "state" in manifest
    edited = ["the manifest was edited after it was saved (its content no longer matches "
              "manifest_sha256)"] if _manifest_edited(manifest) else []
    classes = classes_in(manifest["state"]) if generic else [name]
    known = set(ALLOWED) | set(_REGISTRY) | set(_REGISTERING_MODULES)
    problems = edited + [f"class {c!r} is not on the allow-list" for c in classes
                         if not c.startswith("feature:") and c not in known]
    version = GENERIC_FORMAT_VERSION if generic else (_registered(name) or (None, None))[1]
    if manifest.get("format_version") != version:
        problems.append(
            f"format_version {manifest.get('format_version')!r} (this structcal reads {version})"
        )
    arrays = {}
    try:
        digest = manifest.get("arrays_sha256")
        if digest is not None and _sha256(npz_path) != digest:
            problems.append("the .npz file does not match the manifest's SHA-256")
        with zipfile.ZipFile(npz_path) as zf:
            for info in zf.infolist():
                with zf.open(info) as fh:
                    major, _ = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if major == 1
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(fh)
                name_ = info.filename.removesuffix(".npy")
                arrays[name_] = {"shape": list(shape), "dtype": str(dtype)}
                if dtype.hasobject:
                    problems.append(f"array {info.filename!r} has dtype object (needs pickle)")
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        problems.append(f"cannot read {str(npz_path)!r}: {exc}")
    return {
        "class": name,
        "format_version": manifest.get("format_version"),
        "structcal_version": manifest.get("structcal_version"),
        "metadata": manifest.get("metadata", {}),
        "classes": classes,
        "arrays": arrays,
        "problems": problems,
    }


def _pretrained_root() -> Path:
    """Folder of the shipped models (the subpackage ``structcal.pretrained``)."""
    return Path(__file__).resolve().parent / "pretrained"


def pretrained_path(name: str) -> Path:
    """Path stem of a model shipped with structcal (in ``structcal/pretrained/``).

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
