"""Time one step of the chain recursions: the (K x K) vector-matrix product of the
max-plus semiring as Viterbi runs it (``_vecmat`` on the unpadded potentials) and of the
sum-product semiring as the forward and backward passes run it (``_vecmat_padded`` on the
scaled exponentials, rows padded to a multiple of 32 columns).

Each step feeds the next, as in a chain, so the figure is the latency of one step on one
core (median over ``--repeats`` runs of ``--steps`` steps). ``benchmarks/bench_chain.py``
measures whole passes on the OCR words.

Run: ``python benchmarks/bench_chain_step.py [--json] [--repeats 9] [--steps 300000]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from structcal._simd import data_pointer
from structcal.inference._chain import (
    _vecmat,
    _vecmat_padded,
    padded_width,
    zeros_rows,
)


def _pad(A, width):
    out = zeros_rows(A.shape[0], width)
    out[:, : A.shape[1]] = A
    return out


@njit
def _steps(X, M, S, n, maxplus):
    K, Kp = M.shape[1], M.shape[2]
    x, m, s = data_pointer(X), data_pointer(M), data_pointer(S)
    for r in range(n):
        if maxplus:
            src, dst = (r & 7) * K, ((r + 1) & 7) * K
            _vecmat(x, src, m, 0, s, 0, x, dst, K, True, True)
        else:
            src, dst = (r & 7) * Kp, ((r + 1) & 7) * Kp
            _vecmat_padded(x, src, m, 0, s, 0, x, dst, K, Kp, False, True)


def time_steps(K, maxplus, steps, repeats, rng):
    M = rng.random((1, K, K))
    M /= M.sum(axis=2, keepdims=True)  # row-stochastic: the sum-product state stays bounded
    X = rng.random((8, K))
    X /= X.sum(axis=1, keepdims=True)
    if maxplus:
        M, X, S = np.log(M), np.log(X), np.zeros((1, K))
    else:
        # padded and 64-byte aligned, as the chain kernels lay them out
        Kp = padded_width(K)
        M, X, S = _pad(M[0], Kp)[None], _pad(X, Kp), _pad(np.ones((1, K)), Kp)
    _steps(X, M, S, 10, maxplus)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        _steps(X, M, S, steps, maxplus)
        times.append((time.perf_counter() - t) / steps * 1e9)
    return float(np.median(times)), float(np.min(times)), float(np.max(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--states", type=int, nargs="+", default=[5, 12, 26, 45, 64])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for K in args.states:
        for maxplus in (True, False):
            med, lo, hi = time_steps(K, maxplus, args.steps, args.repeats, rng)
            rows.append({"n_states": K, "semiring": "max-plus" if maxplus else "sum-product",
                         "ns_per_step_median": med, "min": lo, "max": hi})
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'K':>4} {'semiring':<12} {'median ns/step':>15} {'min':>8} {'max':>8}")
    for r in rows:
        print(f"{r['n_states']:>4} {r['semiring']:<12} {r['ns_per_step_median']:>15.1f} "
              f"{r['min']:>8.1f} {r['max']:>8.1f}")


if __name__ == "__main__":
    main()
