"""What a user reads speaks of the current state, not of how it was reached: no issue
numbers, work-log words or branch names in the README, the docs, the docstrings, the
notebooks or the benchmarks' output."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = [
    r"\bissue\s+#?\d+", r"\bstops?\s+\d+\b", r"\bthis\s+stop\b", r"\bthis\s+session\b",
    r"\bh2\d-[a-z]+", r"\bwork[- ]log\b", r"\bbefore this change\b", r"\bthe issue's\b",
    r"\blater\s+runs?\b",
]


def _files():
    yield ROOT / "README.md"
    yield from (ROOT / "docs").glob("*.md")
    yield from (ROOT / "docs" / "user-guide").glob("*.md")
    yield from (ROOT / "docs" / "results").glob("*.md")
    yield from (ROOT / "notebooks").glob("*.ipynb")
    yield from (ROOT / "structcal").rglob("*.py")
    yield from (ROOT / "structcal").rglob("*.md")
    yield from (ROOT / "benchmarks").glob("*.py")


def test_no_history_words_where_users_read():
    hits = []
    for path in _files():
        text = path.read_text(encoding="utf-8")
        for pat in PATTERNS:
            for m in re.finditer(pat, text, re.I):
                line = text[: m.start()].count("\n") + 1
                hits.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not hits, "\n".join(hits[:50])
