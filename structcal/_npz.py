"""Reading ``.npz`` archives safely: a zip of ``.npy`` arrays, never pickled objects.

One reader for every ``.npz`` structcal opens from a user (CLI inputs, saved models):
it checks what the file is before NumPy parses it, so that a folder, a single ``.npy``
array, a text file or a truncated archive each get a message that says so, and nothing
suggests loading pickles.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

__all__ = ["NPZError", "read_npz"]

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_NPY_MAGIC = b"\x93NUMPY"


class NPZError(ValueError):
    """The file is not a readable ``.npz`` archive of plain arrays (message names it)."""


def read_npz(path) -> dict:
    """All arrays of an ``.npz`` file, as a dict name -> array (``allow_pickle=False``).

    Raises
    ------
    NPZError
        No such file, a folder, not a zip archive (a single ``.npy`` array, a text file),
        a damaged archive, or an array of Python objects.
    """
    path = Path(path)
    if not path.exists():
        raise NPZError(f"{path}: no such file")
    if path.is_dir():
        raise NPZError(f"{path}: is a folder, not an .npz file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise NPZError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if head.startswith(_NPY_MAGIC):
        raise NPZError(f"{path}: is a single .npy array, not an .npz archive of named arrays "
                       "(save with np.savez)")
    if not head.startswith((_ZIP_MAGIC, _EMPTY_ZIP_MAGIC)):
        raise NPZError(f"{path}: is not an .npz archive (a zip of .npy arrays; this file "
                       "starts otherwise)")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            out = {}
            for k in data.files:
                try:
                    out[k] = data[k]
                except ValueError as exc:
                    if "pickle" in str(exc).lower() or "object" in str(exc).lower():
                        raise NPZError(f"{path}: array {k!r} holds Python objects, which "
                                       "structcal never loads (save plain numeric or string "
                                       "arrays)") from None
                    raise
            return out
    except NPZError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, NotImplementedError,
            RuntimeError, OverflowError, MemoryError) as exc:
        raise NPZError(f"{path}: is a damaged .npz archive ({type(exc).__name__}: "
                       f"{str(exc)[:120]})") from None


#: The date every member of a written archive carries (the zip format's earliest), so that
#: the same arrays always give the same bytes.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def zip_member(name: str) -> zipfile.ZipInfo:
    """A zip member header with a fixed date and mode (deterministic archives)."""
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def write_npz(arrays: dict) -> bytes:
    """The bytes of an uncompressed ``.npz`` archive of ``arrays`` (as ``np.savez`` writes,
    members in sorted order and without timestamps: the same arrays, the same bytes)."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(arrays[name]), allow_pickle=False)
            zf.writestr(zip_member(f"{name}.npy"), member.getvalue())
    return buffer.getvalue()
