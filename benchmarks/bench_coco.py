"""COCO round trip of many objects on one large image: ``to_coco`` then ``from_coco``.

2,000 rectangular objects on a 1024 x 1024 label image (compressed RLE). Both functions
work from each object's bounding box (encode) or its runs (decode), so the time grows with
the objects' pixels, not with objects x image pixels. With pycocotools installed, its
``encode`` / ``decode`` of the same masks are timed beside them.

Run: ``python benchmarks/bench_coco.py [--json] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def label_image(n=2000, size=1024):
    lab = np.zeros((size, size), np.int64)
    k = 0
    for y in range(0, size, 22):
        for x in range(0, size, 22):
            if k >= n:
                return lab
            k += 1
            lab[y:y + 15, x:x + 12] = k
    return lab


def main(argv=None):
    from structcal.adapters import from_coco, to_coco

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    lab = label_image()
    times = {"structcal to_coco": [], "structcal from_coco": []}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        anns = to_coco(lab)
        t1 = time.perf_counter()
        back, _ = from_coco(anns, lab.shape)
        t2 = time.perf_counter()
        times["structcal to_coco"].append(t1 - t0)
        times["structcal from_coco"].append(t2 - t1)
    assert np.array_equal(back, lab)
    try:
        from pycocotools import mask as cm
    except ImportError:
        cm = None
    if cm is not None:
        times["pycocotools encode (per-object masks)"], times["pycocotools decode"] = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            masks = np.asfortranarray(np.stack([lab == k for k in range(1, lab.max() + 1)],
                                               axis=-1).astype(np.uint8))
            rles = cm.encode(masks)
            t1 = time.perf_counter()
            cm.decode(rles)
            t2 = time.perf_counter()
            times["pycocotools encode (per-object masks)"].append(t1 - t0)
            times["pycocotools decode"].append(t2 - t1)
    result = {"command": "python benchmarks/bench_coco.py", "objects": int(lab.max()),
              "image": list(lab.shape),
              "seconds": {k: {"median": float(np.median(v)), "min": float(np.min(v)),
                              "max": float(np.max(v))} for k, v in times.items()}}
    result["round_trip_median_seconds"] = (result["seconds"]["structcal to_coco"]["median"]
                                           + result["seconds"]["structcal from_coco"]["median"])
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for k, v in result["seconds"].items():
            print(f"{k:<42}{v['median']:>8.3f} s  ({v['min']:.3f}-{v['max']:.3f})")
        print(f"round trip (structcal): {result['round_trip_median_seconds']:.3f} s")


if __name__ == "__main__":
    main()
