"""Which ECE estimator to trust? Posocco & Bonnefoy's protocol at reduced scale.

Synthetic classification problems are drawn from Gaussian mixtures (4 modes per class,
random means and covariances), four model types are trained on 300 samples each, and
the "true" expected calibration error of every model is computed on a large holdout.
Then small evaluation sets (30 to 500 samples, drawn with replacement from the holdout)
are scored by each estimator, and the approximation error ``|estimate - truth| / truth``
is summarised as in the paper's Figure 2: the 95th percentile over evaluation sets, then
the median over problems and models.

One deliberate change from the paper: the truth uses the mixture's exact posterior
``P(y = k | x)`` in place of the sampled labels (same expectation given the score, no
label noise), on 400 000 holdout points in 200 equal-mass bins, so that the reference is
not itself inflated by the plug-in bias being studied.

Second regime, **confident forecasters** (structured events: per-token correctness is
90-99%): binary forecasts drawn from a pool of scores whose mean is 0.9-0.99, the raw
probabilities of the marginal events of the shipped OCR chain CRF (``ocr_chain_crf`` on
the recalibration and test words: each letter's MAP-label marginal) and logit-normal pools
with means 0.9, 0.95 and 0.99. Outcomes are drawn as ``y ~ Bernoulli(g(s))`` with a known
recalibration map ``g`` (temperature 1.5 or 0.7 on the logit, logit shifted by -+0.5), so
the truth ``E |g(s) - s|`` over the pool is exact; evaluation sets of 100 to 10^5 forecasts.
The same pools with ``g(s) = s`` (perfectly calibrated: true ECE 0) give each estimator's
reading on calibrated forecasts, and the default's 95% bootstrap intervals are checked for
containing the estimate and the truth.

    python benchmarks/ece_estimator_study.py            # default run, about 10 minutes
    python benchmarks/ece_estimator_study.py --json
    python benchmarks/ece_estimator_study.py --save benchmarks/results/ece_estimator_study.json \
        > benchmarks/results/ece_estimator_study.txt   # the run the README quotes
    python benchmarks/ece_estimator_study.py --confident-check 10000 100000 --resamples 400 \
        > benchmarks/results/ece_confident_check.txt   # default vs legacy only, more sets
    python benchmarks/ece_estimator_study.py --quick    # seconds (used by a test)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit, logit, logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from structcal.metrics import (  # noqa: E402
    SparseBinsWarning,
    binned_calibration_error,
    calibration_error,
    kde_calibration_error,
)

LEGACY = "binned, 15 uniform bins (legacy)"
DEFAULT = "calibration_error (default: KDE, logit)"
PREVIOUS = "KDE, smoothed residuals, probability"

ESTIMATORS = {
    LEGACY: lambda y, P, s: binned_calibration_error(y, P, setting=s).ece,
    "binned, sqrt(n) uniform bins": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, n_bins="sqrt").ece,
    "binned, 15 equal-mass bins": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, strategy="quantile").ece,
    "binned, sqrt(n) equal-mass bins": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, strategy="quantile", n_bins="sqrt").ece,
    "binned, 15 uniform bins, convex": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, mapping="convex").ece,
    "binned, sqrt(n) uniform bins, convex": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, mapping="convex", n_bins="sqrt").ece,
    "binned, 15 equal-mass bins, convex": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, strategy="quantile", mapping="convex").ece,
    "binned, sqrt(n) equal-mass bins, convex": lambda y, P, s: binned_calibration_error(
        y, P, setting=s, strategy="quantile", mapping="convex", n_bins="sqrt").ece,
    "KDE, smoothed labels (paper)": lambda y, P, s: kde_calibration_error(
        y, P, setting=s, smoothing="labels").ece,
    # the former default: Silverman's bandwidth collapses on confident forecasts
    PREVIOUS: lambda y, P, s: kde_calibration_error(y, P, setting=s).ece,
    DEFAULT: lambda y, P, s: calibration_error(y, P, setting=s).ece,
}


# ---------------------------------------------------------------------------------------
# data


class GaussianMixtureProblem:
    """K classes, each an equal mixture of 4 Gaussians; equal class priors."""

    def __init__(self, rng, n_classes, dim, n_modes=4):
        self.K, self.d = n_classes, dim
        self.means = rng.uniform(-1.5, 1.5, (n_classes, n_modes, dim))
        A = rng.uniform(-0.6, 0.6, (n_classes, n_modes, dim, dim))
        self.covs = A @ np.swapaxes(A, -1, -2) + 0.05 * np.eye(dim)
        self.chol = np.linalg.cholesky(self.covs)
        inv = np.linalg.inv(self.covs)
        self.inv = inv
        self.logdet = np.linalg.slogdet(self.covs)[1]

    def sample(self, rng, n):
        y = rng.integers(0, self.K, n)
        mode = rng.integers(0, self.means.shape[1], n)
        z = rng.standard_normal((n, self.d))
        x = self.means[y, mode] + np.einsum("nij,nj->ni", self.chol[y, mode], z)
        return x, y

    def posterior(self, x):
        """Exact P(y = k | x)."""
        diff = x[:, None, None, :] - self.means[None]  # (n, K, M, d)
        maha = np.einsum("nkmi,kmij,nkmj->nkm", diff, self.inv, diff)
        logp = -0.5 * (maha + self.logdet[None] + self.d * np.log(2 * np.pi))
        logk = logsumexp(logp, axis=2)  # equal mode and class weights cancel
        return np.exp(logk - logsumexp(logk, axis=1, keepdims=True))


def make_models(seed):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.svm import SVC

    return {
        "logistic regression": LogisticRegression(max_iter=2000),
        "naive Bayes": GaussianNB(),
        "random forest": RandomForestClassifier(n_estimators=50, random_state=seed),
        # SVC(probability=True) is deprecated: the same Platt-scaled SVC, spelled out
        "SVC (Platt)": CalibratedClassifierCV(SVC(), method="sigmoid", ensemble=False),
    }


def true_ece(scores, cond, n_bins):
    """sum_B (N_B/N) |mean_B(P(event | x)) - mean_B(score)| over equal-mass bins."""
    order = np.argsort(scores, kind="stable")
    total = 0.0
    for part in np.array_split(order, n_bins):
        total += len(part) * abs(cond[part].mean() - scores[part].mean())
    return total / len(scores)


def setting_truth(P, eta, setting, n_bins):
    if setting == "confidence":
        pred = P.argmax(1)
        idx = np.arange(len(P))
        return true_ece(P[idx, pred], eta[idx, pred], n_bins)
    return float(np.mean([true_ece(P[:, k], eta[:, k], n_bins) for k in range(P.shape[1])]))


# ---------------------------------------------------------------------------------------
# study


def run(args):
    rng = np.random.default_rng(args.seed)
    settings = ["confidence"] if args.quick else ["confidence", "class-wise"]
    records = []  # one per (problem, model, setting): truth and p95 errors per size/estimator
    t0 = time.time()
    for K in args.classes:
        for d in args.dims:
            for rep in range(args.problems):
                prob = GaussianMixtureProblem(rng, K, d)
                Xtr, ytr = prob.sample(rng, args.train)
                Xho, yho = prob.sample(rng, args.holdout)
                eta = prob.posterior(Xho)
                for mname, model in make_models(int(rng.integers(1 << 30))).items():
                    if args.quick and mname not in ("logistic regression", "naive Bayes"):
                        continue
                    P = model.fit(Xtr, ytr).predict_proba(Xho)
                    if P.shape[1] != K:  # a class missing from the training sample
                        continue
                    for setting in settings:
                        truth = setting_truth(P, eta, setting, args.truth_bins)
                        rec = {"classes": K, "dim": d, "problem": rep, "model": mname,
                               "setting": setting, "true_ece": truth,
                               "accuracy": float((P.argmax(1) == yho).mean()),
                               "p95": {name: [] for name in ESTIMATORS}}
                        for m in args.sizes:
                            errs = {name: np.empty(args.resamples) for name in ESTIMATORS}
                            for r in range(args.resamples):
                                idx = rng.integers(0, args.holdout, m)
                                ys, Ps = yho[idx], P[idx]
                                for name, est in ESTIMATORS.items():
                                    errs[name][r] = abs(est(ys, Ps, setting) - truth) / truth
                            for name in ESTIMATORS:
                                rec["p95"][name].append(float(np.percentile(errs[name], 95)))
                        records.append(rec)
                        if args.progress:
                            print(f"  [{time.time() - t0:6.0f} s] K={K} d={d} #{rep} {mname} "
                                  f"{setting}: true ECE {truth:.4f}", file=sys.stderr)
    elapsed = time.time() - t0
    summary = {}
    for setting in settings:
        recs = [r for r in records if r["setting"] == setting]
        summary[setting] = {
            name: [float(np.median([r["p95"][name][j] for r in recs]))
                   for j in range(len(args.sizes))]
            for name in ESTIMATORS
        }
    return records, summary, elapsed


def calibrated_bias(rng, sizes, reps):
    """Mean estimate on perfectly calibrated forecasts (true ECE = 0): the plug-in bias."""
    names = {
        LEGACY: lambda y, p: binned_calibration_error(y, p).ece,
        "KDE, smoothed labels (paper)": lambda y, p: kde_calibration_error(
            y, p, smoothing="labels").ece,
        PREVIOUS: lambda y, p: kde_calibration_error(y, p).ece,
        DEFAULT: lambda y, p: calibration_error(y, p).ece,
    }
    out = {}
    for dist in ("uniform", "beta(0.5, 3)"):
        out[dist] = {name: [] for name in names}
        for n in sizes:
            vals = {name: [] for name in names}
            for _ in range(reps if n < 100_000 else max(2, reps // 4)):
                p = rng.random(n) if dist == "uniform" else rng.beta(0.5, 3, n)
                y = (rng.random(n) < p).astype(np.int64)
                for name, est in names.items():
                    vals[name].append(est(y, p))
            for name in names:
                out[dist][name].append(float(np.mean(vals[name])))
    return out


# ---------------------------------------------------------------------------------------
# confident forecasters


def ocr_crf_confidences():
    """Raw probabilities of the OCR chain CRF's marginal events (recalibration + test)."""
    from structcal.crf import ChainCRF
    from structcal.datasets import load_ocr
    from structcal.inference import infer
    from structcal.io import pretrained_path

    crf = ChainCRF.load(pretrained_path("ocr_chain_crf"))
    data = load_ocr()
    words = data.subset(~np.isin(data.folds, [0, 1, 2]))  # not the training folds
    result = infer(crf.potentials(words.X))
    return result.marginals[np.arange(len(result.map_labels)), result.map_labels]


def logit_normal_pool(rng, mean, sd, size):
    """``expit(mu + sd * z)``, with ``mu`` set so that the pool's mean is ``mean``."""
    z = rng.standard_normal(size)
    lo, hi = -10.0, 20.0
    for _ in range(80):
        mu = 0.5 * (lo + hi)
        lo, hi = (mu, hi) if expit(mu + sd * z).mean() < mean else (lo, mu)
    return expit(0.5 * (lo + hi) + sd * z)


def _logit(s):
    return logit(np.clip(s, 1e-15, 1 - 1e-15))


MISCALIBRATIONS = {  # the true P(y = 1 | s) = g(s)
    "temperature 1.5 (overconfident)": lambda s: expit(_logit(s) / 1.5),
    "temperature 0.7 (underconfident)": lambda s: expit(_logit(s) / 0.7),
    "logit - 0.5": lambda s: expit(_logit(s) - 0.5),
    "logit + 0.5": lambda s: expit(_logit(s) + 0.5),
}


def confident_pools(rng, quick):
    pools = {}
    if not quick:
        pools["OCR chain CRF marginal events"] = ocr_crf_confidences()
    for mean, sd in ((0.9, 1.5), (0.95, 1.5), (0.99, 1.0)):
        if quick and mean != 0.95:
            continue
        pools[f"logit-normal, mean {mean}"] = logit_normal_pool(rng, mean, sd, 200_000)
    return pools


ORACLE = "reference: mean of sign(g(s) - s) * (y - s)"


def efficiency_bound(eta, pool, m):
    """95th-percentile relative error of an efficient estimator of the ECE at size ``m``.

    ``ECE = E |g(s) - s|`` has efficient influence function ``sign(g(s) - s) (y - s) -
    ECE``, of variance ``Var |g(s) - s| + E g(s) (1 - g(s))`` over the pool: no regular
    estimator has a smaller asymptotic variance. Returned is ``1.96 sd / ECE`` (normal
    approximation). Estimators that are biased in the right direction can read a few
    percent below it at finite ``m``; none can be clearly below it once the error is
    dominated by the sampling noise.
    """
    truth = np.mean(np.abs(eta - pool))
    var = np.var(np.abs(eta - pool)) + np.mean(eta * (1.0 - eta))
    return float(1.96 * np.sqrt(var / m) / truth)


def evaluation_sets(args, m):
    """Evaluation sets at size ``m`` in the confident regime: ``args.resamples``, and at
    ``m >= 10^5`` ``args.large_resamples`` (if set; else a fifth, at least 5)."""
    if m < 100_000:
        return args.resamples
    return getattr(args, "large_resamples", None) or max(5, args.resamples // 5)


def run_confident(args, rng, estimators=ESTIMATORS, reference=False, keep=False):
    """p95 relative errors on miscalibrated confident pools, readings on calibrated ones.

    Every record carries the efficiency bound of its distribution at each size (see
    :func:`efficiency_bound`). ``reference=True`` adds an estimator no real one can be:
    it knows the sign of the miscalibration ``g(s) - s`` at every score, so ``mean(sign
    * (y - s))`` is unbiased, with the bound's variance. It is not a floor for the p95
    error at finite sizes (estimators biased upwards, as the plug-ins are, can read
    below it). ``keep=True`` keeps every estimate (``records[i]["estimates"][name][j]``,
    arrays over evaluation sets) for paired comparisons.
    """
    names = list(estimators) + ([ORACLE] if reference else [])
    pools = confident_pools(rng, args.quick)
    records, calibrated = [], {}
    for pname, pool in pools.items():
        for gname, g in {**MISCALIBRATIONS, "calibrated": lambda s: s}.items():
            if args.quick and gname not in ("calibrated", "temperature 1.5 (overconfident)"):
                continue
            eta = g(pool)
            truth = float(np.mean(np.abs(eta - pool)))
            sign = np.sign(eta - pool)
            values = {name: [] for name in names}
            kept = {name: [] for name in names}
            for m in args.confident_sizes:
                reps = evaluation_sets(args, m)
                est = {name: np.empty(reps) for name in names}
                for r in range(reps):
                    idx = rng.integers(0, len(pool), m)
                    s, y = pool[idx], (rng.random(m) < eta[idx]).astype(np.int64)
                    for name, f in estimators.items():
                        est[name][r] = f(y, s, "binary")
                    if reference:
                        est[ORACLE][r] = float(np.mean(sign[idx] * (y - s)))
                for name in names:
                    kept[name].append(est[name])
                    if gname == "calibrated":
                        values[name].append(float(est[name].mean()))
                    else:
                        rel = np.abs(est[name] - truth) / truth
                        values[name].append(float(np.percentile(rel, 95)))
            if gname == "calibrated":
                calibrated[pname] = {"mean_forecast": float(pool.mean()),
                                     "mean_estimate": values}
            else:
                records.append({"pool": pname, "miscalibration": gname, "true_ece": truth,
                                "mean_forecast": float(pool.mean()), "p95": values,
                                "bound": [efficiency_bound(eta, pool, m)
                                          for m in args.confident_sizes]})
                if keep:
                    records[-1]["estimates"] = kept
            if args.progress:
                print(f"  confident: {pname} / {gname}: true ECE {truth:.5f}", file=sys.stderr)
    summary = {name: [float(np.median([r["p95"][name][j] for r in records]))
                      for j in range(len(args.confident_sizes))] for name in names}
    return records, calibrated, summary, pools


def paired_ratio(records, name, base, j, rng, n_boot=400):
    """Median p95 error of ``name`` over that of ``base`` at size index ``j``.

    Returns ``(ratio, low, high, wins)``: the ratio of the medians over distributions,
    its 95% paired bootstrap interval (distributions resampled, and within each the
    evaluation sets, the same sets for both estimators), and on how many distributions
    ``name`` has the lower p95 error. Needs records from ``run_confident(keep=True)``.
    """
    def medians(dists, rows):
        a, b = (
            [np.percentile(np.abs(records[d]["estimates"][which][j][r]
                                  - records[d]["true_ece"]) / records[d]["true_ece"], 95)
             for d, r in zip(dists, rows)]
            for which in (name, base)
        )
        return np.median(a) / np.median(b), a, b

    n_sets = [len(r["estimates"][name][j]) for r in records]
    everything = np.arange(len(records))
    ratio, a, b = medians(everything, [slice(None)] * len(records))
    boot = np.empty(n_boot)
    for k in range(n_boot):
        dists = rng.integers(0, len(records), len(records))
        boot[k] = medians(dists, [rng.integers(0, n_sets[d], n_sets[d]) for d in dists])[0]
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(ratio), float(low), float(high), int(np.sum(np.less(a, b)))


def confident_check(args):
    """Only the default against the legacy estimator in the confident regime (more sets)."""
    pair = {name: ESTIMATORS[name] for name in (LEGACY, DEFAULT)}
    rng = np.random.default_rng(args.seed + 3)
    records, _, summary, pools = run_confident(args, rng, pair, reference=True, keep=True)
    sizes = args.confident_sizes
    bound = [float(np.median([r["bound"][j] for r in records])) for j in range(len(sizes))]
    print(f"confident regime, default vs legacy: {len(records)} score distributions, "
          + ", ".join(f"{evaluation_sets(args, m)} evaluation sets at n = {m}"
                      for m in args.confident_sizes) + f" (seed {args.seed + 3})")
    print("median over distributions of the 95th-percentile relative error")
    print(f"{'estimator':42s}" + "".join(f"{'n=' + str(m):>10s}" for m in sizes))
    for name, vals in summary.items():
        print(f"{name:42s}" + "".join(f"{v:10.4f}" for v in vals))
    print(f"{'efficiency bound (normal approximation)':42s}"
          + "".join(f"{v:10.4f}" for v in bound))
    brng = np.random.default_rng(args.seed + 4)
    paired = [paired_ratio(records, DEFAULT, LEGACY, j, brng) for j in range(len(sizes))]
    print("ratio default / legacy [95% paired bootstrap]: " + ", ".join(
        f"{r:.3f} [{lo:.2f}, {hi:.2f}]" for r, lo, hi, _ in paired))
    print("distributions where the default's p95 error is lower: "
          + ", ".join(f"{w}/{len(records)}" for *_, w in paired))
    # each distribution alone: the same paired bootstrap over its evaluation sets
    alone = [[paired_ratio([r], DEFAULT, LEGACY, j, brng)[:3] for r in records]
             for j in range(len(sizes))]
    clear = [[sum(hi < 1 for _, _, hi in a), sum(lo > 1 for _, lo, _ in a)] for a in alone]
    print("distributions where the default's p95 error is clearly lower / clearly higher "
          "(95% paired interval of the ratio below / above 1): "
          + ", ".join(f"{lo} / {hi}" for lo, hi in clear))
    print("per distribution: p95 error of legacy, default; ratio [95% paired bootstrap]")
    for i, r in enumerate(records):
        print(f"  {r['pool'][:30]:30s} {r['miscalibration'][:32]:32s}" + "".join(
            f"  {r['p95'][LEGACY][j]:.3f} {r['p95'][DEFAULT][j]:.3f} "
            f"{alone[j][i][0]:.2f} [{alone[j][i][1]:.2f}, {alone[j][i][2]:.2f}]"
            for j in range(len(sizes))))
    for r in records:
        del r["estimates"]
    return {"sizes": sizes, "resamples": [evaluation_sets(args, m) for m in sizes],
            "summary": summary,
            "efficiency_bound": bound, "ratio": [p[0] for p in paired],
            "ratio_interval": [[p[1], p[2]] for p in paired],
            "wins": [p[3] for p in paired], "clearly_lower_higher": clear,
            "records": records,
            "pools": {k: float(v.mean()) for k, v in pools.items()}}


def interval_coverage(args, rng, pools, estimator=calibration_error):
    """How often the default's 95% intervals contain the estimate and the truth.

    ``estimator(y, s)`` returns a result with ``estimate`` and ``confidence_interval``
    (the default: :func:`calibration_error`).
    """
    out = {}
    g = MISCALIBRATIONS["temperature 1.5 (overconfident)"]
    for m in args.coverage_sizes:
        counts = {meth: {"contains_estimate": 0, "contains_truth": 0}
                  for meth in ("recentred", "percentile")}
        total = 0
        for pname, pool in pools.items():
            eta = g(pool)
            truth = float(np.mean(np.abs(eta - pool)))
            for _ in range(args.coverage_reps):
                idx = rng.integers(0, len(pool), m)
                s, y = pool[idx], (rng.random(m) < eta[idx]).astype(np.int64)
                r = estimator(y, s)
                seed = int(rng.integers(1 << 31))
                for meth in counts:
                    ci = r.confidence_interval(random_state=seed, method=meth)
                    counts[meth]["contains_estimate"] += ci.low <= r.estimate <= ci.high
                    counts[meth]["contains_truth"] += ci.low <= truth <= ci.high
                total += 1
        out[str(m)] = {meth: {k: v / total for k, v in c.items()} for meth, c in counts.items()}
        out[str(m)]["n_intervals"] = total
    return out


def recommendation(summary, sizes_of):
    lines, verdict = [], {}
    for setting, table in summary.items():
        sizes = sizes_of[setting]
        mean_err = {name: float(np.mean(v)) for name, v in table.items()}
        best = min(mean_err, key=mean_err.get)
        per_size = [min(table, key=lambda name: table[name][j]) for j in range(len(sizes))]
        beats = [d < leg for d, leg in zip(table[DEFAULT], table[LEGACY])]
        verdict[setting] = {
            "best_on_average": best,
            "best_per_size": dict(zip(map(str, sizes), per_size)),
            "default_beats_legacy_at_every_size": bool(all(beats)),
            "default_beats_legacy": beats,
            "default_vs_legacy_ratio": [d / leg for d, leg in zip(table[DEFAULT],
                                                                   table[LEGACY])],
        }
        where = "at every size" if all(beats) else (
            f"only at sizes {[m for m, b in zip(sizes, beats) if b]}, not at "
            f"{[m for m, b in zip(sizes, beats) if not b]}")
        lines.append(
            f"{setting}: the default beats the legacy 15-bin estimator {where}"
            f" (error ratio {min(verdict[setting]['default_vs_legacy_ratio']):.2f}.."
            f"{max(verdict[setting]['default_vs_legacy_ratio']):.2f}); lowest mean error: "
            f"{best}; best per size: "
            + ", ".join(f"n={m}: {name}" for m, name in zip(sizes, per_size))
        )
    return lines, verdict


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a tiny run (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=100, help="evaluation sets per size")
    ap.add_argument("--large-resamples", type=int, metavar="N", help="evaluation sets at "
                    "n >= 10^5 in the confident regime (default: a fifth of --resamples)")
    ap.add_argument("--progress", action="store_true", help="report progress on stderr")
    ap.add_argument("--save", metavar="PATH", help="also write the JSON output to PATH")
    ap.add_argument("--confident-check", type=int, nargs="+", metavar="N",
                    help="only compare the default with the legacy estimator on confident "
                         "forecasts at these sizes (use with --resamples)")
    args = ap.parse_args(argv)
    if args.confident_check:
        args.quick, args.progress, args.confident_sizes = False, False, args.confident_check
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SparseBinsWarning)
            out = confident_check(args)
        if args.save:
            Path(args.save).write_text(json.dumps(out, indent=2) + "\n")
        return out
    if args.quick:
        args.classes, args.dims, args.problems = [2], [2], 1
        args.sizes, args.resamples = [30, 100], min(args.resamples, 20)
        args.holdout, args.truth_bins, args.train = 20_000, 50, 300
        args.confident_sizes, args.coverage_sizes, args.coverage_reps = [100, 1000], [300], 2
    else:
        args.confident_sizes = [100, 1_000, 10_000, 100_000]
        args.coverage_sizes, args.coverage_reps = [100, 1_000, 10_000], 25
        args.classes, args.dims, args.problems = [2, 4], [2, 8], 2
        args.sizes = [30, 50, 100, 200, 500]
        args.holdout, args.truth_bins, args.train = 400_000, 200, 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseBinsWarning)
        records, summary, elapsed = run(args)
        bias_sizes = [100, 1000] if args.quick else [100, 1_000, 10_000, 100_000]
        bias = calibrated_bias(np.random.default_rng(args.seed + 1), bias_sizes,
                               3 if args.quick else 20)
        t0 = time.time()
        crng = np.random.default_rng(args.seed + 2)
        conf_records, conf_calibrated, conf_summary, pools = run_confident(args, crng)
        coverage = interval_coverage(args, crng, pools)
        conf_elapsed = time.time() - t0
    summary = {**summary, "confident (binary)": conf_summary}
    sizes_of = {k: args.sizes for k in summary}
    sizes_of["confident (binary)"] = args.confident_sizes
    lines, verdict = recommendation(summary, sizes_of)
    out = {
        "protocol": {
            "classes": args.classes, "dims": args.dims, "problems_per_cell": args.problems,
            "train_size": args.train, "holdout": args.holdout, "truth_bins": args.truth_bins,
            "sizes": args.sizes, "resamples": args.resamples, "seed": args.seed,
            "models": sorted({r["model"] for r in records}),
            "n_score_distributions": len({(r["classes"], r["dim"], r["problem"], r["model"])
                                          for r in records}),
        },
        "median_p95_relative_error": summary,
        "verdict": verdict,
        "calibrated_bias": {"sizes": bias_sizes, "mean_estimate": bias},
        "confident": {
            "sizes": args.confident_sizes,
            "pools": {k: {"size": int(len(v)), "mean_forecast": float(v.mean())}
                      for k, v in pools.items()},
            "miscalibrations": [r["miscalibration"] for r in conf_records[:4]],
            "records": conf_records,
            "calibrated_mean_estimate": conf_calibrated,
            "interval_coverage": coverage,
            "seconds": conf_elapsed,
        },
        "true_ece": [{k: r[k] for k in ("classes", "dim", "problem", "model", "setting",
                                        "true_ece", "accuracy")} for r in records],
        "seconds": elapsed,
    }
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=2) + "\n")
    if args.json:
        print(json.dumps(out, indent=2))
        return out
    p = out["protocol"]
    print(f"ECE estimator study: {p['n_score_distributions']} score distributions "
          f"({len(p['models'])} models x {len(args.classes) * len(args.dims) * args.problems} "
          f"mixture problems), {args.resamples} evaluation sets per size, {elapsed:.0f} s")
    print("median over distributions of the 95th-percentile relative error |est - true| / "
          "true (lower is better)")
    for setting, table in summary.items():
        if setting == "confident (binary)":
            print(f"\n[{setting}: {len(conf_records)} score distributions = "
                  f"{len(pools)} pools x {len(conf_records) // max(len(pools), 1)} "
                  "miscalibrations, mean forecast "
                  + ", ".join(f"{v.mean():.3f}" for v in pools.values()) + "]")
        else:
            print(f"\n[{setting}]")
        sizes = sizes_of[setting]
        print(f"{'estimator':42s}" + "".join(f"{'n=' + str(m):>9s}" for m in sizes))
        for name, vals in table.items():
            print(f"{name:42s}" + "".join(f"{v:9.3f}" for v in vals))
        if setting == "confident (binary)":
            bound = [np.median([r["bound"][j] for r in conf_records]) for j in range(len(sizes))]
            print(f"{'efficiency bound (see efficiency_bound)':42s}"
                  + "".join(f"{v:9.3f}" for v in bound))
    truths = np.array([r["true_ece"] for r in records])
    print(f"\ntrue ECEs: median {np.median(truths):.3f}, range {truths.min():.3f}.."
          f"{truths.max():.3f}")
    print("\nmean estimate on perfectly calibrated forecasts (true ECE = 0; y ~ Bernoulli(p))")
    for dist, table in bias.items():
        print(f"[p ~ {dist}]")
        print(f"{'estimator':42s}" + "".join(f"{'n=' + str(m):>10s}" for m in bias_sizes))
        for name, vals in table.items():
            print(f"{name:42s}" + "".join(f"{v:10.4f}" for v in vals))
    print("\nmean estimate on perfectly calibrated confident forecasts (true ECE = 0)")
    for pname, rec in conf_calibrated.items():
        print(f"[{pname}, mean forecast {rec['mean_forecast']:.3f}]")
        print(f"{'estimator':42s}" + "".join(f"{'n=' + str(m):>10s}"
                                             for m in args.confident_sizes))
        for name in (LEGACY, PREVIOUS, DEFAULT):
            print(f"{name:42s}" + "".join(f"{v:10.4f}" for v in rec["mean_estimate"][name]))
    print("\n95% bootstrap intervals of the default (200 resamples) on the temperature-1.5 "
          "pools: fraction containing")
    print(f"{'n':>8s} {'intervals':>10s} {'recentred: est.':>16s} {'truth':>7s} "
          f"{'percentile: est.':>17s} {'truth':>7s}")
    for m, c in coverage.items():
        print(f"{m:>8s} {c['n_intervals']:10d} {c['recentred']['contains_estimate']:16.3f} "
              f"{c['recentred']['contains_truth']:7.3f} "
              f"{c['percentile']['contains_estimate']:17.3f} "
              f"{c['percentile']['contains_truth']:7.3f}")
    print("\n".join(["", "recommendation:"] + lines))
    return out


if __name__ == "__main__":
    main()
