"""Outside models -> ChainPotentials: CRFsuite, emission + transition CRFs, token classifiers
(Hugging Face ``transformers`` among them).

Adapters only produce potentials (and read tag sets); optional dependencies
(python-crfsuite, sklearn-crfsuite, torch) are imported lazily, when a function that needs
them is called.
"""

from .crfsuite import CRFsuiteModel, crfsuite_potentials
from .emissions import emission_potentials
from .huggingface import hf_entities, hf_potentials, hf_tag_names
from .tagging import Chunks, TagScheme, token_classifier_potentials, word_scores

__all__ = [
    "CRFsuiteModel",
    "Chunks",
    "TagScheme",
    "crfsuite_potentials",
    "emission_potentials",
    "hf_entities",
    "hf_potentials",
    "hf_tag_names",
    "token_classifier_potentials",
    "word_scores",
]
