"""Accuracy of graph CRFs on the shipped real benchmarks and on synthetic scenes at scale.

1. Scene (Boutell et al. 2004; 1,211 train / 1,196 test images, 6 labels): six
   independent logistic regressions vs a 6-node fully connected binary GraphCRF (one
   2 x 2 matrix per label pair) trained by pseudo-likelihood and by approximate (Bethe)
   likelihood with loopy BP. Hamming accuracy (per label) and exact-match accuracy (all
   six right). With 6 binary nodes exact enumeration (64 labelings) gives the true
   marginals of the CRF, so the error of mean-field and loopy-BP marginals is reported
   against it.
2. Snakes (Nowozin et al. 2011; 200 train / 100 test grids, 11 labels): per-pixel accuracy
   of a unary-only logistic regression on 3 x 3 colour windows vs the grid GraphCRF with
   colour-conditioned edge types, on all pixels and on snake pixels only.
3. Synthetic superpixel scenes (``make_superpixel_scenes``: 100 superpixels, ~290 edges,
   21 labels): logistic regression vs a contrast-sensitive Potts GraphCRF (pseudo-
   likelihood), and the time per graph of MAP (TRW-S + ICM), mean field and loopy BP on
   the test scenes.

Every model is fitted on the training split and scored on the test split; nothing is
tuned on the test data (regularisation strengths are fixed below). Prints a table, or
with ``--json`` one JSON object.

Run: ``python benchmarks/graph_benchmarks.py [--json] [--quick]`` (``--quick`` skips the
slow approximate-likelihood training).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

from structcal.crf import GraphCRF
from structcal.datasets import load_scene, load_snakes, make_superpixel_scenes
from structcal.exceptions import ConvergenceWarning
from structcal.inference.exact import exact_graph
from structcal.inference.graph import belief_propagation, map_inference, mean_field


def scene_study(quick: bool) -> dict:
    train, test = load_scene("train"), load_scene("test")
    out = {}
    pred = np.column_stack(
        [
            LogisticRegression(C=1.0, max_iter=5000).fit(train.X, train.Y[:, j]).predict(test.X)
            for j in range(6)
        ]
    )
    out["scene_independent_lr_hamming"] = float(np.mean(pred == test.Y))
    out["scene_independent_lr_exact_match"] = float(np.mean((pred == test.Y).all(axis=1)))
    gtr, gte = train.graphs(), test.graphs()
    methods = ["pseudo_likelihood"] + ([] if quick else ["belief_propagation"])
    for method in methods:
        t = time.perf_counter()
        crf = GraphCRF(method=method, alpha=1e-2, max_iter=1000).fit(gtr)
        fit_s = time.perf_counter() - t
        pred = crf.predict(gte).reshape(-1, 6)
        key = "pl" if method == "pseudo_likelihood" else "bp"
        out[f"scene_crf_{key}_hamming"] = float(np.mean(pred == test.Y))
        out[f"scene_crf_{key}_exact_match"] = float(np.mean((pred == test.Y).all(axis=1)))
        out[f"scene_crf_{key}_fit_seconds"] = fit_s
        if method == "pseudo_likelihood":
            p = crf.potentials(gte)
            exact = np.concatenate([exact_graph(p, g).marginals for g in range(p.n_graphs)])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                bp = belief_propagation(p, tol=1e-8, max_iter=500)
                mf = mean_field(p, tol=1e-8, max_iter=500)
            for name, r in (("bp", bp), ("meanfield", mf)):
                err = np.abs(r.marginals[:, 1] - exact[:, 1])
                out[f"scene_{name}_marginal_error_mean"] = float(err.mean())
                out[f"scene_{name}_marginal_error_max"] = float(err.max())
                out[f"scene_{name}_converged_fraction"] = float(r.converged.mean())
            # does the more accurate marginal also give better per-label decisions?
            out["scene_exact_marginal_hamming"] = float(
                np.mean((exact[:, 1] > 0.5).reshape(-1, 6) == test.Y)
            )
    return out


def snakes_study(quick: bool) -> dict:
    snakes = load_snakes()
    tr, te = snakes.split("train").graphs(), snakes.split("test").graphs()
    snake = te.labels > 0
    out = {}
    lr = LogisticRegression(C=10.0, max_iter=5000).fit(tr.node_features, tr.labels)
    pred = lr.predict(te.node_features)
    out["snakes_unary_accuracy"] = float(np.mean(pred == te.labels))
    out["snakes_unary_snake_pixel_accuracy"] = float(np.mean(pred[snake] == te.labels[snake]))
    methods = ["pseudo_likelihood"] + ([] if quick else ["belief_propagation"])
    for method in methods:
        key = "pl" if method == "pseudo_likelihood" else "bp"
        t = time.perf_counter()
        crf = GraphCRF(method=method, alpha=1e-4, max_iter=300).fit(tr)
        out[f"snakes_crf_{key}_fit_seconds"] = time.perf_counter() - t
        pred = crf.predict(te)
        out[f"snakes_crf_{key}_accuracy"] = float(np.mean(pred == te.labels))
        out[f"snakes_crf_{key}_snake_pixel_accuracy"] = float(
            np.mean(pred[snake] == te.labels[snake])
        )
    return out


def superpixel_study(n_train: int, n_test: int) -> dict:
    data = make_superpixel_scenes(n_train + n_test, random_state=0)
    tr = data.subset(np.arange(n_train))
    te = data.subset(np.arange(n_train, n_train + n_test))
    out = {
        "superpixel_train_scenes": n_train,
        "superpixel_test_scenes": n_test,
        "superpixel_mean_edges": float(np.diff(te.edge_offsets).mean()),
    }
    lr = LogisticRegression(max_iter=2000).fit(tr.node_features, tr.labels)
    out["superpixel_lr_accuracy"] = float(lr.score(te.node_features, te.labels))
    t = time.perf_counter()
    crf = GraphCRF(pairwise="potts", alpha=1e-3, max_iter=500).fit(tr)
    out["superpixel_crf_fit_seconds"] = time.perf_counter() - t
    out["superpixel_crf_potts_weights"] = crf.pairwise_coef_.tolist()
    p = crf.potentials(te)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        map_inference(p.subset([0]))
        mean_field(p.subset([0]))
        belief_propagation(p.subset([0]))  # compile outside the timings
        for name, fn in (
            ("map", lambda: map_inference(p)),
            ("meanfield", lambda: mean_field(p)),
            ("bp", lambda: belief_propagation(p)),
        ):
            t = time.perf_counter()
            r = fn()
            out[f"superpixel_{name}_ms_per_graph"] = 1e3 * (time.perf_counter() - t) / p.n_graphs
            if name == "map":
                out["superpixel_crf_map_accuracy"] = float(np.mean(r.map_labels == te.labels))
            else:
                out[f"superpixel_crf_{name}_marginal_argmax_accuracy"] = float(
                    np.mean(r.marginals.argmax(axis=1) == te.labels)
                )
                out[f"superpixel_{name}_converged_fraction"] = float(r.converged.mean())
                out[f"superpixel_{name}_mean_iterations"] = float(r.n_iter.mean())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="skip approximate-likelihood training")
    parser.add_argument("--train-scenes", type=int, default=200)
    parser.add_argument("--test-scenes", type=int, default=200)
    args = parser.parse_args()
    t0 = time.perf_counter()
    out = {}
    out.update(scene_study(args.quick))
    out.update(snakes_study(args.quick))
    out.update(superpixel_study(args.train_scenes, args.test_scenes))
    out["total_seconds"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(out))
        return
    width = max(len(k) for k in out)
    for k, v in out.items():
        if isinstance(v, float):
            print(f"{k:<{width}}  {v:.4f}")
        else:
            print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
