"""Smoke run of benchmarks/selection_rule_study.py (synthetic section, a few seconds)."""

import importlib.util
from pathlib import Path

import numpy as np

from structcal.recalibration import StructuredRecalibrator

ROOT = Path(__file__).resolve().parents[1]


def _study():
    path = ROOT / "benchmarks" / "selection_rule_study.py"
    spec = importlib.util.spec_from_file_location("selection_rule_study", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_study_rules_are_the_librarys_choice():
    study = _study()
    X, y, r, items, _ = study.world("fc_weak", 100, 2, np.random.default_rng(3))
    X_e, _, r_e, _, _ = study.world("fc_weak", 50, 1, np.random.default_rng(4))
    rec = StructuredRecalibrator()
    choices, forecasts = study.fit_candidates(rec, X, y, r, items, 7, X_e, r_e)
    for rule, n_se in study.RULES.items():
        assert choices[rule] == StructuredRecalibrator(n_se=n_se)._select("ev", X, y, r, items, 7)[0]
    assert len(set(choices.values())) > 1  # the margins disagree on this draw
    assert set(forecasts) == {"raw", "isotonic", "forecaster"}
    assert all(f.shape == (50,) and np.all((f >= 0) & (f <= 1)) for f in forecasts.values())


def test_study_synthetic_quick(tmp_path):
    study = _study()
    res = study.main(["--sections", "synthetic", "--quick", "--json", "--cache", str(tmp_path)])
    syn = res["synthetic"]
    assert set(syn) == {f"{w} / 150x2" for w in study.WORLDS}
    for v in syn.values():
        for s in v["rules"].values():
            assert sum(s["chosen"].values()) == v["seeds"]
            assert 0.0 <= s["regret_x100_mean"] <= s["regret_x100_max"]
    # known truth: the raw probability is the true one in world 'raw', 2x over-confident in 'iso'
    assert syn["raw / 150x2"]["excess_x100"]["raw"] == 0.0
    iso = syn["iso / 150x2"]["excess_x100"]
    assert iso["isotonic"] < 0.75 * iso["raw"]
    assert "n_se=(1.5, 1)" in study.format_results(res)
