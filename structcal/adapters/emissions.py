"""Emission + transition CRFs (pytorch-crf, AllenNLP, flair, TF-style) as ChainPotentials.

Neural CRF taggers score a sequence as ``start[y_0] + sum_t emissions[t, y_t] +
sum_t transitions[y_t, y_{t+1}] + end[y_last]``. That is a chain with unary
``emissions`` (start added to the first token, end to the last) and shared pairwise
``transitions``; no framework is needed, arrays in (anything ``np.asarray`` takes, and
tensors with ``.detach().cpu().numpy()``).

Conventions of the common libraries (check your version):

================  =======================================  ===========================
library           emissions / mask                         transitions
================  =======================================  ===========================
pytorch-crf       (seq, batch, K) with ``batch_first=False`` ``transitions[i, j]`` i -> j,
                  (its default), mask (seq, batch)         ``start_transitions``,
                                                           ``end_transitions``
AllenNLP          (batch, seq, K), mask (batch, seq)       ``transitions[i, j]`` i -> j,
                                                           ``start_transitions``,
                                                           ``end_transitions`` (optional)
flair             (batch, seq, K) features, lengths        ``transitions[j, i]`` i -> j:
                                                           pass ``transposed=True``
TF-addons         (batch, seq, K), sequence_lengths        ``transition_params[i, j]``
================  =======================================  ===========================
"""

from __future__ import annotations

import numpy as np

from .._validation import as_bool_array, as_float_array, as_int_array, describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["emission_potentials"]


def _numpy(x, name):
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
        x = x.detach().cpu().numpy()
    elif hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # a TF tensor
        x = x.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(
            f"`{name}` must be array-like; got {describe(x)} ({exc})"
        ) from None


def emission_potentials(
    emissions,
    transitions,
    *,
    mask=None,
    lengths=None,
    start=None,
    end=None,
    batch_first: bool = True,
    transposed: bool = False,
):
    """Chain potentials of an emission + transition CRF.

    Parameters
    ----------
    emissions : array-like of shape (batch, seq, K), (seq, batch, K) or (n_tokens, K)
        Per-token scores. 3-d arrays are padded batches (give ``mask`` or ``lengths``);
        a 2-d array is the sequences laid end to end (give ``lengths``).
    transitions : array-like of shape (K, K)
        ``transitions[i, j]`` scores tag ``j`` right after tag ``i`` (``transposed=True``
        for flair's ``[j, i]``). ``-inf`` forbids a move.
    mask : array-like of shape (batch, seq) (or (seq, batch)), bool, optional
        Which positions are real tokens; each row must be a prefix (ones then zeros).
    lengths : array-like of shape (batch,), optional
        Number of real tokens of each sequence (instead of ``mask``).
    start, end : array-like of shape (K,), optional
        Scores of the first and last tag of a sequence (added to the first and last
        token's unary; ``-inf`` forbids).
    batch_first : bool, default=True
        3-d ``emissions`` (and ``mask``) are (batch, seq, K); False for pytorch-crf's
        default (seq, batch, K).
    transposed : bool, default=False
        ``transitions[j, i]`` scores ``i -> j`` (flair).

    Returns
    -------
    ChainPotentials
        Score of a labeling = the model's score, so ``exp(score - log_partition)`` is the
        model's probability (pytorch-crf's ``exp(crf(emissions, tags, mask))``).

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.adapters import emission_potentials
    >>> em = np.zeros((2, 3, 2)); mask = np.array([[1, 1, 1], [1, 1, 0]], bool)
    >>> p = emission_potentials(em, np.zeros((2, 2)), mask=mask, start=np.array([0.0, -1.0]))
    >>> p.lengths.tolist(), p.unary[0].tolist(), p.unary[3].tolist()
    ([3, 2], [0.0, -1.0], [0.0, -1.0])
    """
    from ..potentials import ChainPotentials

    em = as_float_array(_numpy(emissions, "emissions"), "emissions", allow_neginf=True)
    if em.ndim not in (2, 3):
        raise ParameterError(
            f"`emissions` must be 2-d (n_tokens, K) or 3-d (padded batch); got shape {em.shape}"
        )
    K = em.shape[-1]
    trans = as_float_array(
        _numpy(transitions, "transitions"), "transitions", ndim=2, shape=(K, K), allow_neginf=True
    )
    if transposed:
        trans = np.ascontiguousarray(trans.T)
    if mask is not None and lengths is not None:
        raise ParameterError("give either `mask` or `lengths`, not both")
    if em.ndim == 3:
        if not batch_first:
            em = em.transpose(1, 0, 2)
        B, T = em.shape[:2]
        if mask is not None:
            m = _numpy(mask, "mask")
            if m.dtype != np.bool_:
                if not np.isin(m, (0, 1)).all():
                    raise ParameterError("`mask` must hold booleans or 0/1")
                m = m.astype(bool)
            m = as_bool_array(m, "mask", ndim=2)
            if not batch_first:
                m = m.T
            if m.shape != (B, T):
                raise ParameterError(
                    f"`mask` must have the batch and sequence shape of `emissions` {(B, T)} "
                    f"({'batch, seq' if batch_first else 'seq, batch'} order); got {m.shape}"
                )
            lens = m.sum(axis=1)
            prefix = np.arange(T)[None, :] < lens[:, None]
            if not np.array_equal(prefix, m):
                bad = int(np.flatnonzero((prefix != m).any(axis=1))[0])
                raise ParameterError(
                    f"`mask` row {bad} is not a prefix (ones then zeros): left-aligned sequences expected"
                )
        elif lengths is not None:
            lens = as_int_array(
                _numpy(lengths, "lengths"), "lengths", ndim=1, shape=(B,), low=0, high=T + 1
            )
        else:
            lens = np.full(B, T, dtype=np.int64)
        lens = lens.astype(np.int64)
        unary = em[np.arange(T)[None, :] < lens[:, None]]
    else:
        if mask is not None:
            raise ParameterError(
                "`mask` applies to 3-d padded `emissions`; give `lengths` for flat ones"
            )
        if lengths is None:
            raise ParameterError("flat 2-d `emissions` need `lengths` (tokens per sequence)")
        lens = as_int_array(_numpy(lengths, "lengths"), "lengths", ndim=1, low=0)
        if lens.sum() != em.shape[0]:
            raise ParameterError(
                f"`lengths` must sum to the number of rows of `emissions` ({em.shape[0]}); got {int(lens.sum())}"
            )
        unary = em.copy()
    offsets = np.zeros(lens.shape[0] + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    nz = lens > 0
    for vec, rows, name in ((start, offsets[:-1][nz], "start"), (end, offsets[1:][nz] - 1, "end")):
        if vec is not None:
            v = as_float_array(_numpy(vec, name), name, ndim=1, shape=(K,), allow_neginf=True)
            unary[rows] += v
    return ChainPotentials(unary, offsets, trans)
