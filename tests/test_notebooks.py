"""The shipped notebooks run from top to bottom, and their stored outputs are what a fresh run prints.

The documentation renders the notebooks from their stored outputs (no execution at build
time), so these tests keep the stored outputs honest: every code cell holds its outputs,
and a fresh run prints the same text (numbers compared to 6 significant digits, so that a
last-bit difference between machines does not count). Needs the notebooks extra.
"""

import copy
import os
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def _text(cell):
    """The printed text of a code cell: stdout and plain-text results (not pictures, and not
    stderr, whose warnings name the kernel's temporary files)."""
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream" and o.name == "stdout":
            parts.append(o.text)
        elif o.output_type in ("execute_result", "display_data") and "text/plain" in o.get("data", {}):
            if not any(k.startswith("image/") for k in o["data"]):
                parts.append(o["data"]["text/plain"])
    return "".join(parts)


def _same(a: str, b: str) -> bool:
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    return all(x == y or float(x) == pytest.approx(float(y), rel=1e-6, abs=1e-9)
               for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_prints_its_stored_outputs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    stored = nbformat.read(path, as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    empty = [i for i, c in enumerate(code) if not c.outputs]
    assert not empty, f"{path.name}: code cells {empty} have no stored output (execute and save it)"
    # the kernel imports the structcal of this checkout, installed or not
    root = str(path.parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    nb = copy.deepcopy(stored)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    fresh = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in fresh for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert any(o.output_type == "display_data" for c in fresh for o in c.outputs)
    differ = [i for i, (a, b) in enumerate(zip(code, fresh)) if not _same(_text(a), _text(b))]
    assert not differ, (f"{path.name}: the stored outputs of code cells {differ} differ from a fresh "
                        f"run; first: stored {_text(code[differ[0]])!r}, fresh {_text(fresh[differ[0]])!r}")


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ should hold at least the OCR calibration walkthrough"


def test_number_comparison_is_strict_beyond_six_digits():
    assert _same("Brier 12.345678 (n=3)", "Brier 12.3456781 (n=3)")
    assert not _same("Brier 12.3457 (n=3)", "Brier 12.3458 (n=3)")
    assert not _same("Brier 12.3457 (n=3)", "Brier 12.3457 (n=4)")
    assert not _same("right", "WRONG")
