"""Per-item random streams: an item's random numbers depend on the seed and on the item
itself, never on the batch it came in (its position, its neighbours, the partition of a
distributed run, the number of threads).

Each item gets a 64-bit seed from the user's ``random_state`` and a hash of the item's
own unary potentials (:func:`item_seeds`; copies of one item within a batch are told
apart by their order among the copies); kernels then draw uniform ``u`` number
``c`` of the item as :func:`structcal.inference._graph._uniform` ``(seed, c)`` (a
counter-based generator), with ``c`` made of the item's local node index and the sample
or sweep number.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ._validation import check_random_state

__all__ = ["base_seed", "item_seeds"]


def base_seed(random_state) -> int:
    """A 62-bit seed from ``random_state`` (an int gives the same seed every time)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        rs = int(random_state)
        if rs < 0:
            from .exceptions import ParameterError

            raise ParameterError(f"`random_state` must be a non-negative int; got {rs}")
        return int.from_bytes(hashlib.blake2b(rs.to_bytes(16, "little"), digest_size=8)
                              .digest(), "little") >> 2
    return int(check_random_state(random_state).integers(0, 2**62))


def item_seeds(unary: np.ndarray, offsets: np.ndarray, random_state) -> np.ndarray:
    """One seed per item (rows ``offsets[i]:offsets[i+1]`` of ``unary``), as uint64 bits in
    an int64 array: a hash of the base seed, of the item's unary potentials and of how
    many earlier items of the batch have the same potentials (so that copies of one item
    in a batch draw independently, while an item's seed does not depend on the other,
    different items around it)."""
    base = base_seed(random_state).to_bytes(8, "little")
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    unary = np.ascontiguousarray(unary, dtype=np.float64)
    seen: dict = {}
    for i in range(n):
        content = hashlib.blake2b(unary[offsets[i]:offsets[i + 1]].tobytes(), digest_size=16,
                                  key=base).digest()
        copy = seen.get(content, 0)
        seen[content] = copy + 1
        h = hashlib.blake2b(content, digest_size=8)
        h.update(copy.to_bytes(8, "little"))
        out[i] = np.frombuffer(h.digest(), dtype=np.int64)[0]
    return out
