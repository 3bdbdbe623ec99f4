"""Calibrated entity confidence on WNUT-17: CRFsuite (through the adapter) and structcal's ChainCRF.

Models, trained on the WNUT-17 train split with the same token features
(``structcal.datasets.token_features``):

- ``crfsuite``: the shipped CRFsuite tagger (``benchmarks/train_wnut17_tagger.py``: L-BFGS,
  all possible transitions; with ``--quick`` a model with its settings trained on a subset),
  read through ``structcal.adapters.CRFsuiteModel`` (exact weights from the model file);
- ``chaincrf``: structcal's ``ChainCRF`` on the same features as a scipy.sparse matrix
  (``DictVectorizer(separator=":")``), when this checkout's ChainCRF accepts sparse input.

For each: token accuracy and entity precision / recall / F1 (exact chunk match, conlleval
semantics) on test; then four event kinds -- ``map`` (the whole tag sequence of a sentence
is right), ``marginal`` (a token's MAP tag is right), ``entity`` (a predicted entity is
exactly right) and ``all_entities`` (a sentence's entity set is exactly right) -- with
forecasts from

- ``raw``: the model's exact probability of the event;
- ``isotonic``: isotonic regression of the outcome on ``raw``;
- ``knn``: Kuleshov & Liang's k-NN region forecaster (k by 10-fold CV) on the event's
  features (Table 1 features the inputs support; for entities the span features, which
  include the exact probability);
- ``default``: ``StructuredRecalibrator()`` with its defaults, given only the kinds;
- for entities also the naive ``min`` and ``product`` of the MAP tags' token marginals.

Scores: Brier x100 with a 95% cluster-bootstrap interval (sentences resampled), and the
calibration error (``structcal.metrics.calibration_error``, kernel estimator) with its 95%
bootstrap interval. Two protocols: ``dev->test`` (fit on dev events, score test events: a
distribution shift, WNUT-17's test set comes from other sources) and ``crossfit`` (5-fold
cross-fitting within test, folds of sentences -- WNUT-17 has no document ids -- so
recalibration and scoring are in distribution). The targets are checked on the
cross-fitted results: the default's Brier is not worse than the better of raw and
isotonic beyond the paired cluster-bootstrap interval, and its calibration error is at most
half the raw model's where the raw one's interval excludes zero.

Speed: feature dicts of the test sentences -> calibrated entity probabilities, end to end
(adapter, inference, entity events and features, forecaster), against sklearn-crfsuite's
``predict_marginals`` alone on the same dicts; median and range of alternating repeats,
after one warm-up run of each (JIT compilation excluded).

Run: ``python benchmarks/ner_study.py [--json] [--quick] [--out benchmarks/results/ner_study.json]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np

from structcal import StructuredPrediction
from structcal.adapters import CRFsuiteModel, TagScheme
from structcal.calibrators import IsotonicCalibration
from structcal.datasets import load_wnut17, token_features
from structcal.events import (
    AllEntitiesCorrect,
    EntitySpans,
    MAPEvent,
    MarginalEvent,
    build_events,
)
from structcal.exceptions import ParameterError, ParameterTypeError
from structcal.forecasters import KNNRegionForecaster
from structcal.metrics import calibration_error
from structcal.recalibration import StructuredRecalibrator

SEED = 0
ITEM_FEATURES = ["phi_mp1", "phi_mp3", "phi_mg1"]
NODE_FEATURES = ["phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7", "phi_mg2", "phi_mg3"]
SPAN_FEATURES = ITEM_FEATURES + [
    "raw", "set_size", "set_class", "set_min_marginal", "set_mean_marginal",
    "set_prod_marginal", "set_min_pseudo_margin", "span_boundary",
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- models


def train_crfsuite(X, y, max_iterations):
    """An sklearn-crfsuite model with the shipped tagger's settings (for ``--quick`` runs)."""
    import sklearn_crfsuite

    from train_wnut17_tagger import SETTINGS

    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=SETTINGS["c1"], c2=SETTINGS["c2"], max_iterations=max_iterations,
        all_possible_transitions=True,
    )
    crf.fit(X, y)
    return crf


def shipped_crfsuite():
    """The shipped WNUT-17 tagger (``benchmarks/train_wnut17_tagger.py``) as an sklearn-crfsuite model."""
    import sklearn_crfsuite

    from structcal.datasets import wnut17_tagger_path

    return sklearn_crfsuite.CRF(model_filename=str(wnut17_tagger_path()))


def chaincrf_supports_sparse():
    """Whether ChainCRF.fit takes scipy.sparse feature matrices ."""
    import scipy.sparse as sp

    from structcal.crf import ChainCRF

    try:
        ChainCRF(max_iter=2).fit([sp.csr_matrix(np.eye(2))], [np.array([0, 1])])
    except (ParameterError, ParameterTypeError, TypeError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def train_chaincrf(X_train, y_train, tag_names, X_other, max_iter):
    """structcal's ChainCRF on the same features, sparse; returns potentials of X_other."""
    import scipy.sparse as sp
    from sklearn.feature_extraction import DictVectorizer

    from structcal.crf import ChainCRF

    dv = DictVectorizer(separator=":", dtype=np.float64)
    flat = [tok for sent in X_train for tok in sent]
    dv.fit(flat)
    lengths = [len(s) for s in X_train]
    Z = sp.csr_matrix(dv.transform(flat))
    lookup = {t: i for i, t in enumerate(tag_names)}
    y_flat = np.array([lookup[t] for s in y_train for t in s])
    # CRFsuite's c2 = 0.1 on the summed log-loss is alpha = 2 c2 / n_sentences ~ 6e-5 on the
    # mean; ChainCRF has no L1 term (CRFsuite's c1)
    crf = ChainCRF(alpha=1e-4, max_iter=max_iter).fit(Z, y_flat, lengths)

    def potentials(X):
        fl = [tok for sent in X for tok in sent]
        return crf.potentials(sp.csr_matrix(dv.transform(fl)), [len(s) for s in X])

    return crf, {name: potentials(Xo) for name, Xo in X_other.items()}


# --------------------------------------------------------------------------- scores


def tagging_scores(scheme, labels, gold, offsets):
    """Token accuracy and entity P/R/F1 (exact chunk match, conlleval semantics).

    ``labels`` and ``gold`` are tag ids of all sentences laid end to end (sentence ``i`` is
    ``offsets[i]:offsets[i + 1]``); chunks come from ``scheme`` (a ``TagScheme``).
    """
    m = scheme.chunks(labels, offsets)
    g = scheme.chunks(gold, offsets)
    key = lambda c: set(zip(c.start.tolist(), c.end.tolist(), c.type.tolist()))  # noqa: E731
    km, kg = key(m), key(g)
    tp = len(km & kg)
    prec = tp / max(len(km), 1)
    rec = tp / max(len(kg), 1)
    return {
        "token_accuracy": float(np.mean(np.asarray(labels) == np.asarray(gold))),
        "entity_precision": prec, "entity_recall": rec,
        "entity_f1": 2 * prec * rec / max(prec + rec, 1e-300),
        "n_predicted_entities": len(km), "n_gold_entities": len(kg),
    }


def _cluster_weights(groups, n_resamples, rng):
    """Bootstrap weights of each event: sentences drawn with replacement."""
    uniq, inv = np.unique(groups, return_inverse=True)
    counts = rng.multinomial(uniq.shape[0], np.full(uniq.shape[0], 1.0 / uniq.shape[0]), size=n_resamples)
    return counts[:, inv]


def brier_with_interval(y, f, groups, weights):
    se = (f - y) ** 2
    boot = (weights @ se) / weights.sum(axis=1)
    return 100 * float(se.mean()), [100 * float(np.quantile(boot, 0.025)), 100 * float(np.quantile(boot, 0.975))]


def score(y, f, groups, weights):
    y = y.astype(float)
    brier, ci = brier_with_interval(y, f, groups, weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ce = calibration_error(y, np.clip(f, 0, 1))
        ce_ci = ce.confidence_interval(n_resamples=200, random_state=SEED)
    return {
        "n": int(y.shape[0]), "base_rate": float(y.mean()), "brier_x100": brier, "brier_ci": ci,
        "calibration_error": float(ce.estimate), "calibration_error_ci": [float(ce_ci.low), float(ce_ci.high)],
    }


def paired_brier_difference(y, f_a, f_b, weights):
    """Brier(a) - Brier(b) x100 and its 95% paired cluster-bootstrap interval."""
    d = (f_a - y) ** 2 - (f_b - y) ** 2
    boot = (weights @ d) / weights.sum(axis=1)
    return 100 * float(d.mean()), [100 * float(np.quantile(boot, 0.025)), 100 * float(np.quantile(boot, 0.975))]


# --------------------------------------------------------------------------- forecasters


def kinds_for(scheme):
    return [MAPEvent(), MarginalEvent(), EntitySpans(scheme), AllEntitiesCorrect(scheme)]


KNN_FEATURES = {"map": ITEM_FEATURES, "marginal": NODE_FEATURES, "entity": SPAN_FEATURES,
                "all_entities": ITEM_FEATURES}


def make_default(kinds):
    """The default recalibrator given only the kinds."""
    return StructuredRecalibrator(kinds=kinds, random_state=SEED)


def make_knn(kinds):
    return StructuredRecalibrator(
        kinds=kinds, features=KNN_FEATURES, forecaster=KNNRegionForecaster(random_state=SEED),
        method="forecaster", shift_check=False, random_state=SEED,
    )


def forecasts(pred_fit, y_fit, pred_eval, y_eval, scheme, notes):
    """Every forecaster's probabilities of the events of ``pred_eval`` (fit on ``pred_fit``)."""
    kinds = kinds_for(scheme)
    table_eval = build_events(pred_eval, kinds, y_true=y_eval, features=KNN_FEATURES)
    table_fit = build_events(pred_fit, kinds, y_true=y_fit, features=KNN_FEATURES)
    out = {"raw": table_eval.raw.copy()}
    iso = np.empty(table_eval.n_events)
    for k in range(len(kinds)):
        r_fit, r_eval = table_fit.kind == k, table_eval.kind == k
        if r_eval.any():
            cal = IsotonicCalibration().fit(table_fit.raw[r_fit], table_fit.outcome[r_fit])
            iso[r_eval] = cal.predict_proba(table_eval.raw[r_eval])[:, 1]
    out["isotonic"] = iso
    out["knn"] = make_knn(kinds).fit(pred_fit, y_fit).predict(pred_eval).forecast
    rec = make_default(kinds).fit(pred_fit, y_fit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["default"] = rec.predict(pred_eval).forecast
    notes.setdefault("default_selection", []).append(
        {k: {"method": v["method"], "cv_brier_x100": {m: round(100 * b, 3) for m, b in v["cv_brier"].items()},
             "se_vs_chosen_x100": {m: round(100 * b, 3) for m, b in v.get("cv_brier_se", {}).items()}}
         for k, v in rec.selection_.items()})
    shifted = [str(w.message).split("\n")[0] for w in caught if "Shift" in type(w.message).__name__]
    notes.setdefault("shift_warnings", []).append(shifted[0] if shifted else "none")
    ent = table_eval.kind == table_eval.kind_names.index("entity")
    for name in ("min", "product"):
        f = np.full(table_eval.n_events, np.nan)
        col = "set_min_marginal" if name == "min" else "set_prod_marginal"
        f[ent] = table_eval.columns(col)[ent, 0]
        out[name] = f
    return table_eval, out


def evaluate(table, fc, n_resamples, rng):
    groups = table.item
    weights_all = _cluster_weights(groups, n_resamples, rng)
    res = {}
    for k, name in enumerate(table.kind_names):
        rows = table.kind == k
        y = table.outcome[rows]
        w = weights_all[:, rows]
        res[name] = {}
        for fname, f in fc.items():
            if np.isnan(f[rows]).any():
                continue
            res[name][fname] = score(y, f[rows], groups[rows], w)
        if "default" in fc:
            best = min(("raw", "isotonic"), key=lambda n: res[name][n]["brier_x100"])
            diff, ci = paired_brier_difference(y.astype(float), fc["default"][rows], fc[best][rows], w)
            raw_ce = res[name]["raw"]
            res[name]["targets"] = {
                "better_of_raw_isotonic": best,
                "default_minus_best_brier_x100": diff, "ci": ci,
                "brier_target_met": bool(ci[0] <= 0.0),
                "raw_ce_clearly_nonzero": bool(raw_ce["calibration_error_ci"][0] > 0.005),
                "ce_ratio_default_over_raw": res[name]["default"]["calibration_error"] / max(raw_ce["calibration_error"], 1e-12),
            }
            t = res[name]["targets"]
            t["ce_target_met"] = bool((not t["raw_ce_clearly_nonzero"]) or t["ce_ratio_default_over_raw"] <= 0.5)
    return res


def crossfit(pred, y, scheme, n_folds, notes, rng):
    """Forecasts of every test event from recalibrators fit on the other folds of sentences."""
    folds = rng.permutation(pred.n_items) % n_folds
    tables, fcs = [], []
    off = pred.item_offsets
    for f in range(n_folds):
        ev_items = np.flatnonzero(folds == f)
        fit_items = np.flatnonzero(folds != f)
        rows_eval = np.concatenate([np.arange(off[i], off[i + 1]) for i in ev_items])
        rows_fit = np.concatenate([np.arange(off[i], off[i + 1]) for i in fit_items])
        t, fc = forecasts(pred.subset(fit_items), y[rows_fit], pred.subset(ev_items), y[rows_eval], scheme, notes)
        # items of the subset -> items of the whole test set (for cluster resampling)
        t = t.__class__(**{**t.__dict__, "item": ev_items[t.item]})
        tables.append(t)
        fcs.append(fc)
    from structcal.events import EventTable

    table = EventTable.concat([t for t in tables])
    fc = {name: np.concatenate([f[name] for f in fcs]) for name in fcs[0]}
    return table, fc


# --------------------------------------------------------------------------- speed


def speed(crf, model, recal, X, repeats, warm=1):
    """Feature dicts -> calibrated entity probabilities vs sklearn-crfsuite predict_marginals.

    Wall-clock and CPU (process) times of alternating repeats, after ``warm`` untimed runs
    of structcal (small batches run in NumPy until a process has spent about a second on
    them, then in the cached kernels) and one of the peer; the CPU times are less disturbed by other processes on a shared machine (both
    sides may use 2 threads: structcal's inference kernels do).
    """
    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - w, time.process_time() - c

    def ours():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the shift test runs (and warns: dev -> test)
            recal.predict(StructuredPrediction(model.potentials(X)))

    def peer():
        crf.predict_marginals(X)

    for _ in range(warm):
        ours()
    peer()
    o, q = [], []
    for _ in range(repeats):
        o.append(timed(ours))
        q.append(timed(peer))
    o, q = np.array(o), np.array(q)
    # where structcal's time goes (separate runs, CPU time)
    from structcal.potentials import ChainPotentials

    import inspect

    shift_takes_groups = len(inspect.signature(recal._shift_test).parameters) == 2
    parts = {"feature dicts -> attribute matrix": [], "unary scores (sparse product)": [],
             "MAP + entity events and features": [], "shift test": [], "recalibrator.predict (all after the product)": []}
    for _ in range(max(3, repeats)):
        t0 = time.process_time()
        A, lengths = model.attribute_matrix(X)
        t1 = time.process_time()
        U = np.ascontiguousarray(A @ model._dense_weights())
        t2 = time.process_time()
        pot = ChainPotentials(U, np.concatenate([[0], np.cumsum(lengths)]), model.transitions)
        table = recal.events(StructuredPrediction(pot))
        t3 = time.process_time()
        if shift_takes_groups:  # each sentence its own group (older trees: no argument)
            recal._shift_test(table, table.item)
        else:
            recal._shift_test(table)
        t4 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            recal.predict(StructuredPrediction(pot))
        t5 = time.process_time()
        for key, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            parts[key].append(v)
    med = lambda v: float(np.median(v))  # noqa: E731
    rng_ = lambda v: [float(np.min(v)), float(np.max(v))]  # noqa: E731
    return {
        "n_sentences": len(X), "n_tokens": int(sum(len(s) for s in X)), "repeats": repeats,
        "structcal_wall_s": med(o[:, 0]), "structcal_wall_range_s": rng_(o[:, 0]),
        "structcal_cpu_s": med(o[:, 1]), "structcal_cpu_range_s": rng_(o[:, 1]),
        "predict_marginals_wall_s": med(q[:, 0]), "predict_marginals_wall_range_s": rng_(q[:, 0]),
        "predict_marginals_cpu_s": med(q[:, 1]), "predict_marginals_cpu_range_s": rng_(q[:, 1]),
        "speedup_wall": med(q[:, 0]) / med(o[:, 0]), "speedup_cpu": med(q[:, 1]) / med(o[:, 1]),
        "breakdown_cpu_s": {k: med(v) for k, v in parts.items()},
        "n_entities": int(table.n_events),
    }


# --------------------------------------------------------------------------- main


def run_model(name, pred_dev, y_dev, pred_test, y_test, scheme, args, rng):
    notes = {}
    r = {"tagging": tagging_scores(scheme, pred_test.map_labels, y_test, pred_test.item_offsets)}
    log(f"[{name}] tagging: {r['tagging']}")
    if not args.skip_devtest:
        t0 = time.perf_counter()
        table, fc = forecasts(pred_dev, y_dev, pred_test, y_test, scheme, notes)
        r["dev->test"] = evaluate(table, fc, args.n_resamples, rng)
        log(f"[{name}] dev->test done ({time.perf_counter() - t0:.1f} s)")
    if not args.skip_crossfit:
        t0 = time.perf_counter()
        table, fc = crossfit(pred_test, y_test, scheme, args.folds, notes, rng)
        r["crossfit"] = evaluate(table, fc, args.n_resamples, rng)
        log(f"[{name}] crossfit done ({time.perf_counter() - t0:.1f} s)")
    r["notes"] = notes
    return r


def format_tables(results) -> str:
    lines = []
    for model, r in results["models"].items():
        if "unavailable" in r:
            lines.append(f"\n## {model}: not run ({r['unavailable']})")
            continue
        t = r["tagging"]
        lines.append(
            f"\n## {model}: token accuracy {100 * t['token_accuracy']:.2f}%, entity P/R/F1 "
            f"{100 * t['entity_precision']:.1f} / {100 * t['entity_recall']:.1f} / {100 * t['entity_f1']:.1f} "
            f"({t['n_predicted_entities']} predicted, {t['n_gold_entities']} gold entities)"
        )
        for protocol in [p for p in ("dev->test", "crossfit") if p in r]:
            lines.append(f"\n### {protocol}: Brier x100 [95% CI] / calibration error [95% CI]")
            for kind, res in r[protocol].items():
                n = next(iter(v for k, v in res.items() if k != "targets"))["n"]
                lines.append(f"{kind} ({n} events, base rate {next(iter(res.values()))['base_rate']:.3f})")
                for fname, s in res.items():
                    if fname == "targets":
                        continue
                    lines.append(
                        f"  {fname:9s} {s['brier_x100']:6.2f} [{s['brier_ci'][0]:5.2f}, {s['brier_ci'][1]:5.2f}]"
                        f"   {s['calibration_error']:.4f} [{s['calibration_error_ci'][0]:.4f}, {s['calibration_error_ci'][1]:.4f}]"
                    )
                if "targets" in res:
                    tg = res["targets"]
                    lines.append(
                        f"  target: default - {tg['better_of_raw_isotonic']} = {tg['default_minus_best_brier_x100']:+.2f} "
                        f"[{tg['ci'][0]:+.2f}, {tg['ci'][1]:+.2f}] -> {'met' if tg['brier_target_met'] else 'MISSED'}; "
                        f"CE default/raw = {tg['ce_ratio_default_over_raw']:.2f} "
                        f"(raw clearly non-zero: {tg['raw_ce_clearly_nonzero']}) -> {'met' if tg['ce_target_met'] else 'MISSED'}"
                    )
        if r.get("notes"):
            for k, v in r["notes"].items():
                lines.append(f"note [{k}]: {v}")
    if "speed" in results:
        s = results["speed"]
        lines.append(
            f"\n## speed ({s['n_sentences']} sentences, {s['n_tokens']} tokens, {s['repeats']} alternating "
            f"repeats; recalibrator: {results.get('speed_recalibrator')})\n"
            f"                                        wall median [range]      CPU median [range]\n"
            f"structcal dicts -> calibrated entities  {s['structcal_wall_s']:.3f} [{s['structcal_wall_range_s'][0]:.3f}, "
            f"{s['structcal_wall_range_s'][1]:.3f}] s   {s['structcal_cpu_s']:.3f} [{s['structcal_cpu_range_s'][0]:.3f}, "
            f"{s['structcal_cpu_range_s'][1]:.3f}] s\n"
            f"sklearn-crfsuite predict_marginals      {s['predict_marginals_wall_s']:.3f} [{s['predict_marginals_wall_range_s'][0]:.3f}, "
            f"{s['predict_marginals_wall_range_s'][1]:.3f}] s   {s['predict_marginals_cpu_s']:.3f} "
            f"[{s['predict_marginals_cpu_range_s'][0]:.3f}, {s['predict_marginals_cpu_range_s'][1]:.3f}] s\n"
            f"speed-up: {s['speedup_wall']:.2f}x wall, {s['speedup_cpu']:.2f}x CPU\n"
            f"structcal CPU breakdown (medians of separate runs; {s.get('n_entities', '?')} entities):\n"
            + "\n".join(f"  {k:40s} {v:.4f} s" for k, v in s["breakdown_cpu_s"].items())
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    ap.add_argument("--quick", action="store_true", help="small subsets and few iterations (smoke run)")
    ap.add_argument("--out", default=None, help="also write the JSON results to this file")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--models", default="crfsuite,chaincrf")
    ap.add_argument("--skip-speed", action="store_true", help="leave out the speed comparison")
    ap.add_argument("--skip-crossfit", action="store_true", help="leave out the crossfit protocol")
    ap.add_argument("--skip-devtest", action="store_true", help="leave out the dev -> test protocol")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(SEED)
    data = load_wnut17()
    train, dev, test = (data.split_named(s) for s in ("train", "dev", "test"))
    max_iter = 100
    if args.quick:
        train, dev, test = train.subset(np.arange(800)), dev.subset(np.arange(300)), test.subset(np.arange(400))
        max_iter, args.n_resamples, args.repeats = 30, 200, 3
    X = {name: token_features(s.sentences) for name, s in (("train", train), ("dev", dev), ("test", test))}
    results = {"config": {"quick": args.quick, "n_train": train.n_sentences, "n_dev": dev.n_sentences,
                          "n_test": test.n_sentences, "folds": args.folds, "n_resamples": args.n_resamples,
                          "max_iterations": max_iter, "seed": SEED}, "models": {}}
    crf = model = None
    tags = TagScheme(data.tag_names, "BIO")
    if "crfsuite" in args.models or not args.skip_speed:
        if args.quick:
            t0 = time.perf_counter()
            crf = train_crfsuite(X["train"], train.tag_strings, max_iter)
            log(f"CRFsuite trained in {time.perf_counter() - t0:.1f} s")
        else:
            crf = shipped_crfsuite()
        model = CRFsuiteModel.from_model(crf)
        tags = TagScheme(model.labels, "BIO")

    def gold(split):  # gold tags in the model's label order
        return tags.encode([data.tag_names[t] for t in split.tags])

    y_dev, y_test = gold(dev), gold(test)
    preds = {}
    if "crfsuite" in args.models:
        preds["crfsuite"] = (StructuredPrediction(model.potentials(X["dev"])),
                             StructuredPrediction(model.potentials(X["test"])))
        results["models"]["crfsuite"] = run_model("crfsuite", preds["crfsuite"][0], y_dev, preds["crfsuite"][1],
                                                  y_test, tags, args, rng)
    if "chaincrf" in args.models:
        ok, why = chaincrf_supports_sparse()
        if not ok:
            results["models"]["chaincrf"] = {"unavailable": f"ChainCRF does not accept scipy.sparse features in this checkout ({why})"}
        else:
            t0 = time.perf_counter()
            _, pots = train_chaincrf(X["train"], train.tag_strings, tags.tag_names,
                                     {"dev": X["dev"], "test": X["test"]}, max_iter)
            log(f"ChainCRF trained in {time.perf_counter() - t0:.1f} s")
            results["models"]["chaincrf"] = run_model(
                "chaincrf", StructuredPrediction(pots["dev"]), y_dev, StructuredPrediction(pots["test"]), y_test,
                tags, args, rng)
            results["models"]["chaincrf"]["train_seconds"] = time.perf_counter() - t0
    if not args.skip_speed:
        # the calibrated entity pipeline fitted on dev, applied to the test dicts
        kinds = [EntitySpans(tags)]
        pred_dev = preds["crfsuite"][0] if preds else StructuredPrediction(model.potentials(X["dev"]))
        recal = make_default(kinds).fit(pred_dev, y_dev)
        results["speed_recalibrator"] = (
            "StructuredRecalibrator(kinds=[EntitySpans], random_state=0), chose "
            f"{recal.selection_['entity']['method']}"
        )
        results["speed"] = speed(crf, model, recal, X["test"], args.repeats)
    text = format_tables(results)
    print(text, file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    if args.json:
        print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
