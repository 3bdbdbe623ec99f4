"""Would another valid precision certificate accept more? Variants of
:class:`structcal.guarantees.PrecisionGuarantee` on the group re-splits of
``guarantees_study.py``.

Every variant keeps the guarantee's validity argument (exchangeable groups, no plug-in
estimate); they differ where power is won or lost:

- ``structcal``: the shipped certificate (betting e-values over a fixed grid of bets;
  fallback procedure from anchors at the target and a quarter, half and three quarters
  of the way to 1);
- ``anchors6``, ``anchors8``: the same e-values, ``delta`` spread over six or eight
  anchors (more thresholds where a run can start);
- ``anchors_low``: an anchor below the target too (where calibrated forecasts below the
  target still give precise accepted sets);
- ``split``: a third of the calibration groups chooses, and orders, the thresholds that
  the other two thirds test in a fixed sequence (the order may depend on data that the
  test does not use);
- ``predictable``: e-values of predictable bets (aGRAPA, Waudby-Smith & Ramdas) averaged
  over 8 fixed permutations of the groups, instead of the mixture over fixed bets.

Reported per setting: the share of splits meeting the target (pooled test precision) and
the median share of test events accepted, with its ratio to the oracle's (the loosest
threshold meeting the target on the test half itself).

Run: ``python benchmarks/guarantees_variants.py [--splits 100]`` (about 10 minutes on
2 cores once ``guarantees_study.py``'s taggers are cached;
``benchmarks/results/guarantees_variants.txt``).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _study_data as data  # noqa: E402
import guarantees_study as gs  # noqa: E402

import structcal.guarantees as G  # noqa: E402
from structcal.events import EntitySpans, MAPEvent, ObjectEvents  # noqa: E402

DELTA = gs.DELTA
GRID = G._threshold_grid(G.THRESHOLD_STEP)


def with_anchors(anchors):
    def threshold(p, y, g, target, rng):
        old = G._ANCHORS
        G._ANCHORS = anchors
        try:
            return shipped(p, y, g, target, rng)
        finally:
            G._ANCHORS = old
    return threshold


def shipped(p, y, g, target, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return G.PrecisionGuarantee(target, DELTA).fit(p, y, groups=g).thresholds_[0]


def _terms(p, y, g, target):
    _, gi = np.unique(g, return_inverse=True)
    A, FP, n_acc = G._group_counts(p, (~y).astype(float), gi, int(gi.max()) + 1, GRID,
                                   np.ones(p.size))
    return np.where(A > 0, FP / np.where(A > 0, A, 1.0) - (1.0 - target), 0.0), n_acc


def split(p, y, g, target, rng, share=1 / 3, margin=1.0):
    groups = np.unique(g)
    chosen = rng.permutation(groups)[: max(1, round(share * groups.size))]
    s = np.isin(g, chosen)
    R, n_acc = _terms(p[s], y[s], g[s], target)
    growth = np.log1p(-G._BETS[None, None, :] * (R / target)[:, :, None]).mean(axis=0)
    expected = (groups.size - chosen.size) * growth.max(axis=1) - np.log(G._BETS.size)
    order = np.flatnonzero((expected >= np.log(1 / DELTA) + margin)
                           & (n_acc.sum(axis=0) > 0))[::-1]
    if order.size == 0:
        return np.inf
    E = G.betting_evalues(_terms(p[~s], y[~s], g[~s], target)[0], target)
    best = np.inf
    for j in order:  # fixed sequence: stop at the first threshold not certified
        if E[j] < 1 / DELTA:
            break
        best = GRID[j]
    return best


def predictable_evalues(values, upper=1.0, n_perm=8):
    x = np.asarray(values, float)
    one = x.ndim == 1
    x = x[:, None] if one else x
    z = -np.minimum(x / np.broadcast_to(np.asarray(upper, float), (x.shape[1],)), 1.0)
    perms = np.random.default_rng(0)
    total = np.zeros(z.shape[1])
    n = z.shape[0]
    k = np.arange(1, n + 1)[:, None]
    for _ in range(n_perm):
        zp = z[perms.permutation(n)]
        mean = np.vstack([np.zeros((1, z.shape[1])), (np.cumsum(zp, 0) / (k + 1))[:-1]])
        second = np.vstack([np.full((1, z.shape[1]), 0.25),
                            ((np.cumsum(zp**2, 0) + 0.25) / (k + 1))[:-1]])
        bet = np.clip(mean / np.maximum(second, 1e-12), 0.0, 0.9)
        total += np.exp(np.log1p(bet * zp).sum(axis=0))
    e = total / n_perm
    return float(e[0]) if one else e


def predictable(p, y, g, target, rng):
    old = G.betting_evalues
    G.betting_evalues = predictable_evalues
    try:
        return shipped(p, y, g, target, rng)
    finally:
        G.betting_evalues = old


VARIANTS = {
    "structcal": shipped,
    "anchors6": with_anchors(((0.0, 0.4), (0.1, 0.15), (0.2, 0.15), (0.35, 0.1), (0.5, 0.1),
                              (0.75, 0.1))),
    "anchors8": with_anchors(((0.0, 0.3), (0.05, 0.1), (0.1, 0.1), (0.2, 0.1), (0.3, 0.1),
                              (0.45, 0.1), (0.6, 0.1), (0.8, 0.1))),
    "anchors_low": with_anchors(((-0.15, 0.1), (0.0, 0.5), (0.15, 0.1), (0.3, 0.1),
                                 (0.55, 0.1), (0.8, 0.1))),
    "split": split,
    "predictable": predictable,
}


def run(name, p, y, g, targets, n_splits, rng, draw=None):
    rows = {}
    for _ in range(n_splits):
        if draw is not None:
            p, y, g = draw(rng)
        groups = np.unique(g)
        cal = np.isin(g, rng.permutation(groups)[: groups.size // 2])
        test = ~cal
        for target in targets:
            accepted = {m: p[test] >= f(p[cal], y[cal], g[cal], target, rng)
                        for m, f in VARIANTS.items()}
            accepted["oracle"] = p[test] >= gs.oracle_threshold(p[test], y[test], target)
            for m, a in accepted.items():
                r = rows.setdefault((target, m), {"met": 0, "acc": []})
                r["met"] += (y[test][a].mean() if a.any() else 1.0) >= target
                r["acc"].append(a.mean())
    for target in targets:
        oracle = np.median(rows[(target, "oracle")]["acc"])
        cells = []
        for m in (*VARIANTS, "oracle"):
            r = rows[(target, m)]
            med = np.median(r["acc"])
            share = f"{med / oracle:.2f}" if oracle > 0 else "-"
            cells.append(f"{m} {r['met'] / n_splits:.3f} {med:.3f} ({share})")
        print(f"{name:<20}{target:<6}" + " | ".join(cells), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=100)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# python benchmarks/guarantees_variants.py --splits {args.splits}")
    print("setting             target  per variant: share of splits meeting the target, median "
          "share accepted (of the oracle's)")
    for icc in (0.0, 0.4, 0.6):
        run(f"synthetic {icc}", None, None, None, (0.8, 0.9), args.splits, rng,
            draw=gs.synthetic_world(icc))
    gum = data.gum_crossfit()
    docs = np.unique(gum.groups)
    fit_docs = np.random.default_rng(1).permutation(docs)[:32]
    fit = gum.subset(np.flatnonzero(np.isin(gum.groups, fit_docs)), "gum-fit")
    pool = gum.subset(np.flatnonzero(~np.isin(gum.groups, fit_docs)), "gum-pool")
    tags = gum.pred.potentials.label_names
    p, y, g, t, _ = gs.calibrated(fit, pool, EntitySpans(tags))
    run("gum entities", p, y, g, (0.7, 0.8), args.splits, rng)
    types = gs._entity_types(tags)
    for lab in (4, 6, 9):  # organization, place, time
        m = t.label == lab
        run(f"gum [{types[lab]}]", p[m], y[m], g[m], (0.7, 0.8), args.splits, rng)
    o = data.ocr()
    p, y, g, _, _ = gs.calibrated(o["recalibration"], o["test"], MAPEvent())
    run("ocr words", p, y, g, (0.9, 0.95), args.splits, rng)
    b = data.bbbc039()
    p, y, g, _, _ = gs.calibrated(b["val"], b["test"], ObjectEvents())
    run("bbbc039 nuclei", p, y, g, (0.8, 0.9), args.splits, rng)


if __name__ == "__main__":
    main()
