"""Chain inference before/after: this source tree against an earlier git revision.

Runs the same measurement in fresh processes, alternating between the two trees
(``--rounds`` times), so that drift in the machine's speed hits both alike: on one
thread, the median of 9 calls of ``infer`` on the OCR test words x10 (shared 26x26
matrix: Viterbi alone, Viterbi + marginals) and on the test words with one matrix per
edge (the shipped matrix plus N(0, 0.1) noise): the potentials of
``bench_chain.py``, built by its functions from the current tree. Prints per-round milliseconds and the
median ratio baseline / current (above 1: the current tree is faster). The older tree is
exported with ``git archive`` and put first on ``PYTHONPATH``; each tree has its own
Numba cache, warmed by an untimed call.

Run: ``python benchmarks/bench_chain_ab.py --baseline 105c9cb [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_startup import export_revision  # this folder is first on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = ("viterbi", "viterbi_marginals", "viterbi_per_edge", "viterbi_marginals_per_edge")

CHILD = """
import json, sys, time
import numba
import numpy as np
sys.path.insert(0, {bench_dir!r})
from bench_chain import ocr_potentials, per_edge_copy
from structcal.inference import infer

numba.set_num_threads(1)
big, _, test = ocr_potentials(10)
per_edge = per_edge_copy(ocr_potentials(1)[0])
out = {{}}
for name, pot, kw in [("viterbi", big, {{"marginals": False}}), ("viterbi_marginals", big, {{}}),
                      ("viterbi_per_edge", per_edge, {{"marginals": False}}),
                      ("viterbi_marginals_per_edge", per_edge, {{}})]:
    infer(pot, **kw)
    times = []
    for _ in range(9):
        t = time.perf_counter()
        infer(pot, **kw)
        times.append(time.perf_counter() - t)
    out[name] = 1e3 * float(np.median(times))
print(json.dumps(out))
""".format(bench_dir=os.path.dirname(os.path.abspath(__file__)))


def run(pythonpath, cache_dir, code=CHILD):
    """Run ``code`` in a fresh process with ``pythonpath`` first; its last stdout line is JSON."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, OPENBLAS_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_chain_ab_")
    base = export_revision(args.baseline, os.path.join(work, "baseline"))
    trees = {"baseline": base, "current": ROOT}
    caches = {name: os.path.join(work, "cache_" + name) for name in trees}
    rows = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, path in trees.items():
            rows[name].append(run(path, caches[name]))
    ratios = {t: statistics.median(b[t] / c[t] for b, c in zip(rows["baseline"], rows["current"]))
              for t in TASKS}
    if args.json:
        print(json.dumps({"baseline": args.baseline, "rounds": rows, "ratio": ratios}))
        return
    print(f"infer on OCR words, 1 thread, median of 9 calls, ms; baseline {args.baseline} vs this tree, "
          f"{args.rounds} alternating rounds (load average {os.getloadavg()[0]:.1f} at the end)")
    print(f"{'task':28s} {'baseline':>24s} {'current':>24s}  speed ratio (median)")
    for t in TASKS:
        b = " ".join(f"{r[t]:6.2f}" for r in rows["baseline"])
        c = " ".join(f"{r[t]:6.2f}" for r in rows["current"])
        print(f"{t:28s} {b:>24s} {c:>24s}  {ratios[t]:.3f}")


if __name__ == "__main__":
    main()
