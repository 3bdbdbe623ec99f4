"""What compiling a batch driver's parallel copy costs on a first run (empty Numba cache).

Each run is a fresh process with its own empty cache; it times (CPU) the first ``infer``
on random chains, 26 labels: ``serial`` on 200 tokens (below ``PARALLEL_MIN_WORK``: the
serial copy compiles), ``parallel`` on 20,000 tokens with ``PARALLEL_COMPILE_SECONDS = 0``
(the parallel copy compiles at once). Both include the callees the two copies share.

    python benchmarks/bench_parallel_compile.py [--repeats 2]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time, numpy as np
import structcal._numba as nb
if sys.argv[1] == "parallel":
    nb.PARALLEL_COMPILE_SECONDS = 0.0
from structcal import ChainPotentials
from structcal.inference import infer
n = 20000 if sys.argv[1] == "parallel" else 200
rng = np.random.default_rng(0)
p = ChainPotentials(rng.normal(size=(n, 26)), np.arange(0, n + 1, 10), rng.normal(size=(26, 26)))
t = time.process_time()
infer(p)
print(time.process_time() - t)
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    out = {"serial": [], "parallel": []}
    for _ in range(args.repeats):
        for mode in out:  # alternating
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, NUMBA_CACHE_DIR=cache)
                run = subprocess.run([sys.executable, "-c", CHILD, mode], env=env,
                                     capture_output=True, text=True, check=True)
                out[mode].append(float(run.stdout.split()[-1]))
    print(f"first infer with an empty cache, CPU seconds ({args.repeats} fresh processes each)")
    for mode, ts in out.items():
        print(f"  {mode:8s} copy: median {statistics.median(ts):.2f} s "
              f"(range {min(ts):.2f}-{max(ts):.2f})")
    print(f"  parallel / serial: {statistics.median(out['parallel']) / statistics.median(out['serial']):.2f}")


if __name__ == "__main__":
    main()
