"""Multiclass, the simplest structure: Kuleshov & Liang's MAP recalibration vs one-vs-rest.

Kuleshov & Liang (2015, section 5 and Figure 2 left) recalibrate a 10-class linear SVM on
CIFAR-10 (75% accuracy): the l2 loss (Brier score x100) of the MAP event "the top class is
right" goes from 23.0 raw to 19.6 with MAP recalibration (k-NN on the margin feature), better
than normalised one-vs-all recalibration (Zadrozny & Elkan) at 20.1. CIFAR-10 is not
available here; single letters of the shipped OCR data are the stand-in (26 classes, 128
binary pixels; a linear SVM reaches about the paper's accuracy).

A multiclass classifier is a chain of length 1: its per-class scores are the unary
potentials, and structcal's events, features and forecasters apply unchanged.

Protocol
--------
- Base models fit on the letters of the ``train`` split: a linear SVM (``LinearSVC``) and a
  multinomial logistic regression (scikit-learn). Raw probabilities: softmax of the SVM's
  decision values (as a CRF would read them), ``predict_proba`` of the logistic regression.
- Recalibration sets: ``n_recal`` letters (default 2,000, the paper's size) drawn without
  replacement from the ``recalibration`` pool, ``n_draws`` seeded draws; methods are fit on
  each draw and scored on every letter of the ``test`` split (15,624 letters).
- Methods: raw; normalised one-vs-rest with Platt, isotonic and SplineCalib (structcal's
  score calibrators on the score matrix: per-class maps, rows renormalised); temperature and
  vector scaling on the logits; structcal's MAP recalibration (``MAPEvent`` with the margin
  features ``phi_mp3`` (log-probability gap of the top two classes) and ``phi_mg1``
  (probability gap), cross-validated k-NN and tree region forecasters); and structcal's
  marginal recalibration of the per-class events ``y = c`` (``LabelAt(0, c)`` with the raw
  probability, the concordance ``phi_mg3`` and margin ``phi_mg2``, one k-NN forecaster
  per class, rows renormalised).
- The MAP event of a letter is "the base model's top class is right"; every method is
  scored on its probability of that same event, ``p[argmax raw]``. MAP recalibration
  forecasts only that event; its full probability vector puts the calibrated probability
  on the top class and spreads the rest over the other classes in proportion to the raw
  probabilities.
- Scores: Brier x100 of the MAP event (the paper's l2), multiclass Brier x100 of the full
  vector (sum over classes), and structcal's default calibration-error estimator with 95%
  bootstrap intervals: of the MAP event, top-label ("confidence") and class-wise.
- The paired difference MAP recalibration (k-NN) minus one-vs-rest Platt on the MAP event,
  with a 95% interval from a bootstrap over test *words* (letters of one word share a
  writer), per draw.

    python benchmarks/multiclass_study.py            # about 2-3 minutes
    python benchmarks/multiclass_study.py --json
    python benchmarks/multiclass_study.py --quick    # seconds (used by a test)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structcal import ChainPotentials, StructuredPrediction, StructuredRecalibrator  # noqa: E402
from structcal.calibrators import (  # noqa: E402
    IsotonicCalibration,
    PlattScaling,
    SplineCalib,
    TemperatureScaling,
    VectorScaling,
)
from structcal.datasets import load_ocr  # noqa: E402
from structcal.events import LabelAt, MAPEvent  # noqa: E402
from structcal.forecasters import KNNRegionForecaster, TreeRegionForecaster  # noqa: E402
from structcal.metrics import calibration_error  # noqa: E402

MAP_FEATURES = ["phi_mp3", "phi_mg1"]
CLASS_FEATURES = ["raw", "phi_mg2", "phi_mg3"]


def fit_base_models(X, y, *, quick):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    models = {"linear SVM": LinearSVC(C=0.1, dual=False, random_state=0)}
    if not quick:
        models["logistic regression"] = LogisticRegression(C=1.0, max_iter=3000)
    for m in models.values():
        m.fit(X, y)
    return models


def log_probabilities(name, model, X):
    """Raw log-probabilities (the unary potentials of a length-1 chain)."""
    if name == "linear SVM":
        return log_softmax(model.decision_function(X), axis=1)
    return np.log(np.clip(model.predict_proba(X), 1e-300, None))


def as_prediction(logp):
    n, K = logp.shape
    pots = ChainPotentials.from_scores(logp, lengths=np.ones(n, np.int64), transitions=np.zeros((K, K)))
    return StructuredPrediction(pots)


def spread_rest(P_raw, top, q):
    """Full vector with probability ``q`` on class ``top``, the rest spread as in ``P_raw``."""
    n = P_raw.shape[0]
    rows = np.arange(n)
    others = P_raw.copy()
    others[rows, top] = 0.0
    mass = others.sum(axis=1, keepdims=True)
    K = P_raw.shape[1]
    others = np.where(mass > 0, others / np.where(mass > 0, mass, 1.0), 1.0 / (K - 1))
    others[rows, top] = 0.0
    P = others * (1.0 - q)[:, None]
    P[rows, top] = q
    return P


#: StructuredRecalibrator's ``method`` for the structcal rows: the paper's k-NN by default;
#: ``--method auto`` runs the library default (benchmarks/results/multiclass_study_method_auto.txt)
RECAL_METHOD = "forecaster"
#: the method each structcal recalibrator chose, in order of fitting (with ``--method auto``)
CHOSEN = []


def _note_choice(rec, label):
    if RECAL_METHOD != "forecaster":
        methods = sorted({s["method"] for s in rec.selection_.values()})
        CHOSEN.append(f"{label}: {'/'.join(methods)}")


def map_recalibrated(logp_fit, y_fit, logp_test, forecaster, seed):
    rec = StructuredRecalibrator(
        kinds=[MAPEvent()], features=MAP_FEATURES, forecaster=forecaster, method=RECAL_METHOD,
    ).fit(as_prediction(logp_fit), y_fit)
    _note_choice(rec, f"MAP {type(forecaster).__name__}")
    return rec.predict(as_prediction(logp_test)).for_kind("map")


def classwise_recalibrated(logp_fit, y_fit, logp_test, seed):
    K = logp_fit.shape[1]
    kinds = [LabelAt(0, c, name=f"y={c}") for c in range(K)]
    rec = StructuredRecalibrator(
        kinds=kinds, features=CLASS_FEATURES, method=RECAL_METHOD,
        forecaster=KNNRegionForecaster(random_state=seed),
    ).fit(as_prediction(logp_fit), y_fit, raw=True)
    _note_choice(rec, "class-wise")
    out = rec.predict(as_prediction(logp_test))
    n = logp_test.shape[0]
    P = np.empty((n, K))
    for c in range(K):
        P[:, c] = out.for_kind(f"y={c}")
    total = P.sum(axis=1, keepdims=True)
    return np.where(total > 0, P / np.where(total > 0, total, 1.0), 1.0 / K)


def methods_for(logp_fit, y_fit, logp_test, seed, *, quick):
    """Full probability vectors (or None) and MAP-event probabilities of every method."""
    P_raw = np.exp(logp_test)
    top = P_raw.argmax(axis=1)
    rows = np.arange(P_raw.shape[0])
    out = {"raw": P_raw}
    S_fit, S_test = np.exp(logp_fit), P_raw
    out["one-vs-rest Platt (Zadrozny & Elkan)"] = PlattScaling().fit(S_fit, y_fit).predict_proba(S_test)
    out["one-vs-rest isotonic"] = IsotonicCalibration().fit(S_fit, y_fit).predict_proba(S_test)
    if not quick:
        out["one-vs-rest SplineCalib"] = SplineCalib().fit(S_fit, y_fit).predict_proba(S_test)
    out["temperature scaling"] = TemperatureScaling().fit(logp_fit, y_fit).predict_proba(logp_test)
    out["vector scaling"] = VectorScaling().fit(logp_fit, y_fit).predict_proba(logp_test)
    q_knn = map_recalibrated(logp_fit, y_fit, logp_test, KNNRegionForecaster(random_state=seed), seed)
    out["structcal MAP recalibration, k-NN"] = spread_rest(P_raw, top, q_knn)
    if not quick:
        q_tree = map_recalibrated(logp_fit, y_fit, logp_test,
                                  TreeRegionForecaster(random_state=seed), seed)
        out["structcal MAP recalibration, tree"] = spread_rest(P_raw, top, q_tree)
        out["structcal class-wise recalibration, k-NN"] = classwise_recalibrated(
            logp_fit, y_fit, logp_test, seed)
    return {name: (P, P[rows, top]) for name, P in out.items()}


def cluster_bootstrap_diff(a, b, groups, *, n_resamples, seed):
    """95% interval of mean(a) - mean(b) over a bootstrap of whole groups."""
    d = a - b
    sums = np.bincount(groups, weights=d)
    counts = np.bincount(groups).astype(np.float64)
    rng = np.random.default_rng(seed)
    G = sums.shape[0]
    idx = rng.integers(0, G, size=(n_resamples, G))
    boot = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return float(d.mean()), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def scores(P, q, y, correct, *, seed):
    K = P.shape[1]
    onehot = np.zeros_like(P)
    onehot[np.arange(y.shape[0]), y] = 1.0
    res = {
        "map_brier": float(100 * np.mean((q - correct) ** 2)),
        "vector_brier": float(100 * np.mean(np.sum((P - onehot) ** 2, axis=1))),
    }
    for key, (yy, pp, setting) in {
        "map_ece": (correct.astype(np.int64), q, "binary"),
        "toplabel_ece": (y, P, "confidence"),
        "classwise_ece": (y, P, "class-wise"),
    }.items():
        r = calibration_error(yy, pp, setting=setting)
        ci = r.confidence_interval(random_state=seed, n_resamples=100)
        res[key] = [float(100 * r.estimate), float(100 * ci.low), float(100 * ci.high)]
    del K
    return res


def run(*, quick=False, n_recal=2000, n_draws=5, seed=0, log=print):
    t0 = time.perf_counter()
    train, test, pool = load_ocr("train"), load_ocr("test"), load_ocr("recalibration")
    if quick:
        n_draws, n_recal = 1, 1000
        keep = np.arange(test.n_words) < 400
        test = test.subset(np.flatnonzero(keep))
    X_tr, X_te, X_pool = (d.pixels.astype(np.float64) for d in (train, test, pool))
    y_te = test.labels
    words = np.repeat(np.arange(test.n_words), test.lengths)
    models = fit_base_models(X_tr, train.labels, quick=quick)
    log(f"  base models fit on {train.n_letters} letters of the train split "
        f"({time.perf_counter() - t0:.1f} s); test: {test.n_letters} letters of "
        f"{test.n_words} words; {n_draws} draws of {n_recal} recalibration letters")
    result = {"n_test": int(test.n_letters), "n_recal": n_recal, "n_draws": n_draws,
              "models": {}}
    for name, model in models.items():
        logp_te = log_probabilities(name, model, X_te)
        logp_pool = log_probabilities(name, model, X_pool)
        top = logp_te.argmax(axis=1)
        correct = (top == y_te).astype(np.float64)
        per_draw, diffs = [], []
        for d in range(n_draws):
            rng = np.random.default_rng(seed + d)
            pick = rng.choice(pool.n_letters, size=n_recal, replace=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                meth = methods_for(logp_pool[pick], pool.labels[pick], logp_te, seed + d, quick=quick)
            per_draw.append({m: scores(P, q, y_te, correct, seed=seed + d) for m, (P, q) in meth.items()})
            a = (meth["structcal MAP recalibration, k-NN"][1] - correct) ** 2
            b = (meth["one-vs-rest Platt (Zadrozny & Elkan)"][1] - correct) ** 2
            diffs.append([100 * v for v in cluster_bootstrap_diff(
                a, b, words, n_resamples=1000, seed=seed + d)])
        methods = list(per_draw[0])
        summary = {}
        for m in methods:
            entry = {}
            for key in per_draw[0][m]:
                vals = np.array([pd[m][key] if np.ndim(pd[m][key]) == 0 else pd[m][key][0]
                                 for pd in per_draw])
                entry[key] = {"mean": float(vals.mean()), "min": float(vals.min()),
                              "max": float(vals.max())}
                if np.ndim(per_draw[0][m][key]) == 1:
                    entry[key]["interval_first_draw"] = per_draw[0][m][key][1:]
            summary[m] = entry
        result["models"][name] = {
            "accuracy": float(correct.mean()),
            "methods": summary,
            "map_knn_minus_ovr_platt": diffs,
        }
        log(f"  {name}: accuracy {correct.mean():.1%} ({time.perf_counter() - t0:.1f} s)")
    result["seconds"] = time.perf_counter() - t0
    return result


def format_result(res) -> str:
    lines = [
        f"OCR single letters: {res['n_test']} test letters, recalibration sets of "
        f"{res['n_recal']} letters ({res['n_draws']} draws; mean, [min, max] over draws)",
        "x100; ECE = structcal's default estimator (95% bootstrap interval of the first draw)",
    ]
    for name, m in res["models"].items():
        lines.append("")
        lines.append(f"{name}: accuracy {m['accuracy']:.1%}")
        lines.append(f"  {'method':44s} {'MAP Brier':>18s} {'vector Brier':>18s} "
                     f"{'MAP-event ECE':>22s} {'top-label ECE':>22s} {'class-wise ECE':>22s}")
        for meth, e in m["methods"].items():
            def rng_(key):
                v = e[key]
                return f"{v['mean']:6.2f} [{v['min']:.2f},{v['max']:.2f}]"

            def ece(key):
                v = e[key]
                lo, hi = v["interval_first_draw"]
                return f"{v['mean']:5.2f} ({lo:.2f}-{hi:.2f})"
            lines.append(f"  {meth:44s} {rng_('map_brier'):>18s} {rng_('vector_brier'):>18s} "
                         f"{ece('map_ece'):>22s} {ece('toplabel_ece'):>22s} {ece('classwise_ece'):>22s}")
        lines.append("  MAP recalibration (k-NN) minus one-vs-rest Platt, MAP-event Brier x100, "
                     "per draw (95% word-bootstrap interval):")
        lines.append("    " + "; ".join(f"{d:+.2f} ({lo:+.2f}, {hi:+.2f})"
                                        for d, lo, hi in m["map_knn_minus_ovr_platt"]))
    lines.append("")
    if res.get("method_auto_choices"):
        lines.append("method='auto' chose, in order of fitting (models in table order, then draws):")
        ch = res["method_auto_choices"]
        lines.extend("  " + "; ".join(ch[i:i + 3]) for i in range(0, len(ch), 3))
        lines.append("")
    lines.append(f"done in {res['seconds']:.1f} s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="one small draw, SVM only")
    ap.add_argument("--n-recal", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", default="forecaster", choices=["forecaster", "auto"],
                    help="StructuredRecalibrator method of the structcal rows (default: the paper's k-NN)")
    args = ap.parse_args(argv)
    global RECAL_METHOD
    RECAL_METHOD = args.method
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    res = run(quick=args.quick, n_recal=args.n_recal, n_draws=args.draws, seed=args.seed, log=log)
    if CHOSEN:
        res["method_auto_choices"] = CHOSEN
    print(json.dumps(res, indent=1) if args.json else format_result(res))


if __name__ == "__main__":
    main()
