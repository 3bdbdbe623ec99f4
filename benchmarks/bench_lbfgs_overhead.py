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
   for each ``maxcor``: iterations, evaluations, total CPU and final objective;
4. with ``--compact``: the same fit with :func:`compact_lbfgs`, a study of what a leaner
   optimizer would save (not used by the library): plain L-BFGS in the compact form of
   Byrd, Nocedal and Schnabel (1994), whose only O(n) work is seven matrix-vector
   products with the stored ``(m, n)`` pair matrices, and scipy's Wolfe line search.

Run: ``python benchmarks/bench_lbfgs_overhead.py [--full] [--compact]`` (BLAS on one
thread: ``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from scipy.optimize import line_search
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


def compact_lbfgs(fun_and_grad, x0, m=20, gtol=1e-5, ftol=1e-12, max_iter=1000):
    """Minimise with L-BFGS in compact form; returns ``(x, f, n_iter, n_evaluations, reason)``."""
    n = x0.size
    x = x0.copy()
    f, g = fun_and_grad(x)
    S, Y = np.zeros((m, n)), np.zeros((m, n))  # pair i in row i % m
    STY, YTY = np.zeros((m, m)), np.zeros((m, m))  # s_i.y_j and y_i.y_j of the stored rows
    stored, head, n_eval, f_old = 0, 0, [1], None
    last = {}

    def evaluate(z):  # the line search asks for f and g separately at the same point
        if "z" not in last or not np.array_equal(last["z"], z):
            n_eval[0] += 1
            last["z"], last["fg"] = z.copy(), fun_and_grad(z)
        return last["fg"]

    for it in range(max_iter):
        if np.abs(g).max() <= gtol:
            return x, f, it, n_eval[0], "gradient <= gtol"
        d = -g / max(np.linalg.norm(g), 1e-300)
        if stored:
            idx = [(head - stored + i) % m for i in range(stored)]  # oldest .. newest
            Sg, Yg = (S @ g)[idx], (Y @ g)[idx]
            sty, yty = STY[np.ix_(idx, idx)], YTY[np.ix_(idx, idx)]
            R, D = np.triu(sty), np.diag(np.diag(sty))
            gamma = STY[idx[-1], idx[-1]] / YTY[idx[-1], idx[-1]]
            r_sg = np.linalg.solve(R, Sg)
            top, bottom = np.zeros(m), np.zeros(m)
            top[idx] = np.linalg.solve(R.T, (D + gamma * yty) @ r_sg - gamma * Yg)
            bottom[idx] = -gamma * r_sg
            d = -(gamma * g + top @ S + bottom @ Y)
            if g @ d >= 0:  # not a descent direction: forget the pairs
                stored, d = 0, -g / max(np.linalg.norm(g), 1e-300)
        last.clear()
        last["z"], last["fg"] = x.copy(), (f, g)
        step = line_search(lambda z: evaluate(z)[0], lambda z: evaluate(z)[1], x, d, g, f, f_old,
                           c2=0.9, maxiter=20)[0]
        if step is None:
            return x, f, it, n_eval[0], "line search failed"
        x_new = x + step * d
        f_new, g_new = evaluate(x_new)
        s, y = x_new - x, g_new - g
        if s @ y > 1e-10 * (y @ y):
            S[head], Y[head] = s, y
            keep = [(head - min(stored, m - 1) + i) % m for i in range(min(stored, m - 1))] + [head]
            STY[keep, head], STY[head, keep] = (S @ y)[keep], (Y @ s)[keep]
            YTY[keep, head] = YTY[head, keep] = (Y @ y)[keep]
            head, stored = (head + 1) % m, min(stored + 1, m)
        f_old, decrease = f, f - f_new
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol * max(abs(f), abs(f_old), 1.0):
            return x, f, it + 1, n_eval[0], "relative decrease <= ftol"
    return x, f, max_iter, n_eval[0], "max_iter"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="complete fits for each maxcor")
    parser.add_argument("--compact", action="store_true", help="complete fits with compact_lbfgs")
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
    fits = []
    if args.full:  # scipy's L-BFGS-B, as ChainCRF calls it, for each maxcor
        fits += [(f"L-BFGS-B maxcor {m:2d}", lambda m=m: scipy.optimize.minimize(
            problem, np.zeros(n), jac=True, method="L-BFGS-B",
            options={"maxiter": 1000, "gtol": 1e-5, "ftol": 1e-12, "maxcor": m})) for m in (20, 10, 6)]
    if args.compact:  # the compact-form study
        fits += [(f"compact_lbfgs m {m:2d}", lambda m=m: compact_lbfgs(problem, np.zeros(n), m=m))
                 for m in (20, 6)]
    if fits:
        print("complete fits at c2 = 1 (gtol 1e-5, as ChainCRF; compact_lbfgs is a study, not "
              "the library's optimizer):")
    for label, fit in fits:
        t = time.process_time()
        r = fit()
        total = time.process_time() - t
        nit, nfev, f = (r.nit, r.nfev, r.fun) if hasattr(r, "nit") else (r[2], r[3], r[1])
        print(f"  {label}: {nit} iterations, {nfev} evaluations, {total:.1f} s CPU "
              f"({total - nfev * med:.1f} s outside the objective), objective {f:.8f}")


if __name__ == "__main__":
    main()
