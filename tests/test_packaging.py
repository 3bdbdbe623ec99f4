"""The project installs what it needs: every subpackage is listed in pyproject.toml."""

import re
from pathlib import Path

import structcal

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"packages = \[(.*?)\]", text, re.S).group(1)
    listed = set(re.findall(r'"([\w.]+)"', block))
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "structcal").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found == listed


def test_shipped_data_is_package_data():
    from importlib import resources

    assert resources.files("structcal.datasets").joinpath("data", "ocr_letters.npz").is_file()
    assert resources.files("structcal.pretrained").joinpath("ocr_chain_crf.npz").is_file()


def test_import_compiles_nothing():
    import subprocess
    import sys

    code = (
        "import numba.core.registry as r, structcal, structcal.inference, structcal.datasets;"
        "from structcal.inference import _chain;"
        "print(sum(len(d.overloads) for k in (_chain.infer_batch, _chain.kbest_batch) for d in (k.parallel, k.serial)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
    assert structcal.__version__


def test_top_level_names_resolve_lazily():
    import subprocess
    import sys

    code = "import sys, structcal; print('numba' in sys.modules, 'sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    # the start-up target's import line loads neither (numba alone costs ~0.2 s)
    code = ("import sys; from structcal import StructuredRecalibrator, ChainPotentials; "
            "print('numba' in sys.modules, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    for name in structcal.__all__:
        assert getattr(structcal, name) is not None, name
    assert set(structcal.__all__) <= set(dir(structcal))
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        structcal.Nope
