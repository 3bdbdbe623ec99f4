"""Write ``docs/api.rst`` from the ``__all__`` of every public module (run by conf.py).

One section per module; every public name of the module is listed, so the reference
cannot miss one (``tests/test_docs.py`` checks it against the modules).
"""

from importlib import import_module
from pathlib import Path

#: (title, module) of every public module, in reading order.
SECTIONS = [
    ("Top level", "structcal"),
    ("Potentials", "structcal.potentials"),
    ("Inference", "structcal.inference"),
    ("CRF models", "structcal.crf"),
    ("Predictions", "structcal.prediction"),
    ("Events", "structcal.events"),
    ("Features", "structcal.features"),
    ("Region forecasters", "structcal.forecasters"),
    ("Recalibration", "structcal.recalibration"),
    ("Shift test", "structcal.shift"),
    ("Decisions with guarantees", "structcal.guarantees"),
    ("Items and splits", "structcal.items"),
    ("Calibrators", "structcal.calibrators"),
    ("Metrics", "structcal.metrics"),
    ("Online recalibration", "structcal.online"),
    ("Selective prediction", "structcal.selective"),
    ("Adapters for outside models", "structcal.adapters"),
    ("spaCy component", "structcal.adapters.spacy_ner"),
    ("Segmentation", "structcal.segmentation"),
    ("Plotting", "structcal.plotting"),
    ("Datasets", "structcal.datasets"),
    ("Saving and loading", "structcal.io"),
    ("Scale-out on Dask", "structcal.distributed"),
    ("Exceptions and warnings", "structcal.exceptions"),
]

#: Names re-exported at the top level and documented in their own module's section.
_TOP_LEVEL_ELSEWHERE = True


def public_names(module: str) -> list:
    """The documented names of a module: its ``__all__`` (the top level: those defined there)."""
    mod = import_module(module)
    names = list(getattr(mod, "__all__", []))
    if module == "structcal":  # the top level re-exports; document only what lives there
        names = [n for n in names if n == "__version__"]
    return sorted(n for n in names if not n.startswith("_"))


def write(path: Path) -> str:
    lines = ["API reference", "=============", "",
             "Generated from the docstrings and from each module's ``__all__``. The main names",
             "are also available from the top level (``structcal.ChainCRF``,",
             "``structcal.StructuredRecalibrator``, ...).", ""]
    for title, module in SECTIONS:
        if module == "structcal":
            continue
        names = public_names(module)
        lines += [title, "-" * len(title), "", f".. automodule:: {module}", "   :no-members:", "",
                  f".. currentmodule:: {module}", ""]
        if names:
            lines += [".. autosummary::", "   :toctree: generated", ""]
            lines += [f"   {n}" for n in names]
            lines.append("")
    text = "\n".join(lines)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return text


if __name__ == "__main__":
    write(Path(__file__).resolve().parent / "api.rst")
