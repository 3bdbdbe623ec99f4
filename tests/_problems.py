"""Random small chain problems for the brute-force tests."""

import numpy as np

from structcal import ChainPotentials


def random_chains(rng, n_states, lengths, *, scale=1.0, shared=True, neginf=0.0, feasible=True):
    """A batch of random chains.

    ``scale`` multiplies standard normal potentials; ``neginf`` is the probability of each
    entry being -inf. With ``feasible``, a random witness labeling per chain keeps finite
    potentials, so every chain has at least one labeling of finite score.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n_tokens = int(lengths.sum())
    n_edges = int(np.maximum(lengths - 1, 0).sum())
    unary = scale * rng.standard_normal((n_tokens, n_states))
    if shared:
        pairwise = scale * rng.standard_normal((n_states, n_states))
    else:
        pairwise = scale * rng.standard_normal((n_edges, n_states, n_states))
    finite_u, finite_p = unary.copy(), pairwise.copy()
    if neginf:
        unary[rng.random(unary.shape) < neginf] = -np.inf
        pairwise[rng.random(pairwise.shape) < neginf] = -np.inf
        if feasible:
            witness = rng.integers(0, n_states, size=n_tokens)
            unary[np.arange(n_tokens), witness] = finite_u[np.arange(n_tokens), witness]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            e = 0
            for c, L in enumerate(lengths):
                for t in range(L - 1):
                    a, b = witness[offsets[c] + t], witness[offsets[c] + t + 1]
                    if shared:
                        pairwise[a, b] = finite_p[a, b]
                    else:
                        pairwise[e, a, b] = finite_p[e, a, b]
                    e += 1
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return ChainPotentials(unary, offsets, pairwise)
