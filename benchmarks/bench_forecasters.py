"""Region forecasters at corpus scale: fit time, peak memory, scaling, accuracy.

Every measurement runs in a fresh subprocess on one core (NUMBA_NUM_THREADS=1,
OMP_NUM_THREADS=1) after a small warm-up fit (JIT compilation excluded), and reports the
fit's wall-clock and CPU time and its peak memory growth (ru_maxrss after the fit minus
the resident size before it). The old code (commit 105c9cb, brute-force neighbours and a
tree refit per fold and leaf size) is extracted with ``git archive`` and run in
alternation with the new code at the sizes where it fits in memory; earlier measured
figures are quoted for the larger ones. CPU time is the figure to compare on a shared,
loaded machine (wall-clock there is inflated by waiting for a core).

Data: six features shaped like per-token marginal events (marginal probability, margins,
pseudomargin, fraction and neighbour-fraction of the target label, concordance) with a
known outcome probability, so held-out Brier scores can be compared.

    python benchmarks/bench_forecasters.py                 # the full table (slow)
    python benchmarks/bench_forecasters.py --quick         # 10^4 and 10^5 only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "105c9cb"
ISSUE_TABLE = {10_000: (0.65, 0.2), 50_000: (6.2, 1.1), 100_000: (20.0, 2.2), 300_000: (174.0, 6.5)}


def event_features(n, seed=0):
    """Six node-event features (raw, mg2, mp7, mp4, mp5, mg3) and outcomes."""
    rng = np.random.default_rng(seed)
    raw = rng.beta(4.0, 1.0, n)
    mg2 = raw - (1 - raw) * rng.random(n)
    mp7 = np.clip(mg2 + 0.1 * rng.standard_normal(n), -1, 1)
    length = rng.integers(2, 13, n)
    mp4 = rng.binomial(length, 0.2) / length
    mp5 = rng.integers(0, 3, n) / 2.0
    mg3 = (rng.random(n) < 0.9).astype(float)
    X = np.column_stack([raw, mg2, mp7, mp4, mp5, mg3])
    p = np.clip(raw**1.5 * (0.8 + 0.2 * mg3), 0, 1)
    return X, rng.random(n) < p, p


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one(kind, n, options):
    """Run in the subprocess: fit once, print a JSON line."""
    from structcal.forecasters import KNNRegionForecaster, TreeRegionForecaster

    cls = KNNRegionForecaster if kind == "knn" else TreeRegionForecaster
    Xw, yw, _ = event_features(3000, seed=1)
    cls(random_state=0).fit(Xw, yw).predict_proba(Xw[:100])  # compile
    X, y, _ = event_features(n, seed=0)
    before = _rss()
    w, c = time.perf_counter(), time.process_time()
    f = cls(random_state=0, **options).fit(X, y)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    out = {"n": n, "wall": wall, "cpu": cpu, "peak_growth": peak,
           "k": int(getattr(f, "n_neighbors_", getattr(f, "min_samples_leaf_", 0)))}
    if "brier_n" in options or os.environ.get("BENCH_BRIER"):
        Xt, yt, pt = event_features(int(os.environ.get("BENCH_BRIER", 100_000)), seed=2)
        w, c = time.perf_counter(), time.process_time()
        q = f.predict_proba(Xt)[:, 1]
        out["predict_cpu"] = time.process_time() - c
        out["brier"] = float(np.mean((q - yt) ** 2))
        out["mse_truth"] = float(np.mean((q - pt) ** 2))
    print(json.dumps(out))


def run(kind, n, version, old_dir, options=None, brier=0):
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=str(old_dir if version == "old" else ROOT))
    if brier:
        env["BENCH_BRIER"] = str(brier)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", kind, str(n), json.dumps(options or {})]
    r = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _fmt(rows):
    cpu = [r["cpu"] for r in rows]
    wall = [r["wall"] for r in rows]
    mem = max(r["peak_growth"] for r in rows) / 2**30
    rng_ = f" ({min(cpu):.2f}-{max(cpu):.2f})" if len(rows) > 1 else ""
    return f"{np.median(cpu):8.2f} s{rng_:16s} {np.median(wall):8.1f} s {mem:7.2f} GiB  k/m={rows[0]['k']}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=2, help="alternated old/new runs at 10^4")
    args = ap.parse_args(argv)
    if args.one:
        return one(args.one[0], int(args.one[1]), json.loads(args.one[2]))

    print(f"load average {os.getloadavg()} on {os.cpu_count()} CPUs (shared machine: "
          "wall-clock inflated, compare CPU times)")
    with tempfile.TemporaryDirectory() as old_dir:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_COMMIT, "structcal"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", old_dir], input=archive, check=True)

        print("\nKNNRegionForecaster, default 10-fold CV over k = 5..500, six features, one core")
        print("measured figures of the old code (wall-clock): "
              + "; ".join(f"{n:.0e}: {t} s, {m} GiB" for n, (t, m) in ISSUE_TABLE.items()))
        print(f"{'events':>9s} {'code':5s} {'fit CPU median (range)':>28s} {'wall':>10s} {'peak growth':>11s}")
        plan = [(10_000, args.repeats), (100_000, 1)]
        for n, reps in plan:
            rows = {"old": [], "new": []}
            for _ in range(reps):  # alternate old and new
                for version in ("old", "new"):
                    rows[version].append(run("knn", n, version, old_dir))
            for version in ("old", "new"):
                print(f"{n:9d} {version:5s} {_fmt(rows[version])}")
        sizes = [] if args.quick else [300_000, 1_000_000]
        new_rows = {}
        for n in [100_000] + sizes:
            new_rows[n] = run("knn", n, "new", old_dir)
            if n != 100_000:
                print(f"{n:9d} {'new':5s} {_fmt([new_rows[n]])}")
        if 1_000_000 in new_rows:
            a, b = new_rows[100_000]["cpu"], new_rows[1_000_000]["cpu"]
            print(f"fitted scaling exponent 10^5 -> 10^6 (CPU time): {np.log10(b / a):.2f}")

        print("\nHeld-out Brier on 10^5 fresh events: exact CV (cv_max_samples=None) vs k chosen"
              " on a 20,000-event subsample and rescaled (the default)")
        for n in [100_000] + ([300_000] if not args.quick else []):
            for label, opts in (("exact", {"cv_max_samples": None}), ("subsample", {})):
                r = run("knn", n, "new", old_dir, opts, brier=100_000)
                print(f"{n:9d} {label:9s} k={r['k']:5d} fit CPU {r['cpu']:7.2f} s  Brier "
                      f"{r['brier']:.5f}  MSE to the true probability {r['mse_truth']:.6f}")

        print("\nTreeRegionForecaster, default 10-fold CV over leaf sizes 5..500")
        for n in [10_000]:
            rows = {"old": [], "new": []}
            for _ in range(args.repeats):
                for version in ("old", "new"):
                    rows[version].append(run("tree", n, version, old_dir))
            for version in ("old", "new"):
                print(f"{n:9d} {version:5s} {_fmt(rows[version])}")
        r = run("tree", 100_000, "new", old_dir)
        print(f"{100_000:9d} {'new':5s} {_fmt([r])}")


if __name__ == "__main__":
    main()
