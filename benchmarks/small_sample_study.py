"""Which reference should ``method='auto'`` keep when a kind has few recalibration events?

With many events, isotonic regression is the reference of the selection rule and the raw
probability must beat it by a standard error; with few, the isotonic map is mostly
fitting noise, and a cross-validation on a few dozen events can rarely tell it from the
raw probability. Below ``structcal.recalibration.SMALL_KIND_EVENTS`` (100) events the rule
takes the raw probability as its reference instead.

This study compares the two rules on small recalibration sets drawn from real data the
rule was not derived on: for each source -> target pair and event kind, ``--draws``
random sets of whole groups (documents, images, words) are drawn from the source until
they hold at least ``n`` events (``n`` = 30, 60, 90); each set is recalibrated with the
isotonic-reference rule ("isotonic ref") and the raw-reference rule ("raw ref"), without
the shift check (it is the rule that is compared), and scored on all target events.

Pairs: OCR recalibration pool -> test (MAP words, letters), WNUT-17 dev -> test and GUM
dev -> test (entities, sentences, tokens), a synthetic overconfident model (temperature 2,
the raw probability is miscalibrated: recalibration should win) and a synthetic
calibrated one (temperature 1: the raw probability is right). Reported per setting: the
mean target Brier x100 of raw and of each rule over draws, the mean paired difference
(raw ref minus isotonic ref) with a 95% interval over draws, and how often each rule was
worse than raw on the target.

Run: ``python benchmarks/small_sample_study.py [--draws 40] [--json] [--out PATH]``
(``benchmarks/results/small_sample_study.json``; a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _study_data as data  # noqa: E402
from shift_study import synthetic_source  # noqa: E402

import structcal.recalibration as recalibration  # noqa: E402
from structcal import StructuredRecalibrator  # noqa: E402
from structcal.events import EntitySpans, MAPEvent, MarginalEvent  # noqa: E402

SIZES = (30, 60, 90)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def tables(src, tgt, kind):
    """Event tables of the source and target (features of the default recalibrator; the
    method does not change them, and 'raw' fits no map)."""
    rec = StructuredRecalibrator(kinds=[kind], method="raw", shift_check=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.fit(src.pred, src.y, groups=src.groups)
    return rec.events(src.pred, src.y), rec.events(tgt.pred, tgt.y)


def draw_items(src_groups, table, n, rng):
    """Items of whole groups, in random order, until their events number at least n."""
    _, group_of = np.unique(src_groups, return_inverse=True)
    per_group = np.bincount(group_of[table.item], minlength=group_of.max() + 1)
    order = rng.permutation(per_group.shape[0])
    n_groups = int(np.searchsorted(np.cumsum(per_group[order]), n)) + 1
    return np.flatnonzero(np.isin(group_of, order[:n_groups]))


def fit_rule(table, groups, small, seed):
    """The default recalibrator fit with ``small`` as the small-kind threshold."""
    before = recalibration.SMALL_KIND_EVENTS
    recalibration.SMALL_KIND_EVENTS = small
    try:
        rec = StructuredRecalibrator(kinds=None, shift_check=False, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec.fit_events(table, groups=groups)
    finally:
        recalibration.SMALL_KIND_EVENTS = before
    return rec


def setting(name, src, tgt, kind, draws, rng):
    t_src, t_tgt = tables(src, tgt, kind)
    y = t_tgt.outcome.astype(float)
    raw = t_tgt.raw
    brier_raw = 100 * float(np.mean((raw - y) ** 2))
    out = {}
    for n in SIZES:
        rows = {"isotonic ref": [], "raw ref": []}
        chose = {"isotonic ref": {}, "raw ref": {}}
        n_events = []
        for d in range(draws):
            items = draw_items(src.groups, t_src, n, rng)
            sub, _ = t_src.split_items(items)
            n_events.append(sub.n_events)
            if np.unique(sub.outcome).size < 2:  # one outcome only: nothing to compare
                continue
            for rule, small in (("isotonic ref", 0), ("raw ref", 10**9)):
                rec = fit_rule(sub, src.groups, small, d)
                m = rec.selection_[kind.name]["method"]
                chose[rule][m] = chose[rule].get(m, 0) + 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    f = rec.predict_events(t_tgt).forecast
                rows[rule].append(100 * float(np.mean((f - y) ** 2)))
        a, b = np.array(rows["isotonic ref"]), np.array(rows["raw ref"])
        diff = b - a
        boot = np.random.default_rng(0).choice(diff, size=(2000, diff.size)).mean(axis=1)
        out[str(n)] = {
            "draws": int(a.size),
            "median_events": float(np.median(n_events)),
            "brier_raw_x100": brier_raw,
            "brier_isotonic_ref_x100": float(a.mean()),
            "brier_raw_ref_x100": float(b.mean()),
            "raw_ref_minus_isotonic_ref_x100": float(diff.mean()),
            "interval_x100": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
            "worse_than_raw_by_0.005": {"isotonic ref": float(np.mean(a > brier_raw + 0.005)),
                               "raw ref": float(np.mean(b > brier_raw + 0.005))},
            "chose": chose,
        }
        log(f"  {name} n={n}: raw {brier_raw:.2f}  iso-ref {a.mean():.2f}  raw-ref {b.mean():.2f}"
            f"  diff {diff.mean():+.2f} [{out[str(n)]['interval_x100'][0]:+.2f}, "
            f"{out[str(n)]['interval_x100'][1]:+.2f}]  chose {chose}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    pairs = []
    o = data.ocr()
    pairs += [("ocr recalibration -> test", o["recalibration"], o["test"], k)
              for k in (MAPEvent(), MarginalEvent())]
    w = data.wnut17()
    tags = w["dev"].pred.potentials.label_names
    pairs += [("wnut17 dev -> test", w["dev"], w["test"], k)
              for k in (EntitySpans(tags), MAPEvent(), MarginalEvent())]
    g = data.gum_official()
    tags = g["dev"].pred.potentials.label_names
    pairs += [("gum dev -> test", g["dev"], g["test"], k)
              for k in (EntitySpans(tags), MAPEvent(), MarginalEvent())]
    for T in (2.0, 1.0):
        pairs += [(f"synthetic T {T}", synthetic_source(600, 1, T), synthetic_source(600, 2, T), k)
                  for k in (MAPEvent(), MarginalEvent())]
    result = {"command": "python benchmarks/small_sample_study.py"
                         + (f" --draws {args.draws}" if args.draws != 40 else ""),
              "sizes": list(SIZES), "settings": {}}
    for name, src, tgt, kind in pairs:
        log(f"{name} / {kind.name} ...")
        result["settings"][f"{name} / {kind.name}"] = setting(name, src, tgt, kind, args.draws, rng)
    s = result["settings"]
    diffs = [v for d in s.values() for v in d.values()]
    result["summary"] = {
        "cells": len(diffs),
        "raw_ref_better_beyond_interval": sum(v["interval_x100"][1] < 0 for v in diffs),
        "raw_ref_worse_beyond_interval": sum(v["interval_x100"][0] > 0 for v in diffs),
        "mean_difference_x100": float(np.mean([v["raw_ref_minus_isotonic_ref_x100"] for v in diffs])),
        "worse_than_raw_isotonic_ref": float(np.mean([v["worse_than_raw_by_0.005"]["isotonic ref"] for v in diffs])),
        "worse_than_raw_raw_ref": float(np.mean([v["worse_than_raw_by_0.005"]["raw ref"] for v in diffs])),
    }
    result["seconds"] = time.perf_counter() - t0
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print(format_table(result))


def format_table(result):
    lines = [f"{'setting / kind':<44}{'n':>4}{'raw':>8}{'iso ref':>9}{'raw ref':>9}"
             f"{'raw ref - iso ref [95%]':>28}{'worse than raw (iso/raw ref)':>30}"]
    for key, d in result["settings"].items():
        for n, v in d.items():
            lo, hi = v["interval_x100"]
            w = v["worse_than_raw_by_0.005"]
            lines.append(f"{key:<44}{n:>4}{v['brier_raw_x100']:>8.2f}{v['brier_isotonic_ref_x100']:>9.2f}"
                         f"{v['brier_raw_ref_x100']:>9.2f}{v['raw_ref_minus_isotonic_ref_x100']:>+10.2f} "
                         f"[{lo:+.2f}, {hi:+.2f}]{w['isotonic ref']:>17.0%} / {w['raw ref']:.0%}")
    lines.append(json.dumps(result["summary"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
