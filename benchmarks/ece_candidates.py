"""Candidates for the default ECE estimator on confident forecasts.

The default (:func:`structcal.metrics.calibration_error`: kernel smoothing of the
residuals ``y - s`` on the logit scale, Silverman's bandwidth) has a lower median
95th-percentile relative error than 15-bin ECE at n = 100 and 10^3 in the confident
regime of ``ece_estimator_study.py``, and is level with it at 10^4 and 10^5. This script
measures, on the same score distributions and evaluation sets, the estimators that
could break the tie:

* the same kernel sums with a wider bandwidth (1.5, 2 and 3 times Silverman's), or with
  the bandwidth chosen by leave-one-out cross-validation of the residual regression;
* bias-corrected kernel estimates: the plug-in ``|N(u)|`` overestimates ``|E N(u)|`` by
  the noise of ``N``, whose variance given the scores is ``sum_i K(u - u_i)**2 s_i (1 -
  s_i)`` under calibration (a kernel sum with bandwidth ``h / sqrt 2``); corrected by
  ``sqrt(max(N**2 - Var N, 0))`` (as Kumar et al. debias the L2 error) or by inverting
  ``E |m + sd Z| = |N|`` for ``m`` pointwise;
* witness estimators ``mean(sign(LCE_(-i)(s_i)) (y_i - s_i))``: ECE is the largest
  ``E w(s) (y - s)`` over ``|w| <= 1``, attained at ``w = sign(LCE)``; the sign is
  estimated leaving sample ``i`` out (its own kernel term subtracted) or on the other
  half of a 2-fold split, clipped at 0; and the mean of the witness and the default.

Besides each estimator's median p95 error and its ratio to 15 bins with a paired
bootstrap interval, it prints the efficiency bound of the study (the normal-approximation
p95 error of an efficient estimator, see ``efficiency_bound``), the study's reference
estimator that is told the sign of the miscalibration, and the median over distributions
of the lowest p95 error any of the estimators reached on that distribution (a selection
made with hindsight, on the very evaluation sets it is scored on: no single estimator
can do better than that row).

    python benchmarks/ece_candidates.py --seed 3 --progress \\
        > benchmarks/results/ece_candidates.txt          # the choice run (19 min, 2 shared cores)
    python benchmarks/ece_candidates.py --seed 11 --sizes 10000 --resamples 400
    python benchmarks/ece_candidates.py --quick          # seconds
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ece_estimator_study as study  # noqa: E402

from structcal.metrics import SparseBinsWarning, _kernels  # noqa: E402
from structcal.metrics import calibration_error  # noqa: E402
from structcal.metrics.calibration import (  # noqa: E402
    CalibrationErrorResult,
    _kde_spec,
    _KDESpec,
)


class _KernelSums:
    """The default estimator's histograms on one evaluation set (logit scale)."""

    _last = None  # (y, s, sums): the estimators below are called in turn on one set

    @classmethod
    def of(cls, y, s):
        if cls._last is None or cls._last[0] is not y or cls._last[1] is not s:
            cls._last = (y, s, cls(y, s))
        return cls._last[2]

    def __init__(self, y, s):
        self.spec = _kde_spec(y, s, "silverman", "residual", 4097, "binary", None, None,
                              "logit")
        self.dens, self.numer, mom = self.spec.histograms(0)
        self.h = float(self.spec.bandwidths(0, self.dens, mom)[0])
        self.u = self.spec.coords(0)[0]
        self.s = s
        self.r = y - s
        self.trap = np.full(self.spec.grid_size, self.spec.step)
        self.trap[[0, -1]] *= 0.5
        self._smoothed = {}

    def bandwidth(self, c):
        return max(self.h * c, 2.0 * self.spec.step)

    def sums(self, h):
        """Kernel sums ``D(u) = sum K(u - u_i)`` and ``N(u) = sum K(u - u_i) r_i``."""
        if h not in self._smoothed:
            hh = np.array([h])
            self._smoothed[h] = (self.spec.smooth(self.dens, hh)[0],
                                 self.spec.smooth(self.numer, hh)[0])
        return self._smoothed[h]

    def ece(self, A, D):
        return float((A @ self.trap) / (D @ self.trap))

    def null_variance(self, h):
        """``sum_i K_h(u - u_i)**2 s_i (1 - s_i)``: the variance of ``N`` if calibrated."""
        G = self.spec.grid_size
        d, v = np.zeros(G), np.zeros(G)
        _kernels.kde_histograms(self.u, self.s * (1.0 - self.s), np.zeros(1), False,
                                G, False, d, v)
        # K_h(x)**2 = K_{h / sqrt 2}(x) / (2 sqrt(pi) h)
        return np.maximum(self.spec.smooth(v[None, :], np.array([h / np.sqrt(2.0)]))[0], 0.0
                          ) / (2.0 * np.sqrt(np.pi) * h)

    def loo_numerator(self, h):
        """``N(u_i)`` without sample ``i``'s own term ``K_h(0) r_i``."""
        N = self.sums(h)[1]
        return np.interp(self.u, self.spec.grid, N) - self.r / (np.sqrt(2.0 * np.pi) * h)


def plug_in(c):
    def f(y, s, setting):
        k = _KernelSums.of(y, s)
        D, N = k.sums(k.bandwidth(c))
        return k.ece(np.abs(N), D)
    return f


def _rate_factor(n, n0):
    """``h / h_Silverman``: 1 up to ``n0`` forecasts, ``(n / n0)**(1/5 - 1/3)`` beyond."""
    return min(1.0, (n / n0) ** (1.0 / 5.0 - 1.0 / 3.0))


def plug_in_rate(n0):
    """Silverman's bandwidth up to ``n0`` forecasts, shrinking as ``n**(-1/3)`` beyond
    (Silverman's rule shrinks as ``n**(-1/5)``: its smoothing bias, of order ``h**2``,
    then falls more slowly than the sampling noise ``n**(-1/2)``)."""
    def f(y, s, setting):
        k = _KernelSums.of(y, s)
        c = _rate_factor(len(s), n0)
        D, N = k.sums(k.bandwidth(c))
        return k.ece(np.abs(N), D)
    return f


def cv_bandwidth(y, s, setting, mults=2.0 ** (np.arange(-2, 9) / 2)):
    """Plug-in at the bandwidth minimising the leave-one-out squared error of the
    residual regression ``r_i ~ N_(-i)(u_i) / D_(-i)(u_i)``."""
    k = _KernelSums.of(y, s)
    best, h_best = np.inf, k.h
    for m in mults:
        h = k.bandwidth(m)
        D, _ = k.sums(h)
        Di = np.interp(k.u, k.spec.grid, D) - 1.0 / (np.sqrt(2.0 * np.pi) * h)
        Ni = k.loo_numerator(h)
        ok = Di > 1e-9
        pred = np.where(ok, Ni / np.where(ok, Di, 1.0), 0.0)
        cv = float(np.mean((k.r - pred) ** 2))
        if cv < best:
            best, h_best = cv, h
    D, N = k.sums(h_best)
    return k.ece(np.abs(N), D)


def _abs_mean_inverse(a, sd):
    """``m >= 0`` with ``E |m + sd Z| = a`` (0 where ``a <= sd sqrt(2 / pi)``)."""
    sd = np.maximum(sd, 1e-300)
    lo, hi = np.zeros_like(a), a.copy()
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        z = mid / sd
        with np.errstate(over="ignore"):  # z * z = inf where sd = 0: the exp term is 0
            val = sd * np.sqrt(2.0 / np.pi) * np.exp(-0.5 * z * z)
        val += mid * (1.0 - 2.0 * ndtr(-z))
        above = val > a
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return 0.5 * (lo + hi)


def debiased(c, how):
    def f(y, s, setting):
        k = _KernelSums.of(y, s)
        h = k.bandwidth(c)
        D, N = k.sums(h)
        V = k.null_variance(h)
        if how == "sqrt":
            A = np.sqrt(np.maximum(N * N - V, 0.0))
        else:
            A = _abs_mean_inverse(np.abs(N), np.sqrt(V))
        return k.ece(A, D)
    return f


def witness(c):
    def f(y, s, setting):
        k = _KernelSums.of(y, s)
        return max(float(np.mean(np.sign(k.loo_numerator(k.bandwidth(c))) * k.r)), 0.0)
    return f


def witness_cross_fitted(y, s, setting):
    """Sign of the LCE estimated on the other half (rows alternate between halves)."""
    k = _KernelSums.of(y, s)
    half = np.arange(len(s)) % 2 == 0
    G, total = k.spec.grid_size, 0.0
    h = np.array([k.h])
    for train in (half, ~half):
        d, n = np.zeros(G), np.zeros(G)
        _kernels.kde_histograms(k.u[train], k.r[train] + k.u[train], np.zeros(1), False, G,
                                True, d, n)
        N = k.spec.smooth(n[None, :], h)[0]
        total += float(np.sum(np.sign(np.interp(k.u[~train], k.spec.grid, N)) * k.r[~train]))
    return max(total / len(s), 0.0)


class _RateSpec(_KDESpec):
    """The default estimator (bootstrap included) with the ``plug_in_rate`` bandwidth."""

    n0 = 1000

    def bandwidths(self, c, dens, mom):
        h = super().bandwidths(c, dens, mom) * _rate_factor(self.n_eff, self.n0)
        return np.maximum(h, 2.0 * self.step)


def rate_result(n0):
    """``(y, s) -> CalibrationErrorResult`` of ``plug_in_rate(n0)``, with its bootstrap
    (for the interval coverage check)."""
    def f(y, s):
        base = _kde_spec(y, s, "silverman", "residual", 4097, "binary", None, None, "logit")
        spec = _RateSpec(base.columns, "silverman", "residual", 4097, "logit")
        spec.n0 = n0
        curves, est, mx = spec.point()
        return CalibrationErrorResult(
            estimate=float(est[0]), max_error=float(mx[0]), norm="l1",
            method=f"rate(n0={n0})", setting="binary", n_samples=len(s), per_column=est,
            labels=spec.columns.labels, curves=curves, _spec=spec)
    return f


def default_and_witness(y, s, setting):
    return 0.5 * (study.ESTIMATORS[study.DEFAULT](y, s, setting) + witness(1.0)(y, s, setting))


CANDIDATES = {
    study.LEGACY: study.ESTIMATORS[study.LEGACY],
    study.DEFAULT: study.ESTIMATORS[study.DEFAULT],
    "kernel, 1.5 x Silverman bandwidth": plug_in(1.5),
    "kernel, 2 x Silverman bandwidth": plug_in(2.0),
    "kernel, 3 x Silverman bandwidth": plug_in(3.0),
    "kernel, h ~ n^(-1/3) beyond n = 1000": plug_in_rate(1000),
    "kernel, h ~ n^(-1/3) beyond n = 3000": plug_in_rate(3000),
    "kernel, h ~ n^(-1/3) beyond n = 10000": plug_in_rate(10000),
    "kernel, leave-one-out CV bandwidth": cv_bandwidth,
    "kernel, debiased sqrt(N^2 - Var N)": debiased(1.0, "sqrt"),
    "kernel, debiased E|m + sd Z| = |N|": debiased(1.0, "invert"),
    "kernel, debiased E|m + sd Z|, 2 x h": debiased(2.0, "invert"),
    "witness, sign of leave-one-out LCE": witness(1.0),
    "witness, leave-one-out, 2 x h": witness(2.0),
    "witness, 2-fold cross-fitted": witness_cross_fitted,
    "(default + witness) / 2": default_and_witness,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=200, help="evaluation sets per size "
                    "(a fifth of them, at least 5, at n = 10^5)")
    ap.add_argument("--large-resamples", type=int, metavar="N",
                    help="evaluation sets at n >= 10^5 (default: a fifth of --resamples)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000])
    ap.add_argument("--per-distribution", action="store_true", help="print each "
                    "candidate's ratio to 15 bins on each distribution, with its paired "
                    "interval")
    ap.add_argument("--coverage", type=int, nargs="+", metavar="N", default=[],
                    help="also check the 95%% bootstrap intervals of the default and of the "
                    "n^(-1/3) rules at these sizes (as the study does)")
    ap.add_argument("--coverage-reps", type=int, default=25,
                    help="evaluation sets per pool for --coverage")
    ap.add_argument("--quick", action="store_true", help="a tiny run (seconds)")
    ap.add_argument("--progress", action="store_true", help="report progress on stderr")
    ap.add_argument("--save", metavar="PATH", help="also write a JSON summary to PATH")
    ap.add_argument("--only", metavar="WORDS", help="comma-separated parts of names: run "
                    "only the candidates whose name contains one (and the two estimators)")
    args = ap.parse_args(argv)
    candidates = {name: f for name, f in CANDIDATES.items()
                  if args.only is None or name in (study.LEGACY, study.DEFAULT)
                  or any(w in name for w in args.only.split(","))}
    if args.quick:
        args.sizes, args.resamples = [100, 1000], min(args.resamples, 10)
    args.confident_sizes = args.sizes
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseBinsWarning)
        records, calibrated, summary, pools = study.run_confident(
            args, np.random.default_rng(args.seed), candidates, reference=True, keep=True)
    elapsed = time.time() - t0
    sizes = args.sizes
    names = list(summary)
    best = [float(np.median([min(r["p95"][name][j] for name in names) for r in records]))
            for j in range(len(sizes))]
    bound = [float(np.median([r["bound"][j] for r in records])) for j in range(len(sizes))]
    brng = np.random.default_rng(args.seed + 1)
    paired = {name: [study.paired_ratio(records, name, study.LEGACY, j, brng)
                     for j in range(len(sizes))] for name in names if name != study.LEGACY}
    # each distribution alone: the same paired bootstrap over its evaluation sets
    alone = {name: [[study.paired_ratio([r], name, study.LEGACY, j, brng)[:3]
                     for r in records] for j in range(len(sizes))] for name in paired}
    clear = {name: [[sum(hi < 1 for *_, hi in a), sum(lo > 1 for _, lo, _ in a)] for a in v]
             for name, v in alone.items()}

    print(f"ECE estimator candidates, confident regime: {len(records)} score distributions "
          f"({len(pools)} pools x {len(records) // max(len(pools), 1)} miscalibrations), "
          + ", ".join(f"{study.evaluation_sets(args, m)}" for m in sizes)
          + f" evaluation sets at n = {', '.join(map(str, sizes))}, seed {args.seed}, "
          f"{elapsed:.0f} s")
    print("median over distributions of the 95th-percentile relative error; under it the "
          "ratio to 15 bins [95% paired bootstrap] and on how many distributions it is lower")
    width = 26
    print(f"{'estimator':44s}" + "".join(f"{'n=' + str(m):>{width}s}" for m in sizes))
    for name in names:
        print(f"{name:44s}" + "".join(f"{v:>{width}.3f}" for v in summary[name]))
        if name in paired:
            cells = [f"{r:.2f} [{lo:.2f},{hi:.2f}] {w:2d}/{len(records)}"
                     for r, lo, hi, w in paired[name]]
            print(f"{'':44s}" + "".join(f"{c:>{width}s}" for c in cells))
    print("\ndistributions where the p95 error is clearly lower / clearly higher than 15 "
          "bins' (each distribution's 95% paired interval of the ratio below / above 1)")
    for name in paired:
        print(f"{name:44s}" + "".join(f"{f'{lo} / {hi}':>{width}s}" for lo, hi in clear[name]))
    print(f"\n{'efficiency bound (normal approx.)':44s}"
          + "".join(f"{v:>{width}.3f}" for v in bound))
    print(f"{'lowest of all rows per distribution':44s}"
          + "".join(f"{v:>{width}.3f}" for v in best))
    print("\nmean estimate on perfectly calibrated forecasts (true ECE 0), mean over the "
          f"{len(calibrated)} pools")
    print(f"{'estimator':44s}" + "".join(f"{'n=' + str(m):>10s}" for m in sizes))
    for name in names:
        vals = [np.mean([c["mean_estimate"][name][j] for c in calibrated.values()])
                for j in range(len(sizes))]
        print(f"{name:44s}" + "".join(f"{v:10.4f}" for v in vals))
    print("\nper distribution at n = " + str(sizes[-1]) + ": p95 error of 15 bins, the "
          "default, the reference; the efficiency bound")
    for r in records:
        print(f"  {r['pool'][:30]:30s} {r['miscalibration'][:32]:32s} "
              f"{r['p95'][study.LEGACY][-1]:7.3f} {r['p95'][study.DEFAULT][-1]:7.3f} "
              f"{r['p95'][study.ORACLE][-1]:7.3f} {r['bound'][-1]:7.3f}")
    if args.per_distribution:
        for name in alone:
            print(f"\nper distribution, {name} / 15 bins: ratio of p95 errors [95% paired "
                  "interval]")
            print(f"{'':65s}" + "".join(f"{'n=' + str(m):>22s}" for m in sizes))
            for i, r in enumerate(records):
                print(f"  {r['pool'][:30]:30s} {r['miscalibration'][:32]:32s}" + "".join(
                    f"{f'{a[i][0]:.2f} [{a[i][1]:.2f}, {a[i][2]:.2f}]':>22s}"
                    for a in alone[name]))
    coverage = {}
    if args.coverage:
        cargs = argparse.Namespace(coverage_sizes=args.coverage,
                                   coverage_reps=args.coverage_reps)
        rules = {study.DEFAULT: calibration_error,
                 **{name: rate_result(int(name.rsplit(" ", 1)[1]))
                    for name in names if "n^(-1/3)" in name}}
        print("\n95% bootstrap intervals (200 resamples) on the temperature-1.5 pools: "
              "fraction containing")
        print(f"{'estimator':44s} {'n':>7s} {'sets':>5s} {'recentred: est.':>16s} "
              f"{'truth':>6s} {'percentile: est.':>17s} {'truth':>6s}")
        for name, f in rules.items():
            coverage[name] = study.interval_coverage(
                cargs, np.random.default_rng(args.seed + 2), pools, f)
            for m, c in coverage[name].items():
                print(f"{name:44s} {m:>7s} {c['n_intervals']:5d} "
                      f"{c['recentred']['contains_estimate']:16.3f} "
                      f"{c['recentred']['contains_truth']:6.3f} "
                      f"{c['percentile']['contains_estimate']:17.3f} "
                      f"{c['percentile']['contains_truth']:6.3f}")
    for r in records:
        del r["estimates"]
    out = {"seed": args.seed, "sizes": sizes,
           "resamples": [study.evaluation_sets(args, m) for m in sizes],
           "median_p95": summary, "efficiency_bound": bound, "lowest_per_distribution": best,
           "ratio_to_legacy": {k: [list(p) for p in v] for k, v in paired.items()},
           "clearly_lower_higher": clear, "coverage": coverage,
           "calibrated": calibrated, "records": records, "seconds": elapsed}
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
