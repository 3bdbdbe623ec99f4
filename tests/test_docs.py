"""The documentation site builds with warnings as errors (a broken docstring fails CI)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("myst_nb")
    pytest.importorskip("pydata_sphinx_theme")
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    html = tmp_path / "html"
    for page in ["index.html", "getting-started.html", "api.html", "user-guide/chains.html",
                 "user-guide/cli.html", "notebooks/ocr_calibration.html",
                 "generated/structcal.recalibration.StructuredRecalibrator.html"]:
        assert (html / page).exists(), page
    # the notebook is rendered from its stored outputs (figures included), not executed
    assert "<img" in (html / "notebooks/ocr_calibration.html").read_text()
    # the command-line reference is the parser's own help
    assert "structcal demo --help" in (html / "user-guide/cli.html").read_text()


def _pages():
    for path in sorted(DOCS.glob("*.md")) + sorted((DOCS / "user-guide").glob("*.md")):
        blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
        if blocks:
            yield path

@pytest.mark.parametrize("page", list(_pages()), ids=lambda p: p.name)
@pytest.mark.filterwarnings("ignore::structcal.exceptions.DistributionShiftWarning")
def test_every_code_block_of_the_docs_runs(page, tmp_path, monkeypatch):
    """The Python blocks of a page, in order, run in one namespace (the page's session)."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    code = "\n".join(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
    exec(compile(code, str(page), "exec"), {"__name__": "docs"})


def test_api_reference_covers_every_public_name():
    sys.path.insert(0, str(DOCS))
    try:
        import _api
    finally:
        sys.path.remove(str(DOCS))
    text = (DOCS / "api.rst").read_text()
    listed = {}
    module = None
    for line in text.splitlines():
        if line.startswith(".. currentmodule:: "):
            module = line.split(":: ")[1].strip()
            listed[module] = set()
        elif line.startswith("   ") and module and line.strip() and not line.strip().startswith(":"):
            listed[module].add(line.strip())
    for _, mod in _api.SECTIONS:
        if mod == "structcal":
            continue
        assert set(_api.public_names(mod)) <= listed.get(mod, set()), mod
    # every subpackage and public module of structcal has a section
    import pkgutil

    import structcal

    public = {f"structcal.{m.name}" for m in pkgutil.iter_modules(structcal.__path__)
              if not m.name.startswith("_") and m.name not in ("cli", "pretrained", "demos",
                                                               "exceptions_", "warmup")}
    sections = {m for _, m in _api.SECTIONS}
    assert public <= sections | {"structcal.cli", "structcal.demos"}, public - sections
