"""Which valid test for the group certificate? Threshold allocations and the betting bound.

:class:`structcal.guarantees.PrecisionGuarantee` tests thresholds from the strictest down
by the fallback procedure, with shares of delta fixed before any data. This script puts
that choice beside the alternatives, on the same calibration halves (random splits by
group of the pools of ``guarantees_study.py``; the synthetic family draws a fresh world
per split), all with the same betting e-values of the per-group terms:

- ``two sequences``: fixed-sequence testing from the target down at ``0.9 delta`` and
  from halfway to 1 down at ``0.1 delta`` (union bound);
- ``anchors``: the fallback procedure, ``0.7 delta`` at the target and ``0.1 delta`` a
  quarter, half and three quarters of the way to 1 (structcal's rule);
- ``band 1/2``, ``band 3/4``: the fallback procedure with delta spread evenly over every
  threshold from the target to halfway (three quarters of the way) to 1;
- ``best bet``: at each threshold, the capital of the single constant bet that is best
  in hindsight, passed down from the target at level ``delta``. Not a valid test (the
  bet is chosen on the data): an upper bound on what any betting test of these terms,
  from the target down, could certify.

Reported per setting: the median share of the test half accepted, and its ratio to the
oracle's (the loosest threshold meeting the target on the test half itself).

Run: ``python benchmarks/guarantees_tests_compared.py [--splits 60] [--json]`` (about 3
minutes on 2 cores, most of it loading the GUM taggers' predictions).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _study_data as data  # noqa: E402
from guarantees_study import calibrated, oracle_threshold, synthetic_world  # noqa: E402

from structcal.events import EntitySpans, MAPEvent, ObjectEvents  # noqa: E402
from structcal.guarantees import (  # noqa: E402
    _ANCHORS, _allocation, _fallback, _group_counts, _threshold_grid, betting_evalues,
    binomial_tail_pvalue,
)

DELTA = 0.1
GRID = _threshold_grid(0.005)


def evidence(p, y, g, target):
    """E-values of every grid threshold (as the certificate computes them), whether any
    event is accepted there, and the per-group terms (for the hindsight bet)."""
    _, gi = np.unique(g, return_inverse=True)
    G = int(gi.max()) + 1
    A, FP, n_acc = _group_counts(p, (~y).astype(np.float64), gi, G, GRID, np.ones(p.size))
    R = np.where(A > 0, FP / np.where(A > 0, A, 1.0) - (1.0 - target), 0.0)
    if G == p.size:
        E = 1.0 / np.maximum(binomial_tail_pvalue(FP.sum(0), A.sum(0), 1 - target), 1e-300)
    else:
        E = betting_evalues(R, target)
    return E, n_acc.sum(axis=0) > 0, R


def _shares(target, spec):
    share = np.zeros(GRID.size)
    for frac, w in spec:
        share[max(int(np.searchsorted(GRID, target + frac * (1 - target) + 1e-12)) - 1, 0)] += w
    return share


def _band(target, top):
    lo, hi = target - 1e-9, target + top * (1 - target) + 1e-9
    share = ((GRID >= lo) & (GRID <= hi)).astype(float)
    return share / share.sum()


def two_sequences(E, usable, target):
    main = int(np.searchsorted(GRID, target + 1e-12)) - 1
    strict = max(int(np.searchsorted(GRID, (1 + target) / 2 + 1e-12)) - 1, main)
    best = None
    for start, share in ((main, 0.9), (strict, 0.1)):
        j = start
        while j >= 0 and usable[j] and E[j] >= 1 / (share * DELTA):
            best = j if best is None else min(best, j)
            j -= 1
    return best


def best_bet(R, usable, target):
    z = R / target
    lams = np.linspace(0.0, 0.999, 200)
    logcap = np.log1p(-lams[None, None, :] * z[:, :, None]).sum(axis=0).max(axis=1)
    j = int(np.searchsorted(GRID, target + 1e-12)) - 1
    best = None
    while j >= 0 and usable[j] and logcap[j] >= np.log(1 / DELTA):
        best, j = j, j - 1
    return best


RULES = {
    "two sequences": lambda E, u, R, t: two_sequences(E, u, t),
    "anchors": lambda E, u, R, t: _fallback(E, _allocation(GRID, t)[0], DELTA, u),
    "band 1/2": lambda E, u, R, t: _fallback(E, _band(t, 0.5), DELTA, u),
    "band 3/4": lambda E, u, R, t: _fallback(E, _band(t, 0.75), DELTA, u),
    "best bet": lambda E, u, R, t: best_bet(R, u, t),
}


def compare(name, draw, targets, splits, rng):
    out = {}
    for target in targets:
        acc = {k: [] for k in RULES}
        orc = []
        for _ in range(splits):
            p, y, g = draw(rng)
            groups = np.unique(g)
            cal = np.isin(g, rng.permutation(groups)[: groups.size // 2])
            test = ~cal
            E, usable, R = evidence(p[cal], y[cal], g[cal], target)
            for rule, f in RULES.items():
                j = f(E, usable, R, target)
                acc[rule].append(float((p[test] >= (GRID[j] if j is not None else np.inf)).mean()))
            orc.append(float((p[test] >= oracle_threshold(p[test], y[test], target)).mean()))
        om = float(np.median(orc))
        out[str(target)] = {"oracle": om, **{
            rule: {"median_accepted": float(np.median(v)),
                   "of_oracle": float(np.median(v)) / om if om > 0 else None}
            for rule, v in acc.items()}}
        print(f"  {name} @ {target}: oracle {om:.3f}; " + "; ".join(
            f"{r} {out[str(target)][r]['median_accepted']:.3f}" for r in RULES),
            file=sys.stderr, flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    fixed = lambda p, y, g: (lambda r: (p, y, g))  # noqa: E731
    settings = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gum = data.gum_crossfit()
        docs = np.unique(gum.groups)
        fit_docs = np.random.default_rng(1).permutation(docs)[:32]
        fit_src = gum.subset(np.flatnonzero(np.isin(gum.groups, fit_docs)), "gum-fit")
        pool = gum.subset(np.flatnonzero(~np.isin(gum.groups, fit_docs)), "gum-pool")
        p, y, g, _, _ = calibrated(fit_src, pool, EntitySpans(gum.pred.potentials.label_names))
        settings["gum entities"] = compare("gum entities", fixed(p, y, g), (0.7, 0.8),
                                           args.splits, rng)
        o = data.ocr()
        p, y, g, _, _ = calibrated(o["recalibration"], o["test"], MAPEvent())
        settings["ocr words"] = compare("ocr words", fixed(p, y, g), (0.8, 0.9, 0.95),
                                        args.splits, rng)
        b = data.bbbc039()
        p, y, g, _, _ = calibrated(b["val"], b["test"], ObjectEvents())
        settings["bbbc039 nuclei"] = compare("bbbc039 nuclei", fixed(p, y, g),
                                             (0.8, 0.9, 0.95), args.splits, rng)
        for icc in (0.0, 0.2, 0.4, 0.6):
            settings[f"synthetic icc {icc}"] = compare(f"synthetic icc {icc}",
                                                       synthetic_world(icc), (0.8, 0.9),
                                                       args.splits, rng)
    result = {"command": f"python benchmarks/guarantees_tests_compared.py --splits {args.splits}",
              "delta": DELTA, "anchors": [list(a) for a in _ANCHORS], "settings": settings}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{'setting':<28}{'target':>7}{'oracle':>8}" + "".join(f"{r:>17}" for r in RULES))
    for name, per in settings.items():
        for t, v in per.items():
            cells = []
            for r in RULES:
                ratio = v[r]["of_oracle"]
                cells.append(f"{v[r]['median_accepted']:>10.3f} ({'-' if ratio is None else f'{ratio:.2f}'})")
            print(f"{name:<28}{t:>7}{v['oracle']:>8.3f}" + "".join(f"{c:>17}" for c in cells))
    print(f"\ndelta {DELTA}; {result['command']}")


if __name__ == "__main__":
    main()
