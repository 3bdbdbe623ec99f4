"""Training ChainCRF on sparse text features: WNUT-17 (English NER, BIO, 13 tags).

The shipped WNUT-17 data (``structcal.datasets.load_wnut17``) and the library's token
feature dicts (``structcal.datasets.token_features``: lower-cased word, 2- and 3-letter
suffixes, title / upper / digit flags, @mention / #hashtag / URL, the lower case, suffix and
shape of the previous and next word, sentence start and end) ->
``sklearn.feature_extraction.DictVectorizer(separator=":")`` (CRFsuite's attribute names)
-> one stacked CSR matrix with the sentence lengths -> ``ChainCRF(method='likelihood')``,
trained on the train split (3,394 sentences). Reported: training time (wall and CPU,
L-BFGS iterations), dev token accuracy and entity precision / recall / F1 (exact chunk
match, conlleval's BIO rules through ``structcal.adapters.TagScheme``; the scorer of
``ner_study.py``). Side by side with the peer a user would pick on the same feature
dicts: sklearn-crfsuite's ``CRF(algorithm='lbfgs')`` with L2 only (``c1=0``) and the same
regularisation (structcal's objective is the mean negative log-likelihood over sentences
plus ``alpha/2 ||theta||^2``, CRFsuite's the summed one plus ``c2 ||theta||^2``, so
``alpha = 2 c2 / n_sentences``), skipped if it is not installed (``bench`` extra).
The dense path is timed too on a subset (the full dense matrix would not fit: tens of
thousands of features x 62,730 tokens), to show what sparse input saves.

Run: ``python benchmarks/bench_chain_crf_sparse.py [--json] [--c2 0.1 1.0]
[--max-iter 1000]``. Timings on a machine shared with other jobs are rough: CPU seconds
are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from sklearn.feature_extraction import DictVectorizer

from ner_study import tagging_scores  # this folder is first on sys.path
from structcal.adapters import TagScheme
from structcal.crf import ChainCRF
from structcal.datasets import load_wnut17, token_features
from structcal.exceptions import ConvergenceWarning


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run_structcal(X, train, Xd, dev, scheme, alpha, max_iter):
    crf = ChainCRF(alpha=alpha, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        _, wall, cpu = timed(lambda: crf.fit(X, train.tags, train.lengths))
    res = tagging_scores(scheme, crf.predict(Xd, dev.lengths), dev.tags, dev.offsets)
    res.update(fit_wall_s=wall, fit_cpu_s=cpu, n_iter=crf.n_iter_, converged=crf.converged_,
               objective=crf.objective_, alpha=alpha)
    if caught:
        res["warning"] = str(caught[0].message)[:160]
    return res


def run_crfsuite(dicts, train, dicts_dev, dev, scheme, c2, max_iter):
    import sklearn_crfsuite

    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.0, c2=c2, max_iterations=max_iter,
                               all_possible_transitions=True)
    _, wall, cpu = timed(lambda: crf.fit(dicts, train.tag_strings))
    res = tagging_scores(scheme, scheme.encode(crf.predict(dicts_dev)), dev.tags, dev.offsets)
    res.update(fit_wall_s=wall, fit_cpu_s=cpu, c2=c2,
               n_iter=int(crf.training_log_.last_iteration["num"]) if crf.training_log_ else None)
    return res


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--c2", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--max-iter", type=int, default=1000)
    parser.add_argument("--dense-subset", type=int, default=500,
                        help="train sentences for the dense-vs-sparse timing (0: skip)")
    args = parser.parse_args(argv)

    data = load_wnut17()
    train, dev = data.split_named("train"), data.split_named("dev")
    scheme = TagScheme(data.tag_names, "BIO")
    (dicts, dicts_dev), feat_wall, feat_cpu = timed(lambda: (
        token_features(train.sentences), token_features(dev.sentences)))
    vec = DictVectorizer(separator=":", dtype=np.float64)
    X, vec_wall, vec_cpu = timed(lambda: vec.fit_transform([f for s in dicts for f in s]))
    Xd = vec.transform([f for s in dicts_dev for f in s])
    lengths = train.lengths
    n = train.n_sentences
    result = {
        "data": "structcal.datasets.load_wnut17", "n_train_sentences": n,
        "n_train_tokens": int(lengths.sum()),
        "n_dev_sentences": dev.n_sentences, "n_features": X.shape[1], "nnz_per_token": X.nnz / X.shape[0],
        "feature_dicts_wall_s": feat_wall, "dict_vectorizer_wall_s": vec_wall,
        "numba_threads": os.environ.get("NUMBA_NUM_THREADS", "default"),
        "runs": [],
    }
    try:
        import sklearn_crfsuite  # noqa: F401
        have_crfsuite = True
    except ImportError:
        have_crfsuite = False
    # warm-up: JIT compilation of the training kernels (not part of the timings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ChainCRF(max_iter=2).fit(X[:400], train.tags[:400], None)
        ChainCRF(max_iter=2).fit(X, train.tags, lengths)
    for c2 in args.c2:
        alpha = 2.0 * c2 / n
        run = {"c2": c2, "alpha": alpha,
               "structcal": run_structcal(X, train, Xd, dev, scheme, alpha, args.max_iter)}
        if have_crfsuite:
            run["crfsuite"] = run_crfsuite(dicts, train, dicts_dev, dev, scheme, c2, args.max_iter)
        result["runs"].append(run)
        if not args.json:
            print(f"c2={c2} ...", file=sys.stderr)
    if args.dense_subset:
        m = args.dense_subset
        sub = X[: int(lengths[:m].sum())]
        cols = np.unique(sub.indices)  # the features that occur in the subset
        sub = sub[:, cols]
        ysub = train.tags[: int(lengths[:m].sum())]
        alpha = 2.0 * args.c2[0] / m
        res = {"n_sentences": m, "n_tokens": sub.shape[0], "n_features": sub.shape[1]}
        for name, Xin in (("sparse", sub), ("dense", sub.toarray())):
            crf = ChainCRF(alpha=alpha, max_iter=args.max_iter)
            _, wall, cpu = timed(lambda: crf.fit(Xin, ysub, lengths[:m]))
            res[name] = {"fit_wall_s": wall, "fit_cpu_s": cpu, "n_iter": crf.n_iter_,
                         "coef": crf.coef_}
        res["max_abs_coef_difference"] = float(np.abs(res["sparse"].pop("coef") - res["dense"].pop("coef")).max())
        res["dense_matrix_mb"] = sub.shape[0] * sub.shape[1] * 8 / 1e6
        result["dense_vs_sparse"] = res
    if args.json:
        print(json.dumps(result, indent=1))
        return result
    print(f"WNUT-17: train {n} sentences / {result['n_train_tokens']} tokens, dev "
          f"{dev.n_sentences} sentences; {X.shape[1]} features ({result['nnz_per_token']:.1f} per token); "
          f"feature dicts {feat_wall:.1f} s, DictVectorizer {vec_wall:.1f} s (wall)")
    head = f"{'model':<22}{'c2':>6}{'alpha':>10}{'fit wall s':>12}{'fit CPU s':>11}{'iter':>6}" \
           f"{'tok acc':>9}{'ent P':>7}{'ent R':>7}{'ent F1':>8}"
    print(head)
    for run in result["runs"]:
        for name in ("structcal", "crfsuite"):
            if name not in run:
                continue
            r = run[name]
            label = "ChainCRF (sparse)" if name == "structcal" else "sklearn-crfsuite"
            print(f"{label:<22}{run['c2']:>6g}{run['alpha']:>10.2e}{r['fit_wall_s']:>12.1f}{r['fit_cpu_s']:>11.1f}"
                  f"{r['n_iter'] if r['n_iter'] is not None else '-':>6}{100 * r['token_accuracy']:>9.2f}"
                  f"{100 * r['entity_precision']:>7.1f}{100 * r['entity_recall']:>7.1f}{100 * r['entity_f1']:>8.1f}")
            if r.get("warning"):
                print(f"    ({r['warning']})")
    if "dense_vs_sparse" in result:
        d = result["dense_vs_sparse"]
        print(f"\ndense vs sparse input, first {d['n_sentences']} train sentences ({d['n_tokens']} tokens x "
              f"{d['n_features']} features; dense matrix {d['dense_matrix_mb']:.0f} MB): sparse fit "
              f"{d['sparse']['fit_cpu_s']:.1f} s CPU ({d['sparse']['n_iter']} iter), dense "
              f"{d['dense']['fit_cpu_s']:.1f} s CPU ({d['dense']['n_iter']} iter); "
              f"max |coef difference| {d['max_abs_coef_difference']:.1e}")
    return result


if __name__ == "__main__":
    main()
