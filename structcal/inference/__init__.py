"""Inference on batches of structured problems (public functions; kernels are private).

``infer``, ``score_labelings`` and ``pseudo_marginals`` accept chains or graphs and
dispatch on the type of the potentials; the other names are specific to one structure
(graph routines: :mod:`structcal.inference.graph`).
"""

from ._dispatch import infer, pseudo_marginals, score_labelings
from .chain import (
    ChainInference,
    KBestResult,
    assignment_probability,
    constrained_log_partition,
    forward_backward,
    kbest,
    log_probability,
    viterbi,
)
from .graph import (
    GraphInference,
    SecondBest,
    belief_propagation,
    gibbs_sample,
    icm,
    map_inference,
    max_product,
    mean_field,
    second_best,
)

__all__ = [
    "ChainInference",
    "GraphInference",
    "KBestResult",
    "SecondBest",
    "assignment_probability",
    "belief_propagation",
    "constrained_log_partition",
    "forward_backward",
    "gibbs_sample",
    "icm",
    "infer",
    "kbest",
    "log_probability",
    "map_inference",
    "max_product",
    "mean_field",
    "pseudo_marginals",
    "score_labelings",
    "second_best",
    "viterbi",
]
