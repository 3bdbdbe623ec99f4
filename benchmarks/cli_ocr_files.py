"""Write the OCR demo's data as CLI input files, to run `structcal fit/evaluate` on them.

The shipped OCR chain CRF's potentials on the recalibration pool (folds 6-9) and the test
split (folds 3-5), with the unstructured letter classifier's scores and the gold labels,
in the .npz layout `structcal fit --help` describes. Then, e.g.:

    python benchmarks/cli_ocr_files.py /tmp/ocr
    structcal fit /tmp/ocr/recal.npz -o /tmp/ocr/rec --forecaster knn \
        --lexicon /tmp/ocr/lexicon.txt --alphabet abcdefghijklmnopqrstuvwxyz
    structcal evaluate /tmp/ocr/rec /tmp/ocr/test.npz
    structcal apply /tmp/ocr/rec /tmp/ocr/test.npz -o /tmp/ocr/events.csv

lexicon.txt holds the training words (the admissible outputs G of phi_mp2), as the demo
uses them; without --lexicon, phi_mp2 is left out.
"""

import sys
from pathlib import Path

import numpy as np

from structcal.demos import ocr_setup


def main(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    setup = ocr_setup()
    for name, words in (("recal", setup.recalibration), ("test", setup.test)):
        pot = setup.model.potentials(words.X)
        np.savez(
            folder / f"{name}.npz", unary=pot.unary, offsets=pot.offsets, pairwise=pot.pairwise,
            labels=words.labels,
            unstructured_scores=setup.letter_classifier.decision_function(words.pixels),
        )
        print(f"wrote {folder / name}.npz: {words.n_words} words, {pot.n_tokens} letters")
    (folder / "lexicon.txt").write_text("\n".join(sorted(set(setup.train.words))) + "\n")
    print(f"wrote {folder / 'lexicon.txt'}; alphabet {setup.train.alphabet}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ocr_cli_files")
