"""Where structcal's JIT caches live: a per-user cache folder, never the package itself.

Numba's default is to write compiled kernels next to the sources (``__pycache__`` inside
the installed package). That breaks read-only installs, and the files it leaves behind
survive ``pip uninstall``: a left-over ``site-packages/structcal/`` folder of cache files
then shadows a later editable install as a namespace package. structcal therefore gives
Numba a cache locator of its own (:class:`StructcalCacheLocator`) that places every
kernel of the package under::

    <root>/<version>-<key>/<subpackage path>/

``<root>`` is, in order of precedence:

1. ``$STRUCTCAL_CACHE_DIR``;
2. ``$NUMBA_CACHE_DIR/structcal`` when ``NUMBA_CACHE_DIR`` is set;
3. the platform's user cache folder: ``$XDG_CACHE_HOME/structcal`` or
   ``~/.cache/structcal`` (Linux and other Unixes), ``~/Library/Caches/structcal``
   (macOS), ``%LOCALAPPDATA%\\structcal\\Cache`` (Windows);
4. if none of these is writable, ``<temporary folder>/structcal-cache-<user>``.

``<key>`` is a hash of the package's Python sources, of the Python, NumPy and Numba
versions and of the platform. Two installs of different sources therefore never read
each other's kernels, and since the key covers every source file it also retires kernels
whose callees changed in another file (which Numba's per-file check cannot see). Two
installs of the same sources share their kernels. The folders are safe to delete at any
time (:func:`clear_cache`).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["cache_root", "cache_dir", "build_key", "install_locator", "clear_cache",
           "PACKAGE_DIR"]

#: The folder of the installed ``structcal`` package.
PACKAGE_DIR = Path(__file__).resolve().parent

_KEY = None


def _platform_cache_home() -> Path:
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return Path(base) / "structcal" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "structcal"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "structcal"


def _temp_cache_home() -> Path:
    try:
        user = str(os.getuid())
    except AttributeError:  # Windows
        user = os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"structcal-cache-{user}"


def _candidate_roots() -> list:
    roots = []
    env = os.environ.get("STRUCTCAL_CACHE_DIR")
    if env:
        roots.append(Path(env).expanduser())
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        roots.append(Path(numba_dir).expanduser() / "structcal")
    roots.append(_platform_cache_home())
    roots.append(_temp_cache_home())
    return roots


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _inside_package(path: Path) -> bool:
    try:
        path.resolve().relative_to(PACKAGE_DIR)
        return True
    except ValueError:
        return False


_ROOT = None


def cache_root() -> Path:
    """The folder under which structcal keeps its compiled kernels (see the module notes).

    The first writable candidate; never a folder inside the installed package.
    """
    global _ROOT
    if _ROOT is None:
        for root in _candidate_roots():
            if not _inside_package(root) and _writable(root):
                _ROOT = root
                break
        else:  # nothing writable at all: caching still needs a folder of its own
            _ROOT = Path(tempfile.mkdtemp(prefix="structcal-cache-"))
    return _ROOT


def _numba_version() -> str:
    """Numba's version, read from its installed metadata when the module is not loaded (so
    that asking where kernels are cached does not import Numba)."""
    mod = sys.modules.get("numba")
    if mod is not None:
        return mod.__version__
    try:
        from importlib.metadata import version

        return version("numba")
    except Exception:  # no metadata (e.g. a vendored copy): ask the module
        import numba

        return numba.__version__


def build_key() -> str:
    """A short hash of the package's sources and of the versions kernels depend on."""
    global _KEY
    if _KEY is None:
        import platform

        import numpy

        h = hashlib.sha256()
        for part in (sys.version, platform.machine(), sys.platform, numpy.__version__,
                     _numba_version()):
            h.update(part.encode())
            h.update(b"\0")
        sources = []
        for folder, dirs, files in os.walk(PACKAGE_DIR):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            sources += [os.path.join(folder, f) for f in files if f.endswith(".py")]
        for path in sorted(sources):
            h.update(os.path.relpath(path, PACKAGE_DIR).replace(os.sep, "/").encode())
            h.update(b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
        _KEY = h.hexdigest()[:16]
    return _KEY


def cache_dir() -> Path:
    """This install's cache folder: ``<cache_root()>/<version>-<build_key()>``."""
    from . import __version__

    return cache_root() / f"{__version__}-{build_key()}"


def clear_cache(all_versions: bool = False) -> list:
    """Delete this install's compiled kernels (or, with ``all_versions``, every install's).

    Returns the folders removed. The next process recompiles what it needs.
    """
    import shutil

    if all_versions:
        root = cache_root()
        targets = [p for p in root.iterdir() if p.is_dir()] if root.exists() else []
    else:
        targets = [cache_dir()]
    removed = []
    for p in targets:
        if p.exists():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _make_locator():
    from numba.core.caching import _CacheLocator

    class StructcalCacheLocator(_CacheLocator):
        """Numba cache locator for structcal's own kernels (see :mod:`structcal._cache`)."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            rel = Path(py_file).resolve().parent.relative_to(PACKAGE_DIR)
            self._cache_path = str(cache_dir().joinpath(*rel.parts))

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            # the whole package's sources: a change in any file retires every kernel
            return build_key()

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            try:
                inside = _inside_package(Path(py_file))
            except OSError:
                return None
            if not inside or not os.path.exists(py_file):
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
            except OSError:  # the folder went away or lost its rights: a private one
                self._cache_path = tempfile.mkdtemp(prefix="structcal-cache-")
            return self

    return StructcalCacheLocator


_LOCATOR = None


def install_locator():
    """Put structcal's locator first in Numba's list (once per process); idempotent."""
    global _LOCATOR
    if _LOCATOR is not None:
        return _LOCATOR
    from numba.core import caching

    _LOCATOR = _make_locator()
    impl = caching.CacheImpl
    impl._locator_classes = [_LOCATOR] + [
        c for c in impl._locator_classes if c.__name__ != "StructcalCacheLocator"
    ]
    return _LOCATOR
