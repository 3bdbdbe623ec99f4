"""``structcal demo ocr``: calibrate the shipped OCR chain CRF (the main job)."""

from __future__ import annotations

import json
import time

import numpy as np

from ._common import add_common_options

__all__ = ["demo_ocr", "add_parser", "run"]


def demo_ocr(model: str = "ocr_chain_crf", as_json: bool = False, verbose: bool = True) -> dict:
    """Calibrate a shipped OCR chain CRF's MAP and per-letter events (the main job).

    Loads the shipped model and the OCR data, runs inference on the recalibration pool
    (folds 6-9) and the test split (folds 3-5), builds MAP and marginal events with every
    Table 1 feature, fits cross-validated k-NN region forecasters on the recalibration
    events and evaluates raw vs calibrated probabilities on the test events. Steps are
    reported on stderr as they run (``verbose``), the text results on stdout as soon as
    they are known.
    """
    from .. import _warmup as warmup
    from .._progress import compile_monitor, message
    from ..demos import ocr_setup
    from ..forecasters import KNNRegionForecaster
    from ..recalibration import StructuredRecalibrator

    def say(line=""):
        if not as_json:
            print(line, flush=True)

    t0 = time.perf_counter()
    say(f"structcal demo ocr: calibrated confidence for the shipped chain CRF {model!r}")
    # a first run: the k-NN kernels compile in two other processes meanwhile, then the
    # shift test's (k-best lists, the metrics and the k-NN trees run in NumPy at this size)
    background = warmup.start(("knn_query", "knn_sort", "forecasters"), verbose,
                              later=("shift",))
    try:
        with compile_monitor(verbose) as jit:
            message("loading the shipped model and the OCR data ...", verbose)
            setup = ocr_setup(model)
            train, recal, test = setup.train, setup.recalibration, setup.test
            message("inference on the test and recalibration words ...", verbose)
            pred_recal, pred_test = setup.predict(recal), setup.predict(test)
            correct = pred_test.map_labels == test.labels
            letter_accuracy = float(correct.mean())
            word_accuracy = float(np.logical_and.reduceat(correct, test.offsets[:-1]).mean())
            say(f"  test split (folds 3-5): {test.n_words} words, Viterbi accuracy "
                f"{letter_accuracy:.1%} per letter, {word_accuracy:.1%} per word")
            rec = StructuredRecalibrator(
                features="table1", lexicon=setup.lexicon, label_names=train.alphabet,
                forecaster=KNNRegionForecaster(), method="forecaster", random_state=0,
                verbose=verbose,
            ).fit(pred_recal, recal.labels)
            k = {name: int(f.n_neighbors_) for name, f in rec.forecasters_.items()}
            say(f"  recalibration (folds 6-9): {recal.n_words} words; CV k-NN region "
                f"forecasters on every Table 1 feature (k = {k['map']} for words, "
                f"{k['marginal']} for letters)")
            message("scoring raw and calibrated probabilities on the test events ...", verbose)
            report = rec.evaluate(pred_test, test.labels)
    except BaseException:
        if background is not None:  # leave it to finish on its own: report the error now
            background.detach()
        raise
    if background is not None:
        background.close()
    seconds = time.perf_counter() - t0
    from ._report import SCALE

    # the JSON carries the figures the text shows, in its units (stated under "units")
    result = {
        "model": model,
        "units": {
            "letter_accuracy": "percent", "word_accuracy": "percent",
            "l2, calibration_error, sharpness": "x100 (as in the text table)",
            "seconds": "wall-clock seconds, including JIT compilation on a first run",
        },
        "letter_accuracy": 100 * letter_accuracy,
        "word_accuracy": 100 * word_accuracy,
        "n_recalibration_words": recal.n_words,
        "n_test_words": test.n_words,
        "k": k,
    }
    for kind in ("map", "marginal", "pooled"):
        raw, cal = report.get(kind, "raw"), report.get(kind, "calibrated")
        result[kind] = {
            "n_events": raw.n_events,
            "raw_l2": SCALE * raw.l2,
            "raw_calibration_error": SCALE * raw.calibration_error,
            "raw_sharpness": SCALE * raw.sharpness,
            "calibrated_l2": SCALE * cal.l2,
            "calibrated_calibration_error": SCALE * cal.calibration_error,
            "calibrated_sharpness": SCALE * cal.sharpness,
        }
    result["seconds"] = seconds
    result["jit_compiled_signatures"] = jit.n_compiled
    result["jit_compile_seconds"] = jit.seconds
    if as_json:
        print(json.dumps(result))
        return result
    print("  events: 'is the word right?' (map), 'is letter j right?' (marginal); l2 loss,")
    print("  calibration error and sharpness x100 on the test events (10 buckets):\n")
    for line in report.format(scale=SCALE).splitlines():
        print("  " + line)
    jit_note = (f" (including {jit.seconds:.1f} s of JIT compilation: {jit.n_compiled} kernel "
                "signatures, now in the on-disk cache)" if jit.compiled else "")
    print(f"\n  done in {seconds:.1f} s{jit_note}")
    return result


def add_parser(sub) -> None:
    """Register ``structcal demo``."""
    demo = sub.add_parser("demo", help="run a demonstration on shipped data",
                          description=demo_ocr.__doc__.split("\n\n")[0])
    demo.add_argument("dataset", choices=["ocr"], help="which demonstration")
    demo.add_argument("--json", action="store_true",
                      help="print one JSON object (the text's figures in the text's units: "
                           "accuracies in percent, losses x100; stated under 'units')")
    add_common_options(demo)
    demo.add_argument(
        "--model", default="ocr_chain_crf",
        choices=["ocr_chain_crf", "ocr_chain_crf_max_margin"], help="which shipped model",
    )
    demo.set_defaults(run=run)


def run(args) -> int:
    """Run ``structcal demo``."""
    if args.dataset == "ocr":
        demo_ocr(model=args.model, as_json=args.json, verbose=not args.quiet)
    return 0
