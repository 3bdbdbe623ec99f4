"""Numba kernel of the group permutation shift test (private: inputs are trusted)."""

from ._numba import kernel


@kernel
def ks_permutations(order, tie_end, sides, n_ref, n_new, out):
    """KS distance of every column under every split of the events into two samples.

    ``order`` (C, N): per column the order that sorts its values; ``tie_end`` (C, N): True
    at the last position of each run of equal values, where the empirical distribution
    functions are compared; ``sides`` (B, N): True for the events of the reference sample
    under split ``b``; ``n_ref``/``n_new`` (B,): the sample sizes. Writes ``out`` (B, C).
    """
    B, N = sides.shape
    C = order.shape[0]
    for b in range(B):
        ir = 1.0 / n_ref[b]
        inw = 1.0 / n_new[b]
        for c in range(C):
            cr = 0
            best = 0.0
            for j in range(N):
                if sides[b, order[c, j]]:
                    cr += 1
                if tie_end[c, j]:
                    d = abs(cr * ir - (j + 1 - cr) * inw)
                    if d > best:
                        best = d
            out[b, c] = best
