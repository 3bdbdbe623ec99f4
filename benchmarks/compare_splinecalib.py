"""SplineCalib against ml-insights' implementation (optional comparison).

ml-insights is not a structcal dependency. Install it in a separate environment, e.g.

    python -m venv --system-site-packages /tmp/mli && /tmp/mli/bin/pip install ml-insights
    /tmp/mli/bin/python benchmarks/compare_splinecalib.py [--json]

Fits every calibrator on 10^5 forecasts of a smooth, non-sigmoid miscalibration and on a
Naive-Bayes-like over-confident one, and reports fit time (median of 3) and held-out log
loss on 10^5 fresh forecasts (the true map's log loss is the floor).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structcal.calibrators import IsotonicCalibration, PlattScaling, SplineCalib  # noqa: E402


def smooth(rng, n):
    s = rng.beta(2, 2, n)
    true = np.clip(0.05 + 0.9 * (0.5 + 0.5 * np.sin(3 * np.pi * (s - 0.5)) * s), 0.01, 0.99)
    return s, (rng.random(n) < true).astype(int), true


def overconfident(rng, n):
    z = rng.normal(size=n) * 2
    true = expit(z)
    return expit(6 * z), (rng.random(n) < true).astype(int), true


def log_loss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args(argv)
    try:
        import ml_insights as mli
    except ImportError:
        mli = None
    rng = np.random.default_rng(0)
    results = {}
    for pname, gen in (("smooth map", smooth), ("over-confident", overconfident)):
        s, y, _ = gen(rng, args.n)
        st, yt, true = gen(rng, args.n)
        cands = {
            "structcal SplineCalib": lambda: SplineCalib(random_state=0).fit(s, y),
            "structcal SplineCalib(compact_logit)": lambda: SplineCalib(
                random_state=0, compact_logit=True).fit(s, y),
            "structcal IsotonicCalibration": lambda: IsotonicCalibration().fit(s, y),
            "structcal PlattScaling": lambda: PlattScaling().fit(s, y),
        }
        if mli is not None:
            cands["ml-insights SplineCalib (defaults)"] = lambda: _mli_fit(mli, s, y, {})
            cands["ml-insights SplineCalib (plain: no prior, no log-odds)"] = lambda: _mli_fit(
                mli, s, y, {"unity_prior": False, "logodds_scale": False})
        rows = {"true map": {"log_loss": log_loss(yt, true), "fit_seconds": None}}
        for name, fit in cands.items():
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                model = fit()
                times.append(time.perf_counter() - t0)
            if hasattr(model, "calibrate"):  # ml-insights
                p = np.asarray(model.calibrate(st)).reshape(-1)
            else:
                p = model.predict_proba(st)[:, 1]
            rows[name] = {"log_loss": log_loss(yt, p), "fit_seconds": float(np.median(times))}
        results[pname] = rows
    if args.json:
        print(json.dumps({"n": args.n, "ml_insights": mli is not None, "results": results},
                         indent=2))
        return
    if mli is None:
        print("ml-insights is not installed: structcal calibrators only")
    for pname, rows in results.items():
        print(f"\n[{pname}, {args.n} calibration forecasts, {args.n} held out]")
        print(f"{'calibrator':58s} {'log loss':>10s} {'fit':>9s}")
        for name, r in rows.items():
            fit = "" if r["fit_seconds"] is None else f"{r['fit_seconds']:8.2f}s"
            print(f"{name:58s} {r['log_loss']:10.5f} {fit:>9s}")


def _mli_fit(mli, s, y, kw):
    sc = mli.SplineCalib(**kw)
    sc.fit(s, y)
    return sc


if __name__ == "__main__":
    main()
