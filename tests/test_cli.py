"""The main job (``structcal demo ocr``) and the plotting helpers."""

import json

import numpy as np
import pytest

from structcal.cli import main


@pytest.fixture(scope="module")
def demo_json():
    import contextlib
    import io

    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        assert main(["demo", "ocr", "--json", "--quiet"]) == 0
    assert err.getvalue() == ""  # --quiet: no progress messages
    return json.loads(buf.getvalue())


def test_demo_ocr_json_has_the_documented_keys_and_sane_figures(demo_json):
    r = demo_json
    # the same units as the text: accuracies in percent, losses x100
    assert r["units"]["letter_accuracy"] == "percent"
    assert 90 < r["letter_accuracy"] < 97      # shipped likelihood CRF: 93.1% / 69.4%
    assert 60 < r["word_accuracy"] < 80
    for kind in ("map", "marginal"):
        for key in ("raw_l2", "calibrated_l2", "calibrated_calibration_error", "calibrated_sharpness"):
            assert 0.0 <= r[kind][key] <= 100.0, (kind, key)
        # calibration never makes the l2 loss worse than raw by more than noise
        assert r[kind]["calibrated_l2"] <= r[kind]["raw_l2"] + 0.5, kind
    # the MAP events gain the most: raw p(MAP) of the likelihood CRF is overconfident
    assert r["map"]["calibrated_l2"] < 0.5 * r["map"]["raw_l2"]
    assert r["map"]["n_events"] == 2042 and r["marginal"]["n_events"] == 15624
    assert r["seconds"] > 0


def test_demo_ocr_table_output(capsys):
    from structcal.cli import demo_ocr

    result = demo_ocr()
    captured = capsys.readouterr()
    out = captured.out
    assert "per letter" in out and "pooled" in out and "marginal" in out
    assert f"{result['letter_accuracy']:.1f}%" in out
    # the JSON and the table agree: the pooled calibrated l2 x100 appears in the table
    assert f"{result['pooled']['calibrated_l2']:.2f}" in out
    # progress goes to stderr, step by step
    assert "structcal: loading the shipped model" in captured.err
    assert "fitting forecasters" in captured.err
    # the JIT remark appears exactly when kernels were compiled in this run
    assert ("JIT compilation" in out) == (result["jit_compiled_signatures"] > 0)


def test_quiet_is_accepted_before_and_after_the_command():
    from structcal.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["--quiet", "demo", "ocr"]).quiet
    assert parser.parse_args(["demo", "ocr", "-q"]).quiet
    assert not parser.parse_args(["demo", "ocr"]).quiet


def test_cli_rejects_unknown_demo(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "mnist"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_plot_report_draws_one_curve_per_forecaster():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    from structcal.events import MAPEvent, MarginalEvent, build_events
    from structcal.plotting import plot_calibration_curve, plot_report
    from structcal.prediction import StructuredPrediction
    from structcal.recalibration import evaluate_events

    from ._problems import random_chains

    p = random_chains(np.random.default_rng(0), 3, np.arange(60) % 5 + 1)
    pred = StructuredPrediction(p)
    y = pred.map_labels.copy()
    y[::3] = (y[::3] + 1) % 3
    t = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y, features=["phi_mg1", "phi_mg2"])
    report = evaluate_events(t, {"raw": t.raw, "half": np.full(t.n_events, 0.5)})
    ax = plot_report(report, "marginal")
    assert len(ax.get_legend().get_texts()) == 2
    assert "raw (" in ax.get_legend().get_texts()[0].get_text()
    with pytest.raises(TypeError, match="ReliabilityTable"):
        plot_calibration_curve(np.zeros(3))
    from structcal.plotting import plot_reliability_curve

    with pytest.raises(TypeError, match="ReliabilityCurve"):
        plot_reliability_curve([0.1, 0.2])
    n_figures = len(plt.get_fignums())
    for bad, error, word in ((None, TypeError, "report"), (t, TypeError, "report")):
        with pytest.raises(error, match=word):
            plot_report(bad)
    with pytest.raises(ValueError, match="group"):
        plot_report(report, "no such group")
    with pytest.raises(ValueError, match="scale"):
        plot_report(report, "marginal", scale=-1)
    assert len(plt.get_fignums()) == n_figures  # refused before drawing
    plt.close("all")


def test_ocr_setup_rejects_a_non_model():
    from structcal import ParameterTypeError
    from structcal.demos import ocr_setup

    with pytest.raises(ParameterTypeError, match="shipped model name or a ChainCRF"):
        ocr_setup(42)
