"""Cost of ChainPotentials owning its arrays: caller's writeable array (copied) vs a
read-only one (shared), 10^6 tokens x 26 states, 40,000 chains of 25; alternated.

    python benchmarks/bench_potentials_copy.py
"""
import time
import numpy as np
from structcal import ChainPotentials
from structcal.inference import infer
rng = np.random.default_rng(0)
u = rng.normal(size=(10**6, 26)); off = np.arange(0, 10**6 + 1, 25); pw = rng.normal(size=(26, 26))
ro = u.copy(); ro.flags.writeable = False
a, b = [], []
for r in range(7):
    t = time.perf_counter(); ChainPotentials(u, off, pw); a.append(time.perf_counter() - t)
    t = time.perf_counter(); ChainPotentials(ro, off, pw); b.append(time.perf_counter() - t)
p = ChainPotentials(ro, off, pw)
infer(ChainPotentials(ro[:1000], off[:41], pw))
t = time.perf_counter(); infer(p); ti = time.perf_counter() - t
f = lambda v: f"median {1e3*np.median(v):.0f} ms (range {1e3*min(v):.0f}-{1e3*max(v):.0f})"
print("writeable (copied):", f(a)); print("read-only (shared):", f(b)); print(f"infer on the same batch: {ti:.2f} s")
