"""A small two-label Potts grid on a first run: mean field, BP and MAP in a fresh process
with an empty kernel cache, in the default tier (small work runs the general drivers'
Python source where nothing is compiled) and with ``STRUCTCAL_TIER=kernels`` (every
routine compiles its kernels, the pixel-grid ones included).

Mean field's sweeps are counted too: a weak coupling (``--potts 0.5``) converges in about
15 sweeps, Potts 1.0 on these unaries in about 150 (the sweeps that fit the interpreter's
time limit are run as Python first, then a compiled driver continues).

Run: ``python benchmarks/bench_grid_first_run.py [--shape 10 12] [--potts 1.0] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, time
import numpy as np
from structcal import GraphPotentials
from structcal.inference import graph as G
U = np.random.default_rng(0).normal(size=({h}, {w}, 2))
p = GraphPotentials.from_grid([U], potts={potts})
out = {{"mean_field sweeps": float(G.mean_field(p, warn=False).n_iter[0])}} if {count} else {{}}
for name, run in (("mean_field", lambda: G.mean_field(p, warn=False)),
                  ("belief_propagation", lambda: G.belief_propagation(p, warn=False)),
                  ("map_inference", lambda: G.map_inference(p, warn=False))):
    t = time.perf_counter()
    run()
    out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=(10, 12))
    parser.add_argument("--potts", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    code = CHILD.format(h=args.shape[0], w=args.shape[1], potts=args.potts, count=False)
    rows = {"default": [], "STRUCTCAL_TIER=kernels": []}
    for _ in range(args.repeats):
        for tier in rows:
            env = dict(os.environ, NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="grid_first_"))
            env.pop("STRUCTCAL_TIER", None)
            if tier != "default":
                env["STRUCTCAL_TIER"] = "kernels"
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True)
            rows[tier].append(json.loads(out.stdout.strip().splitlines()[-1]))
    with tempfile.TemporaryDirectory() as cache:  # the sweeps mean field makes (untimed)
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, STRUCTCAL_TIER="kernels")
        out = subprocess.run([sys.executable, "-c", CHILD.format(
            h=args.shape[0], w=args.shape[1], potts=args.potts, count=True)], env=env,
            capture_output=True, text=True, check=True)
        sweeps = int(json.loads(out.stdout.strip().splitlines()[-1])["mean_field sweeps"])
    print(f"{args.shape[0]} x {args.shape[1]} grid, two labels, Potts {args.potts} (mean "
          f"field converges in {sweeps} sweeps); a fresh process "
          f"with an empty cache; median (min-max) seconds of {args.repeats} runs")
    print(f"{'routine':22s}" + "".join(f"{t:>28s}" for t in rows))
    for name in rows["default"][0]:
        cells = []
        for tier in rows:
            v = [r[name] for r in rows[tier]]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
        print(f"{name:22s}" + "".join(f"{c:>28s}" for c in cells))


if __name__ == "__main__":
    main()
