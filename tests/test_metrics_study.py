"""The benchmark scripts run end to end (tiny settings)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_script(name, *args):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )
    return out.stdout


def test_estimator_study_quick_run():
    out = json.loads(run_script("ece_estimator_study.py", "--quick", "--json"))
    table = out["median_p95_relative_error"]["confidence"]
    assert len(table) == 11
    assert all(len(v) == 2 and all(x >= 0 for x in v) for v in table.values())
    confident = out["median_p95_relative_error"]["confident (binary)"]
    assert len(confident) == 11
    assert all(len(v) == 2 and all(x >= 0 for x in v) for v in confident.values())
    coverage = out["confident"]["interval_coverage"]["300"]
    assert coverage["recentred"]["contains_estimate"] == 1.0
    assert out["protocol"]["n_score_distributions"] == 2
    assert all(t["true_ece"] > 0 for t in out["true_ece"])
    assert "default_beats_legacy_at_every_size" in out["verdict"]["confidence"]


@pytest.mark.slow
def test_calibration_benchmark_quick_run():
    out = json.loads(run_script("bench_calibration.py", "--quick", "--json", "--repeats", "2"))
    names = [r["name"] for r in out["timings"]]
    assert any("KDE" in n for n in names) and any("SplineCalib" in n for n in names)
    assert all(r["median_seconds"] > 0 for r in out["timings"])
