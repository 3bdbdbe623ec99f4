"""The README's two set-up commands, one after the other in one checkout, leave a working
install: structcal never writes into its own installed package (JIT caches go to a
per-user cache folder), and a read-only install works."""

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> set:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def _copy_project(dst: Path):
    """The project as a fresh clone has it (sources, data, models; no build products)."""
    dst.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dst / name)
    shutil.copytree(ROOT / "structcal", dst / "structcal",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))


def _set_writable(folder: Path, writable: bool):
    for p in [folder, *folder.rglob("*")]:
        mode = p.stat().st_mode
        bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        p.chmod(mode | stat.S_IWUSR if writable else mode & ~bits)


def test_install_then_editable_install_in_one_checkout(tmp_path):
    pytest.importorskip("setuptools")
    project = tmp_path / "project"
    _copy_project(project)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies come from this test's environment (no download)
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", STRUCTCAL_WARMUP="0")
    env.pop("PYTHONPATH", None)
    # the test session's own cache root: identical sources share their compiled kernels
    from structcal._cache import cache_root

    env["STRUCTCAL_CACHE_DIR"] = str(cache_root())
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "structcal").mkdir(parents=True)  # a stray folder of the same name

    def run(*args, cwd=elsewhere):
        return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                              text=True)

    # 1. pip install . && structcal demo ocr, with the installed package read-only
    out = run(python, "-m", "pip", "install", "--no-deps", "-q", str(project))
    assert out.returncode == 0, out.stderr
    installed = site / "structcal"
    before = _files(installed)
    _set_writable(installed, False)
    try:
        out = run(bindir / "structcal", "demo", "ocr", "--quiet")
        assert out.returncode == 0, out.stderr
        assert "pooled" in out.stdout
    finally:
        _set_writable(installed, True)
    assert _files(installed) == before  # nothing written into the package

    # 2. pip install -e . in the same checkout; the CLI works from another folder
    out = run(python, "-m", "pip", "install", "--no-deps", "-q", "-e", str(project))
    assert out.returncode == 0, out.stderr
    assert not installed.exists()
    out = run(bindir / "structcal", "--help")
    assert out.returncode == 0, out.stderr
    out = run(python, "-c", "import structcal; print(structcal.__file__, structcal.__version__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == str(project / "structcal" / "__init__.py")
    out = run(bindir / "structcal", "demo", "ocr", "--quiet", "--json")
    assert out.returncode == 0, out.stderr
    assert not any(p.suffix in (".nbi", ".nbc") for p in (project / "structcal").rglob("*"))


def test_cache_folder_is_outside_the_package_and_keyed(tmp_path):
    code = ("from structcal import _cache; import structcal.inference;"
            "print(_cache.cache_dir()); print(_cache.build_key())")
    env = dict(os.environ, STRUCTCAL_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    folder, key = out.stdout.split()
    assert Path(folder).parent == tmp_path / "c"
    assert folder.endswith(key) and len(key) == 16
    # NUMBA_CACHE_DIR is honoured (under a structcal/ subfolder) when ours is not set
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "n"))
    env.pop("STRUCTCAL_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert Path(out.stdout.split()[0]).parent == tmp_path / "n" / "structcal"


def test_locator_places_kernels_in_the_cache_folder(tmp_path):
    code = (
        "import numpy as np; from structcal import ChainPotentials;"
        "from structcal.inference import infer;"
        "infer(ChainPotentials.from_scores(np.zeros((3, 2)), lengths=[3],"
        " transitions=np.zeros((2, 2))))"
    )
    # (a problem this small runs in NumPy unless the kernels are asked for)
    env = dict(os.environ, STRUCTCAL_CACHE_DIR=str(tmp_path / "c"), STRUCTCAL_WARMUP="0",
               STRUCTCAL_TIER="kernels")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    written = list((tmp_path / "c").rglob("*.nbi"))
    assert any(p.parent.name == "inference" for p in written)
