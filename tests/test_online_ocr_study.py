"""benchmarks/online_ocr_study.py runs end to end on a tiny configuration."""

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_study():
    spec = importlib.util.spec_from_file_location(
        "online_ocr_study", ROOT / "benchmarks" / "online_ocr_study.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_online_ocr_study_tiny_run(capsys):
    study = _load_study()
    out = study.main([
        "--json", "--words", "150", "--batch-n", "300", "--shift-words", "60",
        "--shift-iter", "40", "--noise", "0.3",
    ])
    assert '"streams"' in capsys.readouterr().out  # the JSON object was printed
    assert set(out["streams"]) == set(study.STREAMS)
    for name, res in out["streams"].items():
        T = res["n_events"]
        assert res["horizons"][-1] == T and sum(res["n_events_by_kind"].values()) == T
        assert res["n_events_by_kind"]["map"] == 150
        assert set(res["pooled"]) == set(study.METHODS)
        for method, table in res["pooled"].items():
            assert list(table) == [str(h) for h in res["horizons"]]
            for cell in table.values():
                assert set(cell) == set(study.METRICS)
                assert 0 <= cell["calibration_l2"] <= cell["calibration_l1"] <= 1
                assert 0 <= cell["l2_loss"] <= 1
        assert set(res["by_kind_at_end"]) == {"map", "marginal"}
        assert set(res["worst_calibration_l1"]) == set(study.METHODS)
    iid, adv = out["streams"]["iid"], out["streams"]["adversarial"]
    end = lambda res, m, k: res["pooled"][m][str(res["n_events"])][k]  # noqa: E731
    # same events, another order: the raw forecasts' metrics over the whole stream agree
    for k in study.METRICS:
        np.testing.assert_allclose(end(iid, "raw", k), end(adv, "raw", k), rtol=1e-12)
    # errors late: the batch recalibrators saw only right events and forecast 1 ever after
    assert adv["batch"]["batch isotonic"]["marginal"]["constant"] == 1.0
    assert end(adv, "online", "calibration_l1") < end(adv, "batch isotonic", "calibration_l1")
    assert end(adv, "online", "l2_loss") < end(adv, "batch k-NN", "l2_loss")
    worst = adv["worst_calibration_l1"]
    assert worst["online"] < worst["batch isotonic"] and worst["online"] < worst["raw"]
    # the small shift model is over-confident; online recalibration repairs most of it
    shift = out["streams"]["shift"]
    assert shift["mean_raw_by_kind"]["marginal"] > shift["accuracy_by_kind"]["marginal"] + 0.05
    assert end(shift, "online", "calibration_l1") < end(shift, "raw", "calibration_l1") / 2
    assert end(shift, "online", "l2_loss") < end(shift, "raw", "l2_loss")
