"""Where NumPy beats the kernels: the work threshold of :mod:`structcal._tier`.

For chain inference (``infer``: Viterbi + forward-backward) and k-best lists on random
batches of 20-token chains, prints the time of the NumPy tier and of the Numba kernels
(warm: already loaded in this process) against the work (``n_tokens * K * K``), and, in
fresh processes, what a first kernel call costs before any result (importing Numba,
setting up its compiler and loading the kernel from a warm on-disk cache). A small job
runs in NumPy when its work is at most ``SMALL_WORK``; the table shows NumPy's time there
next to that fixed cost.

Run: ``python benchmarks/bench_numpy_tier.py [--repeats 5] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from structcal import ChainPotentials  # noqa: E402
from structcal._tier import (  # noqa: E402
    LARGE_WORK, SECONDS_PER_STEP, SMALL_WORK, forced_tier, kbest_seconds_per_step,
    shared_seconds_per_step,
)
from structcal.inference import infer, kbest  # noqa: E402

FIRST_CALL = """
import time, numpy as np
from structcal import ChainPotentials
from structcal._tier import forced_tier
from structcal.inference import infer
rng = np.random.default_rng(0)
p = ChainPotentials.from_scores(rng.normal(size=(200, 13)), [20] * 10, rng.normal(size=(13, 13)))
t0 = time.perf_counter()
with forced_tier("kernels"):
    infer(p)
print(time.perf_counter() - t0)
"""


def _batch(n_tokens, K, rng):
    lengths = [20] * max(1, n_tokens // 20)
    return ChainPotentials.from_scores(rng.normal(size=(sum(lengths), K)), lengths,
                                       rng.normal(size=(K, K)))


def _tier(path, n_tokens, K):
    """The tier the library picks for this call (before the rent-or-buy bill): work in
    steps scaled by the path's NumPy rate, as :func:`structcal._tier.numpy_tier` counts it."""
    if path == "infer":  # the batches share one pairwise matrix
        work, rate = n_tokens * K * K, shared_seconds_per_step(K)
    else:
        work, rate = n_tokens * K * K * 2, kbest_seconds_per_step(K, 2)
    work *= rate / SECONDS_PER_STEP
    return "numpy" if work <= SMALL_WORK else "rent or buy" if work <= LARGE_WORK else "kernels"


def _time(f, repeats):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out), max(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for K in (5, 13, 26):
        for n_tokens in (200, 2_000, 20_000):
            p = _batch(n_tokens, K, rng)
            work = p.n_tokens * K * K
            for name, f in (("infer", lambda: infer(p)), ("kbest k=2", lambda: kbest(p, 2))):
                with forced_tier("kernels"):
                    f()  # load (or compile) once: the kernels' warm time
                    kern = _time(f, args.repeats)
                with forced_tier("numpy"):
                    nump = _time(f, args.repeats)
                rows.append({"path": name, "K": K, "n_tokens": p.n_tokens, "work": work,
                             "numpy_s": nump, "kernels_warm_s": kern,
                             "tier": _tier(name, p.n_tokens, K)})
    env = dict(os.environ)
    first = [float(subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True,
                                  text=True, check=True, env=env).stdout) for _ in range(args.repeats)]
    first = (statistics.median(first), min(first), max(first))
    if args.json:
        print(json.dumps({"small_work": SMALL_WORK, "rows": rows, "first_kernel_call_s": first,
                          "cpus": os.cpu_count(), "load_average": os.getloadavg()}))
        return
    print(f"median (min-max) seconds of {args.repeats} runs; {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}; SMALL_WORK = {SMALL_WORK:,}, LARGE_WORK = "
          f"{LARGE_WORK:,} steps of {SECONDS_PER_STEP:g} s; work = tokens x K x K; the tier "
          "counts each path's work at its own NumPy rate (k-best: x k)")
    print(f"{'path':10} {'K':>3} {'tokens':>7} {'work':>12} {'numpy':>22} {'kernels (warm)':>22}")
    for r in rows:
        n, k = r["numpy_s"], r["kernels_warm_s"]
        tier = r["tier"]
        print(f"{r['path']:10} {r['K']:3d} {r['n_tokens']:7d} {r['work']:12,d} "
              f"{n[0]:8.4f} ({n[1]:.4f}-{n[2]:.4f}) {k[0]:8.4f} ({k[1]:.4f}-{k[2]:.4f})  -> {tier}")
    print(f"first kernel call in a fresh process (import Numba, load infer from a warm cache): "
          f"{first[0]:.3f} s ({first[1]:.3f}-{first[2]:.3f})")


if __name__ == "__main__":
    main()
