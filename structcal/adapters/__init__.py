"""Outside models -> ChainPotentials or events: CRFsuite, emission + transition CRFs, token
classifiers (Hugging Face ``transformers`` among them), segmentation networks' probability
maps and instance masks.

Adapters only produce potentials or events (and read tag sets, label images); optional dependencies
(python-crfsuite, sklearn-crfsuite, torch) are imported lazily, when a function that needs
them is called.
"""

from .crfsuite import CRFsuiteModel, crfsuite_potentials
from .emissions import emission_potentials
from .instances import (
    MapObjects,
    from_coco,
    instances_from_map,
    map_objects,
    match_instances,
    read_label_image,
    to_coco,
    write_label_image,
)
from .huggingface import hf_entities, hf_potentials, hf_tag_names
from .tagging import Chunks, TagScheme, token_classifier_potentials, word_scores

__all__ = [
    "CRFsuiteModel",
    "Chunks",
    "MapObjects",
    "TagScheme",
    "crfsuite_potentials",
    "emission_potentials",
    "from_coco",
    "hf_entities",
    "hf_potentials",
    "hf_tag_names",
    "instances_from_map",
    "map_objects",
    "match_instances",
    "read_label_image",
    "to_coco",
    "token_classifier_potentials",
    "word_scores",
    "write_label_image",
]
