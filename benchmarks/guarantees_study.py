"""Do the finite-sample guarantees hold on real data, and do they pay? Group re-splits.

For each dataset, a ``StructuredRecalibrator`` (defaults, groups given) is fit once on a
fixed part of the data; its calibrated probabilities of the events of the rest (the pool)
are then split at random *by group* (500 times by default) into a calibration half and a
test half:

- GUM (named mentions; CRFsuite tagger cross-fitted over documents): entities, per kind
  and per entity type; 32 documents fit the recalibrator, the other 76 are split;
- WNUT-17 (shipped tagger): entities per kind and per type; dev fits the recalibrator,
  the test sentences are split;
- OCR (shipped ChainCRF): words ("the word is right"); the recalibration pool fits it,
  the test words are split;
- BBBC039 nuclei from the shipped pixel CRF segmenter (validation images fit the
  recalibrator, test images are split), and from an untuned map (a logistic regression
  on pixel features trained on 20 images, no CRF, objects = connected components of its
  argmax, raw score = mean probability in the object; validation images fit the
  recalibrator, the 130 other unseen images are split);
- synthetic: 200 groups of 5-40 events, calibrated forecasts, errors clustered in groups
  with intra-group correlation 0 to 0.6 (a fresh draw per split; the truth is known).

Precision control at target ``t`` with ``delta = 0.1``, calibrated on the calibration
half and applied to the test half, four ways:

- ``structcal``: :class:`structcal.guarantees.PrecisionGuarantee` (betting e-values of
  per-group terms, fixed-sequence thresholds);
- ``kish``: the design-effect Learn-then-Test certificate structcal used before
  (binomial tail with Kish-deflated counts, Bonferroni over a 22-threshold grid);
- ``naive``: accept where the calibrated probability is at least ``t``;
- ``oracle``: the loosest threshold whose realised precision on the test half itself
  meets ``t`` (not a method: the most any rule could accept);
- ``ceiling``: the loosest threshold that any certificate valid under group
  exchangeability alone could pass with probability at least 1/2 given as many
  calibration groups, were the groups drawn like the test half's (see
  :func:`ceiling_threshold`; not a method: the most any *valid* rule could accept).
  Where the ceiling accepts under 5%, no method with this guarantee can meet the power
  target, whatever it does.

Reported per setting: the share of splits whose realised test precision (pooled over
events) meets the target, with its 95% Clopper-Pearson interval (the guarantee asks for
at least ``1 - delta = 0.9``), the same for the per-group precision (the quantity
structcal certifies), the median share of test events accepted and its ratio to the
oracle's.

Miss control (GUM and WNUT-17 entities from the 10 best labelings, BBBC039 nuclei from
the MAP objects), :class:`structcal.guarantees.MissControl`: the mean realised share of
a test group's gold entities that no accepted candidate matches (the guarantee: at most
``alpha`` on average), and the mean number of candidates accepted per group.

Run: ``python benchmarks/guarantees_study.py [--json] [--splits 500] [--out PATH]``
(``benchmarks/results/guarantees_study.json``; about 25 minutes on 2 cores, most of it
training the GUM taggers and the BBBC039 segmenter on the first run).
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

from structcal.adapters import TagScheme  # noqa: E402
from structcal.events import EntitySpans, MAPEvent  # noqa: E402
from structcal.guarantees import MissControl, PrecisionGuarantee  # noqa: E402
from structcal.recalibration import StructuredRecalibrator  # noqa: E402

DELTA = 0.1
#: precision targets: the taggers' entities rarely reach 0.9 (entity precision 0.45 and
#: 0.58 at the MAP), so lower targets are tested for them too
TARGETS = {"ner": (0.7, 0.8, 0.9), "other": (0.8, 0.9, 0.95)}
ALL_TARGETS = (0.7, 0.8, 0.9, 0.95)
METHODS = ("structcal", "kish", "naive", "oracle", "ceiling")
#: the oracle must accept at least this share for the power target to apply
ORACLE_FLOOR = 0.05
POWER_TARGET = 0.7


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def calibrated(fit_src, pool_src, kind):
    """Calibrated forecasts, outcomes and groups of ``kind``'s events of the pool."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(kinds=[kind], shift_check=False, random_state=0).fit(
            fit_src.pred, fit_src.y, groups=fit_src.groups)
        out = rec.predict(pool_src.pred, pool_src.y, groups=pool_src.groups)
    t = out.table
    return out.forecast, t.outcome.astype(bool), pool_src.groups[t.item], t, rec.selection_


def clopper_pearson(k, n):
    from scipy.stats import beta

    lo = beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return [float(lo), float(hi)]


# --- the certificate structcal used before (for comparison only) ----------------------
KISH_GRID = np.array((0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96,
                      0.97, 0.975, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.998, 0.999))


def kish_threshold(p, y, g, target):
    from structcal.guarantees import binomial_tail_pvalue, design_effect

    a = 1.0 - target
    rho, _ = design_effect(~y, g)
    best = np.inf
    for t in KISH_GRID:
        acc = p >= t
        n = int(acc.sum())
        if n == 0:
            continue
        k = int((~y[acc]).sum())
        _, inv = np.unique(g[acc], return_inverse=True)
        sizes = np.bincount(inv).astype(np.float64)
        deff = 1.0 + ((sizes**2).sum() / sizes.sum() - 1.0) * rho
        if float(binomial_tail_pvalue(k / deff, n / deff, a)) <= DELTA / KISH_GRID.size:
            best = min(best, t)
    return best


def oracle_threshold(p, y, target):
    o = np.argsort(-p, kind="stable")
    ps = p[o]
    prec = np.cumsum(y[o]) / np.arange(1, o.size + 1)
    last = np.ones(o.size, dtype=bool)  # thresholds between distinct values only
    last[:-1] = ps[1:] != ps[:-1]
    ok = np.flatnonzero((prec >= target) & last)
    return float(ps[ok.max()]) if ok.size else np.inf


def ceiling_threshold(p_test, y_test, g_test, n_cal_groups, target):
    """The loosest threshold that *any* test valid under group exchangeability alone could
    certify with probability at least 1/2, were the groups drawn like the test half's.

    A certificate of ``t`` rejects "mean over groups of R_g(t) >= 0" (``R_g`` as in
    :class:`~structcal.guarantees.PrecisionGuarantee`). Let P be the groups' distribution,
    with mean ``mu < 0``, and mix into it a share ``q = -mu / (target - mu)`` of groups whose
    accepted events are all wrong (``R_g = target``): the mixture Q has mean 0, so it is in
    the null. Any test at level delta rejects under Q with probability <= delta, and with
    probability ``(1 - q)^n`` the n calibration groups of Q are all drawn from P, so under P
    it rejects with probability at most ``delta / (1 - q)^n``. A second null, Q tilted
    from P (:func:`tilted_power_bound`), bounds the power by the Neyman-Pearson test of Q
    against P; it is the tighter bound where the terms vary little, as a z-test would
    suggest. Thresholds where either bound is below 1/2 cannot be certified in most splits
    by any valid method; the ceiling is the loosest other threshold whose realised test
    precision meets the target. P is taken to be the test half (as the oracle is): a
    diagnostic, not a method.
    """
    from structcal.guarantees import _group_counts, _threshold_grid

    grid = _threshold_grid(0.005)
    _, gi = np.unique(g_test, return_inverse=True)
    G = int(gi.max()) + 1 if gi.size else 0
    if G == 0:
        return np.inf
    A, FP, _ = _group_counts(p_test, (~y_test).astype(np.float64), gi, G, grid,
                             np.ones(p_test.shape[0]))
    R = np.where(A > 0, FP / np.where(A > 0, A, 1.0) - (1.0 - target), 0.0)
    mu = R.mean(axis=0)
    q = np.where(mu < 0, -mu / (target - mu), 0.0)
    with np.errstate(divide="ignore"):
        bound = DELTA * np.exp(-n_cal_groups * np.log1p(-np.minimum(q, 1 - 1e-12)))
    bound = np.minimum(bound, tilted_power_bound(R, n_cal_groups))
    pooled = 1.0 - FP.sum(axis=0) / np.maximum(A.sum(axis=0), 1e-300)
    ok = np.flatnonzero((mu < 0) & (bound >= 0.5) & (pooled >= target) & (A.sum(axis=0) > 0))
    return float(grid[ok.min()]) if ok.size else np.inf


def tilted_power_bound(R, n):
    """Per column of ``R`` (rows: the groups of P), the power under P^n of the most
    powerful level-``DELTA`` test of "mean >= 0" against the null Q^n, where Q tilts P
    exponentially-linearly, ``dQ/dP = 1 + theta (x - mu)`` with ``theta = -mu / var``, the
    least-informative member of the null reachable from P (E_Q = 0). Any valid test has at
    most this power at P (Neyman-Pearson). The test's critical value and power use the
    normal approximation of the sum of n log-likelihood ratios; columns where the tilt is
    not a density (``1 + theta (x - mu) <= 0`` at some group) or P is already in the null
    get 1 (no bound)."""
    from scipy.stats import norm

    mu = R.mean(axis=0)
    var = R.var(axis=0)
    out = np.ones(R.shape[1])
    live = (mu < 0) & (var > 0)
    if not live.any():
        return out
    Rl, m, v = R[:, live], mu[live], var[live]
    theta = -m / v
    dq = 1.0 + theta[None, :] * (Rl - m[None, :])
    ok = (dq > 1e-9).all(axis=0)
    dq = np.where(dq > 1e-9, dq, 1.0)
    llr = -np.log(dq)  # log dP/dQ per group
    mp, vp = llr.mean(axis=0), llr.var(axis=0)
    mq = (dq * llr).mean(axis=0)
    vq = (dq * llr**2).mean(axis=0) - mq**2
    crit = n * mq + norm.ppf(1 - DELTA) * np.sqrt(n * np.maximum(vq, 0))
    power = norm.sf((crit - n * mp) / np.sqrt(n * np.maximum(vp, 1e-300)))
    out[np.flatnonzero(live)] = np.where(ok, power, 1.0)
    return out


def group_precision(y, g, acc):
    if not acc.any():
        return 1.0
    _, inv = np.unique(g[acc], return_inverse=True)
    return float(np.mean(np.bincount(inv, weights=y[acc]) / np.bincount(inv)))


def precision_splits(name, p, y, g, n_splits, rng, targets, classes=None, draw=None):
    """``draw`` (for synthetic data): a function rng -> (p, y, g) giving a fresh world."""
    cls = None if p is None else (np.zeros(p.shape[0], np.int64) if classes is None else classes)
    rows = {t: {m: {"met": 0, "met_group": 0, "accepted": [], "precision": []}
                for m in METHODS} for t in targets}
    for _ in range(n_splits):
        if draw is not None:
            p, y, g = draw(rng)
            cls = np.zeros(p.shape[0], np.int64)
        groups = np.unique(g)
        cal_groups = rng.permutation(groups)[: groups.shape[0] // 2]
        cal = np.isin(g, cal_groups)
        test = ~cal
        for target in targets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pg = PrecisionGuarantee(target, DELTA).fit(p[cal], y[cal], groups=g[cal],
                                                           classes=cls[cal])
            thr = {"structcal": pg.accept(p[test], cls[test])}
            kish = np.full(test.sum(), False)
            orc = np.full(test.sum(), False)
            for c in np.unique(cls):
                cm, tm = cal & (cls == c), cls[test] == c
                kish[tm] = p[test][tm] >= kish_threshold(p[cm], y[cm], g[cm], target)
                orc[tm] = p[test][tm] >= oracle_threshold(p[test][tm], y[test][tm], target)
            ceil = np.full(test.sum(), False)
            for c in np.unique(cls):
                cm, tm = cal & (cls == c), cls[test] == c
                ceil[tm] = p[test][tm] >= ceiling_threshold(
                    p[test][tm], y[test][tm], g[test][tm], np.unique(g[cm]).size, target)
            thr.update({"kish": kish, "naive": p[test] >= target, "oracle": orc,
                        "ceiling": ceil})
            for m, a in thr.items():
                r = rows[target][m]
                prec = float(y[test][a].mean()) if a.any() else 1.0
                r["met"] += prec >= target
                r["met_group"] += group_precision(y[test], g[test], a) >= target
                r["accepted"].append(float(a.mean()))
                r["precision"].append(prec if a.any() else float("nan"))
    res = {}
    for target, per in rows.items():
        res[str(target)] = {}
        oracle_median = float(np.median(per["oracle"]["accepted"]))
        ceiling_median = float(np.median(per["ceiling"]["accepted"]))
        for m, r in per.items():
            n = len(r["accepted"])
            med = float(np.median(r["accepted"]))
            res[str(target)][m] = {
                "splits": n, "met": int(r["met"]), "met_rate": r["met"] / n,
                "met_rate_interval": clopper_pearson(int(r["met"]), n),
                "met_rate_group_precision": r["met_group"] / n,
                "median_accepted_share": med,
                "mean_accepted_share": float(np.mean(r["accepted"])),
                "accepting_share_of_splits": float(np.mean(np.asarray(r["accepted"]) > 0)),
                "share_of_oracle": med / oracle_median if oracle_median > 0 else None,
                "share_of_ceiling": (med / ceiling_median if ceiling_median > 0 else None),
                "mean_precision_when_accepting": float(np.nanmean(r["precision"]))
                if np.isfinite(r["precision"]).any() else None,
            }
    log(f"  {name}: " + "; ".join(
        f"t={t} {m} met {v['met_rate']:.3f} acc {v['median_accepted_share']:.3f}"
        for t, per in res.items() for m, v in per.items() if m in ("structcal", "oracle")))
    return res


def per_label(name, p, y, g, t, n_splits, rng, targets, label_names):
    """One setting per entity type (label), each split and certified on its own."""
    out = {}
    for lab in np.unique(t.label):
        m = t.label == lab
        lname = label_names[int(lab)] if label_names is not None else str(lab)
        out[f"{name} [{lname}]"] = precision_splits(f"{name} [{lname}]", p[m], y[m], g[m],
                                                     n_splits, rng, targets)
        out[f"{name} [{lname}]"]["n_events"] = int(m.sum())
        out[f"{name} [{lname}]"]["n_groups"] = int(np.unique(g[m]).size)
    return out


def synthetic_world(icc, G=200):
    """Calibrated forecasts; errors share a group effect giving intra-group correlation
    ``icc`` on the logit scale (a latent-variable ICC, ``s^2 / (s^2 + pi^2 / 3)``)."""
    s = np.sqrt(icc / (1 - icc) * np.pi**2 / 3) if icc > 0 else 0.0

    def draw(rng):
        per = rng.integers(5, 40, G)
        g = np.repeat(np.arange(G), per)
        z = rng.normal(size=g.size) * 2 + 1.5
        eff = rng.normal(size=G)[g] * s
        p = 1 / (1 + np.exp(-z))
        # forecasts calibrated marginally: the group effect is symmetric around the forecast
        y = rng.random(g.size) < 1 / (1 + np.exp(-(z + eff)))
        return p, y, g

    return draw


def untuned_bbbc039_objects():
    """Object events of an untuned pixel classifier on BBBC039 (see the module docstring)."""
    from scipy import ndimage as ndi
    from sklearn.linear_model import LogisticRegression

    from structcal.adapters import map_objects
    from structcal.datasets import load_bbbc039
    from structcal.segmentation import pixel_features

    d = load_bbbc039()
    train = d.split("train")
    rng = np.random.default_rng(0)
    fit_imgs = train.images[:20] / 255.0
    X = pixel_features(fit_imgs)
    yy = train.masks[:20].reshape(-1)
    pick = rng.choice(X.shape[0], 60000, replace=False)
    clf = LogisticRegression(max_iter=300).fit(X[pick], yy[pick])
    val, test = d.split("val"), d.split("test")
    rest = train.subset(np.arange(20, train.n_images))

    def objects(part):
        maps = [clf.predict_proba(pixel_features(im / 255.0))[:, 1].reshape(im.shape)
                for im in part.images]
        gold = [ndi.label(m)[0] for m in part.masks]
        return map_objects(maps, gold=gold)

    fit_objs = objects(val)
    pool_a, pool_b = objects(test), objects(rest)
    return fit_objs, (pool_a, pool_b)


def miss_splits(name, p, y, g, gold_per_group, alpha, n_splits, rng):
    groups = np.asarray(sorted(gold_per_group))
    counts = np.asarray([gold_per_group[k] for k in groups])
    losses, sizes, floors, warned = [], [], [], []
    for _ in range(n_splits):
        cal_groups = rng.permutation(groups)[: groups.shape[0] // 2]
        cal_mask = np.isin(groups, cal_groups)
        cal = np.isin(g, cal_groups)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mc = MissControl(alpha).fit(p[cal], y[cal], g[cal],
                                        (groups[cal_mask], counts[cal_mask]))
        test_groups = groups[~cal_mask]
        a = mc.accept(p[~cal])
        gt, ot = g[~cal], y[~cal]
        hit = {k: 0 for k in test_groups.tolist()}
        for k in gt[a & ot].tolist():
            hit[k] += 1
        tc = counts[~cal_mask]
        loss = [(c - hit[k]) / c if c else 0.0 for k, c in zip(test_groups.tolist(), tc.tolist())]
        losses.append(float(np.mean(loss)))
        sizes.append(float(a.sum() / test_groups.shape[0]))
        floors.append(mc.floor_)
        warned.append(not mc.achievable_)
    mean_loss = float(np.mean(losses))
    out = {"alpha": alpha, "splits": n_splits, "mean_miss_rate": float(np.mean(losses)),
           "miss_rate_q90": float(np.quantile(losses, 0.9)),
           "mean_candidates_accepted_per_group": float(np.mean(sizes)),
           "mean_floor_all_candidates": float(np.mean(floors)),
           "warned_unattainable_share": float(np.mean(warned)),
           "target_met": mean_loss <= alpha,
           "status": ("met" if mean_loss <= alpha else
                      "unattainable, warned" if np.mean(warned) > 0.5 else "MISSED")}
    log(f"  {name} miss control: {out}")
    return out


def entity_gold_per_group(src):
    sch = TagScheme(src.pred.potentials.label_names)
    c = sch.chunks(src.y, src.pred.item_offsets)
    per_item = np.bincount(c.item, minlength=src.pred.n_items)
    out = {}
    for i, k in enumerate(src.groups.tolist()):
        out[k] = out.get(k, 0) + int(per_item[i])
    return out


def object_gold_per_group(src):
    from structcal.events.objects import _components_of

    comp, n = _components_of(src.pred, src.y, 0)
    item = src.pred.item_index
    firsts = np.full(n, -1)
    for node in np.flatnonzero(comp >= 0):
        if firsts[comp[node]] < 0:
            firsts[comp[node]] = node
    per_item = np.bincount(item[firsts], minlength=src.pred.n_items)
    return {int(k): int(per_item[i]) for i, k in enumerate(src.groups.tolist())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--splits", type=int, default=500)
    ap.add_argument("--only", nargs="*", default=None,
                    help="datasets to run (synthetic gum wnut17 ocr bbbc039 bbbc039-untuned)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    only = set(args.only) if args.only else None
    run = lambda name: only is None or name in only  # noqa: E731
    result = {"command": f"python benchmarks/guarantees_study.py --splits {args.splits}",
              "delta": DELTA, "precision": {}, "miss": {}}

    if run("synthetic"):
        log("synthetic ...")
        for icc in (0.0, 0.2, 0.4, 0.6):
            result["precision"][f"synthetic icc {icc}"] = precision_splits(
                f"synthetic icc {icc}", None, None, None, args.splits, rng, (0.8, 0.9),
                draw=synthetic_world(icc))

    if run("gum"):
        log("GUM ...")
        gum = data.gum_crossfit()
        docs = np.unique(gum.groups)
        fit_docs = np.random.default_rng(1).permutation(docs)[:32]
        fit_src = gum.subset(np.flatnonzero(np.isin(gum.groups, fit_docs)), "gum-fit")
        pool = gum.subset(np.flatnonzero(~np.isin(gum.groups, fit_docs)), "gum-pool")
        tags = gum.pred.potentials.label_names
        p, y, g, t, sel = calibrated(fit_src, pool, EntitySpans(tags))
        result["precision"]["gum entities"] = precision_splits("gum", p, y, g, args.splits, rng,
                                                               TARGETS["ner"])
        result["precision"]["gum entities"]["recalibration"] = {k: v["method"] for k, v in sel.items()}
        result["precision"].update(per_label("gum entities", p, y, g, t, args.splits, rng,
                                             (0.7, 0.8), _entity_types(tags)))
        p, y, g, _, _ = calibrated(fit_src, pool, EntitySpans(tags, candidates=10))
        for alpha in (0.3, 0.5):
            result["miss"][f"gum entities (10 best labelings), {alpha}"] = miss_splits(
                "gum", p, y, g, entity_gold_per_group(pool), alpha, args.splits, rng)

    if run("wnut17"):
        log("WNUT-17 ...")
        w = data.wnut17()
        tags = w["dev"].pred.potentials.label_names
        p, y, g, t, sel = calibrated(w["dev"], w["test"], EntitySpans(tags))
        result["precision"]["wnut17 entities"] = precision_splits("wnut17", p, y, g, args.splits,
                                                                  rng, TARGETS["ner"])
        result["precision"].update(per_label("wnut17 entities", p, y, g, t, args.splits, rng,
                                             (0.7, 0.8), _entity_types(tags)))
        p, y, g, _, _ = calibrated(w["dev"], w["test"], EntitySpans(tags, candidates=10))
        for alpha in (0.3, 0.5):
            result["miss"][f"wnut17 entities (10 best labelings), {alpha}"] = miss_splits(
                "wnut17", p, y, g, entity_gold_per_group(w["test"]), alpha, args.splits, rng)

    if run("ocr"):
        log("OCR ...")
        o = data.ocr()
        p, y, g, _, _ = calibrated(o["recalibration"], o["test"], MAPEvent())
        result["precision"]["ocr words"] = precision_splits("ocr", p, y, g, args.splits, rng,
                                                            TARGETS["other"])

    if run("bbbc039"):
        log("BBBC039 ...")
        from structcal.events import ObjectEvents

        b = data.bbbc039()
        p, y, g, _, _ = calibrated(b["val"], b["test"], ObjectEvents())
        result["precision"]["bbbc039 nuclei"] = precision_splits("bbbc039", p, y, g,
                                                                 args.splits, rng,
                                                                 TARGETS["other"])
        for alpha in (0.1, 0.2):
            result["miss"][f"bbbc039 nuclei (MAP objects), {alpha}"] = miss_splits(
                "bbbc039", p, y, g, object_gold_per_group(b["test"]), alpha, args.splits, rng)

    if run("bbbc039-untuned"):
        log("BBBC039, untuned map ...")
        fit_objs, (pa, pb) = untuned_bbbc039_objects()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = StructuredRecalibrator(shift_check=False, random_state=0).fit_events(
                fit_objs.table)
            ca, cb = rec.predict_events(pa.table), rec.predict_events(pb.table)
        p = np.r_[ca.forecast, cb.forecast]
        y = np.r_[ca.table.outcome, cb.table.outcome].astype(bool)
        g = np.r_[ca.table.item, cb.table.item + 10_000]
        result["precision"]["bbbc039 nuclei, untuned map"] = precision_splits(
            "bbbc039 untuned", p, y, g, args.splits, rng, (0.5, 0.8, 0.9))
        result["precision"]["bbbc039 nuclei, untuned map"]["n_events"] = int(p.size)
        result["precision"]["bbbc039 nuclei, untuned map"]["n_groups"] = int(np.unique(g).size)

    result["seconds"] = time.perf_counter() - t0
    result["targets"] = targets(result)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print(format_table(result))


def _entity_types(tags):
    """Label index -> entity type name, for the labels entity events carry."""
    return dict(enumerate(TagScheme(list(tags)).types))


def targets(result):
    valid, power, feasible, infeasible = {}, {}, {}, []
    for name, d in result["precision"].items():
        for t, per in d.items():
            if t not in map(str, ALL_TARGETS):
                continue
            valid[f"{name} @ {t}"] = per["structcal"]["met_rate"] >= 1 - DELTA
            if per["oracle"]["median_accepted_share"] >= ORACLE_FLOOR:
                power[f"{name} @ {t}"] = per["structcal"]["share_of_oracle"]
                if per["ceiling"]["median_accepted_share"] >= ORACLE_FLOOR:
                    feasible[f"{name} @ {t}"] = per["structcal"]["share_of_ceiling"]
                else:
                    infeasible.append(f"{name} @ {t}")
    return {
        "structcal_precision_met_in_at_least_1_minus_delta": all(valid.values()),
        "settings_below_1_minus_delta": sorted(k for k, v in valid.items() if not v),
        "power_settings": len(power),
        "power_at_least_0.7_of_oracle": sum(v is not None and v >= POWER_TARGET
                                            for v in power.values()),
        "power_below_0.7_of_oracle": {k: v for k, v in power.items()
                                      if v is None or v < POWER_TARGET},
        "power_settings_no_valid_test_can_reach": sorted(infeasible),
        "power_settings_within_the_ceiling": len(feasible),
        "power_at_least_0.7_of_ceiling": sum(v is not None and v >= POWER_TARGET
                                             for v in feasible.values()),
        "power_below_0.7_of_ceiling": {k: v for k, v in feasible.items()
                                       if v is None or v < POWER_TARGET},
        "miss_rate_at_most_alpha_where_attainable": all(
            v["status"] != "MISSED" for v in result["miss"].values()),
    }


def format_table(result):
    lines = [f"{'dataset':<40}{'target':>7}{'method':>11}{'met rate':>10}{'interval':>18}"
             f"{'accepted':>10}{'/oracle':>9}{'precision':>11}"]
    for name, d in result["precision"].items():
        for t, per in d.items():
            if t not in map(str, ALL_TARGETS):
                continue
            for m, v in per.items():
                prec = v["mean_precision_when_accepting"]
                ratio = v["share_of_oracle"]
                lines.append(f"{name:<40}{t:>7}{m:>11}{v['met_rate']:>10.3f}"
                             f"{str([round(x, 3) for x in v['met_rate_interval']]):>18}"
                             f"{v['median_accepted_share']:>10.3f}"
                             f"{'-' if ratio is None else f'{ratio:.2f}':>9}"
                             f"{'-' if prec is None else f'{prec:.3f}':>11}")
    lines.append("")
    for name, v in result["miss"].items():
        lines.append(f"{name.rsplit(', ', 1)[0]:<40} alpha {v['alpha']}: mean miss {v['mean_miss_rate']:.3f} "
                     f"(floor {v['mean_floor_all_candidates']:.3f}), accepted per group "
                     f"{v['mean_candidates_accepted_per_group']:.2f}, "
                     f"{v['status']}")
    lines.append("")
    lines.append(json.dumps(result["targets"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
