"""WNUT-17: which CRF feature set makes a tagger worth showcasing?

Trains sklearn-crfsuite (L-BFGS, all transitions) on the WNUT-17 train split with

- the sklearn-crfsuite tutorial's features (``tutorial_features`` below: lower case,
  suffixes, shape flags, tweet marks, the previous and next word);
- ``structcal.datasets.token_features``, the shipped tagger's features (the tutorial's plus
  word shape, prefixes and suffixes of 1-4 letters, letter trigrams, hashtag/mention bodies,
  position flags, a +-2 window of words with their shapes and affixes, word bigrams),

and prints entity precision, recall and F1 (exact chunks) on dev and test. No word
clusters, embeddings or gazetteers: those are what published WNUT-17 systems add. The
shipped model's own settings and figures: ``benchmarks/train_wnut17_tagger.py``.

Run: ``python benchmarks/wnut17_feature_sets.py`` (about 3 minutes).
"""

import time

import numpy as np
import sklearn_crfsuite

from structcal.adapters import TagScheme
from structcal.datasets import load_wnut17, token_features


def _word_features(w: str, prefix: str) -> dict:
    return {
        prefix + "lower": w.lower(),
        prefix + "suffix3": w[-3:],
        prefix + "istitle": w.istitle(),
        prefix + "isupper": w.isupper(),
    }


def tutorial_features(sentences) -> list[list[dict]]:
    """The sklearn-crfsuite tutorial's token features, without part-of-speech tags."""
    out = []
    for sent in sentences:
        feats = []
        n = len(sent)
        for i, w in enumerate(sent):
            f = {
                "bias": 1.0,
                "lower": w.lower(),
                "suffix3": w[-3:],
                "suffix2": w[-2:],
                "istitle": w.istitle(),
                "isupper": w.isupper(),
                "isdigit": w.isdigit(),
                "mention": w.startswith("@"),
                "hashtag": w.startswith("#"),
                "url": w.startswith("http") or w.startswith("www."),
            }
            if i > 0:
                f.update(_word_features(sent[i - 1], "-1:"))
            else:
                f["BOS"] = True
            if i < n - 1:
                f.update(_word_features(sent[i + 1], "+1:"))
            else:
                f["EOS"] = True
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
    for name, fn, c1, c2, it in (("tutorial features", tutorial_features, 0.1, 0.1, 100),
                                 ("token_features (shipped tagger)", token_features, 0.02, 0.01, 300)):
        t0 = time.time()
        crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=it,
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
