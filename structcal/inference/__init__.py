"""Inference on batches of structured problems (public functions; kernels are private)."""

from .chain import (
    ChainInference,
    KBestResult,
    assignment_probability,
    constrained_log_partition,
    forward_backward,
    infer,
    kbest,
    log_probability,
    pseudo_marginals,
    score_labelings,
    viterbi,
)

__all__ = [
    "ChainInference",
    "KBestResult",
    "assignment_probability",
    "constrained_log_partition",
    "forward_backward",
    "infer",
    "kbest",
    "log_probability",
    "pseudo_marginals",
    "score_labelings",
    "viterbi",
]
