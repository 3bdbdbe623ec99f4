"""The benchmark scripts run end to end (tiny settings)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
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


def _study():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ece_estimator_study

    return ece_estimator_study


def test_efficiency_bound_is_the_p95_error_of_the_sign_reference():
    # the reference estimator mean(sign(g(s) - s) (y - s)) is unbiased with exactly the
    # bound's variance, so its empirical p95 relative error must match the bound
    study = _study()
    rng = np.random.default_rng(0)
    pool = study.logit_normal_pool(rng, 0.95, 1.5, 50_000)
    for gname in ("temperature 1.5 (overconfident)", "logit + 0.5"):
        eta = study.MISCALIBRATIONS[gname](pool)
        truth = np.mean(np.abs(eta - pool))
        sign = np.sign(eta - pool)
        m, sets = 1000, 4000
        idx = rng.integers(0, len(pool), (sets, m))
        y = rng.random((sets, m)) < eta[idx]
        est = np.mean(sign[idx] * (y - pool[idx]), axis=1)
        p95 = np.percentile(np.abs(est - truth) / truth, 95)
        assert p95 == pytest.approx(study.efficiency_bound(eta, pool, m), rel=0.06)


def test_paired_ratio_pairs_the_evaluation_sets():
    study = _study()
    rng = np.random.default_rng(1)
    records = []
    for truth in (0.02, 0.05, 0.1):
        a = truth + 0.01 * rng.standard_normal(50)
        records.append({"true_ece": truth,
                        "estimates": {"a": [a], "same": [a.copy()], "worse": [a + 0.02]}})
    # an estimator against itself: ratio 1 in every resample, no wins
    assert study.paired_ratio(records, "same", "a", 0, rng) == (1.0, 1.0, 1.0, 0)
    ratio, low, high, wins = study.paired_ratio(records, "a", "worse", 0, rng)
    assert wins == 3 and ratio < 1 and low <= ratio <= high


def test_candidates_quick_run(tmp_path):
    path = tmp_path / "candidates.json"
    run_script("ece_candidates.py", "--quick", "--save", str(path))
    out = json.loads(path.read_text())
    names = list(out["median_p95"])
    assert len(names) == 17 and names[-1].startswith("reference")
    assert all(len(v) == 2 and all(x >= 0 for x in v) for v in out["median_p95"].values())
    calibrated = next(iter(out["calibrated"].values()))["mean_estimate"]
    assert calibrated[names[-1]] == [0.0, 0.0]  # g(s) = s: the sign is 0 everywhere
    assert all(low <= r <= high for v in out["ratio_to_legacy"].values() for r, low, high, _ in v)
    assert all(low <= legacy for low, legacy in zip(out["lowest_per_distribution"],
                                                    out["median_p95"][names[0]]))
    # per-distribution paired intervals: a count of clearly lower / higher per size
    n_dist = len(out["records"])
    assert set(out["clearly_lower_higher"]) == set(names[1:])
    assert all(0 <= lo + hi <= n_dist for v in out["clearly_lower_higher"].values()
               for lo, hi in v)
