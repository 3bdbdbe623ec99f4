"""Datasets shipped with structcal, and generators of synthetic problems."""

from .bbbc039 import BBBC039_SPLITS, BBBC039Nuclei, load_bbbc039
from .graphs import GraphDataset, grid_edges, make_superpixel_scenes
from .gum import GUM_COLUMNS, GUM_GENRES, load_gum
from .ocr import OCR_ALPHABET, OCR_SPLITS, OCRWords, load_ocr
from .scene import SCENE_LABELS, SceneMultilabel, load_scene
from .snakes import SNAKES_COLOURS, SnakesGrids, load_snakes
from .wnut17 import WNUT17_SPLITS, NERSentences, load_wnut17, token_features, wnut17_tagger_path

__all__ = [
    "BBBC039_SPLITS",
    "BBBC039Nuclei",
    "GUM_COLUMNS",
    "GUM_GENRES",
    "GraphDataset",
    "NERSentences",
    "OCR_ALPHABET",
    "OCR_SPLITS",
    "OCRWords",
    "SCENE_LABELS",
    "SNAKES_COLOURS",
    "SceneMultilabel",
    "WNUT17_SPLITS",
    "SnakesGrids",
    "grid_edges",
    "load_bbbc039",
    "load_gum",
    "load_ocr",
    "load_scene",
    "load_snakes",
    "load_wnut17",
    "token_features",
    "wnut17_tagger_path",
    "make_superpixel_scenes",
]
