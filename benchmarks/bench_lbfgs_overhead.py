"""Where ChainCRF's likelihood training time goes on WNUT-17: objective vs L-BFGS-B itself.

``ChainCRF(method='likelihood')`` minimises its objective with scipy's L-BFGS-B over one
weight per (feature, label) pair: on the WNUT-17 train split with the library's token
features (``DictVectorizer(separator=":")``, 54,931 features, 13 tags) that is a vector of
714,311 parameters. This script measures, in CPU seconds:

1. one objective + gradient evaluation (the batched Numba forward-backward, the two
   sparse products and the bookkeeping);
2. L-BFGS-B's own work per iteration on a vector of the same size, with a diagonal
   quadratic objective whose evaluation is timed separately and subtracted, for
   ``maxcor`` 6, 10 and 20 (ChainCRF uses 20);
3. with ``--full``: complete fits at CRFsuite's ``c2=1`` (``alpha = 2 c2 / n_sentences``)
   for each ``maxcor``: iterations, evaluations, total CPU and final objective.

Run: ``python benchmarks/bench_lbfgs_overhead.py [--full]`` (BLAS on one thread:
``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from sklearn.feature_extraction import DictVectorizer

from structcal.crf.chain import _Likelihood
from structcal.datasets import load_wnut17, token_features


def cpu(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return float(np.median(times)), float(np.min(times)), float(np.max(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="complete fits for each maxcor")
    args = parser.parse_args()
    data = load_wnut17()
    train = data.split_named("train")
    dv = DictVectorizer(separator=":", dtype=np.float64)
    Z = sp.csr_matrix(dv.fit_transform([t for s in token_features(train.sentences) for t in s]))
    offsets = np.r_[0, np.cumsum(train.lengths)].astype(np.int64)
    alpha = 2 * 1.0 / train.n_sentences
    problem = _Likelihood(Z, offsets, train.tags.astype(np.int64), len(data.tag_names), alpha, False)
    n = problem.layout.size
    theta = np.full(n, 0.01)
    problem(theta)  # JIT warm-up
    med, lo, hi = cpu(lambda: problem(theta))
    print(f"WNUT-17 train: {Z.shape[0]} tokens x {Z.shape[1]} features, {n} parameters")
    print(f"objective + gradient: {med:.4f} s CPU [{lo:.4f}, {hi:.4f}]")
    rng = np.random.default_rng(0)
    d, c = rng.uniform(0.01, 10.0, n), rng.standard_normal(n)

    def quadratic(x):
        r = x - c
        return 0.5 * np.dot(d * r, r), d * r

    print("L-BFGS-B's own work per iteration (40 iterations on a quadratic of the same size):")
    for m in (6, 10, 20):
        t = time.process_time()
        r = scipy.optimize.minimize(quadratic, np.zeros(n), jac=True, method="L-BFGS-B",
                                    options={"maxiter": 40, "gtol": 1e-12, "ftol": 1e-15, "maxcor": m})
        total = time.process_time() - t
        evals = cpu(lambda: quadratic(r.x))[0] * r.nfev
        print(f"  maxcor {m:2d}: {1e3 * (total - evals) / r.nit:6.1f} ms per iteration "
              f"({r.nit} iterations, {r.nfev} evaluations)")
    if args.full:
        print("complete fits at c2 = 1 (gtol 1e-5, as ChainCRF):")
        for m in (20, 10, 6):
            t = time.process_time()
            r = scipy.optimize.minimize(problem, np.zeros(n), jac=True, method="L-BFGS-B",
                                        options={"maxiter": 1000, "gtol": 1e-5, "ftol": 1e-12, "maxcor": m})
            total = time.process_time() - t
            print(f"  maxcor {m:2d}: {r.nit} iterations, {r.nfev} evaluations, {total:.1f} s CPU "
                  f"({total - r.nfev * med:.1f} s outside the objective), objective {r.fun:.8f}")


if __name__ == "__main__":
    main()
