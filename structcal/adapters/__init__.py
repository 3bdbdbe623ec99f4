"""Outside models -> ChainPotentials: CRFsuite models, emission + transition CRFs, token classifiers.

Adapters only produce potentials (and read tag sets); optional dependencies
(python-crfsuite, sklearn-crfsuite, torch) are imported lazily, when a function that needs
them is called.
"""

from .crfsuite import CRFsuiteModel, crfsuite_potentials
from .emissions import emission_potentials
from .tagging import Chunks, TagScheme, token_classifier_potentials, word_scores

__all__ = [
    "CRFsuiteModel",
    "Chunks",
    "TagScheme",
    "crfsuite_potentials",
    "emission_potentials",
    "token_classifier_potentials",
    "word_scores",
]
