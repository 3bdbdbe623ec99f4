"""Datasets shipped with structcal, and generators of synthetic problems."""

from .ocr import OCR_ALPHABET, OCR_SPLITS, OCRWords, load_ocr

__all__ = ["OCR_ALPHABET", "OCR_SPLITS", "OCRWords", "load_ocr"]
