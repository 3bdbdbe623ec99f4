"""Exact inference on batches of linear chains.

Every function takes a :class:`~structcal.potentials.ChainPotentials` and runs one Numba
kernel over all chains in parallel, or, for a small batch, the same computation in NumPy
(:mod:`structcal._tier`), which needs no kernel compiled or loaded. Results are small
documented objects.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import as_bool_array, as_int_array, check_int, check_offsets, describe
from ..exceptions import InfeasibleError, ParameterError, ParameterTypeError, PrecisionWarning
from .._tier import (
    SECONDS_PER_STEP, LazyModule, kbest_seconds_per_step, numpy_tier, shared_seconds_per_step,
)
from ..potentials import ChainPotentials
from . import _chain_numpy
from ._chain_numpy import STATUS_FALLBACK, STATUS_INFEASIBLE, STATUS_OK, STATUS_PENDING

_chain = LazyModule("structcal.inference._chain")  # the Numba kernels

__all__ = [
    "ChainInference",
    "KBestResult",
    "infer",
    "viterbi",
    "kbest",
    "forward_backward",
    "score_labelings",
    "log_probability",
    "pseudo_marginals",
    "assignment_probability",
    "constrained_log_partition",
]


@dataclass(frozen=True)
class ChainInference:
    """MAP labeling and/or marginals of a batch of chains.

    Fields that were not requested are ``None``.

    Attributes
    ----------
    map_labels : ndarray of shape (n_tokens,), dtype int64, or None
        The highest-scoring labeling of each chain, laid end to end (Viterbi).
    map_score : ndarray of shape (n_chains,) or None
        Unnormalised log-score of the MAP labeling (0 for an empty chain).
    log_partition : ndarray of shape (n_chains,) or None
        ``log sum_y exp(score(y))`` of each chain (0 for an empty chain).
    marginals : ndarray of shape (n_tokens, n_states) or None
        Node marginals ``p(y_t = a | x)``; each row sums to one.
    edge_marginals : ndarray of shape (n_edges, n_states, n_states) or None
        ``p(y_t = a, y_{t+1} = b | x)`` for each edge (edges laid out as in
        :attr:`ChainPotentials.edge_offsets`).
    n_fallback : int
        Number of chains whose marginals were computed by the exact log-space pass
        because the scaled pass could not be certified for them (steps spanning hundreds
        of nats).
    """

    map_labels: np.ndarray | None
    map_score: np.ndarray | None
    log_partition: np.ndarray | None
    marginals: np.ndarray | None
    edge_marginals: np.ndarray | None = None
    n_fallback: int = 0

    @property
    def map_log_probability(self) -> np.ndarray:
        """``log p(MAP | x)`` of each chain (needs both MAP and marginals)."""
        if self.map_score is None or self.log_partition is None:
            raise ParameterError("map_log_probability needs both map=True and marginals=True")
        return self.map_score - self.log_partition


@dataclass(frozen=True)
class KBestResult:
    """The k highest-scoring distinct labelings of each chain.

    Attributes
    ----------
    labels : ndarray of shape (k, n_tokens), dtype int64
        ``labels[r]`` is the rank-``r`` labeling of every chain, laid end to end; ``-1``
        where a chain has fewer than ``r + 1`` feasible labelings.
    scores : ndarray of shape (n_chains, k)
        Their unnormalised log-scores, in decreasing order; ``-inf`` where missing.
    n_found : ndarray of shape (n_chains,), dtype int64
        Number of feasible labelings found (``min(k, number of labelings with finite
        score)``).
    """

    labels: np.ndarray
    scores: np.ndarray
    n_found: np.ndarray


def _chunk(n_chains: int) -> int:
    import numba

    threads = numba.get_num_threads()
    return int(max(1, min(64, -(-n_chains // (8 * threads)))))


def _scaled_exponentials(pw, stride, needed):
    """Return ``(E, ET, colmax, spread)`` for the sum-product drivers.

    They are the shared matrix's, or empty arrays of the padded width when there is none
    to share (per-edge matrices are exponentiated per chain inside the drivers) or no
    sum-product pass is run.
    """
    K = pw.shape[1]
    Kp = _chain.padded_width(K)
    if needed and stride == 0:
        return _chain.scaled_exponentials(pw, Kp)
    return np.empty((0, K, Kp)), np.empty((0, K, Kp)), np.empty((0, K)), np.empty(0)


def _check_potentials(potentials) -> ChainPotentials:
    if not isinstance(potentials, ChainPotentials):
        raise ParameterTypeError(
            f"`potentials` must be a ChainPotentials; got {describe(potentials)}"
        )
    return potentials


def _raise_infeasible(status, what="potentials"):
    bad = np.flatnonzero(status == STATUS_INFEASIBLE)
    if bad.size:
        raise InfeasibleError(
            f"chain(s) {bad[:10].tolist()}{'...' if bad.size > 10 else ''} of `{what}` have no "
            "labeling of non-zero probability: every labeling includes a -inf potential"
        )


def _labels_iv(potentials: ChainPotentials, labels, name="labels") -> np.ndarray:
    """Accept a flat (n_tokens,) integer array or a list of per-chain integer arrays."""
    if isinstance(labels, (list, tuple)) and (
        len(labels) == 0 or not np.isscalar(labels[0])
    ):
        if len(labels) != potentials.n_chains:
            raise ParameterError(
                f"`{name}` must hold one labeling per chain ({potentials.n_chains}); got "
                f"{len(labels)}"
            )
        parts = []
        for c, (lab, L) in enumerate(zip(labels, potentials.lengths)):
            lab = as_int_array(lab, f"{name}[{c}]", ndim=1, low=0, high=potentials.n_states)
            if lab.shape[0] != L:
                raise ParameterError(
                    f"`{name}[{c}]` must have the chain's length {L}; got {lab.shape[0]}"
                )
            parts.append(lab)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return as_int_array(
        labels, name, ndim=1, shape=(potentials.n_tokens,), low=0, high=potentials.n_states
    )


#: Estimated error (nats) of a log-partition above which :class:`PrecisionWarning` is issued.
PRECISION_TOLERANCE = 1e-6


def _warn_precision(logz: np.ndarray, lengths: np.ndarray):
    """Warn when float64 rounding limits the accuracy of probabilities derived from ``logz``.

    A log-partition is a sum over the chain of terms as large as itself; its rounding
    error is about ``length * eps * |logz|`` nats, and so is the relative error of every
    probability made from a difference of two of them (an event's probability, the MAP's
    probability). Typical chains are many orders of magnitude below the tolerance; huge
    scores on likely labelings (or chains of millions of tokens) are not.
    """
    if logz.shape[0] == 0:
        return
    finite = np.isfinite(logz)
    est = np.finfo(np.float64).eps * lengths * np.abs(np.where(finite, logz, 0.0))
    worst = int(np.argmax(est))
    if est[worst] > PRECISION_TOLERANCE:
        n = int(np.count_nonzero(est > PRECISION_TOLERANCE))
        warnings.warn(
            f"{n} chain(s) have log-partitions so large (chain {worst}: {logz[worst]:.3g} over "
            f"{int(lengths[worst])} tokens) that float64 rounding limits probabilities derived "
            f"from them (event and MAP probabilities) to a relative accuracy of about "
            f"{est[worst]:.1g}; marginals are still probabilities. Scores this large on likely "
            "labelings are unusual: check the scale of the potentials.",
            PrecisionWarning, stacklevel=3,
        )


def _log_partition(p: ChainPotentials, chains=None) -> np.ndarray:
    """Log-partition of the given chains (all by default) by a forward pass only."""
    if chains is None:
        chains = np.arange(p.n_chains, dtype=np.int64)
    uniq, inverse = np.unique(chains, return_inverse=True)
    logz = constrained_log_partition(
        p, uniq, np.zeros(uniq.shape[0] + 1, np.int64), np.zeros(0, np.int64),
        np.zeros((0, p.n_states), bool),
    )
    _raise_infeasible(np.where(logz == -np.inf, STATUS_INFEASIBLE, STATUS_OK))
    _warn_precision(logz, p.lengths[uniq])
    return logz[inverse]


def infer(
    potentials: ChainPotentials, *, map: bool = True, marginals: bool = True, edge_marginals: bool = False
) -> ChainInference:
    """Run Viterbi and/or forward-backward on every chain in one fused pass.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    map : bool, default=True
        Compute the MAP labeling and its score (Viterbi).
    marginals : bool, default=True
        Compute node marginals and the log-partition (forward-backward).
    edge_marginals : bool, default=False
        Also compute pairwise marginals of each edge (implies ``marginals``).

    Returns
    -------
    ChainInference

    Raises
    ------
    InfeasibleError
        If a chain has no labeling with a finite score.

    Notes
    -----
    Viterbi is exact max-product in log space. Marginals come from a forward-backward
    pass with per-step rescaling in probability space, certified as it runs: a chain is
    kept only if no term of it can have underflowed (a bound from the spread of each
    step's potentials and the smallest forward value so far); any other chain is
    recomputed in log space (reported in ``n_fallback``), whose messages are normalised
    at every step and whose marginals are softmaxes of forward plus backward messages.
    Every marginal is therefore a probability (in [0, 1], rows summing to 1 up to
    rounding) at any magnitude of the potentials (finite ones at most
    :data:`~structcal._validation.MAX_LOG_POTENTIAL`, about 1e301, in magnitude), exact
    up to rounding relative to the magnitude of the scores of likely labelings (see the
    Numerics notes of :mod:`structcal.inference._chain`). The log-partition is a sum of
    terms as large as itself; when its rounding error (about ``length * 2.2e-16 *
    |log_partition|``) exceeds :data:`PRECISION_TOLERANCE`, a
    :class:`~structcal.exceptions.PrecisionWarning` says so.

    Memory: besides the outputs, each thread holds scratch for the longest chain of its
    chunk: a few rows of ``Kp`` values per token, ``Kp`` = K rounded up to a multiple of
    32 (K below 4: K itself), and, with per-edge pairwise potentials, two scaled copies
    of that chain's matrices (``2 * K * Kp * 8`` bytes per edge, 13 KB for K = 26). A
    shared matrix is exponentiated once for the batch.

    References
    ----------
    L. R. Rabiner, *A tutorial on hidden Markov models and selected applications in
    speech recognition*, Proc. IEEE 77(2), 1989 (scaled forward-backward, Viterbi).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import infer
    >>> p = ChainPotentials.from_list([np.log([[0.5, 0.5], [0.9, 0.1]])], np.zeros((2, 2)))
    >>> r = infer(p)
    >>> r.map_labels.tolist(), np.round(r.marginals, 3).tolist()
    ([0, 0], [[0.5, 0.5], [0.9, 0.1]])
    """
    p = _check_potentials(potentials)
    marginals = bool(marginals or edge_marginals)
    pw, stride = p._pairwise3()
    K = p.n_states
    if numpy_tier(p.n_tokens * K * K, kernel="inference/_chain.infer_batch",
                  seconds_per_step=shared_seconds_per_step(K) if stride == 0 else SECONDS_PER_STEP):
        labels, scores, logz, marg, edge, status = _chain_numpy.infer(
            p.unary, p.offsets, p.edge_offsets, pw, stride, bool(map), marginals,
            bool(edge_marginals))
    else:
        labels, scores, logz, marg, edge, status = _infer_kernels(
            p, pw, stride, bool(map), marginals, bool(edge_marginals))
    _raise_infeasible(status)
    if marginals:
        _warn_precision(logz, p.lengths)
    return ChainInference(
        map_labels=labels if map else None,
        map_score=scores if map else None,
        log_partition=logz if marginals else None,
        marginals=marg if marginals else None,
        edge_marginals=edge if edge_marginals else None,
        n_fallback=int(np.count_nonzero(status == STATUS_FALLBACK)),
    )


def _infer_kernels(p, pw, stride, do_map, marginals, edge_marginals):
    K = p.n_states
    E, ET, colmax, spread = _scaled_exponentials(pw, stride, marginals)
    labels = np.zeros(p.n_tokens, dtype=np.int64)
    scores = np.zeros(p.n_chains)
    logz = np.zeros(p.n_chains)
    marg = np.empty((p.n_tokens, K)) if marginals else np.empty((0, K))
    edge = np.empty((p.n_edges, K, K)) if edge_marginals else np.empty((0, K, K))
    status = np.zeros(p.n_chains, dtype=np.int64)
    _chain.infer_batch(
        p.unary, p.offsets, p.edge_offsets, pw, stride, E, ET, colmax, spread,
        do_map, marginals, edge_marginals, _chunk(p.n_chains),
        labels, scores, logz, marg, edge, status, work=p.n_tokens,
    )
    pending = np.flatnonzero(status == STATUS_PENDING)
    if pending.size:  # not certified by the scaled pass: the exact log-space pass
        _chain.log_space_batch(
            p.unary, p.offsets, p.edge_offsets, pw, stride, pending, edge_marginals,
            scores, logz, marg, edge, status, work=8 * int(p.lengths[pending].sum()),
        )
    return labels, scores, logz, marg, edge, status


def viterbi(potentials: ChainPotentials) -> ChainInference:
    """Return the MAP labeling and MAP score of every chain (``infer(..., marginals=False)``).

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.

    Returns
    -------
    ChainInference
        With ``map_labels`` and ``map_score`` set.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import viterbi
    >>> p = ChainPotentials.from_list([[[1.0, 0.0], [0.0, 0.5]]], [[0.0, -2.0], [-2.0, 0.0]])
    >>> r = viterbi(p)
    >>> r.map_labels.tolist(), r.map_score.tolist()
    ([0, 0], [1.0])
    """
    return infer(potentials, map=True, marginals=False)


def forward_backward(potentials: ChainPotentials, *, edge_marginals: bool = False) -> ChainInference:
    """Return the log-partition and node (and optionally edge) marginals of every chain.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    edge_marginals : bool, default=False
        Also return the pairwise marginals of each edge.

    Returns
    -------
    ChainInference
        With ``log_partition``, ``marginals`` (and ``edge_marginals``) set.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import forward_backward
    >>> p = ChainPotentials.from_list([np.zeros((2, 2))], np.zeros((2, 2)))
    >>> r = forward_backward(p, edge_marginals=True)
    >>> float(np.exp(r.log_partition[0])), r.edge_marginals[0].tolist()
    (4.0, [[0.25, 0.25], [0.25, 0.25]])
    """
    return infer(potentials, map=False, marginals=True, edge_marginals=edge_marginals)


def kbest(potentials: ChainPotentials, k: int = 2) -> KBestResult:
    """Return the ``k`` highest-scoring distinct labelings of every chain (list Viterbi).

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    k : int, default=2
        Number of labelings per chain (>= 1).

    Returns
    -------
    KBestResult

    Notes
    -----
    Exact: each state at each position keeps its ``k`` best prefixes, so the cost is
    ``O(L K^2 k)`` per chain. Labelings of equal score come in colexicographic order:
    compared from the *last* position backwards, lower labels first (so ``[1, 0]``
    before ``[0, 1]``); this is the order in which the recursion meets them.
    A chain with fewer than ``k`` labelings of finite score reports ``-inf`` scores and
    ``-1`` labels for the missing ranks; an empty chain has one (empty) labeling of score 0.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import kbest
    >>> p = ChainPotentials.from_list([[[2.0, 0.0], [1.0, 0.0]]], np.zeros((2, 2)))
    >>> r = kbest(p, k=3)
    >>> r.labels.tolist(), r.scores.tolist()
    ([[0, 0], [0, 1], [1, 0]], [[3.0, 2.0, 1.0]])
    """
    p = _check_potentials(potentials)
    k = check_int(k, "k", low=1)
    pw, stride = p._pairwise3()
    if numpy_tier(p.n_tokens * p.n_states * p.n_states * k, kernel="inference/_chain.kbest_batch",
                  seconds_per_step=kbest_seconds_per_step(p.n_states, k)):
        labels, scores, found = _chain_numpy.kbest(p.unary, p.offsets, p.edge_offsets, pw, stride, k)
        return KBestResult(labels=labels, scores=scores, n_found=found)
    labels = np.full((k, p.n_tokens), -1, dtype=np.int64)
    scores = np.empty((p.n_chains, k))
    found = np.zeros(p.n_chains, dtype=np.int64)
    _chain.kbest_batch(
        p.unary, p.offsets, p.edge_offsets, pw, stride, k, labels, scores, found,
        work=p.n_tokens * k,
    )
    return KBestResult(labels=labels, scores=scores, n_found=found)


def score_labelings(potentials: ChainPotentials, labels) -> np.ndarray:
    """Unnormalised log-score of one labeling per chain.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    labels : array-like of shape (n_tokens,), or list of array-like
        The labelings, laid end to end or one array per chain.

    Returns
    -------
    ndarray of shape (n_chains,)
        ``-inf`` where a labeling uses a forbidden label or transition.
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels)
    pw, stride = p._pairwise3()
    if numpy_tier(p.n_tokens):
        return _chain_numpy.score(p, pw, stride, labels)
    out = np.empty(p.n_chains)
    _chain.score_batch(p.unary, p.offsets, p.edge_offsets, pw, stride, labels, out, work=p.n_tokens // 8)
    return out


def log_probability(potentials: ChainPotentials, labels) -> np.ndarray:
    """Log-probability ``log p(y | x)`` of one labeling per chain.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    labels : array-like of shape (n_tokens,), or list of array-like
        The labelings, laid end to end or one array per chain.

    Returns
    -------
    ndarray of shape (n_chains,)
        ``-inf`` for labelings of probability zero; never above 0 (the score and the
        log-partition are each exact to rounding, and a difference rounded above 0 is
        clipped to 0).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import log_probability
    >>> p = ChainPotentials.from_list([np.zeros((3, 2))], np.zeros((2, 2)))
    >>> float(np.exp(log_probability(p, [0, 1, 0])[0]))
    0.125
    """
    p = _check_potentials(potentials)
    score = score_labelings(p, labels)
    # both terms are exact to rounding; a difference rounded above 0 is clipped to 0
    return np.minimum(score - _log_partition(p), 0.0)


def pseudo_marginals(potentials: ChainPotentials, labels) -> np.ndarray:
    """Pseudo-marginals ``p(y_t = a | y_-t = labels_-t, x)`` around a given labeling.

    Each position's conditional distribution when every other position is clamped to
    ``labels`` (e.g. the MAP labeling): a softmax of the unary plus the two transitions
    to the clamped neighbours. Needs no forward-backward pass.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    labels : array-like of shape (n_tokens,), or list of array-like
        The labeling to condition on.

    Returns
    -------
    ndarray of shape (n_tokens, n_states)
        Rows sum to one.

    Raises
    ------
    InfeasibleError
        If at some position every label is forbidden given the clamped neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import pseudo_marginals
    >>> p = ChainPotentials.from_list([np.zeros((2, 2))], np.log([[3.0, 1.0], [1.0, 1.0]]))
    >>> pseudo_marginals(p, [0, 0]).tolist()
    [[0.75, 0.25], [0.75, 0.25]]
    """
    p = _check_potentials(potentials)
    labels = _labels_iv(p, labels)
    pw, stride = p._pairwise3()
    if numpy_tier(p.n_tokens * p.n_states):
        out, bad = _chain_numpy.pseudo_marginals(p, pw, stride, labels)
    else:
        out = np.empty((p.n_tokens, p.n_states))
        bad = np.zeros(p.n_chains, dtype=np.int64)
        _chain.pseudo_marginals_batch(
            p.unary, p.offsets, p.edge_offsets, pw, stride, labels, out, bad, work=p.n_tokens
        )
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        raise InfeasibleError(
            f"pseudo-marginals are undefined at position {bad[c] - 1} of chain {c}: every "
            "label is forbidden given the clamped neighbours in `labels`"
        )
    return out


def constrained_log_partition(
    potentials: ChainPotentials, chains, constraint_offsets, positions, allowed
) -> np.ndarray:
    """Log-partition of chains restricted to labelings that satisfy per-position constraints.

    Query ``q`` restricts chain ``chains[q]``: for each constraint ``i`` in
    ``constraint_offsets[q]:constraint_offsets[q + 1]``, the label at position
    ``positions[i]`` must be one of ``allowed[i]``. ``exp(result - log_partition)`` is the
    probability of the constraint set. Runs one forward pass per query.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    chains : array-like of shape (n_queries,)
        Chain of each query.
    constraint_offsets : array-like of shape (n_queries + 1,)
        Constraints of each query, CSR-style.
    positions : array-like of shape (n_constraints,)
        Position (within its chain) that each constraint restricts.
    allowed : array-like of shape (n_constraints, n_states), bool
        Labels allowed at that position.

    Returns
    -------
    ndarray of shape (n_queries,)
        ``-inf`` where no labeling satisfies a query's constraints.
    """
    p = _check_potentials(potentials)
    chains = as_int_array(chains, "chains", ndim=1, low=0, high=p.n_chains)
    n_q = chains.shape[0]
    positions = as_int_array(positions, "positions", ndim=1, low=0)
    q_offsets = check_offsets(constraint_offsets, "constraint_offsets", positions.shape[0])
    if q_offsets.shape[0] != n_q + 1:
        raise ParameterError(
            f"`constraint_offsets` must have n_queries + 1 = {n_q + 1} entries; got "
            f"{q_offsets.shape[0]}"
        )
    allowed = as_bool_array(allowed, "allowed", ndim=2, shape=(positions.shape[0], p.n_states))
    lengths = np.repeat(p.lengths[chains], np.diff(q_offsets))
    if positions.size and (positions >= lengths).any():
        i = int(np.argmax(positions >= lengths))
        q = int(np.searchsorted(q_offsets, i, side="right") - 1)
        raise ParameterError(
            f"`positions[{i}]`={positions[i]} is past the end of chain {chains[q]} "
            f"(length {lengths[i]}) in query {q}"
        )
    pw, stride = p._pairwise3()
    if numpy_tier(int(p.lengths[chains].sum()) * p.n_states * p.n_states,
                  kernel="inference/_chain.constrained_log_partition_batch",
                  seconds_per_step=(shared_seconds_per_step(p.n_states) if stride == 0
                                    else SECONDS_PER_STEP)):
        return _chain_numpy.constrained_log_partition(
            p.unary, p.offsets, p.edge_offsets, pw, stride, chains, q_offsets, positions, allowed)
    E, _, colmax, spread = _scaled_exponentials(pw, stride, True)
    out = np.empty(n_q)
    pending = np.zeros(n_q, dtype=bool)
    _chain.constrained_log_partition_batch(
        p.unary, p.offsets, p.edge_offsets, pw, stride, E, colmax, spread,
        chains, q_offsets, positions, allowed, _chunk(n_q), out, pending,
        work=int(p.lengths[chains].sum()) * 4,
    )
    pending = np.flatnonzero(pending)
    if pending.size:  # not certified by the scaled pass: the exact log-space pass
        _chain.constrained_log_space_batch(
            p.unary, p.offsets, p.edge_offsets, pw, stride, chains, q_offsets, positions,
            allowed, pending, out, work=32 * int(p.lengths[chains[pending]].sum()),
        )
    return out


def assignment_probability(potentials: ChainPotentials, queries, *, log: bool = False) -> np.ndarray:
    """Exact probability of partial assignments, e.g. ``P(y_3 = 'e')`` or ``P(y_2..4 = "ing")``.

    Parameters
    ----------
    potentials : ChainPotentials
        The batch of chains.
    queries : sequence of (chain, assignment)
        ``assignment`` is a mapping ``{position: label}`` or a pair ``(start, labels)``
        meaning ``y[start:start + len(labels)] == labels``.
    log : bool, default=False
        Return log-probabilities.

    Returns
    -------
    ndarray of shape (n_queries,)

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import assignment_probability
    >>> p = ChainPotentials.from_list([np.zeros((4, 3))], np.zeros((3, 3)))
    >>> assignment_probability(p, [(0, {1: 2}), (0, (1, [2, 0]))]).round(4).tolist()
    [0.3333, 0.1111]
    """
    p = _check_potentials(potentials)
    if not isinstance(queries, (list, tuple)):
        raise ParameterTypeError(
            f"`queries` must be a list of (chain, assignment) pairs; got {describe(queries)}"
        )
    chains, counts, pos_parts, lab_parts = [], [], [], []
    for q, item in enumerate(queries):
        try:
            c, assignment = item
        except (TypeError, ValueError):
            raise ParameterTypeError(
                f"`queries[{q}]` must be a (chain, assignment) pair; got {describe(item)}"
            ) from None
        c = check_int(c, f"chain of queries[{q}]", low=0)
        if isinstance(assignment, dict):  # integers only, as in the (start, labels) form
            pos = np.array([check_int(k, f"position of queries[{q}]", low=0)
                            for k in assignment], dtype=np.int64)
            lab = np.array([check_int(v, f"label of queries[{q}] at position {k}")
                            for k, v in assignment.items()], dtype=np.int64)
        else:
            try:
                start, lab = assignment
            except (TypeError, ValueError):
                raise ParameterTypeError(
                    f"assignment of `queries[{q}]` must be a dict or a (start, labels) pair; "
                    f"got {describe(assignment)}"
                ) from None
            lab = as_int_array(lab, f"labels of queries[{q}]", ndim=1)
            start = check_int(start, f"start of queries[{q}]", low=0)
            pos = np.arange(start, start + lab.shape[0], dtype=np.int64)
        chains.append(c)
        counts.append(pos.shape[0])
        pos_parts.append(pos)
        lab_parts.append(lab)
    chains = as_int_array(np.asarray(chains, dtype=np.int64), "chain of queries", low=0, high=p.n_chains)
    positions = np.concatenate(pos_parts) if pos_parts else np.zeros(0, np.int64)
    labels = np.concatenate(lab_parts) if lab_parts else np.zeros(0, np.int64)
    labels = as_int_array(labels, "assignment labels", low=0, high=p.n_states)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    allowed = np.zeros((labels.shape[0], p.n_states), dtype=bool)
    allowed[np.arange(labels.shape[0]), labels] = True
    constrained = constrained_log_partition(p, chains, offsets, positions, allowed)
    logp = np.minimum(constrained - _log_partition(p, chains), 0.0)  # see log_probability
    return logp if log else np.exp(logp)
