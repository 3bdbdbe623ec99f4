"""A BiLSTM-CRF (pytorch-crf) through the emission adapter: exactness and entity confidence.

Model: word embeddings (64, words of the training split seen at least twice, the rest one
unknown vector) + a BiLSTM (64 per direction) -> linear emissions -> a ``torchcrf.CRF``
layer, trained by Adam on the GUM training documents (named mentions, BIO) on the CPU.
Its emissions and transitions go through ``structcal.adapters.emission_potentials``:

- *exactness*: the chain's MAP labeling against ``CRF.decode`` and its log-partition
  against pytorch-crf's own (``CRF.forward`` gives the log-likelihood of a labeling;
  score minus log-likelihood is the log-partition), on every test sentence;
- *entity F1* of the test split (exact chunk match, conlleval);
- *entity confidence* on the test split, recalibrated on the dev documents: the naive
  confidences users get from such a tagger (mean and min of the softmax of the emissions
  over the entity's tokens; the Viterbi path's share ``exp(path score - log Z)`` of the
  sentence), structcal's exact entity probability, and the default recalibration of it;
  Brier x100 with 95% intervals over documents, the kernel calibration error with its
  interval, and the share of test entities accepted at a certified precision of 0.8
  (``structcal.guarantees``, delta 0.1, certified on half of the dev documents with the
  recalibrator fit on the other half).

Needs ``torch`` and ``pytorch-crf`` (benchmark-only). Run:
``python benchmarks/neural_tagger_study.py [--epochs 8] [--out benchmarks/results/neural_tagger_study.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from structcal import StructuredPrediction, StructuredRecalibrator
from structcal.adapters import TagScheme, emission_potentials
from structcal.datasets import load_gum
from structcal.events import EntitySpans, build_events, entity_table
from structcal.guarantees import accept_events, certify_precision
from structcal.inference import infer
from structcal.metrics import calibration_error


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build_model(n_words, n_tags, torch):
    from torchcrf import CRF

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(n_words, 64, padding_idx=0)
            self.lstm = torch.nn.LSTM(64, 64, batch_first=True, bidirectional=True)
            self.out = torch.nn.Linear(128, n_tags)
            self.crf = CRF(n_tags, batch_first=True)

        def emissions(self, words):
            h, _ = self.lstm(self.emb(words))
            return self.out(h)

    return Tagger()


def batches(data, vocab, order, size, torch):
    for b in range(0, len(order), size):
        idx = order[b:b + size]
        sents = [data.sentences[i] for i in idx]
        L = max(len(s) for s in sents)
        words = torch.zeros((len(idx), L), dtype=torch.long)
        tags = torch.zeros((len(idx), L), dtype=torch.long)
        mask = torch.zeros((len(idx), L), dtype=torch.bool)
        for r, i in enumerate(idx):
            s = data.sentences[i]
            words[r, :len(s)] = torch.tensor([vocab.get(w.lower(), 1) for w in s])
            tags[r, :len(s)] = torch.tensor(data.y[i])
            mask[r, :len(s)] = True
        yield idx, words, tags, mask


def emissions_of(model, data, vocab, torch):
    """Per-sentence emission arrays, and the decode and log-likelihood of pytorch-crf."""
    out, decoded, loglik = [None] * data.n_sentences, [None] * data.n_sentences, []
    ll = np.zeros(data.n_sentences)
    model.eval()
    with torch.no_grad():
        for idx, words, tags, mask in batches(data, vocab, np.arange(data.n_sentences), 64, torch):
            em = model.emissions(words)
            dec = model.crf.decode(em, mask=mask)
            for r, i in enumerate(idx):
                n = int(mask[r].sum())
                out[i] = em[r, :n].numpy().astype(np.float64)
                decoded[i] = np.asarray(dec[r])
                ll[i] = float(model.crf(em[r:r + 1, :n], tags[r:r + 1, :n], reduction="sum"))
    return out, decoded, ll


def potentials(model, ems):
    lengths = [e.shape[0] for e in ems]
    crf = model.crf
    return emission_potentials(np.concatenate(ems), crf.transitions.detach().numpy(),
                               lengths=lengths, start=crf.start_transitions.detach().numpy(),
                               end=crf.end_transitions.detach().numpy())


def naive_confidences(ems, table, spans, map_labels, offsets):
    """Mean and min over each entity's tokens of the softmax of the emissions at the MAP tag."""
    mean, low = np.zeros(table.n_events), np.zeros(table.n_events)
    for r in range(table.n_events):
        i, s, e = int(spans["item"][r]), int(spans["start"][r]), int(spans["end"][r])
        em = ems[i][s:e]
        p = np.exp(em - em.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        tag = map_labels[offsets[i] + s:offsets[i] + e]
        top = p[np.arange(e - s), tag]
        mean[r], low[r] = top.mean(), top.min()
    return mean, low


def brier(y, p, groups, rng, n_boot=1000):
    _, inv = np.unique(groups, return_inverse=True)
    G = int(inv.max()) + 1
    se = (p - y) ** 2
    w = rng.multinomial(G, np.full(G, 1 / G), size=n_boot)[:, inv]
    boot = (w @ se) / w.sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ce = calibration_error(y, np.clip(p, 0, 1))
        ci = ce.confidence_interval(random_state=0)
    return {"brier_x100": 100 * float(se.mean()),
            "brier_interval_x100": [100 * float(np.quantile(boot, 0.025)),
                                    100 * float(np.quantile(boot, 0.975))],
            "calibration_error": float(ce.estimate),
            "calibration_error_interval": [float(ci.low), float(ci.high)]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    train, dev, test = (load_gum(s, mentions="named") for s in ("train", "dev", "test"))
    counts = {}
    for s in train.sentences:
        for w in s:
            counts[w.lower()] = counts.get(w.lower(), 0) + 1
    vocab = {w: i + 2 for i, w in enumerate(sorted(w for w, c in counts.items() if c >= 2))}
    tags = TagScheme(train.tag_names)
    model = build_model(len(vocab) + 2, len(train.tag_names), torch)
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    rng = np.random.default_rng(0)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for _, words, y, mask in batches(train, vocab, rng.permutation(train.n_sentences), 32,
                                         torch):
            opt.zero_grad()
            loss = -model.crf(model.emissions(words), y, mask=mask, reduction="mean")
            loss.backward()
            opt.step()
            total += float(loss)
        log(f"epoch {epoch + 1}: mean loss {total:.1f}")
    train_seconds = time.perf_counter() - t0

    ems_dev, _, _ = emissions_of(model, dev, vocab, torch)
    ems_test, decoded, loglik = emissions_of(model, test, vocab, torch)
    pot_dev, pot_test = potentials(model, ems_dev), potentials(model, ems_test)
    r = infer(pot_test)
    maps = [r.map_labels[pot_test.offsets[i]:pot_test.offsets[i + 1]] for i in range(len(ems_test))]
    same_map = float(np.mean([np.array_equal(a, b) for a, b in zip(maps, decoded)]))
    scores = np.array([float(pot_test.unary[pot_test.offsets[i] + np.arange(len(y))][
        np.arange(len(y)), y].sum() + sum(pot_test.pairwise[y[t], y[t + 1]] for t in range(len(y) - 1)))
        for i, y in enumerate(test.y)])
    logz_torch = scores - loglik
    logz_err = float(np.max(np.abs(logz_torch - r.log_partition)))

    # entity F1
    c_pred = tags.chunks(r.map_labels, pot_test.offsets)
    c_gold = tags.chunks(test.tags, test.offsets)
    P = set(zip(c_pred.start.tolist(), c_pred.end.tolist(), c_pred.type.tolist()))
    G = set(zip(c_gold.start.tolist(), c_gold.end.tolist(), c_gold.type.tolist()))
    tp = len(P & G)
    f1 = {"precision": tp / max(len(P), 1), "recall": tp / max(len(G), 1),
          "f1": 2 * tp / max(len(P) + len(G), 1), "n_predicted": len(P), "n_gold": len(G)}

    # confidence: recalibrated on dev (documents as groups), scored on test
    pred_dev, pred_test = StructuredPrediction(pot_dev), StructuredPrediction(pot_test)
    kind = EntitySpans(tags)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
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
    spans = entity_table(t, "entity", tags)
    y = t.outcome.astype(float)
    doc = test.document[t.item]
    mean_sm, min_sm = naive_confidences(ems_test, t, spans, r.map_labels, pot_test.offsets)
    viterbi_share = np.exp(np.minimum(r.map_score - r.log_partition, 0.0))[t.item]
    forecasts = {"mean token softmax": mean_sm, "min token softmax": min_sm,
                 "Viterbi path share": viterbi_share, "exact (structcal)": t.raw,
                 "recalibrated (structcal default)": out.forecast}
    if out.shifted:
        forecasts["recalibrated, shift_policy='fallback'"] = fb.forecast
    conf = {k: brier(y, np.clip(v, 0, 1), doc, np.random.default_rng(1)) for k, v in forecasts.items()}

    # guarantee: recalibrate on half of the dev documents, certify on the other half
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
        new = rec2.predict(pred_test, test.tags, groups=test.document)
        acc = accept_events(g, new)
    guarantee = {"target": 0.8, "delta": 0.1, "threshold": g.thresholds_.get("entity"),
                 "accepted_share": float(acc.mean()),
                 "precision_accepted": float(new.table.outcome[acc].mean()) if acc.any() else None}
    result = {"command": f"python benchmarks/neural_tagger_study.py --epochs {args.epochs}",
              "train_seconds": train_seconds, "seconds": time.perf_counter() - t0,
              "exactness": {"map_equals_pytorch_crf_decode": same_map,
                            "max_abs_log_partition_difference": logz_err,
                            "n_sentences": len(ems_test)},
              "entities": f1, "confidence": conf, "guarantee": guarantee,
              "recalibration": {k: v["method"] for k, v in rec.selection_.items()},
              "shift": shift}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
