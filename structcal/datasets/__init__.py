"""Datasets shipped with structcal, and generators of synthetic problems."""

# each loader's module is imported on first use (PEP 562): reading one dataset, or the
# token features of the shipped tagger, does not import the others' dependencies
_WHERE = {
    "BBBC039_SPLITS": "bbbc039", "BBBC039Nuclei": "bbbc039", "load_bbbc039": "bbbc039",
    "GraphDataset": "graphs", "grid_edges": "graphs", "make_superpixel_scenes": "graphs",
    "GUM_COLUMNS": "gum", "GUM_GENRES": "gum", "load_gum": "gum",
    "OCR_ALPHABET": "ocr", "OCR_SPLITS": "ocr", "OCRWords": "ocr", "load_ocr": "ocr",
    "SCENE_LABELS": "scene", "SceneMultilabel": "scene", "load_scene": "scene",
    "SNAKES_COLOURS": "snakes", "SnakesGrids": "snakes", "load_snakes": "snakes",
    "WNUT17_SPLITS": "wnut17", "NERSentences": "wnut17", "load_wnut17": "wnut17",
    "token_features": "wnut17", "wnut17_tagger_path": "wnut17",
}


def __getattr__(name):
    if name in _WHERE:
        from importlib import import_module

        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


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
