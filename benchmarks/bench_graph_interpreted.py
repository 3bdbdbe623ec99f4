"""Graph routines run as Python (the interpreted tier of small uncompiled work): seconds
per elementary step (nodes and edges x labels x labels x iterations), the rate
``structcal._numba.INTERPRET_SECONDS_PER_STEP`` must exceed.

Run: ``python benchmarks/bench_graph_interpreted.py`` (seconds; nothing is compiled).
"""

import time
import warnings

import networkx as nx
import numpy as np

from structcal import GraphPotentials
from structcal._tier import forced_tier
from structcal.inference import graph as G
from structcal.inference.graph import _steps

rng = np.random.default_rng(0)
for side, K in ((6, 3), (10, 4), (5, 8)):
    g = nx.grid_2d_graph(side, side)
    for node in g.nodes:
        g.nodes[node]["unary"] = rng.normal(size=K)
    p = GraphPotentials.from_networkx([g], pairwise=rng.normal(size=(K, K)))
    labels = rng.integers(0, K, p.n_nodes)
    with forced_tier("numpy"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G.score_labelings(p, labels)
        for name, f, it in (("mean_field", lambda: G.mean_field(p, max_iter=200), lambda r: r.n_iter[0]),
                            ("bp", lambda: G.belief_propagation(p, max_iter=100), lambda r: r.n_iter[0]),
                            ("trws", lambda: G.map_inference(p, max_iter=100, polish=False), lambda r: r.n_iter[0]),
                            ("icm", lambda: G.icm(p, labels, max_iter=100), lambda r: r.n_iter[0] if r.n_iter is not None else 1),
                            ("pseudo", lambda: G.pseudo_marginals(p, labels), lambda r: 1),
                            ("gibbs", lambda: G.gibbs_sample(p, 10, burn_in=0, thin=1), lambda r: 10)):
            t = time.perf_counter(); r = f(); s = time.perf_counter() - t
            n = it(r)
            print(f"{side}x{side} K={K} {name:<11} {s:7.3f} s, {n} iterations: {s / _steps(p, max(int(n), 1)):.2e} s/step")
