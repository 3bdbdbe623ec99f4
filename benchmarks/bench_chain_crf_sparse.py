"""Training ChainCRF on sparse text features: WNUT-17 (English NER, BIO, 13 tags).

Token feature dicts (lower-cased word, 2- and 3-letter suffixes and prefix, word shape,
is_title / is_upper / is_digit / has a digit / punctuation, the lower-cased previous and
next words, sentence start and end) -> ``sklearn.feature_extraction.DictVectorizer`` ->
one stacked CSR matrix with the sentence lengths -> ``ChainCRF(method='likelihood')``,
trained on the train split (3,394 sentences). Reported: training time (wall and CPU,
L-BFGS iterations), dev token accuracy and entity precision / recall / F1 (exact chunk
match, conlleval's BIO rules: an I-X that does not continue a chunk of type X starts
one). Side by side with the peer a user would pick on the same feature dicts:
sklearn-crfsuite's ``CRF(algorithm='lbfgs')`` with L2 only (``c1=0``) and the same
regularisation (structcal's objective is the mean negative log-likelihood over sentences
plus ``alpha/2 ||theta||^2``, CRFsuite's the summed one plus ``c2 ||theta||^2``, so
``alpha = 2 c2 / n_sentences``), skipped if it is not installed (``bench`` extra).
The dense path is timed too on a subset (the full dense matrix would not fit: tens of
thousands of features x 62,730 tokens), to show what sparse input saves.

Run: ``python benchmarks/bench_chain_crf_sparse.py [--json] [--c2 0.1 0.3 1.0]
[--max-iter 1000] [--data path/to/wnut17.npz]`` (default data: the copy shipped in
structcal.datasets if there is one, else /work/shared/data/wnut17/wnut17.npz). Timings on
a machine shared with other jobs are rough: CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse
from sklearn.feature_extraction import DictVectorizer

from structcal.crf import ChainCRF
from structcal.exceptions import ConvergenceWarning

SHARED = Path("/work/shared/data/wnut17/wnut17.npz")


def load(path):
    """Sentences (lists of str) and tag ids per split, and the tag names, from the .npz."""
    if path is None:
        shipped = Path(__file__).resolve().parents[1] / "structcal" / "datasets" / "data" / "wnut17.npz"
        path = shipped if shipped.exists() else SHARED
    z = np.load(path, allow_pickle=False)
    text = z["tokens_utf8"].tobytes()
    toff = z["token_offsets"]
    tokens = [text[a:b].decode("utf-8") for a, b in zip(toff[:-1], toff[1:])]
    soff, sp = z["sentence_offsets"], z["split_offsets"]
    tags = z["tags"].astype(np.int64)
    out = {}
    for k, name in enumerate(z["split_names"].tolist()):
        sents = range(sp[k], sp[k + 1])
        out[name] = (
            [tokens[soff[s]:soff[s + 1]] for s in sents],
            [tags[soff[s]:soff[s + 1]] for s in sents],
        )
    return out, [str(t) for t in z["tag_names"]], str(path)


def _shape(w):
    s = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in w)
    out = []
    for c in s:  # collapse runs: "Xxxxx-dd" -> "Xx-d"
        if not out or out[-1] != c:
            out.append(c)
    return "".join(out)


def token_features(sent, t):
    """The feature dict of token ``t`` of a sentence (simple, CRFsuite-tutorial style)."""
    w = sent[t]
    lw = w.lower()
    f = {
        "bias": 1.0,
        "w=" + lw: 1.0,
        "suf2=" + lw[-2:]: 1.0,
        "suf3=" + lw[-3:]: 1.0,
        "pre3=" + lw[:3]: 1.0,
        "shape=" + _shape(w): 1.0,
        "is_title": float(w.istitle()),
        "is_upper": float(w.isupper()),
        "is_digit": float(w.isdigit()),
        "has_digit": float(any(c.isdigit() for c in w)),
        "is_punct": float(not any(c.isalnum() for c in w)),
        "starts_@#": float(w[:1] in ("@", "#")),
    }
    if t > 0:
        f["-1:w=" + sent[t - 1].lower()] = 1.0
        f["-1:is_title"] = float(sent[t - 1].istitle())
    else:
        f["BOS"] = 1.0
    if t + 1 < len(sent):
        f["+1:w=" + sent[t + 1].lower()] = 1.0
        f["+1:is_title"] = float(sent[t + 1].istitle())
    else:
        f["EOS"] = 1.0
    return f


def chunks(tags, tag_names):
    """Set of (sentence, start, end, type) entity chunks, conlleval's BIO rules."""
    out = set()
    for s, seq in enumerate(tags):
        start, typ = None, None
        for t, k in enumerate(list(seq) + [0]):
            name = tag_names[k] if t < len(seq) else "O"
            prefix, _, kind = name.partition("-")
            continues = prefix == "I" and typ == kind
            if start is not None and not continues:
                out.add((s, start, t, typ))
                start, typ = None, None
            if prefix == "B" or (prefix == "I" and not continues):
                start, typ = t, kind
    return out


def scores(pred, gold, tag_names):
    p, g = chunks(pred, tag_names), chunks(gold, tag_names)
    tp = len(p & g)
    prec = tp / max(len(p), 1)
    rec = tp / max(len(g), 1)
    acc = float(np.mean(np.concatenate(pred) == np.concatenate(gold)))
    return {"token_accuracy": acc, "entity_precision": prec, "entity_recall": rec,
            "entity_f1": 2 * prec * rec / max(prec + rec, 1e-300), "n_gold": len(g), "n_pred": len(p)}


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run_structcal(X, y, lengths, Xd, ld, yd, tag_names, alpha, max_iter):
    crf = ChainCRF(alpha=alpha, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        _, wall, cpu = timed(lambda: crf.fit(X, np.concatenate(y), lengths))
    pred = crf.predict(Xd, ld)
    off = np.r_[0, np.cumsum(ld)]
    res = scores([pred[a:b] for a, b in zip(off[:-1], off[1:])], yd, tag_names)
    res.update(fit_wall_s=wall, fit_cpu_s=cpu, n_iter=crf.n_iter_, converged=crf.converged_,
               objective=crf.objective_, alpha=alpha)
    if caught:
        res["warning"] = str(caught[0].message)[:160]
    return res


def run_crfsuite(dicts, y, dicts_dev, yd, tag_names, c2, max_iter):
    import sklearn_crfsuite

    names = [[tag_names[k] for k in seq] for seq in y]
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.0, c2=c2, max_iterations=max_iter,
                               all_possible_transitions=True)
    _, wall, cpu = timed(lambda: crf.fit(dicts, names))
    index = {n: k for k, n in enumerate(tag_names)}
    pred = [np.array([index[t] for t in seq]) for seq in crf.predict(dicts_dev)]
    res = scores(pred, yd, tag_names)
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
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)

    data, tag_names, path = load(args.data)
    (train, y), (dev, yd) = data["train"], data["dev"]
    _, fw, fc = timed(lambda: None)
    (dicts, dicts_dev), feat_wall, feat_cpu = timed(lambda: (
        [[token_features(s, t) for t in range(len(s))] for s in train],
        [[token_features(s, t) for t in range(len(s))] for s in dev],
    ))
    vec = DictVectorizer(dtype=np.float64)
    X, vec_wall, vec_cpu = timed(lambda: vec.fit_transform([f for s in dicts for f in s]))
    Xd = vec.transform([f for s in dicts_dev for f in s])
    lengths = np.array([len(s) for s in train])
    ld = np.array([len(s) for s in dev])
    n = len(train)
    result = {
        "data": path, "n_train_sentences": n, "n_train_tokens": int(lengths.sum()),
        "n_dev_sentences": len(dev), "n_features": X.shape[1], "nnz_per_token": X.nnz / X.shape[0],
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
        ChainCRF(max_iter=2).fit(X[:400], np.concatenate(y)[:400], None)
        ChainCRF(max_iter=2).fit(X, np.concatenate(y), lengths)
    for c2 in args.c2:
        alpha = 2.0 * c2 / n
        run = {"c2": c2, "alpha": alpha,
               "structcal": run_structcal(X, y, lengths, Xd, ld, yd, tag_names, alpha, args.max_iter)}
        if have_crfsuite:
            run["crfsuite"] = run_crfsuite(dicts, y, dicts_dev, yd, tag_names, c2, args.max_iter)
        result["runs"].append(run)
        if not args.json:
            print(f"c2={c2} ...", file=sys.stderr)
    if args.dense_subset:
        m = args.dense_subset
        sub = X[: int(lengths[:m].sum())]
        cols = np.unique(sub.indices)  # the features that occur in the subset
        sub = sub[:, cols]
        ysub = np.concatenate(y[:m])
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
    print(f"WNUT-17 ({path}): train {n} sentences / {result['n_train_tokens']} tokens, dev "
          f"{len(dev)} sentences; {X.shape[1]} features ({result['nnz_per_token']:.1f} per token); "
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
