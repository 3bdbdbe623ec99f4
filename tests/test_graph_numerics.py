"""Graph kernels at large magnitudes against enumeration (issue 15 audit).

Belief propagation is exact on forests: marginals and Bethe log-partition must match
brute force at scales up to 1e4 with ``-inf`` entries. Mean field is approximate, but
its log-partition is the ELBO, a lower bound on the exact one, and its marginals must
stay finite distributions; loopy BP must stay finite.
"""

import warnings

import numpy as np
import pytest

from structcal.exceptions import ConvergenceWarning, InfeasibleError
from structcal.inference.exact import exact_graph
from structcal.inference.graph import belief_propagation, mean_field

from ._graph_problems import random_graphs


@pytest.mark.parametrize("scale", [1e2, 1e3, 1e4])
@pytest.mark.parametrize("kind", ["shared", "per_edge", "potts"])
def test_graph_kernels_at_large_scales_match_enumeration(scale, kind):
    rng = np.random.default_rng([int(scale), len(kind)])
    for topology in ("tree", "forest", "loopy"):
        for neginf in (0.0, 0.3):
            p = random_graphs(rng, 3, rng.integers(1, 6, size=5), topology=topology, kind=kind,
                              scale=scale, neginf=neginf)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                bp = belief_propagation(p, log_partition=True)
                try:
                    mf = mean_field(p, log_partition=True)
                except InfeasibleError:  # documented: hard constraints mean field cannot hold
                    mf = None
            for g in range(p.n_graphs):
                ex = exact_graph(p, g)
                s, e = p.offsets[g], p.offsets[g + 1]
                for r in (bp, mf):
                    if r is None:
                        continue
                    m = r.marginals[s:e]
                    assert np.isfinite(m).all() and np.isfinite(r.log_partition[g])
                    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-9)
                if mf is not None:  # the ELBO is a lower bound
                    assert mf.log_partition[g] <= ex.log_partition + 1e-9 * max(1.0, abs(ex.log_partition))
                if topology != "loopy":
                    np.testing.assert_allclose(bp.marginals[s:e], ex.marginals, atol=1e-9)
                    np.testing.assert_allclose(bp.log_partition[g], ex.log_partition, rtol=1e-12, atol=1e-9)
