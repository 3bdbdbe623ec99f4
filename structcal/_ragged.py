"""Helpers for ragged batches stored flat with offsets (CSR style)."""

from __future__ import annotations

import numpy as np

__all__ = ["offsets_from_lengths", "ragged_rows"]


def offsets_from_lengths(lengths) -> np.ndarray:
    """``[0, cumsum(lengths)]`` as int64 (lengths are assumed validated)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def ragged_rows(offsets: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the selected items, in order, and the offsets of the selection.

    Parameters
    ----------
    offsets : ndarray of shape (n_items + 1,)
        Item ``i`` is rows ``offsets[i]:offsets[i + 1]``.
    items : ndarray of int64
        Selected items (validated by the caller).

    Returns
    -------
    rows : ndarray of int64
        Row indices of the selected items, concatenated.
    new_offsets : ndarray of shape (len(items) + 1,)
    """
    lengths = offsets[1:][items] - offsets[:-1][items]
    new_offsets = offsets_from_lengths(lengths)
    rows = np.repeat(offsets[:-1][items] - new_offsets[:-1], lengths) + np.arange(
        new_offsets[-1], dtype=np.int64
    )
    return rows, new_offsets
