"""Train the WNUT-17 CRFsuite tagger shipped as ``structcal/pretrained/wnut17_crfsuite.crfsuite``.

Default mode trains python-crfsuite (L-BFGS, the settings in ``SETTINGS``, all possible
transitions) on the WNUT-17 ``train`` split with ``structcal.datasets.token_features``,
measures token accuracy and entity precision / recall / F1 (exact chunks, conlleval
rules) on ``dev`` and ``test``, and writes the model file and
``benchmarks/results/wnut17_tagger.json`` (settings, figures, training seconds, library
versions; the results pages read it). CRFsuite's L-BFGS is
deterministic: re-running gives the same model file.

``--select`` instead trains each setting of ``GRID`` on ``train`` and prints its dev
figures; ``SETTINGS`` is the one with the best dev entity F1 (test is not looked at).

Run from the repository root:

    python benchmarks/train_wnut17_tagger.py            # writes structcal/pretrained/wnut17_crfsuite.crfsuite, ~2.5 min
    python benchmarks/train_wnut17_tagger.py --select   # the dev table behind SETTINGS, ~8 min
    python benchmarks/train_wnut17_tagger.py --out /tmp/m --json /tmp/m/t.json  # write elsewhere
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pycrfsuite

from ner_study import tagging_scores  # benchmarks/ is on the path when run as a script
from structcal.adapters import TagScheme
from structcal.datasets import load_wnut17, token_features

ROOT = Path(__file__).resolve().parents[1]
NAME = "wnut17_crfsuite"

#: The shipped setting (best dev entity F1 of ``GRID``).
SETTINGS = {"c1": 0.02, "c2": 0.01, "max_iterations": 300}
GRID = [
    {"c1": 0.1, "c2": 0.1, "max_iterations": 100},
    {"c1": 0.05, "c2": 0.05, "max_iterations": 150},
    {"c1": 0.0, "c2": 0.3, "max_iterations": 300},
    {"c1": 0.02, "c2": 0.01, "max_iterations": 300},
]
#: Entity F1 of the WNUT-17 shared-task systems on the test split (Derczynski et al., 2017).
PUBLISHED_F1 = {"lowest": 26.30, "highest": 41.86}


def train(features, tag_strings, settings, path):
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(features, tag_strings):
        trainer.append(x, y)
    trainer.set_params({**settings, "feature.possible_transitions": True})
    trainer.train(str(path))
    return path


def evaluate(path, split, scheme):
    """Token accuracy and entity P/R/F1 of the model at ``path`` on ``split``."""
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    pred = [t for x in token_features(split.sentences) for t in tagger.tag(x)]
    gold = [t for s in split.tag_strings for t in s]
    m = tagging_scores(scheme, scheme.encode(pred), scheme.encode(gold), split.offsets)
    return {"token_accuracy": round(m["token_accuracy"], 4),
            "precision": round(m["entity_precision"], 4), "recall": round(m["entity_recall"], 4),
            "f1": round(m["entity_f1"], 4), "n_predicted": m["n_predicted_entities"],
            "n_gold": m["n_gold_entities"]}


def line(name, m):
    return (f"{name:34s} token acc {100 * m['token_accuracy']:.1f}%  P {100 * m['precision']:.1f}  "
            f"R {100 * m['recall']:.1f}  F1 {100 * m['f1']:.1f}  ({m['n_predicted']} predicted, "
            f"{m['n_gold']} gold entities)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--select", action="store_true", help="print the dev figures of each GRID setting")
    ap.add_argument("--out", default=str(ROOT / "structcal" / "pretrained"), help="model folder")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "wnut17_tagger.json"),
                    help="where to write the figures")
    args = ap.parse_args(argv)
    data = load_wnut17()
    train_split, dev, test = (data.split_named(s) for s in ("train", "dev", "test"))
    scheme = TagScheme(list(data.tag_names))
    X = token_features(train_split.sentences)
    if args.select:
        with tempfile.TemporaryDirectory() as tmp:
            for i, s in enumerate(GRID):
                t0 = time.perf_counter()
                path = train(X, train_split.tag_strings, s, Path(tmp) / f"{i}.crfsuite")
                m = evaluate(path, dev, scheme)
                print(line(f"c1 {s['c1']} c2 {s['c2']} it {s['max_iterations']} (dev)", m)
                      + f"  {time.perf_counter() - t0:.0f} s", flush=True)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    path = train(X, train_split.tag_strings, SETTINGS, out / f"{NAME}.crfsuite")
    seconds = time.perf_counter() - t0
    figures = {"dev": evaluate(path, dev, scheme), "test": evaluate(path, test, scheme)}
    meta = {"model": f"{NAME}.crfsuite", "trainer": "python-crfsuite L-BFGS",
            "settings": {**SETTINGS, "feature.possible_transitions": True},
            "features": "structcal.datasets.token_features", "train_split": "train",
            "n_train_sentences": train_split.n_sentences, "figures": figures,
            "published_shared_task_f1": PUBLISHED_F1, "train_seconds": round(seconds, 1),
            "versions": {"python": platform.python_version(), "python-crfsuite": pycrfsuite.__version__
                         if hasattr(pycrfsuite, "__version__") else "unknown", "numpy": np.__version__}}
    Path(args.json).write_text(json.dumps(meta, indent=1) + "\n")
    for split, m in figures.items():
        print(line(f"{NAME} ({split})", m))
    print(f"trained in {seconds:.0f} s; wrote {path} ({path.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
