"""Datasets shipped with structcal, and generators of synthetic problems."""

from .graphs import GraphDataset, grid_edges, make_superpixel_scenes
from .ocr import OCR_ALPHABET, OCR_SPLITS, OCRWords, load_ocr
from .scene import SCENE_LABELS, SceneMultilabel, load_scene
from .snakes import SNAKES_COLOURS, SnakesGrids, load_snakes

__all__ = [
    "GraphDataset",
    "OCR_ALPHABET",
    "OCR_SPLITS",
    "OCRWords",
    "SCENE_LABELS",
    "SNAKES_COLOURS",
    "SceneMultilabel",
    "SnakesGrids",
    "grid_edges",
    "load_ocr",
    "load_scene",
    "load_snakes",
    "make_superpixel_scenes",
]
