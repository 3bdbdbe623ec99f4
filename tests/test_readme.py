"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
# WNUT-17's test sentences come from other sources than dev: the README shows the warning
@pytest.mark.filterwarnings("ignore::structcal.exceptions.DistributionShiftWarning")
def test_readme_example_runs_and_prints_the_same_on_every_run(code, capsys):
    # reproducible by default: a second run prints exactly the same numbers
    outputs = []
    for _ in range(2):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
