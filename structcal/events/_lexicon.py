"""Numba kernels for lexicon (trie) queries on chains (private: inputs are trusted).

The trie's nodes are stored in breadth-first order: node 0 is the root (the empty
prefix), a node's parent always comes before it, and the nodes that label position ``d``
are ``levels[d]:levels[d + 1]`` (``levels[0] == 1``).
"""

import numpy as np

from .._numba import batch_kernel, prange

_NEG_INF = -np.inf


@batch_kernel
def contains_batch(children, terminal, labels, offsets, out):
    """``out[c]`` = whether labeling ``labels[offsets[c]:offsets[c + 1]]`` is a word of the trie."""
    n = offsets.shape[0] - 1
    for c in prange(n):
        node = 0
        ok = True
        for t in range(offsets[c], offsets[c + 1]):
            node = children[node, labels[t]]
            if node < 0:
                ok = False
                break
        out[c] = ok and terminal[node]


@batch_kernel
def log_mass_batch(
    parent, label, terminal, levels, unary, offsets, edge_offsets, pw, pw_stride, out
):
    """``out[c] = log sum_{w in lexicon, |w| = L_c} exp(score_c(w))`` (``-inf`` if none).

    One pass over the trie nodes of depth < L_c: a node's score is its parent's plus one
    transition and one unary, so shared prefixes are scored once.
    """
    n_chains = offsets.shape[0] - 1
    max_len = levels.shape[0] - 1
    for c in prange(n_chains):
        s = offsets[c]
        L = offsets[c + 1] - s
        if L == 0:
            out[c] = 0.0 if terminal[0] else _NEG_INF
            continue
        if L > max_len:
            out[c] = _NEG_INF
            continue
        score = np.empty(levels[L])
        score[0] = 0.0
        best = _NEG_INF
        for d in range(L):
            m = (edge_offsets[c] + d - 1) * pw_stride
            for node in range(levels[d], levels[d + 1]):
                a = label[node]
                x = score[parent[node]] + unary[s + d, a]
                if d > 0:
                    x += pw[m, label[parent[node]], a]
                score[node] = x
                if d == L - 1 and terminal[node] and x > best:
                    best = x
        if best == _NEG_INF:
            out[c] = _NEG_INF
            continue
        total = 0.0
        for node in range(levels[L - 1], levels[L]):
            if terminal[node]:
                total += np.exp(score[node] - best)
        out[c] = best + np.log(total)
