"""Numba kernels for the structure of pixel grids (private: inputs are trusted).

Pixel ``(r, c)`` of an ``h x w`` grid is node ``r * w + c``; edges are numbered as in
:func:`~structcal.potentials.grid_edges` (grouped by direction):

============== ================================ ===========================================
direction      pixels                           edge index
============== ================================ ===========================================
horizontal     ``(r, c) - (r, c + 1)``          ``r (w - 1) + c``
vertical       ``(r, c) - (r + 1, c)``          ``eV + r w + c``, ``eV = h (w - 1)``
diagonal       ``(r, c) - (r + 1, c + 1)``      ``eD + r (w - 1) + c``, ``eD = eV + (h - 1) w``
anti-diagonal  ``(r, c + 1) - (r + 1, c)``      ``eA + r (w - 1) + c``,
                                                ``eA = eD + (h - 1) (w - 1)``
============== ================================ ===========================================

A pixel's *slots* list its neighbours in increasing node index, which is the order of its
CSR slots in :class:`~structcal.potentials.GraphAdjacency`: up, left, right, down
(4-connected); up-left, up, up-right, left, right, down-left, down, down-right
(8-connected). The neighbour in slot ``d`` sees the same edge in its slot ``D - 1 - d``.
The inference kernels for grids (``structcal.inference._grid``) use the same functions.
"""

import numpy as np

from .._numba import kernel


@kernel
def n_slots(connectivity):
    """Number of slots of a pixel: 4 or 8."""
    return 4 if connectivity == 4 else 8


@kernel
def slot_offset(connectivity, d):
    """``(dr, dc)`` of slot ``d``'s neighbour."""
    if connectivity == 4:
        if d == 0:
            return -1, 0
        if d == 1:
            return 0, -1
        if d == 2:
            return 0, 1
        return 1, 0
    if d < 3:
        return -1, d - 1
    if d == 3:
        return 0, -1
    if d == 4:
        return 0, 1
    return 1, d - 6


@kernel
def slot_edge(connectivity, e0, h, w, r, c, d):
    """Edge joining pixel ``(r, c)`` to its slot-``d`` neighbour (``e0`` + local index), or
    -1 if it has none."""
    dr, dc = slot_offset(connectivity, d)
    rr = r + dr
    cc = c + dc
    if rr < 0 or rr >= h or cc < 0 or cc >= w:
        return -1
    top = min(r, rr)
    left = min(c, cc)
    eV = e0 + h * (w - 1)
    if dr == 0:
        return e0 + r * (w - 1) + left
    if dc == 0:
        return eV + top * w + c
    eD = eV + (h - 1) * w
    if dr == dc:
        return eD + top * (w - 1) + left
    return eD + (h - 1) * (w - 1) + top * (w - 1) + left


@kernel
def grid_slot_table(h, w, connectivity, e0, nbr, eid):
    """Write the neighbour (local index) and edge of every slot of every pixel (-1: none).

    ``nbr`` and ``eid`` have shape ``(h * w, n_slots)``.
    """
    D = n_slots(connectivity)
    for r in range(h):
        for c in range(w):
            for d in range(D):
                dr, dc = slot_offset(connectivity, d)
                e = slot_edge(connectivity, e0, h, w, r, c, d)
                eid[r * w + c, d] = e
                nbr[r * w + c, d] = (r + dr) * w + c + dc if e >= 0 else -1


@kernel
def grid_degrees(shapes, connectivity, degree):
    """Number of neighbours of every pixel of a batch of grids laid end to end."""
    D = n_slots(connectivity)
    i = 0
    for g in range(shapes.shape[0]):
        h, w = shapes[g, 0], shapes[g, 1]
        for r in range(h):
            for c in range(w):
                k = 0
                for d in range(D):
                    dr, dc = slot_offset(connectivity, d)
                    if 0 <= r + dr < h and 0 <= c + dc < w:
                        k += 1
                degree[i] = k
                i += 1


@kernel
def grid_csr(shapes, connectivity, offsets, edge_offsets, indptr, nbr, eid, rev, twin):
    """Fill the CSR adjacency of a batch of grids (``indptr`` from :func:`grid_degrees`)."""
    D = n_slots(connectivity)
    for g in range(shapes.shape[0]):
        h, w = shapes[g, 0], shapes[g, 1]
        n0, e0 = offsets[g], edge_offsets[g]
        pos = np.empty(h * w * D, dtype=np.int64)  # CSR slot of each (pixel, slot)
        for r in range(h):
            for c in range(w):
                li = r * w + c
                k = indptr[n0 + li]
                for d in range(D):
                    e = slot_edge(connectivity, e0, h, w, r, c, d)
                    if e < 0:
                        continue
                    dr, dc = slot_offset(connectivity, d)
                    nbr[k] = n0 + li + dr * w + dc
                    eid[k] = e
                    rev[k] = d < D // 2
                    pos[li * D + d] = k
                    k += 1
        for r in range(h):
            for c in range(w):
                li = r * w + c
                for d in range(D):
                    if slot_edge(connectivity, e0, h, w, r, c, d) >= 0:
                        dr, dc = slot_offset(connectivity, d)
                        # the neighbour sees the same edge in its slot D - 1 - d
                        twin[pos[li * D + d]] = pos[(li + dr * w + dc) * D + D - 1 - d]
