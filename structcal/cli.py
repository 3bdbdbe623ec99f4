"""Command-line interface: ``structcal demo ocr`` and friends."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

__all__ = ["main"]


def _naive_bayes_chain(train):
    """Bernoulli naive Bayes letter scores and bigram transitions (Laplace-smoothed)."""
    K = len(train.alphabet)
    counts = np.zeros((K, train.pixels.shape[1]))
    np.add.at(counts, train.labels, train.pixels)
    n = np.bincount(train.labels, minlength=K)[:, None]
    on = (counts + 1.0) / (n + 2.0)
    W = np.log(on) - np.log1p(-on)
    b = np.log1p(-on).sum(axis=1) + np.log((n[:, 0] + 1.0) / (n.sum() + K))
    first = train.offsets[:-1]
    last = train.offsets[1:] - 1
    nonlast = np.setdiff1d(np.arange(train.n_letters), last)
    bigram = np.ones((K, K))
    np.add.at(bigram, (train.labels[nonlast], train.labels[nonlast + 1]), 1.0)
    T = np.log(bigram / bigram.sum(axis=1, keepdims=True))
    return W, b, T, first


def demo_ocr(as_json: bool = False) -> dict:
    """Run chain inference on the shipped OCR test words and report what it did."""
    from .datasets import load_ocr
    from .inference import infer
    from .potentials import ChainPotentials

    t0 = time.perf_counter()
    data = load_ocr()
    train, test = data.split("train"), data.split("test")
    W, b, T, _ = _naive_bayes_chain(train)
    pixels = test.pixels.astype(np.float64)
    potentials = ChainPotentials.from_scores(pixels @ W.T + b, test.lengths, T)
    t1 = time.perf_counter()
    result = infer(potentials)
    t2 = time.perf_counter()
    correct = result.map_labels == test.labels
    word_ok = np.logical_and.reduceat(correct, test.offsets[:-1])
    map_prob = np.exp(result.map_log_probability)
    report = {
        "model": "Bernoulli naive Bayes letters + bigram transitions (fit on the train split)",
        "n_test_words": test.n_words,
        "n_test_letters": test.n_letters,
        "letter_accuracy": float(correct.mean()),
        "word_accuracy": float(word_ok.mean()),
        "mean_map_probability": float(map_prob.mean()),
        "inference_seconds": t2 - t1,
        "seconds": t2 - t0,
    }
    if as_json:
        print(json.dumps(report))
    else:
        print("structcal demo ocr: chain inference on the OCR test split (folds 3-5)")
        print(f"  model            {report['model']}")
        print(f"  words / letters  {test.n_words} / {test.n_letters}")
        print(f"  Viterbi accuracy {report['letter_accuracy']:.3f} per letter, "
              f"{report['word_accuracy']:.3f} per word")
        print(f"  mean p(MAP | x)  {report['mean_map_probability']:.3f} "
              f"(vs {report['word_accuracy']:.3f} words correct: raw confidence is not calibrated)")
        print(f"  Viterbi + marginals + log-partition in {report['inference_seconds']:.3f} s "
              f"(includes JIT compilation on first run); total {report['seconds']:.1f} s")
    return report


def main(argv=None) -> int:
    """Entry point of the ``structcal`` command."""
    parser = argparse.ArgumentParser(prog="structcal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a demonstration on shipped data")
    demo.add_argument("dataset", choices=["ocr"], help="which demonstration")
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.command == "demo" and args.dataset == "ocr":
        demo_ocr(as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
