"""What map_objects' post-processing changes on BBBC039: objects, precision and recall.

An untuned pixel classifier (a logistic regression on ``pixel_features``, trained on 20
training images, no CRF) gives a foreground probability map for each of the 50 test
images; ``map_objects`` turns it into objects with and without the post-processing
options. Precision: the share of objects matching a gold nucleus at IoU >= 0.5; recall:
the share of gold nuclei (connected components of the gold mask) matched.

Run: ``python benchmarks/map_postprocessing.py [--json] [--out PATH]``
(``benchmarks/results/map_postprocessing.json``; about a minute).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SETTINGS = {
    "none": {},
    "min_size=15": {"min_size": 15},
    "min_size=15, fill_holes": {"min_size": 15, "fill_holes": True},
    "min_size=15, fill_holes, split_touching": {"min_size": 15, "fill_holes": True,
                                                "split_touching": True},
}


def main(argv=None):
    from scipy import ndimage as ndi
    from sklearn.linear_model import LogisticRegression

    from structcal.adapters import map_objects
    from structcal.datasets import load_bbbc039
    from structcal.segmentation import pixel_features

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    d = load_bbbc039()
    train, test = d.split("train"), d.split("test")
    X = pixel_features(train.images[:20] / 255.0)
    y = train.masks[:20].reshape(-1)
    pick = np.random.default_rng(0).choice(X.shape[0], 60000, replace=False)
    clf = LogisticRegression(max_iter=300).fit(X[pick], y[pick])
    maps = [clf.predict_proba(pixel_features(im / 255.0))[:, 1].reshape(im.shape)
            for im in test.images]
    gold = [ndi.label(m)[0] for m in test.masks]
    result = {"command": "python benchmarks/map_postprocessing.py", "images": len(maps),
              "settings": {}}
    for name, kw in SETTINGS.items():
        objs = map_objects(maps, gold=gold, **kw)
        n = objs.table.n_events
        prec = float(objs.table.outcome.mean()) if n else float("nan")
        rec = 1.0 - float(objs.n_missed.sum()) / float(objs.n_gold.sum())
        result["settings"][name] = {"objects": int(n), "precision": prec, "recall": rec}
    result["seconds"] = time.perf_counter() - t0
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print(f"{'post-processing':<45}{'objects':>9}{'precision':>11}{'recall':>9}")
        for name, r in result["settings"].items():
            print(f"{name:<45}{r['objects']:>9}{r['precision']:>11.3f}{r['recall']:>9.3f}")


if __name__ == "__main__":
    main()
