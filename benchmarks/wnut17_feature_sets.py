"""WNUT-17: does a richer CRF feature set make a tagger worth showcasing?

Trains sklearn-crfsuite (L-BFGS, 150 iterations, all transitions) on the WNUT-17 train
split with the shipped model's features (``structcal.datasets.token_features``: the
sklearn-crfsuite tutorial's) and with a richer set (word shape, prefixes and suffixes of
1-4 letters, hashtag/mention bodies, a +-2 window of words with their shapes and affixes,
word bigrams), and prints entity precision, recall and F1 (exact chunks) on dev and test.
No word clusters, embeddings or gazetteers: those are what published WNUT-17 systems add.

Run: ``python benchmarks/wnut17_feature_sets.py`` (about 2 minutes on 2 cores).
"""

import re
import time

import numpy as np
import sklearn_crfsuite

from structcal.adapters import TagScheme
from structcal.datasets import load_wnut17, token_features


def shape(w):
    s = re.sub("[A-Z]", "X", w)
    s = re.sub("[a-z]", "x", s)
    s = re.sub("[0-9]", "d", s)
    return re.sub(r"(.)\1+", r"\1\1", s)


def context(w, p):
    return {p + "lower": w.lower(), p + "shape": shape(w), p + "istitle": w.istitle(),
            p + "isupper": w.isupper(), p + "suf3": w[-3:].lower(), p + "pre3": w[:3].lower()}


def rich_features(sentences):
    out = []
    for s in sentences:
        feats = []
        for i, w in enumerate(s):
            f = {"bias": 1.0, "lower": w.lower(), "shape": shape(w), "istitle": w.istitle(),
                 "isupper": w.isupper(), "isdigit": w.isdigit(), "mention": w.startswith("@"),
                 "hashtag": w.startswith("#"), "url": w.startswith(("http", "www.")),
                 "hyphen": "-" in w, "len": min(len(w), 10)}
            for k in (1, 2, 3, 4):
                f[f"suf{k}"], f[f"pre{k}"] = w[-k:].lower(), w[:k].lower()
            if w.startswith(("#", "@")):
                f["tagbody"] = w[1:].lower()
            for d in (-2, -1, 1, 2):
                j = i + d
                if 0 <= j < len(s):
                    f.update(context(s[j], f"{d:+d}:"))
                else:
                    f[f"{d:+d}:pad"] = True
            if i > 0:
                f["bigram-1"] = s[i - 1].lower() + "|" + w.lower()
            if i < len(s) - 1:
                f["bigram+1"] = w.lower() + "|" + s[i + 1].lower()
            feats.append(f)
        out.append(feats)
    return out


def chunks(scheme, tag_strings):
    """Exact (sentence, start, end, type) chunks of BIO tag sequences (conlleval rules)."""
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in tag_strings])]).astype(np.int64)
    c = scheme.chunks(scheme.encode([t for s in tag_strings for t in s]), offsets)
    first = offsets[c.item]
    return set(zip(c.item.tolist(), (c.start - first).tolist(), (c.end - first).tolist(),
                   c.type.tolist()))


def main():
    data = load_wnut17()
    train, dev, test = (data.split_named(s) for s in ("train", "dev", "test"))
    scheme = TagScheme(list(train.tag_names))
    for name, fn, c1, c2 in (("tutorial features (shipped model)", token_features, 0.1, 0.1),
                             ("rich features, c1 0.05 c2 0.05", rich_features, 0.05, 0.05),
                             ("rich features, c1 0 c2 0.3", rich_features, 0.0, 0.3)):
        t0 = time.time()
        crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=150,
                                   all_possible_transitions=True)
        crf.fit(fn(train.sentences), train.tag_strings)
        for split, d in (("dev", dev), ("test", test)):
            P, G = chunks(scheme, crf.predict(fn(d.sentences))), chunks(scheme, d.tag_strings)
            tp = len(P & G)
            p, r = tp / max(len(P), 1), tp / max(len(G), 1)
            print(f"{name:36s} {split:5s} P {p:.3f} R {r:.3f} F1 {2 * p * r / max(p + r, 1e-9):.3f}"
                  f"  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
