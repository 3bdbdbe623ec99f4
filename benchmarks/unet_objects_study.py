"""A small U-Net on BBBC039 nuclei: per-object confidence from its probability map.

Model: a two-level U-Net (16 and 32 channels, batch norm, ReLU) trained with binary
cross-entropy on the 100 training images of the shipped BBBC039 split (130 x 174, random
flips) by Adam on the CPU. Its foreground probability maps of the validation and test
images go through ``structcal.adapters.map_objects``: objects are the connected
components of ``p >= 0.5``; gold objects the components of the expert masks; an object is
right if it matches a gold object at IoU >= 0.5.

Reported on the test split (50 images), recalibrated on the validation split (50 images,
images as groups):

- *object F1* (precision, recall) at IoU 0.5;
- *per-object confidence*: the network's own score (mean probability inside the mask),
  and structcal's default recalibration of the object events (raw score plus the map
  features); Brier x100 with 95% intervals over images, the calibration error with its
  interval over images;
- the same with **missed gold objects charged** (``structcal.metrics.object_calibration``:
  a miss is a forecast 0 for an object that exists);
- the share of test objects accepted at a certified precision of 0.9 and 0.95
  (``structcal.guarantees``, delta 0.1, certified on half of the validation images with
  the recalibrator fit on the other half), and the precision among them.

Needs ``torch`` (benchmark-only). Run:
``python benchmarks/unet_objects_study.py [--epochs 40] [--out benchmarks/results/unet_objects_study.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from structcal import StructuredRecalibrator
from structcal.adapters import map_objects
from structcal.datasets import load_bbbc039
from structcal.guarantees import accept_events, certify_precision
from structcal.metrics import calibration_error, object_calibration


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build_unet(torch):
    nn = torch.nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = block(1, 16), block(16, 32), block(32, 64)
            self.up2, self.u2 = nn.ConvTranspose2d(64, 32, 2, stride=2), block(64, 32)
            self.up1, self.u1 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
            self.out = nn.Conv2d(16, 1, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            m = self.mid(nn.functional.max_pool2d(b, 2))
            b = self.u2(torch.cat([self.up2(m), b], 1))
            a = self.u1(torch.cat([self.up1(b), a], 1))
            return self.out(a)[:, 0]

    return UNet()


def pad4(x):
    """Reflect-pad the last two axes to multiples of 4 (two poolings)."""
    h, w = x.shape[-2:]
    ph, pw = (-h) % 4, (-w) % 4
    pads = [(0, 0)] * (x.ndim - 2) + [(0, ph), (0, pw)]
    return np.pad(x, pads, mode="reflect")


def predict_maps(model, images, torch):
    model.eval()
    h, w = images.shape[1:]
    with torch.no_grad():
        x = torch.from_numpy(pad4(images.astype(np.float32) / 255.0)[:, None])
        out = torch.cat([torch.sigmoid(model(x[i:i + 10])) for i in range(0, len(x), 10)])
    return out.numpy()[:, :h, :w].astype(np.float64)


def boot_brier(y, p, groups, rng, n_boot=1000):
    _, inv = np.unique(groups, return_inverse=True)
    G = int(inv.max()) + 1
    se = (p - y) ** 2
    w = rng.multinomial(G, np.full(G, 1 / G), size=n_boot)[:, inv]
    boot = (w @ se) / w.sum(axis=1)
    return 100 * float(se.mean()), [100 * float(np.quantile(boot, 0.025)),
                                    100 * float(np.quantile(boot, 0.975))]


def confidence_report(y, p, groups, seed=1):
    b, b_ci = boot_brier(y, p, groups, np.random.default_rng(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ce = calibration_error(y, p)
        ci = ce.confidence_interval(groups=groups, random_state=0)
    return {"brier_x100": b, "brier_interval_x100": b_ci,
            "calibration_error": float(ce.estimate),
            "calibration_error_interval": [float(ci.low), float(ci.high)]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    data = load_bbbc039()
    split = {name: np.flatnonzero(data.split_codes == k)
             for k, name in enumerate(("train", "val", "test"))}
    xtr = torch.from_numpy(pad4(data.images[split["train"]].astype(np.float32) / 255.0))
    ytr = torch.from_numpy(pad4(data.masks[split["train"]].astype(np.float32)))
    model = build_unet(torch)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for idx in np.array_split(rng.permutation(len(xtr)), len(xtr) // 10):
            x, y = xtr[idx], ytr[idx]
            if rng.uniform() < 0.5:
                x, y = x.flip(-1), y.flip(-1)
            if rng.uniform() < 0.5:
                x, y = x.flip(-2), y.flip(-2)
            opt.zero_grad()
            loss = loss_fn(model(x[:, None]), y)
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        log(f"epoch {epoch + 1}: mean loss {total / len(xtr):.4f}")
    train_seconds = time.perf_counter() - t0

    objs, gold = {}, {}
    for s in ("val", "test"):
        maps = predict_maps(model, data.images[split[s]], torch)
        gold[s] = [ndi.label(m)[0] for m in data.masks[split[s]]]
        objs[s] = map_objects(list(maps), gold=gold[s])
    names = {s: np.asarray(data.names)[split[s]] for s in split}
    tv, tt = objs["val"].table, objs["test"].table

    n_gold = int(objs["test"].n_gold.sum())
    n_pred, n_hit = len(tt), int(tt.outcome.sum())
    f1 = {"precision": n_hit / max(n_pred, 1), "recall": (n_gold - int(objs["test"].n_missed.sum()))
          / max(n_gold, 1), "n_predicted": n_pred, "n_gold": n_gold}
    f1["f1"] = 2 * f1["precision"] * f1["recall"] / max(f1["precision"] + f1["recall"], 1e-12)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(random_state=0).fit_events(tv, groups=names["val"])
        out = rec.predict_events(tt, groups=names["test"])
    y = tt.outcome.astype(float)
    img = names["test"][tt.item]
    forecasts = {"network score (mean probability in mask)": tt.raw,
                 "recalibrated (structcal default)": out.forecast}
    conf = {k: confidence_report(y, np.clip(v, 0, 1), img) for k, v in forecasts.items()}
    with_misses = {}
    for k, v in forecasts.items():
        r = object_calibration(np.clip(v, 0, 1), tt.outcome, objs["test"].n_missed,
                               groups=tt.item)
        b, b_ci = boot_brier(r.outcomes.astype(float), r.forecasts, r.groups,
                             np.random.default_rng(1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = r.calibration.confidence_interval(groups=r.groups, random_state=0)
        with_misses[k] = {"brier_x100": b, "brier_interval_x100": b_ci,
                          "calibration_error": float(r.calibration.estimate),
                          "calibration_error_interval": [float(ci.low), float(ci.high)],
                          "expected_matched": r.expected_matched, "matched": r.n_matched,
                          "missed": r.n_missed}

    # guarantees: recalibrate on half of the validation images, certify on the other half
    val_items = np.arange(len(split["val"]))
    half = np.random.default_rng(2).permutation(val_items)[: len(val_items) // 2]
    tv_a, tv_b = tv.split_items(half)
    guarantee = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec2 = StructuredRecalibrator(random_state=0).fit_events(tv_a, groups=names["val"])
        cal = rec2.predict_events(tv_b, groups=names["val"])
        new = rec2.predict_events(tt, groups=names["test"])
        for target in (0.9, 0.95):
            g = certify_precision(cal, target, 0.1, groups=names["val"])
            acc = accept_events(g, new)
            naive = tt.raw >= target
            guarantee.append({
                "target": target, "delta": 0.1, "threshold": g.thresholds_.get("object"),
                "accepted_share": float(acc.mean()),
                "precision_accepted": float(tt.outcome[acc].mean()) if acc.any() else None,
                "naive_rule_accepted_share": float(naive.mean()),
                "naive_rule_precision": float(tt.outcome[naive].mean()) if naive.any() else None,
            })
    result = {"command": f"python benchmarks/unet_objects_study.py --epochs {args.epochs}",
              "train_seconds": train_seconds, "seconds": time.perf_counter() - t0,
              "objects": f1, "confidence": conf, "confidence_with_misses": with_misses,
              "guarantee": guarantee,
              "recalibration": {k: v["method"] for k, v in rec.selection_.items()}}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
