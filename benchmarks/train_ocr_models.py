"""Train the two OCR chain CRFs shipped in ``structcal/pretrained/`` (and choose their hyperparameters).

Default mode trains, on the OCR ``train`` split (folds 0-2, 2,014 words), with fixed
hyperparameters and seeds:

* ``ocr_chain_crf``            -- ``ChainCRF(method="likelihood")`` on ``ImageFeatures()``
  (pixels + neighbouring-pixel products + quadratic PCA-20 features, 800 per letter);
* ``ocr_chain_crf_max_margin`` -- ``ChainCRF(method="max_margin")`` (BCFW structured SVM)
  on the same features;

measures Viterbi accuracy per letter and per word on the ``test`` split (folds 3-5), the
raw mean ``p(MAP | x)`` (scores read as log-potentials) against the word accuracy, and
writes ``NAME.npz`` + ``NAME.json`` with all of that in the metadata. Runs on one thread
(``NUMBA_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``, set before numpy is imported) so the
result is reproducible bit for bit on a given machine and the timings are one-core
timings.

``--select`` instead runs the hyperparameter search that fixed those settings: 3-fold
cross-validation over the three training folds (train on two, validate on the third),
never touching the test split, and prints a table (``--json``: a JSON object).

Run from the repository root:

    python benchmarks/train_ocr_models.py                 # writes structcal/pretrained/ocr_chain_crf*.{npz,json}
    python benchmarks/train_ocr_models.py --select        # the CV table behind the settings
    python benchmarks/train_ocr_models.py --out /tmp/m    # write elsewhere (e.g. to compare)
    python benchmarks/train_ocr_models.py --baselines     # also measure both methods on raw pixels
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from structcal.crf import ChainCRF, ImageFeatures  # noqa: E402
from structcal.datasets import OCR_ALPHABET, OCR_SPLITS, load_ocr  # noqa: E402
from structcal.exceptions import ConvergenceWarning  # noqa: E402
from structcal.inference import infer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: The shipped models' settings (chosen by ``--select``; see structcal/pretrained/README.md).
MODELS = {
    "ocr_chain_crf": dict(method="likelihood", alpha=3e-4, features=ImageFeatures()),
    "ocr_chain_crf_max_margin": dict(
        method="max_margin", alpha=1e-2, features=ImageFeatures(), random_state=0
    ),
}

#: ``--baselines``: the same methods on the raw pixels (trained and measured, not saved).
BASELINES = {
    "pixels_likelihood": dict(method="likelihood", alpha=3e-3),
    "pixels_max_margin": dict(method="max_margin", alpha=3e-3, random_state=0),
}

#: The ``--select`` grid: (name, ChainCRF parameters).
GRID = [
    (
        f"{method} {fname} alpha={alpha:g}",
        dict(method=method, alpha=alpha, features=feat, random_state=0),
    )
    for method, alphas in (
        ("likelihood", (1e-4, 3e-4, 1e-3, 3e-3)),
        ("max_margin", (1e-3, 3e-3, 1e-2)),
    )
    for fname, feat in (
        ("pixels", None),
        ("pixels+pairs", ImageFeatures(n_components=0)),
        ("pixels+pairs+pca20", ImageFeatures(n_components=20)),
        ("pixels+pairs+pca40", ImageFeatures(n_components=40)),
    )
    for alpha in alphas
    if method == "likelihood" or fname in ("pixels", "pixels+pairs+pca20")
]


def accuracy(crf: ChainCRF, data) -> dict:
    """Viterbi accuracy per letter and per word, and the raw mean p(MAP | x)."""
    p = crf.potentials(data.pixels, lengths=data.lengths)
    r = infer(p, map=True, marginals=True)
    ok = r.map_labels == data.labels
    word_ok = np.logical_and.reduceat(ok, data.offsets[:-1])
    return {
        "letter": float(ok.mean()),
        "word": float(word_ok.mean()),
        "mean_p_map": float(np.exp(r.map_log_probability).mean()),
    }


def fit(params: dict, data) -> tuple[ChainCRF, float, list[str]]:
    crf = ChainCRF(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t = time.perf_counter()
        crf.fit(data.pixels, data.labels, lengths=data.lengths)
        seconds = time.perf_counter() - t
    return crf, seconds, [str(w.message) for w in caught]


def describe_params(params: dict) -> dict:
    out = {k: v for k, v in params.items() if k != "features"}
    feat = params.get("features")
    out["features"] = (
        None
        if feat is None
        else {
            "class": type(feat).__name__,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in feat.get_params().items()},
        }
    )
    return out


def environment() -> dict:
    import scipy
    import sklearn

    import structcal

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "numba": numba.__version__,
        "structcal": structcal.__version__,
        "machine": platform.machine(),
        "numba_threads": numba.get_num_threads(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def train(out: Path | None, names: list[str], settings: dict = MODELS) -> dict:
    train_set, test_set = load_ocr("train"), load_ocr("test")
    report = {}
    for name in names:
        params = settings[name]
        crf, seconds, warned = fit(params, train_set)
        meta = {
            "description": f"ChainCRF(method={params['method']!r}) on the OCR letters",
            "alphabet": OCR_ALPHABET,
            "training_split": "train",
            "training_folds": list(OCR_SPLITS["train"]),
            "n_training_words": train_set.n_words,
            "test_split": "test",
            "test_folds": list(OCR_SPLITS["test"]),
            "hyperparameters": describe_params(params),
            "test_accuracy": accuracy(crf, test_set),
            "train_accuracy": accuracy(crf, train_set),
            "training_seconds": round(seconds, 2),
            "n_iter": crf.n_iter_,
            "converged": crf.converged_,
            "objective": crf.objective_,
            "duality_gap": crf.duality_gap_,
            "warnings": warned,
            "command": "python benchmarks/train_ocr_models.py",
            "environment": environment(),
        }
        if out is not None:
            crf.save(out / name, metadata=meta)
        report[name] = meta
        acc = meta["test_accuracy"]
        print(
            f"{name:26s} test letter {acc['letter']:.4f}  word {acc['word']:.4f}  "
            f"mean p(MAP) {acc['mean_p_map']:.4f}  fit {seconds:6.1f} s  "
            f"n_iter {crf.n_iter_}  converged {crf.converged_}",
            flush=True,
        )
    if out is not None:
        save_letter_classifier(out, train_set, test_set)
    return report


def save_letter_classifier(out: Path, train_set, test_set) -> None:
    """Save the OCR set-up's letter classifier (``structcal.demos.fit_letter_classifier``)."""
    from structcal.demos import LETTER_CLASSIFIER, fit_letter_classifier
    from structcal.io import save

    t0 = time.perf_counter()
    svm = fit_letter_classifier(train_set)
    seconds = time.perf_counter() - t0
    acc = float(np.mean(svm.predict(test_set.pixels) == test_set.labels))
    save(svm, out / LETTER_CLASSIFIER, metadata={
        "description": "The decision scores (a LinearDecisionMap) of LinearSVC(C=0.1, dual=False) on the 128 raw pixels of the OCR letters "
                       "(structcal.demos.fit_letter_classifier): the unstructured scores of "
                       "the Table 1 features phi_no1 and phi_no2",
        "alphabet": OCR_ALPHABET,
        "training_split": "train",
        "training_folds": list(OCR_SPLITS["train"]),
        "test_letter_accuracy": acc,
        "training_seconds": round(seconds, 2),
        "command": "python benchmarks/train_ocr_models.py",
        "environment": environment(),
    })
    print(f"{LETTER_CLASSIFIER:26s} test letter {acc:.4f}  fit {seconds:6.1f} s", flush=True)


def select() -> list[dict]:
    train_set = load_ocr("train")
    rows = []
    for label, params in GRID:
        folds = []
        for held in OCR_SPLITS["train"]:
            fit_set = train_set.subset(train_set.folds != held)
            val_set = train_set.subset(train_set.folds == held)
            crf, seconds, warned = fit(params, fit_set)
            acc = accuracy(crf, val_set)
            folds.append(
                {**acc, "seconds": seconds, "n_iter": crf.n_iter_, "converged": crf.converged_}
            )
        row = {
            "config": label,
            "params": describe_params(params),
            "cv_letter": float(np.mean([f["letter"] for f in folds])),
            "cv_word": float(np.mean([f["word"] for f in folds])),
            "seconds": float(np.median([f["seconds"] for f in folds])),
            "converged": all(f["converged"] for f in folds),
            "folds": folds,
        }
        rows.append(row)
        print(
            f"{label:45s} cv letter {row['cv_letter']:.4f}  word {row['cv_word']:.4f}  "
            f"fit {row['seconds']:5.1f} s  converged {row['converged']}",
            flush=True,
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--select", action="store_true", help="run the 3-fold CV grid instead")
    parser.add_argument("--out", type=Path, default=ROOT / "structcal" / "pretrained", help="output folder")
    parser.add_argument(
        "--baselines",
        action="store_true",
        help="also train and measure both methods on raw pixels (not saved)",
    )
    parser.add_argument(
        "--only", choices=sorted(MODELS), action="append", help="train only this model"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object at the end")
    args = parser.parse_args(argv)
    if args.select:
        result = {"cv": select(), "environment": environment()}
    else:
        result = {"models": train(args.out, args.only or list(MODELS))}
        if args.baselines:
            result["baselines"] = train(None, list(BASELINES), BASELINES)
        result["environment"] = environment()
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
