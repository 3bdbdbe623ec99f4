"""Containers for batches of structured problems, as flat arrays.

:class:`ChainPotentials` holds a batch of linear chains: one ``(n_tokens, n_states)``
array of unary log-potentials with ``offsets`` marking where each chain starts, and
pairwise log-potentials either shared by every edge or given per edge. Anything that
produces such scores (structcal's CRFs, a CRFsuite model, a neural network's logits plus a
transition matrix) plugs into inference and everything after it.
"""

from __future__ import annotations

import numpy as np

from .._ragged import offsets_from_lengths, ragged_rows
from .._validation import MAX_LOG_POTENTIAL, as_float_array, as_int_array, check_offsets, describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["ChainPotentials"]


def _readonly(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


def _writeable_somewhere(a) -> bool:
    """Whether the memory of ``a`` can be written through ``a`` or any array it views."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return True
        a = a.base
    if a is None:
        return False
    try:
        return not memoryview(a).readonly
    except TypeError:  # an unknown buffer owner: assume the worst
        return True


def _owned(a: np.ndarray, given) -> np.ndarray:
    """``a`` (validated from the caller's ``given``) as a read-only array nobody else can write.

    An array that validation created (converted dtype or layout, or built from a list)
    belongs to us and is frozen in place; the caller's own array, or a view of it, is
    copied first when any part of it is writeable, so that changing the caller's array
    later cannot change the potentials. Arrays that are read-only all the way down (such as
    another batch's attributes) are shared without a copy.
    """
    fresh = a is not given and a.base is None
    if not fresh and _writeable_somewhere(a):
        a = a.copy()
    a.flags.writeable = False
    return a


def _offsets_from_lengths(lengths, name="lengths") -> np.ndarray:
    return offsets_from_lengths(as_int_array(lengths, name, ndim=1, low=0))


def _label_names(names, n_states):
    """Validated label names (a tuple of ``n_states`` distinct str), or None."""
    if names is None:
        return None
    if isinstance(names, str) or not hasattr(names, "__len__"):
        raise ParameterTypeError(f"`label_names` must be a sequence of str; got {describe(names)}")
    out = tuple(str(n) if isinstance(n, (str, np.str_)) else n for n in names)
    if not all(isinstance(n, str) for n in out):
        raise ParameterTypeError("`label_names` must hold str")
    if len(out) != n_states:
        raise ParameterError(
            f"`label_names` must name the {n_states} labels (columns of `unary`); got {len(out)}"
        )
    if len(set(out)) != len(out):
        raise ParameterError(f"`label_names` has duplicates: {sorted({n for n in out if out.count(n) > 1})}")
    return out


class ChainPotentials:
    """Log-potentials of a batch of linear chains.

    The score of a labeling ``y`` of chain ``c`` with tokens ``s..s+L-1`` is
    ``sum_t unary[s + t, y_t] + sum_t pairwise_t[y_t, y_{t+1}]`` and its probability is
    ``exp(score - log_partition)``. ``-inf`` marks a forbidden label or transition; NaN
    and ``+inf`` are rejected.

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Unary log-potentials, chains laid end to end.
    offsets : array-like of shape (n_chains + 1,)
        Chain ``c`` is rows ``offsets[c]:offsets[c + 1]`` of ``unary``. Starts at 0, is
        non-decreasing and ends at ``n_tokens``.
    pairwise : array-like of shape (n_states, n_states) or (n_edges, n_states, n_states)
        Transition log-potentials ``pairwise[a, b]`` from label ``a`` at ``t`` to label
        ``b`` at ``t + 1``: one matrix shared by every edge, or one per edge, where the
        edges of chain ``c`` (``max(L_c - 1, 0)`` of them) are laid end to end in chain
        order. Without empty chains ``n_edges = n_tokens - n_chains``.
    label_names : sequence of str, optional
        The name of each label (column), when the producer knows them (the tagger
        adapters set the model's tag names): event kinds that read labels by name (the
        entity kinds) then check that their tag set is in this order.

    Attributes
    ----------
    unary : ndarray of shape (n_tokens, n_states), read-only
        The potentials own their arrays: an argument that is the caller's writeable
        array (or a view of one) is copied, so changing it later does not change the
        potentials. Read-only arrays (e.g. another batch's attributes) are shared.
    offsets : ndarray of shape (n_chains + 1,), read-only
    pairwise : ndarray of shape (n_states, n_states) or (n_edges, n_states, n_states), read-only
    edge_offsets : ndarray of shape (n_chains + 1,)
        Chain ``c``'s edges are ``edge_offsets[c]:edge_offsets[c + 1]``.
    label_names : tuple of str or None

    Notes
    -----
    **Empty chains** (``L = 0``) are allowed: such a chain has exactly one labeling, the
    empty one, with score 0 and probability 1. Its MAP labeling is empty with score 0, its
    log-partition is 0, it contributes no rows to marginals and no edges, and its k-best
    list holds that one labeling (the other ``k - 1`` entries have score ``-inf``).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> p = ChainPotentials.from_list(
    ...     [np.zeros((3, 2)), np.zeros((1, 2))], pairwise=np.eye(2))
    >>> p.n_chains, p.n_tokens, p.n_states, p.lengths.tolist()
    (2, 4, 2, [3, 1])
    """

    __slots__ = ("unary", "offsets", "pairwise", "edge_offsets", "label_names")

    def __init__(self, unary, offsets, pairwise, *, label_names=None):
        given = (unary, offsets, pairwise)
        unary = as_float_array(unary, "unary", ndim=2, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        n_tokens, n_states = unary.shape
        if n_states < 1:
            raise ParameterError(f"`unary` must have at least one state (column); got shape {unary.shape}")
        offsets = check_offsets(offsets, "offsets", n_tokens)
        lengths = np.diff(offsets)
        edge_offsets = np.zeros_like(offsets)
        np.cumsum(np.maximum(lengths - 1, 0), out=edge_offsets[1:])
        pairwise = as_float_array(pairwise, "pairwise", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        if pairwise.ndim == 2:
            if pairwise.shape != (n_states, n_states):
                raise ParameterError(
                    f"`pairwise` must have shape (n_states, n_states)=({n_states}, {n_states}) "
                    f"or (n_edges, n_states, n_states)=({edge_offsets[-1]}, {n_states}, "
                    f"{n_states}); got {pairwise.shape}"
                )
        elif pairwise.ndim == 3:
            want = (int(edge_offsets[-1]), n_states, n_states)
            if pairwise.shape != want:
                raise ParameterError(
                    f"per-edge `pairwise` must have shape (n_edges, n_states, n_states)={want} "
                    f"(n_edges = sum of max(length - 1, 0) over chains); got {pairwise.shape}"
                )
        else:
            raise ParameterError(
                f"`pairwise` must be 2-d (shared) or 3-d (per edge); got shape {pairwise.shape}"
            )
        self.unary = _readonly(_owned(unary, given[0]))
        self.offsets = _readonly(_owned(offsets, given[1]))
        self.pairwise = _readonly(_owned(pairwise, given[2]))
        self.edge_offsets = _readonly(edge_offsets)
        self.label_names = _label_names(label_names, n_states)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_list(cls, unaries, pairwise) -> "ChainPotentials":
        """Build a batch from per-chain arrays.

        Parameters
        ----------
        unaries : sequence of array-like of shape (L_c, n_states)
            Unary log-potentials of each chain.
        pairwise : array-like of shape (n_states, n_states), or sequence of array-like of shape (L_c - 1, n_states, n_states)
            One shared transition matrix, or the per-edge matrices of each chain.

        Returns
        -------
        ChainPotentials
        """
        if isinstance(unaries, np.ndarray) or not hasattr(unaries, "__len__"):
            raise ParameterTypeError(
                f"`unaries` must be a list of 2-d arrays, one per chain; got {describe(unaries)}"
            )
        if len(unaries) == 0:
            raise ParameterError("`unaries` must hold at least one chain; got an empty list")
        arrays = []
        for c, u in enumerate(unaries):
            u = as_float_array(u, f"unaries[{c}]", ndim=2, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            if arrays and u.shape[1] != arrays[0].shape[1]:
                raise ParameterError(
                    f"every chain must have the same number of states; unaries[0] has "
                    f"{arrays[0].shape[1]} and unaries[{c}] has {u.shape[1]}"
                )
            arrays.append(u)
        offsets = _offsets_from_lengths([a.shape[0] for a in arrays])
        unary = np.concatenate(arrays, axis=0)
        unary.flags.writeable = False  # ours: no need for the constructor to copy it
        if isinstance(pairwise, (list, tuple)):
            if len(pairwise) != len(arrays):
                raise ParameterError(
                    f"per-chain `pairwise` must hold one array per chain ({len(arrays)}); "
                    f"got {len(pairwise)}"
                )
            K = unary.shape[1]
            mats = []
            for c, (pw, u) in enumerate(zip(pairwise, arrays)):
                want = (max(u.shape[0] - 1, 0), K, K)
                pw = as_float_array(pw, f"pairwise[{c}]", allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
                if pw.shape != want:
                    raise ParameterError(
                        f"`pairwise[{c}]` must have shape (L - 1, n_states, n_states)={want}; "
                        f"got {pw.shape}"
                    )
                mats.append(pw)
            pairwise = np.concatenate(mats, axis=0)
            pairwise.flags.writeable = False
        return cls(unary, offsets, pairwise)

    @classmethod
    def from_scores(cls, scores, lengths, transitions, start=None, end=None) -> "ChainPotentials":
        """Build a batch from an outside model's per-token scores and a transition matrix.

        Start and end scores, when given, are added to the unary potentials of each chain's
        first and last token, which is equivalent to extra start/end factors.

        Parameters
        ----------
        scores : array-like of shape (n_tokens, n_states)
            Per-token log-scores, e.g. a neural network's logits (or log-softmax outputs).
        lengths : array-like of shape (n_chains,)
            Number of tokens of each chain.
        transitions : array-like of shape (n_states, n_states)
            Transition log-scores, shared by every edge.
        start, end : array-like of shape (n_states,), optional
            Log-scores of the first and last label of each chain.

        Returns
        -------
        ChainPotentials
        """
        unary = as_float_array(scores, "scores", ndim=2, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
        offsets = _offsets_from_lengths(lengths)
        if offsets[-1] != unary.shape[0]:
            raise ParameterError(
                f"`lengths` must sum to the number of rows of `scores` ({unary.shape[0]}); "
                f"got {offsets[-1]}"
            )
        K = unary.shape[1]
        lengths = np.diff(offsets)
        nonempty = lengths > 0
        if start is not None or end is not None:
            unary = unary.copy()
        if start is not None:
            start = as_float_array(start, "start", shape=(K,), ndim=1, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            unary[offsets[:-1][nonempty]] += start
        if end is not None:
            end = as_float_array(end, "end", shape=(K,), ndim=1, allow_neginf=True, max_abs=MAX_LOG_POTENTIAL)
            unary[offsets[1:][nonempty] - 1] += end
        if start is not None or end is not None:
            unary.flags.writeable = False  # our copy: the constructor need not copy it
        return cls(unary, offsets, transitions)

    @classmethod
    def _trusted(cls, unary, offsets, pairwise, edge_offsets) -> "ChainPotentials":
        """Build without validation (for producers inside structcal that guarantee validity)."""
        self = object.__new__(cls)
        self.unary = _readonly(np.ascontiguousarray(unary, dtype=np.float64))
        self.offsets = _readonly(np.ascontiguousarray(offsets, dtype=np.int64))
        self.pairwise = _readonly(np.ascontiguousarray(pairwise, dtype=np.float64))
        self.edge_offsets = _readonly(np.ascontiguousarray(edge_offsets, dtype=np.int64))
        self.label_names = None
        return self

    # ------------------------------------------------------------------ properties

    @property
    def n_chains(self) -> int:
        """Number of chains in the batch."""
        return int(self.offsets.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        """Total number of tokens (positions) over all chains."""
        return int(self.unary.shape[0])

    @property
    def n_states(self) -> int:
        """Number of labels each token can take."""
        return int(self.unary.shape[1])

    @property
    def n_edges(self) -> int:
        """Total number of edges, ``sum_c max(L_c - 1, 0)``."""
        return int(self.edge_offsets[-1])

    @property
    def lengths(self) -> np.ndarray:
        """Length of each chain, shape (n_chains,)."""
        return np.diff(self.offsets)

    @property
    def shared_pairwise(self) -> bool:
        """Whether one pairwise matrix is shared by every edge."""
        return self.pairwise.ndim == 2

    @property
    def chain_index(self) -> np.ndarray:
        """Chain of each token, shape (n_tokens,)."""
        return np.repeat(np.arange(self.n_chains, dtype=np.int64), self.lengths)

    @property
    def position_index(self) -> np.ndarray:
        """Position of each token within its chain, shape (n_tokens,)."""
        return np.arange(self.n_tokens, dtype=np.int64) - np.repeat(self.offsets[:-1], self.lengths)

    def _pairwise3(self) -> tuple[np.ndarray, int]:
        """Pairwise as a 3-d array and the stride the kernels use (0 = shared)."""
        if self.shared_pairwise:
            return self.pairwise[None], 0
        if self.pairwise.shape[0] == 0:  # no edges at all: any single matrix will do
            return np.zeros((1, self.n_states, self.n_states)), 0
        return self.pairwise, 1

    def chain(self, c: int) -> "ChainPotentials":
        """Return chain ``c`` alone as a batch of one."""
        return self.subset([c])

    def subset(self, chains) -> "ChainPotentials":
        """Return the chains selected by an index array (in that order).

        Parameters
        ----------
        chains : array-like of int
            Chain indices, each in ``[0, n_chains)``.
        """
        chains = as_int_array(chains, "chains", ndim=1, low=0, high=self.n_chains)
        rows, offsets = ragged_rows(self.offsets, chains)
        if self.shared_pairwise:
            pairwise = self.pairwise
        else:
            pairwise = self.pairwise[ragged_rows(self.edge_offsets, chains)[0]]
        return ChainPotentials(self.unary[rows], offsets, pairwise, label_names=self.label_names)

    def split_tokens(self, values) -> list[np.ndarray]:
        """Split a per-token array (first axis ``n_tokens``) into a list of per-chain views."""
        values = np.asarray(values)
        if values.shape[:1] != (self.n_tokens,):
            raise ParameterError(
                f"`values` must have n_tokens={self.n_tokens} rows; got shape {values.shape}"
            )
        return [values[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def __repr__(self) -> str:
        kind = "shared" if self.shared_pairwise else "per-edge"
        return (
            f"ChainPotentials(n_chains={self.n_chains}, n_tokens={self.n_tokens}, "
            f"n_states={self.n_states}, pairwise={kind})"
        )
