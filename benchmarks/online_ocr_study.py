"""Structured online recalibration of OCR event streams (Kuleshov & Ermon 2017, Algorithm 1).

The events of interest of the OCR chain CRF -- per letter, "the MAP letter is right"
(marginal events) and per word, "the MAP word is right" (MAP events) -- arrive as a stream,
word by word (each word's letters in order, then the word itself), and each event is
forecast before its outcome is revealed. The base forecast is the model's own probability
of the event (its marginal of the MAP letter, or p(MAP | x)).

Streams (all words of the test and recalibration folds 3-9, 4,863 words and about
41,500 events, in one random word order fixed by ``--seed``):

iid
    The shipped likelihood CRF (``ocr_chain_crf``, trained on folds 0-2).
shift
    A model trained on little data: ``ChainCRF(alpha=1e-4)`` on the raw pixels of fold 0
    only (626 words; its letter classifier and lexicon from fold 0 too), streamed on the
    same words. The dataset's folds are its own cross-validation folds, not documented as
    writer-disjoint, and the shipped CRF is equally accurate on every one of folds 3-9
    (92.6-93.5% per letter), so streaming "other folds" alone is no real shift; the shift
    here is the small, weakly regularised model, whose probabilities are over-confident
    on new words (measured below), against the same stream.
drift
    The shipped CRF on the same words, but the scanner degrades along the stream: each
    pixel of the word at stream position s (of n) is flipped with probability
    ``--noise * s / (n - 1)`` (from clean to ``--noise`` at the end). The model grows
    over-confident as the stream goes on, so a recalibrator frozen early goes stale.
adversarial
    The events of ``iid`` reordered so that the raw forecast's errors cluster: every event
    whose outcome is 1 (the letter / word is right) first, then every event whose outcome
    is 0, each part in the ``iid`` order. No recalibrator fit on an early part can be
    right later.

Forecasters, scored on the whole stream in stream order:

raw
    The model's probability.
online
    Algorithm 1 (``structcal.online.recalibrate_events``; N = M = ``--n-grid``, the
    internal-regret subroutine), one independent recalibrator per event kind. Per-kind
    streams rather than one pooled stream because a marginal and a MAP event with the same
    raw probability need not be right equally often, and calibration of each kind implies
    calibration of the pooled stream (the pooled C_T is at most the share-weighted sum of
    the kinds'), not the other way round. ``online pooled`` is the one pooled
    recalibrator, for comparison: pooled over both kinds the two are alike, but on the
    shift stream the MAP events alone end at C_T^1 = 0.026 per kind against 0.061 pooled
    (``by_kind_at_end`` in the JSON), the pooled buckets being dominated by the 7.6 times
    more numerous letters.
batch isotonic / batch k-NN
    Fit on the first ``--batch-n`` events of the stream (per kind), then frozen; they
    forecast the raw probability until then (the recalibration data are not there yet).
    Isotonic regression on the raw probability, and the cross-validated k-NN region
    forecaster on all Table 1 features of the kind (Kuleshov & Liang 2015, "all").

Reported: C_T^1, C_T^2 (on the grid of N bins; forecasts off the grid are binned to the
nearest grid point, each bin comparing the outcome frequency with the mean forecast) and
the average l2 loss after T = 1000, 3000, 10000, 20000 events and at the end, pooled over
both kinds, with the largest C_T^1 over T >= 1000 (how far off a forecaster ever got: on
the adversarial stream the end alone hides it, since the raw forecasts' metrics over the
whole stream do not depend on the order); and per kind at the end (JSON). ``--seed`` fixes the
word order, the drift noise and the online forecaster's coin.

Run: ``python benchmarks/online_ocr_study.py [--json] [--quick]`` (about half a minute
on one core; ``--quick``: 1,200 words per stream and a shift model trained on 300
words). BLAS and Numba run on one thread.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one thread, set before numpy loads (not when imported by tests)
    for _var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from structcal.calibrators import IsotonicCalibration  # noqa: E402
from structcal.crf import ChainCRF  # noqa: E402
from structcal.datasets import load_ocr  # noqa: E402
from structcal.demos import OCRSetup, ocr_setup  # noqa: E402
from structcal.events import Lexicon, MAPEvent, MarginalEvent, build_events  # noqa: E402
from structcal.exceptions import ConvergenceWarning  # noqa: E402
from structcal.features import FEATURE_GROUPS  # noqa: E402
from structcal.forecasters import KNNRegionForecaster  # noqa: E402
from structcal.online import recalibrate_events, running_metrics  # noqa: E402

HORIZONS = (1000, 3000, 10000, 20000)
WORST_FROM = 1000
METRICS = ("calibration_l1", "calibration_l2", "l2_loss")
METHODS = ("raw", "online", "online pooled", "batch isotonic", "batch k-NN")
STREAMS = ("iid", "shift", "drift", "adversarial")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- streams


class _AllLetters:
    """A letter classifier's scores over all 26 letters (a letter it never saw scores lowest)."""

    def __init__(self, classifier, n_states):
        self.classifier, self.n_states = classifier, n_states

    def decision_function(self, pixels):
        seen = self.classifier.decision_function(pixels)
        out = np.full((seen.shape[0], self.n_states), seen.min() - 1.0)
        out[:, self.classifier.classes_] = seen
        return out


def shift_setup(data, n_words, max_iter):
    """A small likelihood CRF on the raw pixels of the first ``n_words`` words of fold 0."""
    from sklearn.svm import LinearSVC

    n_states = len(data.alphabet)
    fold0 = data.subset(data.folds == 0)
    train = fold0.subset(np.arange(min(n_words, fold0.n_words)))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = ChainCRF(alpha=1e-4, n_states=n_states, max_iter=max_iter).fit(train.X, train.y)
    seconds = time.perf_counter() - t
    svm = _AllLetters(LinearSVC(C=0.1, dual=False).fit(train.pixels, train.labels), n_states)
    lexicon = Lexicon(set(train.words), n_states=len(train.alphabet), alphabet=train.alphabet)
    info = {"train_words": train.n_words, "train_letters": train.n_letters,
            "fit_seconds": seconds, "iterations": int(getattr(crf, "n_iter_", -1))}
    info["letters_seen"] = int(np.unique(train.labels).size)
    return OCRSetup(crf, svm, lexicon, train, None, None), info


def degrade(words, rank, noise, seed):
    """Flip each pixel of the word at stream rank s with probability noise * s / (n - 1)."""
    n = words.n_words
    rate_word = noise * rank / max(n - 1, 1)
    rate = np.repeat(rate_word, words.lengths)[:, None]
    flip = np.random.default_rng(seed).random(words.pixels.shape) < rate
    return replace(words, pixels=np.ascontiguousarray(words.pixels ^ flip.astype(np.uint8)))


def events(setup, words):
    """MAP and marginal events of ``words`` with raw probabilities and Table 1 features."""
    pred = setup.predict(words)
    features = {"map": FEATURE_GROUPS["item"]["all"], "marginal": FEATURE_GROUPS["node"]["all"]}
    return build_events(
        pred, [MAPEvent(), MarginalEvent()], y_true=words.labels, features=features,
        lexicon=setup.lexicon, label_names=words.alphabet,
    )


def word_order(table, rank):
    """Event rows in stream order: words by ``rank``, each word's letters, then the word."""
    lmax = int(table.item_lengths.max())
    slot = np.where(table.position >= 0, table.position, lmax + 1)
    return np.argsort(rank[table.item] * (lmax + 2) + slot, kind="stable")


def errors_late(table, order):
    """``order`` with every event whose outcome is 1 first, then every 0 (each in order)."""
    y = table.outcome[order]
    return np.concatenate([order[y], order[~y]])


# ----------------------------------------------------------------------------- forecasters


def _predict(model, X):
    p = model.predict_proba(X)
    return p[:, list(model.classes_).index(1)] if 1 in list(model.classes_) else np.zeros(len(X))


def batch_forecasts(table, order, n, method, seed):
    """Raw forecasts for the first ``n`` events, then a recalibrator fit on them, frozen."""
    p = table.raw[order].copy()
    head, kinds = order[:n], table.kind[order]
    info = {}
    for k, name in enumerate(table.kind_names):
        fit_rows = head[table.kind[head] == k]
        later = n + np.flatnonzero(kinds[n:] == k)
        if later.size == 0:
            continue
        y = table.outcome[fit_rows]
        if fit_rows.size == 0:
            info[name] = {"fit_events": 0}
            continue  # nothing to learn from: stays raw
        if y.min() == y.max():  # one outcome seen: every recalibrator predicts it
            p[later] = float(y[0])
            info[name] = {"fit_events": int(fit_rows.size), "constant": float(y[0])}
            continue
        if method == "isotonic":
            model = IsotonicCalibration().fit(table.raw[fit_rows], y)
            p[later] = _predict(model, table.raw[order[later]])
            info[name] = {"fit_events": int(fit_rows.size)}
        else:
            cols = FEATURE_GROUPS[table.kind_scopes[k]]["all"]
            model = KNNRegionForecaster(random_state=seed).fit(table.columns(cols)[fit_rows], y)
            p[later] = _predict(model, table.columns(cols)[order[later]])
            info[name] = {"fit_events": int(fit_rows.size), "k": int(model.n_neighbors_)}
    return np.clip(p, 0.0, 1.0), info


def summarize(p, y, n_grid, horizons):
    m = running_metrics(p, y, n_grid=n_grid)
    return {str(T): {k: float(v) for k, v in m.at(T).items() if k in METRICS} for T in horizons}


def worst_calibration(p, y, n_grid):
    """The largest C_T^1 over T >= WORST_FROM (how far off the forecaster ever got)."""
    c = running_metrics(p, y, n_grid=n_grid).calibration_l1[WORST_FROM - 1:]
    return float(c.max()) if c.size else float("nan")


def study_stream(table, order, args):
    T = order.shape[0]
    horizons = [h for h in HORIZONS if h < T] + [T]
    y = table.outcome[order]
    t = time.perf_counter()
    online = recalibrate_events(table, order=order, n_grid=args.n_grid, random_state=args.seed)
    pooled = recalibrate_events(table, order=order, by=None, n_grid=args.n_grid,
                                random_state=args.seed)
    online_seconds = time.perf_counter() - t
    forecasts = {"raw": table.raw[order], "online": online.forecasts,
                 "online pooled": pooled.forecasts}
    batch_info = {}
    for method, key in (("isotonic", "batch isotonic"), ("knn", "batch k-NN")):
        forecasts[key], batch_info[key] = batch_forecasts(table, order, args.batch_n, method,
                                                          args.seed)
    kinds = table.kind[order]
    names = list(enumerate(table.kind_names))
    out = {
        "n_events": int(T),
        "n_events_by_kind": {name: int((kinds == k).sum()) for k, name in names},
        "accuracy_by_kind": {name: float(y[kinds == k].mean()) for k, name in names},
        "mean_raw_by_kind": {name: float(table.raw[order][kinds == k].mean()) for k, name in names},
        "horizons": horizons,
        "online_seconds_both": online_seconds,
        "batch": batch_info,
        "pooled": {m: summarize(p, y, args.n_grid, horizons) for m, p in forecasts.items()},
        "worst_calibration_l1": {m: worst_calibration(p, y, args.n_grid)
                                 for m, p in forecasts.items()},
        "by_kind_at_end": {},
    }
    for k, name in enumerate(table.kind_names):
        sel = kinds == k
        out["by_kind_at_end"][name] = {
            m: summarize(p[sel], y[sel], args.n_grid, [int(sel.sum())])[str(int(sel.sum()))]
            for m, p in forecasts.items()
        }
    return out


# ----------------------------------------------------------------------------- driver


def run(args):
    t0 = time.perf_counter()
    data = load_ocr()
    stream_words = data.subset(data.folds >= 3)
    rng = np.random.default_rng(args.seed)
    if args.words is not None and args.words < stream_words.n_words:
        stream_words = stream_words.subset(np.sort(rng.choice(stream_words.n_words, args.words,
                                                              replace=False)))
    rank = np.empty(stream_words.n_words, dtype=np.int64)
    rank[rng.permutation(stream_words.n_words)] = np.arange(stream_words.n_words)
    results = {
        "params": {"n_grid": args.n_grid, "batch_n": args.batch_n, "seed": args.seed,
                   "words": stream_words.n_words, "noise": args.noise,
                   "shift_words": args.shift_words, "streams": list(args.streams)},
        "streams": {},
    }
    tables = {}
    need_shipped = any(s in args.streams for s in ("iid", "drift", "adversarial"))
    shipped = ocr_setup("ocr_chain_crf") if need_shipped else None
    if "iid" in args.streams or "adversarial" in args.streams:
        tables["iid"] = events(shipped, stream_words)
    if "shift" in args.streams:
        setup, info = shift_setup(data, args.shift_words, args.shift_iter)
        results["shift_model"] = info
        log(f"shift model: {info['train_words']} words of fold 0, fit {info['fit_seconds']:.1f} s")
        tables["shift"] = events(setup, stream_words)
    if "drift" in args.streams:
        tables["drift"] = events(shipped, degrade(stream_words, rank, args.noise, args.seed))
    log(f"events built ({time.perf_counter() - t0:.0f} s)")
    for name in args.streams:
        table = tables["iid" if name == "adversarial" else name]
        order = word_order(table, rank)
        if name == "adversarial":
            order = errors_late(table, order)
        results["streams"][name] = study_stream(table, order, args)
        log(f"stream {name} done ({time.perf_counter() - t0:.0f} s)")
    results["seconds"] = time.perf_counter() - t0
    return results


def print_tables(results):
    p = results["params"]
    print(f"OCR event streams: {p['words']} words of folds 3-9, N = M = {p['n_grid']}, "
          f"batch recalibrators fit on the first {p['batch_n']} events")
    for name, res in results["streams"].items():
        acc = ", ".join(
            f"{k} {res['n_events_by_kind'][k]} events, right {v:.3f}, mean raw "
            f"{res['mean_raw_by_kind'][k]:.3f}" for k, v in res["accuracy_by_kind"].items()
        )
        print(f"\n== {name}: {res['n_events']} events ({acc})")
        hs = [str(h) for h in res["horizons"]]
        head = "".join(f"{'T=' + h:>9}" for h in hs)
        w = 9 * len(hs)
        print(f"{'':<16}{'C_T^1':^{w}}|{'C_T^2':^{w}}|{'l2 loss':^{w}}|{'max C^1':>9}")
        print(f"{'method':<16}{head}|{head}|{head}|{'T>=' + str(WORST_FROM):>9}")
        for m, r in res["pooled"].items():
            cells = ["".join(f"{r[h][metric]:>9.4f}" for h in hs) for metric in METRICS]
            print(f"{m:<16}" + "|".join(cells) + f"|{res['worst_calibration_l1'][m]:>9.4f}")
        ks = {k: v.get("k") for k, v in res["batch"]["batch k-NN"].items() if "k" in v}
        if ks:
            print(f"(k-NN k chosen by CV: {ks})")
    print(f"\n(total {results['seconds']:.0f} s)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true",
                        help="1,200 words per stream, shift model on 300 words")
    parser.add_argument("--words", type=int, default=None,
                        help="stream only this many words (random subset of folds 3-9)")
    parser.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    parser.add_argument("--n-grid", type=int, default=10, help="grid N (M = N buckets)")
    parser.add_argument("--batch-n", type=int, default=2000,
                        help="events the batch recalibrators are fit on")
    parser.add_argument("--noise", type=float, default=0.2,
                        help="drift stream: pixel flip probability at the end of the stream")
    parser.add_argument("--shift-words", type=int, default=626,
                        help="words of fold 0 the shift model is trained on")
    parser.add_argument("--shift-iter", type=int, default=300, help="shift model L-BFGS iterations")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.words = 1200 if args.words is None else args.words
        args.shift_words = min(args.shift_words, 300)
    return args


def main(argv=None):
    args = parse_args(argv)
    results = run(args)
    if args.json:
        print(json.dumps(results))
    else:
        print_tables(results)
    return results


if __name__ == "__main__":
    main()
