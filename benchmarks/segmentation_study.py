"""Segmentation for real: a grid CRF on BBBC039 nuclei, and calibrated pixel / object / image events.

Model (``structcal.segmentation.PixelCRFSegmenter``): logistic regression on
``scipy.ndimage`` pixel features (train split, 300k pixels), its log-probabilities as
unaries, a 4-connected contrast-sensitive Potts grid CRF whose two weights are chosen on
the validation split (Dice of the mean-field argmax over a 3 x 3 grid). Segmentation quality on the test
split: unary argmax vs CRF MAP (TRW-S + ICM) vs mean-field argmax.

Events (``structcal.events``): per pixel ``MarginalEvent`` ("the MAP label of this pixel
is right"), per predicted object ``ObjectEvents`` ("matches a gold nucleus at IoU >=
0.5"; gold objects are the 4-connected components of the binary gold mask, so touching
nuclei are one gold object), per image ``AllObjectsFound`` and ``ObjectCountCorrect``.
Forecasters, fit on the validation split and scored on the test split: raw (the model's
probability: mean-field marginal; factorised object probability; sampled image-event
probability), isotonic on raw, k-NN and tree region forecasters on the features, and
``StructuredRecalibrator`` end to end (k-NN per kind, the study's features) and the
default ``StructuredRecalibrator(kinds, random_state=0)`` (features='auto', per-kind
cross-validated choice of raw / isotonic / forecaster). Pixel events: 40,000
validation pixels drawn at random fit the forecasters (k-NN over 1.1M events is not the
point), and 100,000 test pixels drawn at random are scored (the kernel ECE and its
bootstrap over 1.1M events cost more than the rest of the study).

Raw object probability: the factorised mean-field probability (default), the fraction of
16 labelings drawn node by node from the mean-field marginals in which the event holds,
and the same fraction over 16 labelings drawn from the CRF itself by Gibbs sampling
(from the MAP, 20 burn-in sweeps, thin 2); for each, Brier / ECE of the raw value, of
isotonic on it and of k-NN on the features with it as the ``raw`` feature (key
``raw_comparison``; the image events likewise with marginal vs Gibbs samples).

End to end (key ``recalibrator``): on the 50 test images, from the images to calibrated
probabilities of every object and image event: pixel features, unaries, contrast weights
and grid CRFs, TRW-S MAP (+ ICM), mean-field marginals, pseudo-marginals, objects and
their features, the sampled image-event probabilities and the forecasts of the fitted
``StructuredRecalibrator``, one call, wall and CPU time; ``stages`` repeats it on a fresh
prediction stage by stage (CPU).

Metrics: Brier x100 with a paired bootstrap interval (images resampled) of the
difference to raw and to isotonic-on-raw, ``calibration_error`` (kernel ECE) with its
bootstrap interval, risk-coverage of objects (precision of the objects kept vs the
fraction kept, AURC). Marginal source: mean field vs loopy BP vs pseudo-marginals as the
raw pixel probability, raw and after isotonic recalibration (loopy BP: 10 damped sweeps;
pixel Brier and ECE here over all test pixels).

Run: ``python benchmarks/segmentation_study.py [--json] [--quick]`` (``--quick``: a
20 val / 20 test images, 10,000 / 50,000 pixel events, 50 bootstrap resamples instead of 100; ``--figure PATH``: save
a PNG of two test images with their objects coloured by calibrated confidence).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from structcal import StructuredPrediction
from structcal.calibrators import IsotonicCalibration
from structcal.datasets import load_bbbc039
from structcal.events import (
    AllObjectsFound,
    MarginalEvent,
    ObjectCountCorrect,
    ObjectEvents,
    build_events,
)
from structcal.exceptions import ConvergenceWarning
from structcal.forecasters import KNNRegionForecaster, SingleClassWarning, TreeRegionForecaster
from structcal.inference.graph import belief_propagation
from structcal.metrics import calibration_error
from structcal.potentials import grid_coordinates
from structcal.recalibration import StructuredRecalibrator
from structcal.segmentation import PixelCRFSegmenter, segmentation_scores
from structcal.selective import risk_coverage_curve

FEATURES = {
    "marginal": ["phi_mp5", "phi_mp7", "phi_mg2", "raw"],
    "object": ["object_log_size", "object_eccentricity", "object_solidity", "set_mean_marginal",
               "set_min_marginal", "object_rim_marginal", "object_boundary_marginal",
               "object_mean_pseudo_margin", "object_contrast", "raw"],
    "all_found": ["phi_mg1", "n_objects", "raw"],
    "count": ["phi_mg1", "n_objects", "raw"],
}


def _register_image_feature():
    from structcal.events.objects import _components_of, _objects_per_item
    from structcal.features import register_feature

    @register_feature("n_objects", scope="item", needs=["map"], replace=True,
                      description="number of predicted objects in the image")
    def _n_objects(ctx):
        comp, n = _components_of(ctx.pred, ctx.pred.map_labels, 0, key=("_objects", 0))
        return _objects_per_item(ctx.pred, comp, n)[ctx.events.item].astype(float)


def kinds():
    return [MarginalEvent(), ObjectEvents(), AllObjectsFound(n_samples=16),
            ObjectCountCorrect(n_samples=16)]


def predict(model, data, marginal_method="mean_field"):
    x = data.images / 255.0
    p = model.potentials(list(x))
    node_data = {"coords": grid_coordinates([data.shape] * data.n_images),
                 "intensity": x.reshape(-1)}
    return StructuredPrediction(p, node_data=node_data, marginal_method=marginal_method,
                                tol=1e-4, max_iter=100)


def brier_boot(y, p, ref, groups, n_boot, rng):
    """Brier x100 of p, and a 95% paired bootstrap interval of brier(p) - brier(ref) over groups."""
    uniq, inv = np.unique(groups, return_inverse=True)
    d = (p - y) ** 2 - (ref - y) ** 2
    sums = np.bincount(inv, weights=d, minlength=uniq.size)
    counts = np.bincount(inv, minlength=uniq.size)
    boots = []
    for _ in range(n_boot):
        pick = rng.integers(0, uniq.size, uniq.size)
        boots.append(sums[pick].sum() / counts[pick].sum())
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return 100 * float(np.mean(d)), 100 * float(lo), 100 * float(hi)


def score(y, p, groups, refs, n_boot, rng):
    y = y.astype(float)
    ce = calibration_error(y, p)
    ci = ce.confidence_interval(n_resamples=n_boot, random_state=0)
    out = {"brier": 100 * float(np.mean((p - y) ** 2)),
           "ece": float(ce.estimate), "ece_ci": [float(ci.low), float(ci.high)]}
    for name, ref in refs.items():
        out[f"brier_minus_{name}"] = brier_boot(y, p, ref, groups, n_boot, rng)
    return out


def forecasts(a, b, tree=True):
    """Raw, isotonic-on-raw, k-NN (and tree) forecasts of table ``b``'s events, fit on ``a``."""
    raw_a, raw_b = np.clip(a.raw, 0, 1), np.clip(b.raw, 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClassWarning)
        out = {"raw": raw_b, "isotonic_raw": _proba(IsotonicCalibration().fit(raw_a, a.outcome),
                                                     raw_b),
               "knn": _proba(KNNRegionForecaster(random_state=0).fit(a.X, a.outcome), b.X)}
        if tree:
            out["tree"] = _proba(TreeRegionForecaster(random_state=0).fit(a.X, a.outcome), b.X)
    return out


def _proba(model, X):
    pr = model.predict_proba(X)
    return pr[:, -1] if model.classes_[-1] else 1.0 - pr[:, 0]


def save_figure(path, test, pred, confidence):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import ndimage as ndi

    from structcal.events import object_table

    comp_all = object_table(pred)["component"]
    H, W = test.shape
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, g in zip(axes, (0, 1)):
        comp = comp_all[g * H * W:(g + 1) * H * W].reshape(H, W)
        shown = np.full((H, W), np.nan)
        shown[comp >= 0] = confidence[comp[comp >= 0]]
        ax.imshow(test.images[g], cmap="gray")
        im = ax.imshow(shown, cmap="RdYlGn", vmin=0.5, vmax=1, alpha=0.65)
        gold = test.masks[g].astype(bool)
        ax.contour(gold & ~ndi.binary_erosion(gold), levels=[0.5], colors="white", linewidths=0.3)
        ax.set_axis_off()
    fig.colorbar(im, ax=axes, fraction=0.025, label="calibrated P(nucleus is right)")
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def end_to_end_stages(model, test, rec):
    """CPU seconds of each stage of the end-to-end path, on a fresh prediction."""
    out = {}

    def timed(name, fn):
        c = time.process_time()
        v = fn()
        out[name] = time.process_time() - c
        return v

    pred = timed("potentials (pixel features, unaries, contrast, grid CRFs)",
                 lambda: predict(model, test))
    timed("MAP (TRW-S + ICM)", lambda: pred.map_labels)
    timed("mean-field marginals", lambda: pred.marginals)
    timed("pseudo-marginals", lambda: pred.pseudo_marginals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClassWarning)
        timed("events, features, sampled image events, forecasts",
              lambda: rec.predict(pred, test.masks.reshape(-1)))
    out["total"] = sum(out.values())
    return out


def raw_comparison(pred_val, pred_test, val, test, n_boot, rng):
    """Raw object / image probabilities from the factorised marginals, from samples of the
    marginals and from Gibbs samples of the CRF: raw, isotonic on raw and k-NN on the
    features with that raw value, fit on val, scored on test."""
    sources = {
        "object": [("factorised", ObjectEvents()),
                   ("sampled", ObjectEvents(raw="sampled", n_samples=16)),
                   ("gibbs", ObjectEvents(raw="gibbs", n_samples=16))],
        "all_found": [("sampled", AllObjectsFound(n_samples=16)),
                      ("gibbs", AllObjectsFound(raw="gibbs", n_samples=16))],
        "count": [("sampled", ObjectCountCorrect(n_samples=16)),
                  ("gibbs", ObjectCountCorrect(raw="gibbs", n_samples=16))],
    }
    out = {}
    for name, kinds_ in sources.items():
        out[name] = {}
        preds = {}
        for src, kind in kinds_:
            t = time.process_time()
            a = build_events(pred_val, [kind], y_true=val.masks.reshape(-1),
                             features={name: FEATURES[name]})
            b = build_events(pred_test, [kind], y_true=test.masks.reshape(-1),
                             features={name: FEATURES[name]})
            secs = time.process_time() - t
            yb = b.outcome
            fc = forecasts(a, b, tree=False)
            row = {"cpu_seconds_val_and_test": secs}
            for f, p in fc.items():
                row[f] = score(yb, p, b.item, {"raw": fc["raw"]} if f != "raw" else {}, n_boot,
                               rng)
            if name == "object":
                row["aurc_raw"] = risk_coverage_curve(yb, fc["raw"]).aurc
            out[name][src] = row
            preds[src] = (yb, b.item, fc)
        # the events are the same for every source (the MAP's objects / the images): paired
        # bootstrap intervals (images resampled) of the Brier differences between sources
        srcs = [src for src, _ in kinds_]
        for i, s1 in enumerate(srcs):
            for s2 in srcs[i + 1:]:
                y, item, p1 = preds[s1]
                _, _, p2 = preds[s2]
                out[name][f"{s1}_minus_{s2}"] = {
                    f: brier_boot(y.astype(float), p1[f], p2[f], item, n_boot, rng)
                    for f in ("raw", "isotonic_raw", "knn")}
    return out


def study(quick, figure=None):
    rng = np.random.default_rng(0)
    n_boot = 50 if quick else 100
    data = load_bbbc039()
    train, val, test = data.split("train"), data.split("val"), data.split("test")
    if quick:
        val, test = val.subset(np.arange(20)), test.subset(np.arange(20))
    out = {"n_images": {"train": train.n_images, "val": val.n_images, "test": test.n_images}}
    t0 = time.perf_counter()
    model = PixelCRFSegmenter().fit(train.images / 255.0, train.masks)
    model.tune(list(val.images / 255.0), list(val.masks), potts_grid=(0.0, 0.5, 1.0),
               contrast_grid=(0.0, 1.0, 2.0))
    out["model"] = {"potts": model.potts, "contrast": model.contrast,
                    "tuning": model.tuning_.tolist(), "seconds": time.perf_counter() - t0}

    pred_val, pred_test = predict(model, val), predict(model, test)
    masks = list(test.masks)
    H, W = test.shape
    shape = lambda lab: list(lab.reshape(-1, H, W))  # noqa: E731
    unary_lab = pred_test.potentials.unary.argmax(axis=1)
    t = time.perf_counter()
    map_lab = pred_test.map_labels
    t_map = time.perf_counter() - t
    t = time.perf_counter()
    mf_lab = pred_test.marginals.argmax(axis=1)
    t_mf = time.perf_counter() - t
    out["segmentation"] = {
        "unary_argmax": segmentation_scores(shape(unary_lab), masks),
        "crf_map_trws": dict(segmentation_scores(shape(map_lab), masks), seconds=t_map),
        "mean_field_argmax": dict(segmentation_scores(shape(mf_lab), masks), seconds=t_mf),
    }

    t = time.perf_counter()
    tv = build_events(pred_val, kinds(), y_true=val.masks.reshape(-1), features=FEATURES)
    tt = build_events(pred_test, kinds(), y_true=test.masks.reshape(-1), features=FEATURES)
    out["event_seconds"] = time.perf_counter() - t
    results = {}
    for k, name in enumerate(tv.kind_names):
        a, b = tv.select(tv.kind == k)._only_kind(k), tt.select(tt.kind == k)._only_kind(k)
        if name == "marginal":
            n_fit, n_score = (10000, 50000) if quick else (40000, 100000)
            a = a.select(rng.choice(a.n_events, size=min(n_fit, a.n_events), replace=False))
            b = b.select(np.sort(rng.choice(b.n_events, size=min(n_score, b.n_events),
                                            replace=False)))
        yb = b.outcome
        fc = forecasts(a, b)
        refs = {"raw": fc["raw"], "isotonic_raw": fc["isotonic_raw"]}
        row = {"n_val": a.n_events, "n_test": b.n_events, "base_rate": float(yb.mean()),
               "features": list(a.feature_names)}
        for f, p in fc.items():
            row[f] = score(yb, p, b.item, {r: v for r, v in refs.items() if r != f}, n_boot, rng)
        if name == "object":
            for f in ("raw", "isotonic_raw", "knn"):
                rc = risk_coverage_curve(yb, fc[f])
                keep = {c: float(rc.accuracy[np.searchsorted(rc.coverage, c)])
                        for c in (0.5, 0.8, 0.9)}
                row[f]["precision_at_coverage"] = keep
                row[f]["aurc"] = rc.aurc
            row["risk_coverage_knn"] = {"coverage": rc.coverage[:: max(1, rc.coverage.size // 50)].tolist(),
                                        "precision": rc.accuracy[:: max(1, rc.coverage.size // 50)].tolist()}
        results[name] = row
        if name == "object":
            object_forecast = fc["knn"]
    out["events"] = results
    if figure:
        save_figure(figure, test, pred_test, object_forecast)

    # StructuredRecalibrator end to end (fit on val, predict test), timed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClassWarning)
        t = time.perf_counter()
        rec = StructuredRecalibrator([ObjectEvents(), AllObjectsFound(n_samples=16),
                                      ObjectCountCorrect(n_samples=16)],
                                     features={k: FEATURES[k] for k in ("object", "all_found", "count")},
                                     forecaster=KNNRegionForecaster(random_state=0))
        rec.fit(pred_val, val.masks.reshape(-1))
        t_fit = time.perf_counter() - t
        # end to end on the test images: pixel features, unaries, grid CRFs, MAP, marginals,
        # pseudo-marginals, events, features, sampled image-event probabilities, forecasts
        t, c = time.perf_counter(), time.process_time()
        res = rec.predict(predict(model, test), test.masks.reshape(-1))
    out["recalibrator"] = {"fit_seconds": t_fit, "end_to_end_seconds": time.perf_counter() - t,
                           "end_to_end_cpu_seconds": time.process_time() - c,
                           "n_test_images": test.n_images,
                           "stages": end_to_end_stages(model, test, rec)}
    for k, name in enumerate(res.table.kind_names):
        rows = res.table.kind == k
        y = res.table.outcome[rows]
        out["events"][name]["recalibrator"] = score(
            y, res.forecast[rows], res.table.item[rows],
            {"raw": np.clip(res.table.raw[rows], 0, 1)}, n_boot, rng)
    # the default recalibrator: features='auto', per-kind choice raw / isotonic / forecaster
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClassWarning)
        default = StructuredRecalibrator([ObjectEvents(), AllObjectsFound(n_samples=16),
                                          ObjectCountCorrect(n_samples=16)], random_state=0)
        default.fit(pred_val, val.masks.reshape(-1))
        res = default.predict(pred_test, test.masks.reshape(-1))
    out["default_recalibrator"] = {"selection": {k: {kk: (vv if isinstance(vv, (str, int, float)) else str(vv))
                                                     for kk, vv in v.items()}
                                                 for k, v in default.selection_.items()}}
    for k, name in enumerate(res.table.kind_names):
        rows = res.table.kind == k
        out["events"][name]["default"] = score(
            res.table.outcome[rows], res.forecast[rows], res.table.item[rows],
            {"raw": np.clip(res.table.raw[rows], 0, 1)}, n_boot, rng)

    out["raw_comparison"] = raw_comparison(pred_val, pred_test, val, test, n_boot, rng)

    # marginal source for pixel events: mean field vs loopy BP vs pseudo-marginals
    src = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        bp_val = belief_propagation(pred_val.potentials, max_iter=10, warn=False).marginals
        bp_test = belief_propagation(pred_test.potentials, max_iter=10, warn=False).marginals
    yv = (pred_val.map_labels == val.masks.reshape(-1))
    yt = (pred_test.map_labels == test.masks.reshape(-1))
    sub = rng.choice(yv.size, size=min(200000, yv.size), replace=False)
    for name, (mv, mt) in {
        "mean_field": (pred_val.marginals, pred_test.marginals),
        "loopy_bp": (bp_val, bp_test),
        "pseudo_marginals": (pred_val.pseudo_marginals, pred_test.pseudo_marginals),
    }.items():
        rv = mv[np.arange(yv.size), pred_val.map_labels]
        rt = mt[np.arange(yt.size), pred_test.map_labels]
        iso = _proba(IsotonicCalibration().fit(rv[sub], yv[sub]), rt)
        src[name] = {"raw_brier": 100 * float(np.mean((rt - yt) ** 2)),
                     "raw_ece": float(calibration_error(yt.astype(float), rt).estimate),
                     "isotonic_brier": 100 * float(np.mean((iso - yt) ** 2)),
                     "isotonic_ece": float(calibration_error(yt.astype(float), iso).estimate)}
    out["marginal_source"] = src
    out["total_seconds"] = time.perf_counter() - t0
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="20 val / 20 test images")
    parser.add_argument("--figure", help="save a PNG of objects coloured by confidence")
    args = parser.parse_args()
    _register_image_feature()
    res = study(args.quick, args.figure)
    if args.json:
        print(json.dumps(res))
        return
    print("segmentation on the test split")
    for k, v in res["segmentation"].items():
        print(f"  {k:<18} pixel acc {v['pixel_accuracy']:.4f}  Dice {v['dice']:.4f}  "
              f"object F1 {v['object_f1']:.3f} ({v['n_matched']}/{v['n_predicted']} pred, "
              f"{v['n_gold']} gold)")
    print("\nBrier x100 / kernel ECE [95% CI] on test events (fit on val)")
    for name, row in res["events"].items():
        print(f"  {name} ({row['n_test']} test events, base rate {row['base_rate']:.3f})")
        for f in ("raw", "isotonic_raw", "knn", "tree", "recalibrator", "default"):
            if f not in row:
                continue
            r = row[f]
            line = f"    {f:<13} {r['brier']:7.3f}  ECE {r['ece']:.4f} [{r['ece_ci'][0]:.4f}, {r['ece_ci'][1]:.4f}]"
            for key in ("brier_minus_raw", "brier_minus_isotonic_raw"):
                if key in r:
                    d, lo, hi = r[key]
                    line += f"  {key[6:]} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            print(line)
    print("\nraw probability source: Brier x100 / ECE of raw, isotonic on raw, k-NN (test)")
    for name, rows in res["raw_comparison"].items():
        for src, r in rows.items():
            if "_minus_" in src:
                print(f"  {name:<9} {src:<22} Brier x100 difference " + "  ".join(
                    f"{f} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for f, (d, lo, hi) in r.items()))
                continue
            print(f"  {name:<9} {src:<10} " + "  ".join(
                f"{f} {r[f]['brier']:.3f}/{r[f]['ece']:.4f}" for f in ("raw", "isotonic_raw", "knn")))
    e2e = res["recalibrator"]
    print(f"\nend to end on {e2e['n_test_images']} test images: {e2e['end_to_end_seconds']:.2f} s wall, "
          f"{e2e['end_to_end_cpu_seconds']:.2f} s CPU; stages (CPU s):")
    for k, v in e2e["stages"].items():
        print(f"  {k:<55} {v:.2f}")
    print("\nmarginal source (pixel events): Brier x100 / ECE raw -> isotonic")
    for k, v in res["marginal_source"].items():
        print(f"  {k:<17} {v['raw_brier']:.3f}/{v['raw_ece']:.4f} -> {v['isotonic_brier']:.3f}/{v['isotonic_ece']:.4f}")
    print(f"\ntotal {res['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
