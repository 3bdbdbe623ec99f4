"""The selection rule of ``StructuredRecalibrator(method='auto')``, measured for several margins.

``method='auto'`` picks, per event kind, among the raw probability, isotonic regression on it
and the region forecaster from cross-validated held-out Brier scores
(``StructuredRecalibrator._held_out_losses``): isotonic is the reference, the forecaster
replaces it if it wins by more than ``n_se[0]`` clustered standard errors of the paired
difference, the raw probability then replaces the choice if it wins by more than
``n_se[1]`` (``structcal.recalibration._one_se_choice``). This study fits the candidates
once per recalibration set and applies that same function with each margin in ``RULES``
(a number serves both steps; a pair is (forecaster step, raw step)), so the rules compared
are exactly the library's.

Sections
--------
- ``ner``: WNUT-17 test sentences (1,287), a CRFsuite and a ChainCRF tagger trained on the
  train split with ``benchmarks/ner_study.py``'s functions and features; the four event
  kinds of that study (``map``, ``marginal``, ``entity``, ``all_entities``) with the
  default features. Per outer split, 3 folds of sentences: each fold's events are forecast
  by the maps fit on the other two folds (cross-fitting, as ``ner_study.py --folds 3``;
  outer split 0 is that study's split, the others are fresh permutations). A rule *misses*
  on a split and kind if its held-out Brier score, pooled over the 3 folds, is worse than
  the better of raw and isotonic by more than a 95% paired bootstrap interval over
  sentences (lower end > 0): the target. The ChainCRF is trained with
  CRFsuite's label order (as ``ner_study.py`` does when it trains both); ``ner_study.py
  --models chaincrf`` alone uses the data set's order, which gives a slightly different
  model (the same raw Brier scores to 0.001, k-NN cross-validated scores up to 0.1 apart).
- ``ocr``: multiclass, the MAP event of single OCR letters (``benchmarks/multiclass_study.py``:
  linear SVM and logistic regression fit on the train split, MAP features ``phi_mp3``,
  ``phi_mg1``; k-NN and tree region forecasters). Each draw: 2,000 recalibration letters
  from the recalibration pool; scored on all 15,624 test letters, bootstrap over words.
- ``synthetic``: worlds with a known true probability ``p`` of each event (2 events per
  input, features: an irrelevant one, a population flag, the raw probability): ``raw``
  (the model is calibrated), ``iso`` (2x over-confident on the logit scale: a monotone map
  repairs it), ``fc`` (one population 4x over-confident, the other calibrated: only a
  forecaster that sees the flag repairs it), ``fc_weak`` (the same, milder). Scored on
  20,000 fresh inputs against ``p``: excess risk ``mean((f - p)^2)`` and the *regret* of a
  rule, its choice's excess risk minus the best candidate's (x100).

Printed per rule and setting: misses / splits, how often each candidate was chosen
(r/i/f over all fits), the mean Brier x100 difference rule minus isotonic (and minus the
better of raw and isotonic) on held-out data; synthetic: choices and regret.

Run (trained models' outputs are cached as .npz under ``--cache``; 682 s CPU, 14 minutes wall on
a loaded 2-core machine, without a cache; the cache saves the ~2.5 minutes of training)::

    python benchmarks/selection_rule_study.py --out benchmarks/results/selection_rule_study.json \\
        > benchmarks/results/selection_rule_study.txt
    python benchmarks/selection_rule_study.py --json            # JSON on stdout
    python benchmarks/selection_rule_study.py --quick           # smoke run (seconds per section)
    python benchmarks/selection_rule_study.py --sections synthetic --quick
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structcal.forecasters import SingleClassWarning  # noqa: E402
from structcal.recalibration import (  # noqa: E402
    StructuredRecalibrator,
    _fit_isotonic,
    _one_se_choice,
    _positive_column,
)

#: margins compared: a number serves both steps; a pair is (forecaster step, raw step)
RULES = {"0": 0.0, "1": 1.0, "(1.5, 1)": (1.5, 1.0), "1.5": 1.5, "(2, 1)": (2.0, 1.0), "2": 2.0}
CANDIDATES = ("raw", "isotonic", "forecaster")
SEED = 0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- one recalibration set


def fit_candidates(rec, X, y, r, items, seed, X_eval, r_eval):
    """The choice of every rule on one recalibration set, and each candidate's eval forecasts.

    The held-out losses are the library's (``_held_out_losses``, folds drawn with ``seed``);
    the final maps are fit on the whole set as ``StructuredRecalibrator.fit`` fits them.
    """
    losses = rec._held_out_losses(X, y, r, items, seed)
    choices = {name: ("raw" if losses is None else _one_se_choice(losses, items, n))
               for name, n in RULES.items()}
    iso = _fit_isotonic(r, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClassWarning)
        fc = rec._base_forecaster(seed).fit(X, y)
    forecasts = {
        "raw": np.clip(r_eval, 0.0, 1.0),
        "isotonic": np.full(r_eval.shape[0], float(y[0])) if iso is None else iso.predict_proba(r_eval)[:, 1],
        "forecaster": _positive_column(fc, X_eval),
    }
    return choices, forecasts


def score_split(parts, n_resamples, rng):
    """Pooled held-out scores of one outer split (``parts``: its folds, or one draw).

    Each part: ``y`` (eval outcomes), ``groups`` (bootstrap clusters), ``forecasts`` (per
    candidate), ``choices`` (per rule). Per rule: Brier x100 minus isotonic, minus the better
    of raw and isotonic with its 95% paired bootstrap interval, and whether it is a miss.
    """
    from ner_study import _cluster_weights, paired_brier_difference

    y = np.concatenate([p["y"] for p in parts]).astype(np.float64)
    groups = np.concatenate([p["groups"] for p in parts])
    fc = {c: np.concatenate([p["forecasts"][c] for p in parts]) for c in CANDIDATES}
    brier = {c: float(np.mean((fc[c] - y) ** 2)) for c in CANDIDATES}
    best = min(("raw", "isotonic"), key=lambda c: brier[c])
    weights = _cluster_weights(groups, n_resamples, rng)
    out = {"better_of_raw_isotonic": best, "brier_x100": {c: 100 * b for c, b in brier.items()}, "rules": {}}
    for name in RULES:
        f = np.concatenate([p["forecasts"][p["choices"][name]] for p in parts])
        diff, ci = paired_brier_difference(y, f, fc[best], weights)
        out["rules"][name] = {
            "choices": "".join(p["choices"][name][0] for p in parts),
            "minus_best_x100": diff, "ci": ci, "miss": bool(ci[0] > 0.0),
            "minus_isotonic_x100": 100 * float(np.mean((f - y) ** 2) - brier["isotonic"]),
        }
    return out


def summarize(splits):
    """Per rule over outer splits: misses, choice counts, mean differences."""
    out = {}
    for name in RULES:
        rs = [s["rules"][name] for s in splits]
        ch = "".join(r["choices"] for r in rs)
        out[name] = {
            "misses": int(sum(r["miss"] for r in rs)), "splits": len(rs),
            "chosen": {c: ch.count(c[0]) for c in CANDIDATES},
            "minus_isotonic_x100": float(np.mean([r["minus_isotonic_x100"] for r in rs])),
            "minus_best_x100": float(np.mean([r["minus_best_x100"] for r in rs])),
            "worst_ci": max((r["ci"] for r in rs), key=lambda c: c[0]),
        }
    return out


# --------------------------------------------------------------------------- WNUT-17


def ner_predictions(args, cache):
    """Test-set potentials of both taggers and the gold tags (cached: training takes minutes)."""
    import ner_study as ns

    from structcal import ChainPotentials, StructuredPrediction
    from structcal.adapters import CRFsuiteModel, TagScheme
    from structcal.datasets import load_wnut17, token_features

    path = cache / f"ner_potentials{'_quick' if args.quick else ''}.npz"
    if not path.exists():
        data = load_wnut17()
        train, test = data.split_named("train"), data.split_named("test")
        max_iter = 100
        if args.quick:
            train, test, max_iter = train.subset(np.arange(800)), test.subset(np.arange(300)), 30
        X = {"train": token_features(train.sentences), "test": token_features(test.sentences)}
        t0 = time.perf_counter()
        model = CRFsuiteModel.from_model(ns.train_crfsuite(X["train"], train.tag_strings, max_iter))
        tags = TagScheme(model.labels, "BIO")
        log(f"  CRFsuite trained ({time.perf_counter() - t0:.0f} s)")
        p = model.potentials(X["test"])
        out = {"labels": np.array(tags.tag_names), "y": tags.encode([data.tag_names[t] for t in test.tags]),
               "crfsuite_unary": p.unary, "crfsuite_offsets": p.offsets, "crfsuite_pairwise": p.pairwise}
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning at 100 iterations, as in ner_study
            _, pots = ns.train_chaincrf(X["train"], train.tag_strings, tags.tag_names, {"test": X["test"]}, max_iter)
        log(f"  ChainCRF trained ({time.perf_counter() - t0:.0f} s)")
        p = pots["test"]
        out.update(chaincrf_unary=p.unary, chaincrf_offsets=p.offsets, chaincrf_pairwise=p.pairwise)
        np.savez(path, **out)
    z = np.load(path)
    tags = TagScheme([str(s) for s in z["labels"]], "BIO")
    preds = {m: StructuredPrediction(ChainPotentials(z[f"{m}_unary"], z[f"{m}_offsets"], z[f"{m}_pairwise"]))
             for m in ("crfsuite", "chaincrf")}
    return preds, z["y"], tags


def ner_section(args, cache):
    import ner_study as ns

    preds, y, tags = ner_predictions(args, cache)
    res = {}
    for model, pred in preds.items():
        t0 = time.perf_counter()
        rec = StructuredRecalibrator(kinds=ns.kinds_for(tags), random_state=ns.SEED)
        table = rec.events(pred, y)
        splits = {k: [] for k in table.kind_names}
        for s in range(args.ner_splits):
            # split 0: ner_study.py's (--skip-devtest --folds 3); then fresh permutations
            perm_rng = np.random.default_rng(ns.SEED if s == 0 else 1000 + s)
            folds = perm_rng.permutation(pred.n_items) % 3
            parts = {k: [] for k in table.kind_names}
            for f in range(3):
                fit_item = folds[table.item] != f
                seeds = np.random.default_rng(ns.SEED)  # as StructuredRecalibrator.fit draws them
                for key in table.kind_names:
                    seed = int(seeds.integers(0, 2**31 - 1))
                    rows = rec._rows(table, key)
                    X, _ = rec._design(table, key)
                    fr, er = fit_item[rows], ~fit_item[rows]
                    y_k, r_k, it_k = table.outcome[rows], table.raw[rows], table.item[rows]
                    choices, fc = fit_candidates(rec, X[fr], y_k[fr], r_k[fr], it_k[fr], seed, X[er], r_k[er])
                    parts[key].append({"y": y_k[er], "groups": it_k[er], "forecasts": fc, "choices": choices})
            for key in table.kind_names:
                splits[key].append(score_split(parts[key], args.n_resamples, np.random.default_rng(s)))
            log(f"  {model} split {s + 1}/{args.ner_splits} ({time.perf_counter() - t0:.0f} s)")
        res[model] = {k: {"summary": summarize(v), "splits": v} for k, v in splits.items()}
    return res


# --------------------------------------------------------------------------- OCR multiclass


def ocr_section(args, cache):
    import multiclass_study as mc

    from structcal.datasets import load_ocr
    from structcal.events import MAPEvent
    from structcal.forecasters import KNNRegionForecaster, TreeRegionForecaster

    train, test, pool = load_ocr("train"), load_ocr("test"), load_ocr("recalibration")
    if args.quick:
        test = test.subset(np.flatnonzero(np.arange(test.n_words) < 400))
    words = np.repeat(np.arange(test.n_words), test.lengths)
    path = cache / f"ocr_logp{'_quick' if args.quick else ''}.npz"
    if not path.exists():
        t0 = time.perf_counter()
        models = mc.fit_base_models(train.pixels.astype(np.float64), train.labels, quick=args.quick)
        log(f"  OCR base models fit ({time.perf_counter() - t0:.0f} s)")
        out = {}
        for i, (name, m) in enumerate(models.items()):
            out[f"name_{i}"] = np.array(name)
            out[f"test_{i}"] = mc.log_probabilities(name, m, test.pixels.astype(np.float64))
            out[f"pool_{i}"] = mc.log_probabilities(name, m, pool.pixels.astype(np.float64))
        np.savez(path, **out)
    z = np.load(path)
    n_models = sum(k.startswith("name_") for k in z.files)
    forecasters = {"knn": KNNRegionForecaster(), "tree": TreeRegionForecaster()}
    if args.quick:
        forecasters.pop("tree")
    res = {}
    for i in range(n_models):
        name = str(z[f"name_{i}"])
        for fname, forecaster in forecasters.items():
            t0 = time.perf_counter()
            rec = StructuredRecalibrator(kinds=[MAPEvent()], features=mc.MAP_FEATURES, forecaster=forecaster,
                                         random_state=SEED)
            te = rec.events(mc.as_prediction(z[f"test_{i}"]), test.labels)
            X_te, _ = rec._design(te, "map")
            splits = []
            for d in range(args.ocr_draws):
                pick = np.random.default_rng(d).choice(pool.n_letters, size=args.n_recal, replace=False)
                tf = rec.events(mc.as_prediction(z[f"pool_{i}"][pick]), pool.labels[pick])
                X, _ = rec._design(tf, "map")
                seed = int(np.random.default_rng(SEED).integers(0, 2**31 - 1))  # as fit draws it
                choices, fc = fit_candidates(rec, X, tf.outcome, tf.raw, tf.item, seed, X_te, te.raw)
                part = {"y": te.outcome, "groups": words, "forecasts": fc, "choices": choices}
                splits.append(score_split([part], args.n_resamples, np.random.default_rng(d)))
            res[f"{name} / {fname}"] = {"map": {"summary": summarize(splits), "splits": splits}}
            log(f"  OCR {name} / {fname}: {args.ocr_draws} draws ({time.perf_counter() - t0:.0f} s)")
    return res


# --------------------------------------------------------------------------- synthetic worlds


WORLDS = ("raw", "iso", "fc", "fc_weak")


def world(name, n_items, m, rng):
    """Features, outcomes, raw probabilities, inputs and true probabilities of one world."""
    from scipy.special import expit

    items = np.repeat(np.arange(n_items), m)
    z1 = np.repeat(rng.standard_normal(n_items), m)  # input feature, irrelevant
    z2 = np.repeat(rng.random(n_items) < 0.5, m).astype(np.float64)  # input population
    u = np.repeat(rng.standard_normal(n_items) * 0.7, m) + rng.standard_normal(n_items * m) * 1.2 + 1.0
    r = expit(2.0 * u)  # the model's logit, 2x over-confident
    if name == "raw":
        r = p = expit(u)
    elif name == "iso":
        p = expit(u)
    elif name == "fc":
        p = np.where(z2 > 0, expit(0.5 * u), expit(2.0 * u))
    else:  # fc_weak
        p = np.where(z2 > 0, expit(0.8 * u), expit(1.25 * u))
    y = rng.random(p.shape[0]) < p
    return np.column_stack([z1, z2, r]), y, r, items, p


def synthetic_section(args):
    rec = StructuredRecalibrator(random_state=SEED)  # the default forecaster
    sizes = ((150, 2),) if args.quick else ((150, 2), (500, 2), (2000, 2))
    res = {}
    for name in WORLDS:
        X_e, _, r_e, _, p_e = world(name, 20_000, 1, np.random.default_rng(99))
        for n_items, m in sizes:
            t0 = time.perf_counter()
            n_seeds = args.syn_seeds if n_items < 2000 else max(1, args.syn_seeds // 2)
            rows = []
            for s in range(n_seeds):
                X, y, r, items, _ = world(name, n_items, m, np.random.default_rng(10_000 * s + n_items))
                choices, fc = fit_candidates(rec, X, y, r, items, s, X_e, r_e)
                excess = {c: 100 * float(np.mean((fc[c] - p_e) ** 2)) for c in CANDIDATES}
                rows.append({"excess_x100": excess, "choices": choices})
            best = [min(r["excess_x100"].values()) for r in rows]
            summary = {"seeds": n_seeds,
                       "excess_x100": {c: float(np.mean([r["excess_x100"][c] for r in rows])) for c in CANDIDATES},
                       "rules": {}}
            for rule in RULES:
                ch = [r["choices"][rule] for r in rows]
                regret = [r["excess_x100"][c] - b for r, c, b in zip(rows, ch, best)]
                summary["rules"][rule] = {"chosen": {c: ch.count(c) for c in CANDIDATES},
                                          "regret_x100_mean": float(np.mean(regret)),
                                          "regret_x100_max": float(np.max(regret))}
            res[f"{name} / {n_items}x{m}"] = summary
            log(f"  synthetic {name} {n_items}x{m}: {n_seeds} seeds ({time.perf_counter() - t0:.0f} s)")
    return res


# --------------------------------------------------------------------------- output


def _rule_cell(s):
    ch = s["chosen"]
    return (f"{s['misses']:2d}/{s['splits']:<2d} r{ch['raw']:2d} i{ch['isotonic']:2d} f{ch['forecaster']:2d} "
            f"{s['minus_isotonic_x100']:+.3f}")


def format_results(res) -> str:
    cfg = res["config"]
    lines = [f"selection rule study: margins n_se in {list(RULES)} (pair = forecaster step, raw step)",
             f"config: {cfg}"]
    legend = ("cell: misses/splits (held-out Brier worse than the better of raw and isotonic beyond the 95% "
              "paired bootstrap interval), how often raw / isotonic / forecaster was chosen, mean Brier x100 "
              "rule minus isotonic")
    for section, title in (("ner", "WNUT-17, cross-fit within test (3 folds per outer split)"),
                           ("ocr", "OCR letters, MAP event (draws of recalibration letters, scored on test)")):
        if section not in res:
            continue
        lines += ["", f"## {title}", legend]
        for setting, kinds in res[section].items():
            for kind, v in kinds.items():
                lines.append(f"{setting} / {kind}")
                for rule, s in v["summary"].items():
                    lines.append(f"  n_se={rule:9s} {_rule_cell(s)}   minus better-of {s['minus_best_x100']:+.3f}, "
                                 f"worst interval [{s['worst_ci'][0]:+.2f}, {s['worst_ci'][1]:+.2f}]")
    if "synthetic" in res:
        lines += ["", "## synthetic worlds (true probabilities known; excess risk and regret x100 vs the best candidate)"]
        for setting, v in res["synthetic"].items():
            ex = v["excess_x100"]
            lines.append(f"{setting} ({v['seeds']} seeds): excess raw {ex['raw']:.3f}, isotonic {ex['isotonic']:.3f}, "
                         f"forecaster {ex['forecaster']:.3f}")
            for rule, s in v["rules"].items():
                ch = s["chosen"]
                lines.append(f"  n_se={rule:9s} r{ch['raw']:2d} i{ch['isotonic']:2d} f{ch['forecaster']:2d}  regret mean "
                             f"{s['regret_x100_mean']:.3f} max {s['regret_x100_max']:.3f}")
    if "totals" in res:
        lines += ["", "## totals over every NER and OCR setting x kind x split"]
        for rule, t in res["totals"].items():
            lines.append(f"  n_se={rule:9s} misses {t['misses']}/{t['splits']}; synthetic regret x100 mean "
                         f"{t['synthetic_regret_x100']:.3f}")
    lines.append(f"\n{res['seconds']:.0f} s")
    return "\n".join(lines)


def totals(res):
    out = {}
    for rule in RULES:
        sums = [v["summary"][rule] for sec in ("ner", "ocr") if sec in res
                for kinds in res[sec].values() for v in kinds.values()]
        syn = [v["rules"][rule]["regret_x100_mean"] for v in res.get("synthetic", {}).values()]
        out[rule] = {"misses": sum(s["misses"] for s in sums), "splits": sum(s["splits"] for s in sums),
                     "synthetic_regret_x100": float(np.mean(syn)) if syn else float("nan")}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    ap.add_argument("--quick", action="store_true", help="small data, one split per section (smoke run)")
    ap.add_argument("--out", default=None, help="also write the JSON results to this file")
    ap.add_argument("--sections", default="ner,ocr,synthetic")
    ap.add_argument("--ner-splits", type=int, default=8, help="outer splits of the WNUT-17 test set")
    ap.add_argument("--ocr-draws", type=int, default=10)
    ap.add_argument("--n-recal", type=int, default=2000, help="recalibration letters per OCR draw")
    ap.add_argument("--syn-seeds", type=int, default=20, help="data sets per synthetic world (half at 2000 inputs)")
    ap.add_argument("--n-resamples", type=int, default=500)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "structcal_selection_rule_study"),
                    help="where trained models' outputs are cached (.npz)")
    args = ap.parse_args(argv)
    if args.quick:
        args.ner_splits, args.ocr_draws, args.n_recal, args.syn_seeds, args.n_resamples = 1, 1, 1000, 3, 200
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    t0 = time.perf_counter()
    res = {"config": {k: getattr(args, k) for k in ("quick", "sections", "ner_splits", "ocr_draws", "n_recal",
                                                     "syn_seeds", "n_resamples")}}
    if "ner" in sections:
        res["ner"] = ner_section(args, cache)
    if "ocr" in sections:
        res["ocr"] = ocr_section(args, cache)
    if "synthetic" in sections:
        res["synthetic"] = synthetic_section(args)
    res["totals"] = totals(res)
    res["seconds"] = time.perf_counter() - t0
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(format_results(res))
    return res


if __name__ == "__main__":
    main()
