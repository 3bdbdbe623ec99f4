"""Random small graph problems for the brute-force tests."""

import numpy as np

from structcal.potentials import GraphPotentials


def random_edges(rng, n, topology):
    """Edges (local indices, random orientation) of a random graph on ``n`` nodes.

    ``tree``: a random spanning tree; ``forest``: a tree with some edges removed (so
    several components, possibly isolated nodes); ``loopy``: a spanning tree plus extra
    edges (at least one cycle when ``n >= 3``); ``complete``: every pair.
    """
    if n < 2:
        return np.zeros((0, 2), np.int64)
    perm = rng.permutation(n)
    tree = [(perm[rng.integers(0, i)], perm[i]) for i in range(1, n)]
    if topology == "tree":
        pairs = tree
    elif topology == "forest":
        keep = rng.random(len(tree)) < 0.6
        pairs = [e for e, k in zip(tree, keep) if k]
    elif topology == "complete":
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    else:
        have = {tuple(sorted(e)) for e in tree}
        others = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in have]
        n_extra = max(1, len(others) // 3) if others else 0
        extra = (
            [others[k] for k in rng.choice(len(others), size=n_extra, replace=False)]
            if others
            else []
        )
        pairs = tree + extra
    out = []
    for a, b in pairs:
        out.append((a, b) if rng.random() < 0.5 else (b, a))
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def random_graphs(
    rng, n_states, sizes, *, topology="tree", kind="shared", scale=1.0, neginf=0.0, n_types=3
):
    """A batch of random graphs with the given node counts.

    ``kind``: ``shared`` (one matrix), ``per_edge``, ``typed`` (``n_types`` matrices) or
    ``potts``. ``scale`` multiplies standard normal potentials; ``neginf`` is the
    probability of an entry being ``-inf`` (a random witness labeling is kept finite, so
    every graph stays feasible).
    """
    K = n_states
    unaries, edges = [], []
    for n in sizes:
        unaries.append(scale * rng.standard_normal((n, K)))
        edges.append(random_edges(rng, n, topology))
    m = sum(e.shape[0] for e in edges)
    witness = [rng.integers(0, K, size=n) for n in sizes]
    if neginf:
        for u, w in zip(unaries, witness):
            keep = u[np.arange(u.shape[0]), w].copy()
            u[rng.random(u.shape) < neginf] = -np.inf
            u[np.arange(u.shape[0]), w] = keep
    pairs = (
        np.concatenate([np.stack([w[e[:, 0]], w[e[:, 1]]], axis=1) for w, e in zip(witness, edges)])
        if m
        else np.zeros((0, 2), np.int64)
    )
    if kind == "potts":
        pw = scale * rng.standard_normal(m)
        if neginf:
            forbid = (rng.random(m) < neginf) & (pairs[:, 0] != pairs[:, 1])
            pw[forbid] = -np.inf
        split = np.cumsum([e.shape[0] for e in edges])[:-1]
        return GraphPotentials.from_list(unaries, edges, potts=list(np.split(pw, split)))
    if kind == "shared":
        mats = scale * rng.standard_normal((1, K, K))
        mat_of_edge = np.zeros(m, np.int64)
    elif kind == "typed":
        mats = scale * rng.standard_normal((n_types, K, K))
        mat_of_edge = rng.integers(0, n_types, size=m)
    else:
        mats = scale * rng.standard_normal((m, K, K))
        mat_of_edge = np.arange(m)
    if neginf:
        finite = mats.copy()
        mats[rng.random(mats.shape) < neginf] = -np.inf
        for e in range(m):
            a, b = pairs[e]
            mats[mat_of_edge[e], a, b] = finite[mat_of_edge[e], a, b]
    if kind == "shared":
        return GraphPotentials.from_list(unaries, edges, mats[0])
    split = np.cumsum([e.shape[0] for e in edges])[:-1]
    if kind == "typed":
        return GraphPotentials.from_list(
            unaries, edges, mats, edge_type=list(np.split(mat_of_edge, split))
        )
    return GraphPotentials.from_list(unaries, edges, list(np.split(mats, split)))
