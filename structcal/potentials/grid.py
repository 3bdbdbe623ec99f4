"""Pixel grids as graphs: edges and coordinates built from array shapes (no networkx).

Pixels are numbered row-major (``p = row * width + col``). Edges are listed by direction
- horizontal ``(p, p + 1)``, vertical ``(p, p + width)`` and, for 8-connectivity,
diagonal ``(p, p + width + 1)`` and anti-diagonal ``(p + 1, p + width)`` - each
direction in row-major order of its first pixel, so a per-edge array of one image can be
laid out with the same arrays (see :func:`grid_edges`).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int_array, check_int, describe
from ..exceptions import ParameterError

__all__ = ["grid_edges", "grid_coordinates", "GRID_DIRECTIONS"]

#: Names of the edge directions, in the order of the codes returned by :func:`grid_edges`.
GRID_DIRECTIONS = ("horizontal", "vertical", "diagonal", "anti-diagonal")


def check_connectivity(connectivity) -> int:
    """Return ``connectivity`` as an int after checking it is 4 or 8."""
    if isinstance(connectivity, bool) or connectivity not in (4, 8):
        raise ParameterError(f"`connectivity` must be 4 or 8; got {describe(connectivity)}")
    return int(connectivity)


def grid_edges(height: int, width: int, connectivity: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Edges of a ``height x width`` grid of row-major pixels.

    Parameters
    ----------
    height, width : int
        Grid size (at least 1 each).
    connectivity : {4, 8}, default=4
        4: horizontal and vertical neighbours; 8: also the two diagonals.

    Returns
    -------
    edges : ndarray of shape (n_edges, 2), dtype int64
        Pixel pairs, grouped by direction (see the module docstring).
    direction : ndarray of shape (n_edges,), dtype int64
        Direction code of each edge (index into :data:`GRID_DIRECTIONS`).

    Examples
    --------
    >>> from structcal.potentials import grid_edges
    >>> edges, direction = grid_edges(2, 2, connectivity=8)
    >>> edges.tolist(), direction.tolist()
    ([[0, 1], [2, 3], [0, 2], [1, 3], [0, 3], [1, 2]], [0, 0, 1, 1, 2, 3])
    """
    height = check_int(height, "height", low=1)
    width = check_int(width, "width", low=1)
    connectivity = check_connectivity(connectivity)
    idx = np.arange(height * width, dtype=np.int64).reshape(height, width)
    parts = [
        (idx[:, :-1], idx[:, 1:]),  # horizontal
        (idx[:-1, :], idx[1:, :]),  # vertical
    ]
    if connectivity == 8:
        parts.append((idx[:-1, :-1], idx[1:, 1:]))  # diagonal
        parts.append((idx[:-1, 1:], idx[1:, :-1]))  # anti-diagonal
    edges = np.concatenate(
        [np.stack([a.ravel(), b.ravel()], axis=1) for a, b in parts]
    ).reshape(-1, 2)
    direction = np.repeat(np.arange(len(parts), dtype=np.int64), [a.size for a, _ in parts])
    return edges, direction


def grid_coordinates(shapes) -> np.ndarray:
    """Row and column of every pixel of a batch of row-major grids laid end to end.

    Parameters
    ----------
    shapes : array-like of shape (n_grids, 2), int
        Height and width of each grid.

    Returns
    -------
    ndarray of shape (n_pixels, 2), dtype int64

    Examples
    --------
    >>> from structcal.potentials import grid_coordinates
    >>> grid_coordinates([(1, 2), (2, 1)]).tolist()
    [[0, 0], [0, 1], [0, 0], [1, 0]]
    """
    shapes = as_int_array(shapes, "shapes", ndim=2, shape=(None, 2), low=0)
    widths = np.repeat(shapes[:, 1], shapes.prod(axis=1))
    sizes = shapes.prod(axis=1)
    starts = np.concatenate([[0], np.cumsum(sizes)])[:-1].astype(np.int64)
    local = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts, sizes)
    safe = np.maximum(widths, 1)
    return np.stack([local // safe, local % safe], axis=1)
