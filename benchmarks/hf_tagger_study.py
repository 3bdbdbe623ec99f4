"""A Hugging Face token classifier on GUM: the pipeline's entity score against structcal's.

Model: a small BERT (``BertForTokenClassification``, 2 layers, hidden 128) built from a
config, with a WordPiece tokenizer trained on the GUM training words, trained from
scratch on the GUM training documents (named mentions, BIO, first sub-word labelled) by
AdamW on the CPU. Its logits go through ``structcal.adapters.hf_potentials`` (word level,
first sub-word, the BIO scheme's valid transitions).

Reported on the test documents, recalibrated on the dev documents (documents as groups):

- the entities and scores a user gets from ``pipeline(..., aggregation_strategy="first")``:
  chunks of each word's most probable tag, scored by the mean probability of the chosen
  tags (its F1, and Brier / calibration error of its scores on its own entities);
- structcal's entities (chunks of the most probable *valid* sequence) with the same naive
  score, the exact probability, and the default recalibration (same events, paired);
- the share accepted at a certified precision of 0.8 (delta 0.1) against the naive rule
  "pipeline score >= 0.8".

Needs ``torch``, ``transformers`` and ``tokenizers`` (benchmark-only). Run:
``python benchmarks/hf_tagger_study.py [--epochs 6]
[--out benchmarks/results/hf_tagger_study.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from unet_objects_study import confidence_report  # this folder is first on sys.path

from structcal import StructuredPrediction, StructuredRecalibrator
from structcal.adapters import TagScheme, hf_potentials
from structcal.datasets import load_gum
from structcal.events import EntitySpans, entity_table
from structcal.guarantees import accept_events, certify_precision


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def chunk_list(scheme, sequences):
    """conlleval chunks ``(sentence, start, end, type index)`` of label sequences."""
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sequences])]).astype(np.int64)
    c = scheme.chunks(np.concatenate(sequences).astype(np.int64), offsets)
    first = offsets[c.item]
    return list(zip(c.item.tolist(), (c.start - first).tolist(), (c.end - first).tolist(),
                    c.type.tolist()))


def encode(tok, sentences, torch):
    return tok([list(s) for s in sentences], is_split_into_words=True, padding=True,
               truncation=True, max_length=512, return_tensors="pt")


def word_probs(model, tok, sentences, torch, batch=64):
    """The split's encoding (one padding for all), its logits, and each sentence's
    word-level softmax (first sub-word)."""
    enc = encode(tok, sentences, torch)
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(input_ids=enc["input_ids"][b:b + batch],
                                  attention_mask=enc["attention_mask"][b:b + batch]).logits
                            for b in range(0, len(sentences), batch)])
    lp = torch.log_softmax(logits, -1).numpy()
    probs = []
    for i, s in enumerate(sentences):
        ids = enc.word_ids(i)
        first = [ids.index(w) for w in range(len(s))]
        probs.append(np.exp(lp[i, first]))
    return probs, enc, logits


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    torch.manual_seed(0)
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    data = {s: load_gum(s, mentions="named") for s in ("train", "dev", "test")}
    tags = list(data["train"].tag_names)
    id2label = dict(enumerate(tags))
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    wp.train_from_iterator((" ".join(s) for s in data["train"].sentences),
                           trainers.WordPieceTrainer(vocab_size=4000, special_tokens=[
                               "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=wp, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]")
    config = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=128,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=256, num_labels=len(tags),
                                     id2label=id2label,
                                     label2id={t: i for i, t in id2label.items()})
    model = transformers.BertForTokenClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    train = data["train"]
    rng = np.random.default_rng(0)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for idx in np.array_split(rng.permutation(train.n_sentences), train.n_sentences // 32):
            sents = [train.sentences[i] for i in idx]
            enc = encode(tok, sents, torch)
            labels = torch.full(enc["input_ids"].shape, -100, dtype=torch.long)
            for r, i in enumerate(idx):
                seen = set()
                for k, w in enumerate(enc.word_ids(r)):
                    if w is not None and w not in seen:
                        seen.add(w)
                        labels[r, k] = int(train.y[i][w])
            opt.zero_grad()
            loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                         labels=labels).loss
            loss.backward()
            opt.step()
            total += float(loss.detach())
        log(f"epoch {epoch + 1}: mean loss {total / (train.n_sentences // 32):.4f}")
    train_seconds = time.perf_counter() - t0

    scheme = TagScheme(tags)
    kind = EntitySpans(scheme)
    pots, probs = {}, {}
    for s in ("dev", "test"):
        probs[s], enc, logits = word_probs(model, tok, data[s].sentences, torch)
        pots[s] = hf_potentials(enc, logits, id2label)
    dev, test = data["dev"], data["test"]

    # the pipeline's own entities and scores (aggregation "first")
    word_tags = [p.argmax(1) for p in probs["test"]]
    gold = set(chunk_list(scheme, test.y))
    pipe_rows = [(test.document[i],
                  float(probs["test"][i][np.arange(s0, s1), word_tags[i][s0:s1]].mean()),
                  (i, s0, s1, typ) in gold) for i, s0, s1, typ in chunk_list(scheme, word_tags)]
    n_gold = len(gold)
    p_doc = np.array([r[0] for r in pipe_rows])
    p_score = np.array([r[1] for r in pipe_rows])
    p_ok = np.array([r[2] for r in pipe_rows], dtype=float)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred_dev, pred_test = StructuredPrediction(pots["dev"]), StructuredPrediction(pots["test"])
        rec = StructuredRecalibrator([kind], random_state=0).fit(pred_dev, dev.tags,
                                                                 groups=dev.document)
        out = rec.predict(pred_test, test.tags, groups=test.document)
        # what the shift test decided for the test documents, and what falling back gives
        shift = {"flagged": list(out.shifted), "maps": dict(out.fallback or {})}
        if out.shifted:
            fb = rec.set_params(shift_policy="fallback").predict(pred_test, test.tags,
                                                                 groups=test.document)
            rec.set_params(shift_policy="adapt")
    t = out.table
    spans = entity_table(t, "entity", scheme)
    y = t.outcome.astype(float)
    map_tags = pred_test.map_labels
    naive_same = np.array([  # the pipeline's score of structcal's entities: same events
        float(probs["test"][int(i)][np.arange(s0, s1),
                                    map_tags[pots["test"].offsets[int(i)] + np.arange(s0, s1)]]
              .mean())
        for i, s0, s1 in zip(spans["item"], spans["start"], spans["end"])])
    doc = np.asarray(test.document)[t.item]
    f1 = lambda tp, npred: {"precision": tp / max(npred, 1), "recall": tp / max(n_gold, 1),  # noqa: E731
                            "f1": 2 * tp / max(npred + n_gold, 1), "n_predicted": npred,
                            "n_gold": n_gold}
    conf = {
        "pipeline score on the pipeline's entities": confidence_report(p_ok, p_score, p_doc),
        "pipeline score on structcal's entities": confidence_report(y, naive_same, doc),
        "exact (structcal)": confidence_report(y, np.clip(t.raw, 0, 1), doc),
        "recalibrated (structcal default)": confidence_report(y, out.forecast, doc),
    }
    if out.shifted:
        conf["recalibrated, shift_policy='fallback'"] = confidence_report(y, fb.forecast, doc)
    docs = np.unique(dev.document)
    half = set(np.random.default_rng(2).permutation(docs)[: len(docs) // 2].tolist())
    a = np.flatnonzero([d in half for d in dev.document])
    b = np.flatnonzero([d not in half for d in dev.document])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec2 = StructuredRecalibrator([kind], random_state=0).fit(
            pred_dev.subset(a), np.concatenate([dev.y[i] for i in a]), groups=dev.document[a])
        cal = rec2.predict(pred_dev.subset(b), np.concatenate([dev.y[i] for i in b]),
                           groups=dev.document[b])
        g = certify_precision(cal, 0.8, 0.1, groups=dev.document[b])
        acc = accept_events(g, rec2.predict(pred_test, test.tags, groups=test.document))
    naive = p_score >= 0.8
    guarantee = {"target": 0.8, "delta": 0.1, "threshold": g.thresholds_.get("entity"),
                 "accepted_share": float(acc.mean()) if acc.size else 0.0,
                 "precision_accepted": float(t.outcome[acc].mean()) if acc.any() else None,
                 "naive_rule_accepted_share": float(naive.mean()) if naive.size else 0.0,
                 "naive_rule_precision": float(p_ok[naive].mean()) if naive.any() else None}
    result = {"command": f"python benchmarks/hf_tagger_study.py --epochs {args.epochs}",
              "transformers_version": transformers.__version__,
              "train_seconds": train_seconds, "seconds": time.perf_counter() - t0,
              "entities_pipeline": f1(int(p_ok.sum()), len(pipe_rows)),
              "entities_structcal": f1(int(t.outcome.sum()), len(t)),
              "confidence": conf, "guarantee": guarantee,
              "recalibration": {k: v["method"] for k, v in rec.selection_.items()},
              "shift": shift}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
