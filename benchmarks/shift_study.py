"""Does the default recalibration do harm when the data scored differ from the data it was fit on?

For every real recalibration -> scoring pair built from the shipped data, and for a
synthetic family with known shift, each event kind is recalibrated on the source and
scored on the target:

- GUM (named mentions, CRFsuite tagger cross-fitted over documents): every ordered pair of
  the 6 genres (30 pairs; events of one genre's documents recalibrate, another genre's are
  scored), and the official dev -> test split (tagger trained on train);
- WNUT-17 dev -> test (the shipped tagger; the test set comes from other sources);
- OCR recalibration pool -> test (the shipped likelihood ChainCRF);
- BBBC039 validation -> test (the tuned pixel CRF; object and image events);
- synthetic: overconfident chains whose temperature changes between source and target.

Forecasts on the target: ``raw`` (the model's probability), ``isotonic`` (fit on all
source events), ``forecaster`` (the k-NN region forecaster) and ``default``
(``StructuredRecalibrator(kinds=[kind]).fit(source, groups=...)``, the library's default
rule and shift policy, ``shift_policy="adapt"``); the same recalibrator under the other
policies: ``fitted`` (``"warn"``: the fitted map whatever the shift test says), ``adapt``
and ``fallback`` (the simplest map whose input did not shift). Brier x100 on the target
with 95% paired bootstrap intervals over the target's groups (documents, images; else
items) of each forecast minus raw.

In distribution: grouped cross-fitting (5 folds of groups) within GUM (all documents),
WNUT-17 test, OCR test, BBBC039 test and the synthetic source: every event scored by maps
fit on the other folds; the share of isotonic regression's improvement over raw that the
default keeps.

Targets: on every pair and kind the default's Brier is
not worse than raw beyond the 95% paired interval (its lower end <= 0); in distribution
the default keeps at least 80% of isotonic's improvement over raw (where isotonic
improves beyond its interval).

Rule replay (``--rules``): the cross-validated held-out losses on each source decide, for
each candidate rule, which map it would keep; the rule's target Brier is that map's.

Run: ``python benchmarks/shift_study.py [--json] [--quick] [--rules] [--out PATH]``
(``benchmarks/results/shift_study.json``; about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _study_data as data  # noqa: E402

from structcal import ChainPotentials, StructuredPrediction  # noqa: E402
from structcal.events import MAPEvent, MarginalEvent  # noqa: E402
from structcal.recalibration import (  # noqa: E402
    METHODS,
    StructuredRecalibrator,
    _clustered_se,
    _one_se_choice,
)

N_BOOT = 1000
CANDIDATES = ("raw", "isotonic", "forecaster", "default", "fitted", "adapt", "fallback")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _quiet():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("ignore")
    return w


def fit_source(src, kind, seed=0):
    """Maps of every candidate fit on the source's events of one kind, and the CV losses."""
    w = _quiet()
    try:
        fits = {}
        for m in ("raw", "isotonic", "forecaster"):
            fits[m] = StructuredRecalibrator(kinds=[kind], method=m, shift_check=False,
                                             random_state=seed).fit(src.pred, src.y,
                                                                    groups=src.groups)
        fits["default"] = StructuredRecalibrator(kinds=[kind], random_state=seed).fit(
            src.pred, src.y, groups=src.groups)
        rec = fits["default"]
        # the same fitted recalibrator under each shift policy: "fitted" keeps its map
        # whatever the shift test says, "adapt" reweights toward a flagged batch,
        # "fallback" takes the simplest map whose input did not shift
        for name, policy in (("fitted", "warn"), ("adapt", "adapt"), ("fallback", "fallback")):
            fits[name] = copy.deepcopy(rec)
            fits[name].shift_policy = policy
        table = rec.events(src.pred, src.y)
        key = kind.name
        X, _ = rec._design(table, key)
        rows = rec._rows(table, key)
        y = table.outcome[rows]
        r = rec._raw(table, rows)
        grp = src.groups[table.item[rows]]
        losses = rec._held_out_losses(X, y, r, grp, 12345)
    finally:
        w.__exit__(None, None, None)
    return fits, {"losses": losses, "groups": grp, "choice": rec.selection_[key]["method"]}


def score_target(fits, tgt, kind):
    """Forecasts of every candidate on the target's events of ``kind``."""
    w = _quiet()
    try:
        out = {m: f.predict(tgt.pred, tgt.y, groups=tgt.groups) for m, f in fits.items()}
    finally:
        w.__exit__(None, None, None)
    t = out["raw"].table
    fc = {m: o.forecast for m, o in out.items()}
    fallback = out["default"].fallback or {}
    adapted = out["adapt"].adaptation or {}
    fc["_adaptation"] = next(iter(adapted.values()), None)
    fc["_fallback"] = next(iter((out["fallback"].fallback or {}).values()), None)
    return t.outcome.astype(float), tgt.groups[t.item], fc, next(iter(fallback.values()), None)


def paired(y, groups, forecasts, ref="raw", rng=None):
    """Brier x100 of each forecast, and of each minus ``ref`` with a 95% interval over groups."""
    rng = rng or np.random.default_rng(0)
    _, inv = np.unique(groups, return_inverse=True)
    G = int(inv.max()) + 1
    counts = rng.multinomial(G, np.full(G, 1.0 / G), size=N_BOOT)[:, inv]  # (B, n)
    w = counts / counts.sum(axis=1, keepdims=True)
    out = {}
    for m, f in forecasts.items():
        if m.startswith("_"):
            continue
        se = (f - y) ** 2
        d = se - (forecasts[ref] - y) ** 2
        boot = w @ d
        out[m] = {"brier_x100": 100 * float(se.mean()),
                  f"minus_{ref}_x100": 100 * float(d.mean()),
                  "interval_x100": [100 * float(np.quantile(boot, 0.025)),
                                    100 * float(np.quantile(boot, 0.975))]}
    return out


def replay_rules(cv):
    """The method each candidate rule keeps, from the source's held-out losses."""
    L, g = cv["losses"], cv["groups"]

    def beats(a, b, n):
        d = L[a] - L[b]
        return float(np.mean(d)) < -n * _clustered_se(d, g)

    rules = {}
    for n_se in ((2.0, 1.0), (2.0, 0.0)):
        rules[f"isotonic_ref{n_se}"] = _one_se_choice(L, g, n_se)
    for n in (1.0, 1.5, 2.0, 3.0):
        chosen = "isotonic" if beats("isotonic", "raw", n) else "raw"
        if beats("forecaster", chosen, 2.0):
            chosen = "forecaster"
        rules[f"raw_ref{n}"] = chosen
    return rules


def synthetic_source(n, seed, temperature):
    """Overconfident chains: scores of a calibrated model divided by ``temperature``."""
    rng = np.random.default_rng(seed)
    K = 4
    lengths = rng.integers(3, 9, size=n)
    truth_scores = rng.normal(size=(lengths.sum(), K)) * 1.5
    T = np.eye(K) * 0.8
    true_pot = ChainPotentials.from_scores(truth_scores, lengths=lengths, transitions=T)
    # sample gold labelings from the true model (forward filtering, backward sampling)
    from structcal.inference import infer

    r = infer(true_pot, edge_marginals=True)
    y = np.empty(true_pot.n_tokens, dtype=np.int64)
    for c in range(true_pot.n_chains):
        s, e = true_pot.offsets[c], true_pot.offsets[c + 1]
        e0 = true_pot.edge_offsets[c]
        y[s] = rng.choice(K, p=r.marginals[s] / r.marginals[s].sum())
        for t in range(s + 1, e):
            row = r.edge_marginals[e0 + t - 1 - s][y[t - 1]]
            y[t] = rng.choice(K, p=row / row.sum())
    model = ChainPotentials.from_scores(truth_scores / temperature, lengths=lengths,
                                        transitions=T / temperature)
    return data.Source(f"synthetic-T{temperature}", StructuredPrediction(model), y,
                       np.arange(n) // 4, [MAPEvent(), MarginalEvent()])


def shift_pairs(quick):
    """(setting name, source, target) of every real and synthetic pair."""
    pairs = []
    log("GUM cross-fitted predictions ...")
    gum = data.gum_crossfit()
    genres = sorted(set(gum.item_meta["genre"]))
    by_genre = {g: gum.subset(np.flatnonzero(gum.item_meta["genre"] == g), f"gum-{g}")
                for g in genres}
    for a in genres:
        for b in genres:
            if a != b and not (quick and b != genres[(genres.index(a) + 1) % len(genres)]):
                pairs.append((f"gum genre {a} -> {b}", by_genre[a], by_genre[b]))
    off = data.gum_official()
    pairs.append(("gum dev -> test", off["dev"], off["test"]))
    w = data.wnut17()
    pairs.append(("wnut17 dev -> test", w["dev"], w["test"]))
    o = data.ocr()
    pairs.append(("ocr recalibration -> test", o["recalibration"], o["test"]))
    if not quick:
        log("BBBC039 segmenter ...")
        b = data.bbbc039()
        pairs.append(("bbbc039 val -> test", b["val"], b["test"]))
        for change in data.MODALITY_CHANGES:
            pairs.append((f"bbbc039 val -> test {change}", b["val"], b[f"test-{change}"]))
    for t_src, t_tgt in ((2.0, 2.0), (2.0, 1.0), (2.0, 3.0)):
        pairs.append((f"synthetic T {t_src} -> {t_tgt}", synthetic_source(600, 1, t_src),
                      synthetic_source(600, 2, t_tgt)))
    return pairs, gum, w, o


def in_distribution(sources, n_folds=5):
    """Grouped cross-fitting within each source: pooled held-out forecasts per candidate."""
    results = {}
    for src in sources:
        for kind in src.kinds:
            ys, gs, fs = [], [], {m: [] for m in CANDIDATES}
            groups = np.unique(src.groups)
            fold_of = np.random.default_rng(0).permutation(groups.shape[0]) % n_folds
            item_fold = fold_of[np.searchsorted(groups, src.groups)]
            for f in range(n_folds):
                train = src.subset(np.flatnonzero(item_fold != f), "train")
                test = src.subset(np.flatnonzero(item_fold == f), "test")
                fits, _ = fit_source(train, kind)
                y, g, fc, _ = score_target(fits, test, kind)
                ys.append(y)
                gs.append(g + f * (10**9))
                for m in CANDIDATES:
                    fs[m].append(fc[m])
            y, g = np.concatenate(ys), np.concatenate(gs)
            fc = {m: np.concatenate(v) for m, v in fs.items()}
            res = paired(y, g, fc)
            gain_iso = -res["isotonic"]["minus_raw_x100"]
            gain_def = -res["default"]["minus_raw_x100"]
            iso_improves = res["isotonic"]["interval_x100"][1] < 0
            res["share_of_isotonic_gain_kept"] = (gain_def / gain_iso) if gain_iso > 0 else None
            res["isotonic_improves_beyond_interval"] = bool(iso_improves)
            res["target_met"] = (not iso_improves) or gain_def >= 0.8 * gain_iso
            res["n_events"] = int(y.shape[0])
            results[f"{src.name} / {kind.name}"] = res
            log(f"  in distribution {src.name} / {kind.name}: iso gain {gain_iso:.3f}, "
                f"default gain {gain_def:.3f}")
    return results


def false_alarms(src, n_splits, alpha=0.05, seed=0):
    """Share of random splits of the source's groups into two halves that the default's
    shift test flags (in distribution: every flag is a false alarm), with its 95% interval."""
    from scipy.stats import beta

    from structcal.shift import group_shift_test

    w = _quiet()
    try:
        rec = StructuredRecalibrator(kinds=src.kinds, random_state=seed).fit(
            src.pred, src.y, groups=src.groups)
        table = rec.events(src.pred)
        cols = {}
        for key in rec.selection_:
            X, _ = rec._design(table, key)
            rows = rec._rows(table, key)
            r = rec._raw(table, rows)
            extra = len(rec.shift_columns_[key]) == X.shape[1] + 1
            cols[key] = (np.column_stack([r, X]) if extra else X,
                         src.groups[table.item[rows]])
    finally:
        w.__exit__(None, None, None)
    rng = np.random.default_rng(seed)
    groups = np.unique(src.groups)
    flagged = 0
    cap = StructuredRecalibrator._SHIFT_CAP
    for _ in range(n_splits):
        half = set(rng.permutation(groups)[: groups.shape[0] // 2].tolist())
        p_min = 1.0
        for key, (V, g) in cols.items():
            a = np.flatnonzero(np.isin(g, list(half)))
            b = np.flatnonzero(~np.isin(g, list(half)))
            if a.shape[0] > cap:
                a = np.sort(rng.choice(a, cap, replace=False))
            if b.shape[0] > cap:
                b = np.sort(rng.choice(b, cap, replace=False))
            res = group_shift_test(V[a], V[b], g[a], g[b], n_permutations=200,
                                   random_state=int(rng.integers(2**31)))
            p_min = min(p_min, res.pvalue * len(cols))
        flagged += p_min < alpha
    lo = beta.ppf(0.025, flagged, n_splits - flagged + 1) if flagged else 0.0
    hi = beta.ppf(0.975, flagged + 1, n_splits - flagged) if flagged < n_splits else 1.0
    return {"splits": n_splits, "flagged": int(flagged), "rate": flagged / n_splits,
            "interval": [float(lo), float(hi)], "n_groups": int(groups.shape[0])}


def false_alarms_without_groups(src, n_splits, seed=0):
    """The user path with no ``groups=``: random halves of the source's groups (documents),
    in their original order; the recalibrator is fit on one half and predicts the other,
    neither given groups. Every DistributionShiftWarning is a false alarm."""
    from scipy.stats import beta

    from structcal.exceptions import DistributionShiftWarning

    rng = np.random.default_rng(seed)
    groups = np.unique(src.groups)
    flagged = 0
    for _ in range(n_splits):
        half = np.isin(src.groups, rng.permutation(groups)[: groups.shape[0] // 2])
        a, b = src.subset(np.flatnonzero(half), "a"), src.subset(np.flatnonzero(~half), "b")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec = StructuredRecalibrator(kinds=src.kinds, method="raw",
                                         random_state=int(rng.integers(2**31))).fit(a.pred, a.y)
            rec.predict(b.pred)
        flagged += any(issubclass(w.category, DistributionShiftWarning) for w in caught)
    lo = beta.ppf(0.025, flagged, n_splits - flagged + 1) if flagged else 0.0
    hi = beta.ppf(0.975, flagged + 1, n_splits - flagged) if flagged < n_splits else 1.0
    return {"splits": n_splits, "flagged": int(flagged), "rate": flagged / n_splits,
            "interval": [float(lo), float(hi)], "n_groups": int(groups.shape[0])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the JSON result")
    ap.add_argument("--quick", action="store_true", help="one target per GUM genre, no BBBC039")
    ap.add_argument("--rules", action="store_true", help="replay candidate selection rules")
    ap.add_argument("--out", default=None, help="write the JSON result here")
    ap.add_argument("--false-alarms-no-groups", type=int, default=None, metavar="N",
                    help="false alarms over N in-distribution halves of WNUT-17 and GUM, no groups given")
    ap.add_argument("--false-alarms-gum", type=int, default=None, metavar="N",
                    help="only the false-alarm rate on N random document splits of GUM "
                         "(cross-fit), printed as JSON")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.false_alarms_no_groups:
        n = args.false_alarms_no_groups
        res = {"command": f"python benchmarks/shift_study.py --false-alarms-no-groups {n}"}
        res["wnut17 test"] = false_alarms_without_groups(data.wnut17()["test"], n)
        log(f"  WNUT-17: {res['wnut17 test']}")
        res["gum"] = false_alarms_without_groups(data.gum_crossfit(), n)
        log(f"  GUM: {res['gum']}")
        text = json.dumps(res, indent=1)
        if args.out:
            Path(args.out).write_text(text + "\n")
        print(text)
        return
    if args.false_alarms_gum:
        res = false_alarms(data.gum_crossfit(), args.false_alarms_gum)
        res["command"] = f"python benchmarks/shift_study.py --false-alarms-gum {args.false_alarms_gum}"
        print(json.dumps(res, indent=1))
        return res
    pairs, gum, w, o = shift_pairs(args.quick)
    shift, cache = {}, {}
    for name, src, tgt in pairs:
        for kind in src.kinds:
            key = (src.name, kind.name)
            if key not in cache:
                log(f"fitting on {src.name} / {kind.name} ...")
                cache[key] = fit_source(src, kind)
            fits, cv = cache[key]
            y, g, fc, fell_back = score_target(fits, tgt, kind)
            fallback_map = fc.pop("_fallback")
            res = paired(y, g, fc)
            res["adaptation"] = fc.get("_adaptation")
            res["fallback_policy_map"] = fallback_map  # None, "raw" or "isotonic"
            res["fallback_not_worse_than_raw"] = res["fallback"]["interval_x100"][0] <= 0
            res["fallback_share_of_fitted_gain"] = None
            res["adapt_not_worse_than_raw"] = res["adapt"]["interval_x100"][0] <= 0
            fitted_gain = -res["fitted"]["minus_raw_x100"]
            res["fitted_beats_raw_beyond_interval"] = res["fitted"]["interval_x100"][1] < 0
            res["adapt_share_of_fitted_gain"] = (
                -res["adapt"]["minus_raw_x100"] / fitted_gain
                if res["fitted_beats_raw_beyond_interval"] else None)
            res["default_share_of_fitted_gain"] = (
                -res["default"]["minus_raw_x100"] / fitted_gain
                if res["fitted_beats_raw_beyond_interval"] else None)
            if res["fitted_beats_raw_beyond_interval"]:
                res["fallback_share_of_fitted_gain"] = (
                    -res["fallback"]["minus_raw_x100"] / fitted_gain)
            res["default_fell_back_to"] = fell_back  # None, "adapted", "raw" or "isotonic"
            res["n_target_events"] = int(y.shape[0])
            res["n_target_groups"] = int(np.unique(g).shape[0])
            res["default_chose"] = cv["choice"]
            res["target_met"] = res["default"]["interval_x100"][0] <= 0
            if args.rules:
                rules = replay_rules(cv)
                res["rules"] = {r: {"chose": m, "minus_raw_x100": res[m]["minus_raw_x100"],
                                    "harmful": res[m]["interval_x100"][0] > 0}
                                for r, m in rules.items()}
            shift[f"{name} / {kind.name}"] = res
            log(f"  {name} / {kind.name}: default ({cv['choice']}) - raw "
                f"{res['default']['minus_raw_x100']:+.3f} {res['default']['interval_x100']}")
    sources = [gum, w["test"], o["test"], synthetic_source(600, 3, 2.0)]
    indist = in_distribution(sources if not args.quick else sources[1:])
    alarms = {}
    n_splits = 40 if args.quick else 300
    for src in ([gum, w["test"], o["test"]] + ([pairs_bbbc] if (pairs_bbbc := next(
            (s for n, s, _ in pairs if n.startswith("bbbc039")), None)) else [])):
        log(f"false alarms on random group splits of {src.name} ...")
        alarms[src.name] = false_alarms(src, n_splits if src.name != "gum-crossfit"
                                        else n_splits)
        log(f"  {alarms[src.name]}")
    flagged_real = {k: v["default_fell_back_to"] is not None for k, v in shift.items()}
    result = {
        "command": "python benchmarks/shift_study.py" + (" --quick" if args.quick else "")
                   + (" --rules" if args.rules else ""),
        "seconds": time.perf_counter() - t0,
        "shift": shift,
        "in_distribution": indist,
        "false_alarms": alarms,
        "power_on_real_shifts": {
            "flagged_settings": sum(flagged_real.values()),
            "settings": len(flagged_real),
        },
        "targets": {
            "false_alarm_rate_at_most_0.05": all(a["rate"] <= 0.05 for a in alarms.values()),
            "shift_pairs_not_worse_than_raw": sum(r["target_met"] for r in shift.values()),
            "shift_pairs": len(shift),
            "in_distribution_met": sum(r["target_met"] for r in indist.values()),
            "in_distribution_settings": len(indist),
            "adapt_not_worse_than_raw": sum(r["adapt_not_worse_than_raw"]
                                            for r in shift.values()),
            "fitted_beats_raw": sum(r["fitted_beats_raw_beyond_interval"]
                                    for r in shift.values()),
            "adapt_keeps_half_of_fitted_gain": sum(
                (r["adapt_share_of_fitted_gain"] or 0) >= 0.5 for r in shift.values()
                if r["fitted_beats_raw_beyond_interval"]),
            "default_keeps_half_of_fitted_gain": sum(
                (r["default_share_of_fitted_gain"] or 0) >= 0.5 for r in shift.values()
                if r["fitted_beats_raw_beyond_interval"]),
            "fallback_not_worse_than_raw": sum(r["fallback_not_worse_than_raw"]
                                               for r in shift.values()),
            "fallback_keeps_half_of_fitted_gain": sum(
                (r["fallback_share_of_fitted_gain"] or 0) >= 0.5 for r in shift.values()
                if r["fitted_beats_raw_beyond_interval"]),
        },
    }
    if args.rules:
        names = next(iter(shift.values()))["rules"].keys()
        result["rule_summary"] = {
            r: {"harmful_pairs": sum(v["rules"][r]["harmful"] for v in shift.values()),
                "mean_minus_raw_x100": float(np.mean([v["rules"][r]["minus_raw_x100"]
                                                      for v in shift.values()]))}
            for r in names}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print(format_table(result))


def format_table(result):
    lines = [f"{'setting / kind':<52}{'chose':>13}{'default-raw x100':>18}{'interval':>22}"
             f"{'iso-raw':>10}{'ok':>5}{'fitted-raw':>12}{'adapt-raw':>11}{'ok':>5}"]
    for k, r in result["shift"].items():
        d = r["default"]
        chose = r["default_chose"] + (f"->{r['default_fell_back_to']}" if r.get("default_fell_back_to") else "")
        lines.append(f"{k:<52}{chose:>13}{d['minus_raw_x100']:>+18.3f}"
                     f"{str([round(x, 3) for x in d['interval_x100']]):>22}"
                     f"{r['isotonic']['minus_raw_x100']:>+10.3f}{'yes' if r['target_met'] else 'NO':>5}"
                     f"{r['fitted']['minus_raw_x100']:>+12.3f}{r['adapt']['minus_raw_x100']:>+11.3f}"
                     f"{'yes' if r['adapt_not_worse_than_raw'] else 'NO':>5}")
    lines.append("")
    lines.append(f"{'in distribution':<52}{'iso gain':>11}{'default gain':>18}{'kept':>10}{'ok':>5}")
    for k, r in result["in_distribution"].items():
        gi, gd = -r["isotonic"]["minus_raw_x100"], -r["default"]["minus_raw_x100"]
        kept = r["share_of_isotonic_gain_kept"]
        lines.append(f"{k:<52}{gi:>11.3f}{gd:>18.3f}{'-' if kept is None else f'{kept:.2f}':>10}"
                     f"{'yes' if r['target_met'] else 'NO':>5}")
    lines.append("")
    for k, a in result["false_alarms"].items():
        lines.append(f"false alarms, random splits of {k}'s {a['n_groups']} groups: "
                     f"{a['flagged']}/{a['splits']} = {a['rate']:.3f} "
                     f"[{a['interval'][0]:.3f}, {a['interval'][1]:.3f}]")
    pw = result["power_on_real_shifts"]
    lines.append(f"flagged (the default changed its map) on {pw['flagged_settings']} of "
                 f"{pw['settings']} shift settings")
    t = result["targets"]
    lines.append("")
    lines.append(f"shift: default not worse than raw on {t['shift_pairs_not_worse_than_raw']} of "
                 f"{t['shift_pairs']} settings; in distribution: target met on "
                 f"{t['in_distribution_met']} of {t['in_distribution_settings']}")
    lines.append(f"adapt: not worse than raw on {t['adapt_not_worse_than_raw']} of "
                 f"{t['shift_pairs']}; where the fitted map beats raw ({t['fitted_beats_raw']} "
                 f"settings) adapt keeps >= 50% of its gain in "
                 f"{t['adapt_keeps_half_of_fitted_gain']}, the default in "
                 f"{t['default_keeps_half_of_fitted_gain']}")
    if "fallback_not_worse_than_raw" in t:
        lines.append(f"fallback: not worse than raw on {t['fallback_not_worse_than_raw']} of "
                     f"{t['shift_pairs']}; keeps >= 50% of the fitted map's gain in "
                     f"{t['fallback_keeps_half_of_fitted_gain']} of {t['fitted_beats_raw']}")
    if "rule_summary" in result:
        lines.append("")
        for r, v in result["rule_summary"].items():
            lines.append(f"rule {r:<28} harmful pairs {v['harmful_pairs']:>3}  mean minus raw "
                         f"{v['mean_minus_raw_x100']:+.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
