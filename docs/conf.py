"""Sphinx configuration of the structcal documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
Sphinx + numpydoc because every public docstring is already numpydoc (the scikit-learn
convention the package follows), autosummary for an API reference generated from the code,
myst-nb to render the notebooks from their stored outputs (no execution, no pandoc), and
the PyData theme, the maintained theme of NumPy, SciPy, pandas and scikit-learn.
"""

import os
import shutil
from pathlib import Path

import structcal

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "structcal"
author = "structcal developers"
copyright = "structcal developers"
release = version = structcal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]

# the notebooks live in the top-level notebooks/ folder (executed by the tests); they are
# copied here at build time and rendered from their stored outputs, never executed
_nb_dir = HERE / "notebooks"
_nb_dir.mkdir(exist_ok=True)
for _nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    if not (_nb_dir / _nb.name).exists() or (_nb_dir / _nb.name).read_bytes() != _nb.read_bytes():
        shutil.copyfile(_nb, _nb_dir / _nb.name)
nb_execution_mode = "off"

# the API reference lists every name of every public module's __all__, and the results
# pages' tables are generated from benchmarks/results/*.json: neither can drift
import sys  # noqa: E402

sys.path.insert(0, str(HERE))
import _api  # noqa: E402
import _results  # noqa: E402

_api.write(HERE / "api.rst")
_results.write_all()

# the command-line reference is the parser's own help, so it cannot drift from the code
os.environ["COLUMNS"] = "88"
from structcal.cli import build_parser  # noqa: E402

_parser = build_parser()
_help = ["$ structcal --help", _parser.format_help()]
for _action in _parser._subparsers._group_actions:
    for _name, _sub in _action.choices.items():
        _help += [f"$ structcal {_name} --help", _sub.format_help()]
(HERE / "user-guide" / "_cli_help.txt").write_text("\n".join(_help))

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "**/_cli_help.txt", "results/_generated",
                    "_api.py", "_results.py"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

templates_path = ["_templates"]
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# no intersphinx: the build runs offline in CI, and references to other projects'
# objects are plain text rather than broken links

html_theme = "pydata_sphinx_theme"
html_title = f"structcal {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document structcal's own members only, not those scikit-learn's base classes add.

    (``score``, ``set_fit_request``, ...: their docstrings link into sklearn's docs.)
    """
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and callable(obj) and not module.startswith("structcal"):
        return True
    return None


def setup(app):
    """Register the member filter."""
    app.connect("autodoc-skip-member", _skip_foreign_members)
