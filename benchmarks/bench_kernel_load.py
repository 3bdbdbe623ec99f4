"""What running small work in a cached kernel costs a fresh process, step by step.

The small-work rule of :mod:`structcal._tier` rents NumPy for as long as loading a kernel
would still cost: ``LOAD_SECONDS`` before Numba is imported, ``FIRST_LOAD_SECONDS`` before a
kernel is loaded, ``KERNEL_LOAD_SECONDS`` after. This script measures those three costs in
fresh processes with a warm kernel cache: importing Numba (with structcal's kernel module),
the first call of a cached chain kernel (Viterbi on a 7-token chain: loading it sets up
Numba's code generation), and the first call of another cached kernel (the k-best lists).

Run: ``python benchmarks/bench_kernel_load.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, time
import numpy as np
from structcal import ChainPotentials
from structcal._tier import forced_tier
from structcal.inference import chain as C
p = ChainPotentials.from_list([np.random.default_rng(0).normal(size=(7, 26))],
                              np.random.default_rng(1).normal(size=(26, 26)))
out = {}
t = time.perf_counter()
from structcal import _numba  # imports Numba
out["import Numba"] = time.perf_counter() - t
with forced_tier("kernels"):
    for name, run in (("first kernel (Viterbi)", lambda: C.viterbi(p)),
                      ("another kernel (k-best)", lambda: C.kbest(p, 2))):
        t = time.perf_counter()
        run()
        out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True)  # fill
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True,
                             text=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"fresh processes, warm kernel cache; median (min-max) seconds of {args.repeats} runs")
    for name in runs[0]:
        v = [r[name] for r in runs]
        print(f"{name:28s} {statistics.median(v):.4f} ({min(v):.4f}-{max(v):.4f})")


if __name__ == "__main__":
    main()
