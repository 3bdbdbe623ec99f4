"""Recalibrating graph CRFs: mean-field marginals vs pseudo-marginals vs MAP-only features.

Kuleshov & Liang's scene experiment recalibrates a loopy segmentation CRF and finds that
features from the MAP alone (pseudo-marginals around the MAP, neighbour agreement) are
nearly as good as mean-field marginals. This study measures that on the three graph
benchmarks shipped with structcal:

- ``snakes`` (Nowozin et al.; 10 x 10 grids, 11 labels): GraphCRF (pseudo-likelihood,
  colour-conditioned edge types) fit on 100 train grids, recalibration on the other
  100 (a seeded random split), test on the 100 test grids;
- ``scene`` (Boutell et al.; a 6-node fully connected binary graph per image): GraphCRF
  fit on 600 training images, recalibration on the other 611 (seeded random split), test on the 1,196
  test images;
- ``superpixel`` (``make_superpixel_scenes``: ~100 superpixels, ~290 edges, 21 labels):
  contrast-sensitive Potts GraphCRF fit on 200 scenes, recalibration on 200, test on 200.

Events: the per-graph MAP event ("the whole labeling is right") and the per-node marginal
events ("node j is right"). Marginals are mean field (the paper's choice), MAP is TRW-S +
ICM, the second best is the best single-node change of the MAP. Forecasters: k-NN region
forecasters, k by 10-fold CV over 5..500. Feature sets (node / graph events):

- ``map_only``: phi_mp4, phi_mp5, phi_mp6 / phi_mp1, phi_mp3 (no marginal inference);
- ``pseudo``: map_only + phi_mp7 (the pseudomargin) / same as map_only;
- ``marginals``: phi_mg2, phi_mg3 and the raw mean-field probability / phi_mg1 and raw;
- ``all``: the union.

Prints l2 loss (Brier) and calibration error (10 buckets) x100 on the test events, raw
and calibrated, or with ``--json`` one JSON object.

Run: ``python benchmarks/graph_recalibration_study.py [--json] [--quick]`` (``--quick``
uses fewer synthetic scenes and skips nothing else).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from structcal import StructuredPrediction
from structcal.crf import GraphCRF
from structcal.datasets import load_scene, load_snakes, make_superpixel_scenes
from structcal.events import MAPEvent, MarginalEvent, build_events
from structcal.exceptions import ConvergenceWarning
from structcal.forecasters import KNNRegionForecaster, SingleClassWarning
from structcal.metrics import brier_decomposition

FEATURE_SETS = {
    "marginal": {
        "map_only": ["phi_mp4", "phi_mp5", "phi_mp6"],
        "pseudo": ["phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7"],
        "marginals": ["phi_mg2", "phi_mg3", "raw"],
        "all": ["phi_mp4", "phi_mp5", "phi_mp6", "phi_mp7", "phi_mg2", "phi_mg3", "raw"],
    },
    "map": {
        "map_only": ["phi_mp1", "phi_mp3"],
        "pseudo": ["phi_mp1", "phi_mp3"],
        "marginals": ["phi_mg1", "raw"],
        "all": ["phi_mp1", "phi_mp3", "phi_mg1", "raw"],
    },
}
#: every feature a kind's sets use, computed once per table
FEATURES = {kind: sorted({f for fs in sets.values() for f in fs}) for kind, sets in FEATURE_SETS.items()}


def _datasets(quick: bool):
    # the training files are ordered (by label sets for scene), so the fit / recalibration
    # halves are a seeded random split of them
    rng = np.random.default_rng(0)
    snakes = load_snakes()
    tr = snakes.split("train")
    perm = rng.permutation(tr.n_grids)
    yield "snakes", dict(
        fit=tr.subset(perm[:100]).graphs(),
        recal=tr.subset(perm[100:]).graphs(),
        test=snakes.split("test").graphs(),
        crf=GraphCRF(method="pseudo_likelihood", alpha=1e-4, max_iter=300),
    )
    sc_tr, sc_te = load_scene("train"), load_scene("test")
    perm = rng.permutation(sc_tr.n_images)
    yield "scene", dict(
        fit=sc_tr.subset(perm[:600]).graphs(),
        recal=sc_tr.subset(perm[600:]).graphs(),
        test=sc_te.graphs(),
        crf=GraphCRF(method="pseudo_likelihood", alpha=1e-2, max_iter=1000),
    )
    n = 100 if quick else 200
    data = make_superpixel_scenes(3 * n, random_state=0)
    yield "superpixel", dict(
        fit=data.subset(np.arange(n)),
        recal=data.subset(np.arange(n, 2 * n)),
        test=data.subset(np.arange(2 * n, 3 * n)),
        crf=GraphCRF(pairwise="potts", alpha=1e-3, max_iter=500),
    )


def _tables(crf, data):
    pred = StructuredPrediction(crf.potentials(data), marginal_method="mean_field")
    table = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=data.labels,
                         features=FEATURES)
    node_acc = float(np.mean(pred.map_labels == data.labels))
    return table, node_acc


def _score(y, p):
    d = brier_decomposition(y, p, n_bins=10)
    return {"l2": 100 * d.brier, "cal": 100 * d.calibration_error}


def study_one(name, spec):
    t0 = time.perf_counter()
    crf = spec["crf"].fit(spec["fit"])
    out = {"fit_seconds": time.perf_counter() - t0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        recal, _ = _tables(crf, spec["recal"])
        test, acc = _tables(crf, spec["test"])
    out["map_node_accuracy"] = acc
    for kind in ("map", "marginal"):
        k_r, k_t = recal.kind_names.index(kind), test.kind_names.index(kind)
        r, t = recal.select(recal.kind == k_r), test.select(test.kind == k_t)
        y_t = t.outcome.astype(float)
        row = {
            "recal_events": len(r),
            "test_events": len(t),
            "base_rate": float(y_t.mean()),
            "raw": _score(y_t, np.clip(t.raw, 0.0, 1.0)),
        }
        for set_name, feats in FEATURE_SETS[kind].items():
            with warnings.catch_warnings():
                # snakes: every recalibration event may hold (a constant forecast of 1)
                warnings.simplefilter("ignore", SingleClassWarning)
                f = KNNRegionForecaster(random_state=0).fit(r.columns(feats), r.outcome)
            proba = f.predict_proba(t.columns(feats))
            # P(event holds); a single-outcome fit has one column, of that outcome
            p = proba[:, -1] if f.classes_[-1] else 1.0 - proba[:, 0]
            row[set_name] = _score(y_t, p)
            row[set_name]["k"] = int(f.n_neighbors_)
        out[kind] = row
    out["seconds"] = time.perf_counter() - t0
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="100 synthetic scenes per split")
    args = parser.parse_args()
    t0 = time.perf_counter()
    results = {name: study_one(name, spec) for name, spec in _datasets(args.quick)}
    results["total_seconds"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(results))
        return
    sets = list(FEATURE_SETS["marginal"])
    head = f"{'dataset':<11} {'events':<9} {'n test':>7} {'holds':>6} {'raw l2/cal':>12}"
    head += "".join(f" {s + ' l2/cal':>18}" for s in sets)
    print("l2 loss and calibration error x100 on the test events (lower is better)\n")
    print(head)
    for name, res in results.items():
        if name == "total_seconds":
            continue
        for kind in ("map", "marginal"):
            row = res[kind]
            line = f"{name:<11} {kind:<9} {row['test_events']:>7} {row['base_rate']:>6.3f}"
            line += f" {row['raw']['l2']:>6.2f}/{row['raw']['cal']:<5.2f}"
            line += "".join(f" {row[s]['l2']:>11.2f}/{row[s]['cal']:<6.2f}" for s in sets)
            print(line)
        print(f"{'':<11} MAP node accuracy {res['map_node_accuracy']:.3f}; "
              f"CRF fit {res['fit_seconds']:.1f} s, dataset {res['seconds']:.1f} s")
    print(f"\ntotal {results['total_seconds']:.1f} s")


if __name__ == "__main__":
    main()
