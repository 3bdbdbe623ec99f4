"""A spaCy beam NER on GUM: the beam's entity probabilities, raw and recalibrated.

Model: ``spacy.blank("en")`` + ``beam_ner`` (beam width 8, spaCy's default model), trained
on the GUM training documents (named mentions) on the CPU. Its entities on the dev and
test documents go through ``structcal.adapters.spacy_ner.spacy_entity_events`` (raw
score: the total probability of the beam's parses that contain the entity).

Reported on the test documents, recalibrated on the dev documents (documents as groups):
entity F1; Brier x100 with a 95% interval over documents and the calibration error with
its interval over documents, for the beam's probability and structcal's default
recalibration; the share of test entities accepted at a certified precision of 0.8
(delta 0.1, certified on half of the dev documents with the recalibrator fit on the
other half) against the naive rule "beam probability >= 0.8".

Needs spaCy (benchmark-only). Run:
``python benchmarks/spacy_ner_study.py [--epochs 10] [--out benchmarks/results/spacy_ner_study.json]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from unet_objects_study import confidence_report  # this folder is first on sys.path

from structcal import StructuredRecalibrator
from structcal.adapters.spacy_ner import spacy_entity_events
from structcal.datasets import load_gum
from structcal.guarantees import accept_events, certify_precision


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def gold_docs(nlp, data):
    from spacy.tokens import Doc
    from spacy.training import biluo_tags_to_spans, iob_to_biluo

    out = []
    for words, y in zip(data.sentences, data.y):
        d = Doc(nlp.vocab, words=list(words))
        d.ents = biluo_tags_to_spans(d, iob_to_biluo([data.tag_names[t] for t in y]))
        out.append(d)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    t0 = time.perf_counter()
    random.seed(0)
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    data = {s: load_gum(s, mentions="named") for s in ("train", "dev", "test")}
    gold = {s: gold_docs(nlp, d) for s, d in data.items()}
    ner = nlp.add_pipe("beam_ner", config={"beam_width": 8})
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold["train"]]
    opt = nlp.initialize(lambda: examples)
    for epoch in range(args.epochs):
        random.shuffle(examples)
        losses = {}
        for batch in spacy.util.minibatch(examples, 32):
            nlp.update(batch, sgd=opt, losses=losses)
        log(f"epoch {epoch + 1}: loss {float(losses['beam_ner']):.1f}")
    train_seconds = time.perf_counter() - t0

    ev, docs = {}, {}
    for s in ("dev", "test"):
        pred = list(nlp.pipe([Doc(nlp.vocab, words=[t.text for t in d]) for d in gold[s]]))
        ev[s] = spacy_entity_events(pred, ner=ner, gold=gold[s])
        docs[s] = np.asarray(data[s].document)
    n_gold = sum(len(d.ents) for d in gold["test"])
    t = ev["test"].table
    tp = int(t.outcome.sum())
    p, r = tp / max(len(t), 1), tp / max(n_gold, 1)
    f1 = {"precision": p, "recall": r, "f1": 2 * p * r / max(p + r, 1e-12),
          "n_predicted": len(t), "n_gold": n_gold}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = StructuredRecalibrator(random_state=0).fit_events(ev["dev"].table,
                                                                groups=docs["dev"])
        out = rec.predict_events(t, groups=docs["test"])
    y = t.outcome.astype(float)
    doc_of = docs["test"][t.item]
    forecasts = {"beam probability (spaCy)": t.raw, "recalibrated (structcal default)": out.forecast}
    conf = {k: confidence_report(y, np.clip(v, 0, 1), doc_of) for k, v in forecasts.items()}

    dev_docs = np.unique(docs["dev"])
    half = set(np.random.default_rng(2).permutation(dev_docs)[: len(dev_docs) // 2].tolist())
    in_half = np.flatnonzero([d in half for d in docs["dev"]])
    a, b = ev["dev"].table.split_items(in_half)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec2 = StructuredRecalibrator(random_state=0).fit_events(a, groups=docs["dev"])
        g = certify_precision(rec2.predict_events(b, groups=docs["dev"]), 0.8, 0.1,
                              groups=docs["dev"])
        acc = accept_events(g, rec2.predict_events(t, groups=docs["test"]))
    naive = t.raw >= 0.8
    guarantee = {"target": 0.8, "delta": 0.1, "threshold": g.thresholds_.get("entity"),
                 "accepted_share": float(acc.mean()),
                 "precision_accepted": float(t.outcome[acc].mean()) if acc.any() else None,
                 "naive_rule_accepted_share": float(naive.mean()),
                 "naive_rule_precision": float(t.outcome[naive].mean()) if naive.any() else None}
    result = {"command": f"python benchmarks/spacy_ner_study.py --epochs {args.epochs}",
              "spacy_version": spacy.__version__, "train_seconds": train_seconds,
              "seconds": time.perf_counter() - t0, "entities": f1, "confidence": conf,
              "guarantee": guarantee,
              "recalibration": {k: v["method"] for k, v in rec.selection_.items()}}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
