"""Entry points shared by chains and graphs: dispatch on the type of the potentials.

``infer``, ``score_labelings`` and ``pseudo_marginals`` exist for both structures with
the same meaning (see :mod:`structcal.inference.chain` and
:mod:`structcal.inference.graph`); the names exported by :mod:`structcal.inference` call
the one matching the potentials, so code downstream (events, features) need not care.
"""

from __future__ import annotations

from .._validation import describe
from ..exceptions import ParameterTypeError
from ..potentials import ChainPotentials, GraphPotentials
from . import chain as _chain_api
from . import graph as _graph_api

__all__ = ["infer", "score_labelings", "pseudo_marginals"]


def _module(potentials):
    if isinstance(potentials, GraphPotentials):
        return _graph_api
    if isinstance(potentials, ChainPotentials):
        return _chain_api
    raise ParameterTypeError(
        f"`potentials` must be a ChainPotentials or GraphPotentials; got {describe(potentials)}"
    )


def infer(potentials, **kwargs):
    """MAP labeling and/or marginals of a batch of chains or graphs.

    Calls :func:`structcal.inference.chain.infer` (exact) for
    :class:`~structcal.potentials.ChainPotentials` and
    :func:`structcal.inference.graph.infer` (exact on forests, approximate otherwise) for
    :class:`~structcal.potentials.GraphPotentials`; see those for the keyword arguments.

    Parameters
    ----------
    potentials : ChainPotentials or GraphPotentials
        The batch.
    **kwargs
        Passed on (``map=``, ``marginals=``, ``edge_marginals=`` are common to both).

    Returns
    -------
    ChainInference or GraphInference
        Both have ``map_labels``, ``map_score`` and ``marginals``.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import infer
    >>> p = ChainPotentials.from_list([np.log([[0.5, 0.5], [0.9, 0.1]])], np.zeros((2, 2)))
    >>> r = infer(p)
    >>> r.map_labels.tolist(), np.round(r.marginals, 3).tolist()
    ([0, 0], [[0.5, 0.5], [0.9, 0.1]])
    """
    return _module(potentials).infer(potentials, **kwargs)


def score_labelings(potentials, labels):
    """Unnormalised log-score of one labeling per chain or graph.

    Parameters
    ----------
    potentials : ChainPotentials or GraphPotentials
        The batch.
    labels : array-like of shape (n_tokens,) or (n_nodes,), or list of array-like
        The labelings, laid end to end or one array per problem.

    Returns
    -------
    ndarray of shape (n_chains,) or (n_graphs,)
        ``-inf`` where a labeling uses a forbidden label or pair.
    """
    return _module(potentials).score_labelings(potentials, labels)


def pseudo_marginals(potentials, labels):
    """Pseudo-marginals ``p(y_j = a | y_N(j) = labels_N(j), x)`` around a given labeling.

    For chains the neighbours are the previous and next tokens; for graphs, the nodes
    adjacent to ``j``.

    Parameters
    ----------
    potentials : ChainPotentials or GraphPotentials
        The batch.
    labels : array-like of shape (n_tokens,) or (n_nodes,), or list of array-like
        The labeling to condition on (e.g. the MAP labeling).

    Returns
    -------
    ndarray of shape (n_tokens, n_states) or (n_nodes, n_states)
        Rows sum to one.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal import ChainPotentials
    >>> from structcal.inference import pseudo_marginals
    >>> p = ChainPotentials.from_list([np.zeros((2, 2))], np.log([[3.0, 1.0], [1.0, 1.0]]))
    >>> pseudo_marginals(p, [0, 0]).tolist()
    [[0.75, 0.25], [0.75, 0.25]]
    """
    return _module(potentials).pseudo_marginals(potentials, labels)
