"""Training speed of ChainCRF on the OCR training split (2,014 words, 15,102 letters).

Times, on one thread (``NUMBA_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``, set before numpy
is imported):

* the cost of one likelihood objective + gradient evaluation (what each L-BFGS iteration
  pays; usually about 1.1 evaluations per iteration), split into the Numba
  forward-backward kernel (``expected_statistics``) and the two dense matmuls;
* dense ``float64`` matmuls against ``scipy.sparse`` CSR ones for the binary pixels
  (about 20% of them on) and for the 800 ``ImageFeatures``, i.e. whether sparse storage
  would pay;
* one block-coordinate Frank-Wolfe pass (``max_margin``) and one duality-gap check;
* complete ``fit`` calls with the shipped models' settings and the raw-pixel baselines of
  ``benchmarks/train_ocr_models.py`` (skip with ``--no-fits``), after JIT compilation;
  the first calls of the kernels, compilation included, are reported separately
  (serial kernels are cached on disk, the ``prange`` drivers compile in every process).

Medians (and min-max) of ``--repeats`` runs. Timings on a machine shared with other jobs
are rough.

Run: ``python benchmarks/bench_chain_crf.py [--json] [--repeats 5] [--no-fits]``
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402

from structcal.crf import (  # noqa: E402
    ChainCRF,
    ImageFeatures,
    _chain_kernels,  # noqa: E402
)
from structcal.crf.chain import _kernel_tokens, _Layout, _Likelihood, _structured_hinge  # noqa: E402
from structcal.datasets import load_ocr  # noqa: E402
from structcal.exceptions import ConvergenceWarning  # noqa: E402


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {
        "median_s": float(np.median(times)),
        "min_s": float(min(times)),
        "max_s": float(max(times)),
    }


def bench_objective(Z, data, repeats):
    problem = _Likelihood(Z, data.offsets, data.labels, 26, 1e-3, True)
    theta = 0.01 * np.random.default_rng(0).standard_normal(problem.layout.size)
    out = {"n_features": Z.shape[1], "first_call_with_jit": timed(lambda: problem(theta), 1)}
    out["objective_and_gradient"] = timed(lambda: problem(theta), repeats)
    W = problem.layout.unpack(theta)[0]
    out["dense_unary_matmul"] = timed(lambda: Z @ W.T, repeats)
    marg = problem.marg.copy()
    out["dense_gradient_matmul"] = timed(lambda: marg.T @ Z, repeats)
    S = scipy.sparse.csr_matrix(Z)
    out["density"] = float(S.nnz / Z.size)
    out["sparse_unary_matmul"] = timed(lambda: S @ W.T, repeats)
    out["sparse_gradient_matmul"] = timed(lambda: S.T @ marg, repeats)
    U = problem.unary(theta)
    T = problem.layout.unpack(theta)[2]
    from structcal.inference._chain import padded_width, scaled_exponentials

    pw = np.ascontiguousarray(T)[None]
    E, ET, colmax = scaled_exponentials(pw, padded_width(pw.shape[1]))
    out["forward_backward_kernel"] = timed(
        lambda: _chain_kernels.expected_statistics(
            U,
            problem.offsets,
            pw,
            E,
            ET,
            colmax,
            problem.chunk,
            problem.marg,
            problem.edge_sum,
            problem.logz,
            problem.status,
        ),
        repeats,
    )
    return out


def bench_bcfw(Z, data, repeats):
    n = data.n_words
    K = 26
    layout = _Layout(K, Z.shape[1])
    lengths = data.lengths
    goff = np.concatenate([[0], np.cumsum(lengths**2)]).astype(np.int64)
    gram = np.concatenate(
        [(Z[a:b] @ Z[a:b].T + 1).ravel() for a, b in zip(data.offsets[:-1], data.offsets[1:])]
    )
    theta, acc, n_up = np.zeros(layout.size), np.zeros(layout.size), np.zeros(1)
    mu = np.eye(K)[data.labels]
    edge_mu = np.zeros((n, K, K))
    chain = np.repeat(np.arange(n), lengths)
    nxt = np.ones(len(data.labels), bool)
    nxt[data.offsets[1:] - 1] = False
    i = np.flatnonzero(nxt)
    np.add.at(edge_mu, (chain[i], data.labels[i], data.labels[i + 1]), 1.0)
    loss_i = np.zeros(n)
    order = np.random.default_rng(0).permutation(n).astype(np.int64)

    def one_pass():
        _chain_kernels.bcfw_pass(
            *_kernel_tokens(Z),
            goff,
            gram,
            data.offsets,
            data.labels,
            order,
            1e-2 * n,
            True,
            theta,
            mu,
            edge_mu,
            loss_i,
            True,
            acc,
            n_up,
        )

    def check():
        w = _chain_kernels.averaged_iterate(theta, acc, n_up)
        _structured_hinge(layout, w, Z, data.offsets, data.labels, True)

    return {
        "n_features": Z.shape[1],
        "first_pass_with_jit": timed(one_pass, 1),
        "bcfw_pass": timed(one_pass, repeats),
        "first_check_with_jit": timed(check, 1),
        "duality_gap_check": timed(check, repeats),
    }


def bench_fits(data, repeats):
    # the settings of benchmarks/train_ocr_models.py (shipped models and pixel baselines)
    configs = {
        "likelihood, pixels, alpha=3e-3": dict(method="likelihood", alpha=3e-3),
        "likelihood, ImageFeatures(), alpha=3e-4 (shipped)": dict(
            method="likelihood", alpha=3e-4, features=ImageFeatures()
        ),
        "max_margin, pixels, alpha=3e-3": dict(method="max_margin", alpha=3e-3, random_state=0),
        "max_margin, ImageFeatures(), alpha=1e-2 (shipped)": dict(
            method="max_margin", alpha=1e-2, features=ImageFeatures(), random_state=0
        ),
    }
    out = {}
    for name, params in configs.items():
        runs = []
        for _ in range(repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                crf = ChainCRF(**params).fit(data.pixels, data.labels, lengths=data.lengths)
            runs.append(crf.fit_time_)
        out[name] = {
            "median_s": float(np.median(runs)),
            "min_s": float(min(runs)),
            "max_s": float(max(runs)),
            "n_iter": crf.n_iter_,
            "converged": crf.converged_,
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-fits", action="store_true", help="skip the complete fit timings")
    args = parser.parse_args(argv)
    data = load_ocr("train")
    pixels = data.pixels.astype(np.float64)
    rich = ImageFeatures().fit(pixels).transform(pixels)
    result = {
        "objective_pixels": bench_objective(pixels, data, args.repeats),
        "objective_image_features": bench_objective(rich, data, args.repeats),
        "bcfw_pixels": bench_bcfw(pixels, data, args.repeats),
        "bcfw_image_features": bench_bcfw(rich, data, args.repeats),
    }
    if not args.no_fits:
        result["fits"] = bench_fits(data, max(1, min(args.repeats, 3)))
    result["environment"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }

    def ms(d):
        return f"{1000 * d['median_s']:8.1f} ms  ({1000 * d['min_s']:.1f}-{1000 * d['max_s']:.1f})"

    print(
        f"ChainCRF on OCR train ({data.n_words} words, {data.n_letters} letters), "
        f"1 thread, medians of {args.repeats}"
    )
    for key in ("objective_pixels", "objective_image_features"):
        r = result[key]
        print(f"\n{key} ({r['n_features']} features, density {r['density']:.2f})")
        for k in (
            "objective_and_gradient",
            "forward_backward_kernel",
            "dense_unary_matmul",
            "sparse_unary_matmul",
            "dense_gradient_matmul",
            "sparse_gradient_matmul",
        ):
            print(f"  {k:28s} {ms(r[k])}")
        print(f"  {'first call (JIT compile)':28s} {ms(r['first_call_with_jit'])}")
    for key in ("bcfw_pixels", "bcfw_image_features"):
        r = result[key]
        print(f"\n{key} ({r['n_features']} features)")
        for k in ("bcfw_pass", "duality_gap_check", "first_pass_with_jit", "first_check_with_jit"):
            print(f"  {k:28s} {ms(r[k])}")
    if "fits" in result:
        print("\ncomplete fits (kernels already compiled), ChainCRF.fit_time_")
        for k, v in result["fits"].items():
            if isinstance(v, dict):
                print(
                    f"  {k:52s} {v['median_s']:6.1f} s  ({v['min_s']:.1f}-{v['max_s']:.1f})  "
                    f"n_iter {v['n_iter']}  converged {v['converged']}"
                )
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
