"""The synthetic experiments of Kuleshov & Ermon (2017), Figure 2, and online throughput.

Experiments (grid N = ``--n-grid``, Algorithm 1 with M = N buckets, both subroutines):

bernoulli
    y_t ~ Bernoulli(1/2) i.i.d.; the base forecaster says 0.3 when y_t = 0 and 0.7 when
    y_t = 1 (a perfect classifier, badly calibrated). Algorithm 1 should become calibrated
    within a few hundred steps and stay as accurate as the base (here: sharpen it to 0/1);
    the subroutine alone (M = 1, it never sees the base forecast) is calibrated but
    useless (about 1/2 every time).
adversary
    The base forecast is noise, p^F_t ~ Bernoulli(1/2) (so 0 or 1), and the outcome is
    chosen after seeing the forecaster's *mixed* forecast: y_t = 1 if its mean is <= 1/2,
    else 0 (the standard adversary of online calibration: it knows the algorithm, the
    past and the distribution of p_t, not the coin). Algorithm 1 should ignore the noise
    and reduce to the subroutine. The base row is scored on the outcomes generated against
    Algorithm 1 (regret subroutine).
adversary-sees-coin
    The same rule applied to the *realised* forecast, y_t = 1[p_t <= 1/2]: every forecast
    <= 1/2 is followed by a 1 and every larger one by a 0, so C_T^1 >= 1/2 for any
    forecaster. Shown to make the adversary model of the guarantees concrete.

Reported: C_T^1 and C_T^2 (eq. (1) on the grid; the paper plots the l2 version) and the
average l2 loss at T = 100, 300, 1000, 10000, mean and standard deviation over
``--seeds`` seeds. Then the throughput of the compiled stream call and of the step API
(median of ``--repeats`` runs; rough on a shared machine).

Run: ``python benchmarks/online_synthetic.py [--json] [--seeds 10] [--n-grid 10]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numba
import numpy as np

from structcal.online import OnlineRecalibrator, running_metrics

HORIZONS = (100, 300, 1000, 10000)
METRICS = ("calibration_l1", "calibration_l2", "l2_loss")


def bernoulli_stream(seed, T):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=T)
    return np.where(y == 1, 0.7, 0.3), y


def play_adversary(rec, p_raw, sees_coin):
    """Run ``rec`` step by step against y_t = 1[p_t <= 1/2] (mixed mean or realised p_t)."""
    T = p_raw.shape[0]
    forecasts, ys = np.empty(T), np.empty(T, dtype=np.int64)
    rec.partial_fit(np.empty((0, 1)), np.empty(0, dtype=np.int64))  # an empty stream: state
    for t in range(T):
        q = rec.predict_proba(p_raw[t : t + 1, None])[0, 1]  # mean of the mixed forecast
        forecasts[t] = rec.forecast(p_raw[t])  # the coin is drawn here
        ys[t] = int((forecasts[t] if sees_coin else q) <= 0.5)
        rec.update(p_raw[t], ys[t])
    return forecasts, ys


def summarize(runs):
    """runs: list of RunningMetrics (one per seed) -> {T: {metric: (mean, std)}}."""
    out = {}
    for T in HORIZONS:
        out[T] = {}
        for name in METRICS:
            vals = np.array([getattr(m, name)[T - 1] for m in runs])
            out[T][name] = (float(vals.mean()), float(vals.std()))
    return out


def experiment_bernoulli(seeds, n_grid):
    T = max(HORIZONS)
    rows = {"base": []}
    for method in ("regret", "blackwell"):
        rows[f"subroutine alone ({method})"] = []
        rows[f"Algorithm 1 ({method})"] = []
    for seed in range(seeds):
        p, y = bernoulli_stream(seed, T)
        rows["base"].append(running_metrics(p, y, n_grid=n_grid))
        for method in ("regret", "blackwell"):
            for label, M in (("subroutine alone", 1), ("Algorithm 1", n_grid)):
                rec = OnlineRecalibrator(n_grid=n_grid, n_buckets=M, method=method,
                                         random_state=seed)
                f = rec.forecast_stream(p, y)
                rows[f"{label} ({method})"].append(running_metrics(f, y, n_grid=n_grid))
    return {k: summarize(v) for k, v in rows.items()}


def experiment_adversary(seeds, n_grid):
    T = max(HORIZONS)
    rows = {"base (noise)": []}
    for method in ("regret", "blackwell"):
        rows[f"subroutine alone ({method})"] = []
        rows[f"Algorithm 1 ({method})"] = []
    rows["Algorithm 1 (regret), adversary sees the coin"] = []
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        p_raw = rng.integers(0, 2, size=T).astype(np.float64)
        for method in ("regret", "blackwell"):
            for label, M in (("subroutine alone", 1), ("Algorithm 1", n_grid)):
                rec = OnlineRecalibrator(n_grid=n_grid, n_buckets=M, method=method,
                                         random_state=seed)
                f, y = play_adversary(rec, p_raw, sees_coin=False)
                rows[f"{label} ({method})"].append(running_metrics(f, y, n_grid=n_grid))
                if label == "Algorithm 1" and method == "regret":
                    rows["base (noise)"].append(running_metrics(p_raw, y, n_grid=n_grid))
        rec = OnlineRecalibrator(n_grid=n_grid, method="regret", random_state=seed)
        f, y = play_adversary(rec, p_raw, sees_coin=True)
        rows["Algorithm 1 (regret), adversary sees the coin"].append(
            running_metrics(f, y, n_grid=n_grid)
        )
    return {k: summarize(v) for k, v in rows.items()}


def throughput(repeats):
    """Steps per second of forecast_stream (compiled) and of forecast+update (Python)."""
    out = {}
    T = 1_000_000
    p, y = bernoulli_stream(0, T)
    rng = np.random.default_rng(0)
    q = rng.random(T)
    yq = (rng.random(T) < q).astype(np.int64)
    for method in ("regret", "blackwell"):
        for n_grid in (10, 100):
            for name, (pp, yy) in (("bernoulli", (p, y)), ("uniform", (q, yq))):
                OnlineRecalibrator(n_grid=n_grid, method=method).forecast_stream(pp[:10], yy[:10])
                times = []
                for _ in range(repeats):
                    rec = OnlineRecalibrator(n_grid=n_grid, method=method, random_state=0)
                    t = time.perf_counter()
                    rec.forecast_stream(pp, yy)
                    times.append(time.perf_counter() - t)
                out[f"stream_{method}_N{n_grid}_{name}_steps_per_s"] = T / float(np.median(times))
    n = 20000
    times = []
    for _ in range(repeats):
        rec = OnlineRecalibrator(random_state=0)
        t = time.perf_counter()
        for i in range(n):
            rec.forecast(p[i])
            rec.update(p[i], y[i])
        times.append(time.perf_counter() - t)
    out["step_api_regret_N10_steps_per_s"] = n / float(np.median(times))
    return out


def print_table(title, table):
    print(f"\n{title}")
    head = f"{'forecaster':<46}{'metric':<16}" + "".join(f"{'T=' + str(T):>18}" for T in HORIZONS)
    print(head)
    print("-" * len(head))
    for label, per_T in table.items():
        for name in METRICS:
            cells = "".join(
                f"{per_T[T][name][0]:>10.4f} ±{per_T[T][name][1]:<6.4f}" for T in HORIZONS
            )
            short = {"calibration_l1": "C_T^1", "calibration_l2": "C_T^2", "l2_loss": "l2 loss"}
            print(f"{label if name == METRICS[0] else '':<46}{short[name]:<16}{cells}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seeds", type=int, default=10, help="seeds averaged per row")
    parser.add_argument("--n-grid", type=int, default=10, help="grid resolution N (M = N)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per throughput cell")
    parser.add_argument("--no-timing", action="store_true", help="skip the throughput runs")
    args = parser.parse_args()

    t0 = time.perf_counter()
    bern = experiment_bernoulli(args.seeds, args.n_grid)
    adv = experiment_adversary(args.seeds, args.n_grid)
    seconds = time.perf_counter() - t0
    timing = {} if args.no_timing else throughput(args.repeats)

    out = {
        "config": {
            "n_grid": args.n_grid,
            "n_buckets_algorithm1": args.n_grid,
            "seeds": args.seeds,
            "horizons": list(HORIZONS),
            "experiment_seconds": seconds,
            "repeats": args.repeats,
            "machine": f"{platform.processor() or platform.machine()}, numba {numba.__version__}",
        },
        "bernoulli": {k: {str(T): v for T, v in d.items()} for k, d in bern.items()},
        "adversary": {k: {str(T): v for T, v in d.items()} for k, d in adv.items()},
        "throughput": timing,
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"Kuleshov & Ermon (2017) synthetic experiments: N = {args.n_grid}, Algorithm 1 with "
          f"M = N, mean ± std over {args.seeds} seeds ({seconds:.1f} s)")
    print_table("Bernoulli(1/2) outcomes, base forecasts 0.3 (y=0) / 0.7 (y=1)", bern)
    print_table("Adversary y_t = 1[mean of the mixed forecast <= 1/2], base forecasts "
                "Bernoulli(1/2) noise", adv)
    if timing:
        print(f"\nthroughput (median of {args.repeats}; shared machine, rough):")
        for k, v in timing.items():
            print(f"  {k:<48}{v:>14,.0f}")


if __name__ == "__main__":
    main()
