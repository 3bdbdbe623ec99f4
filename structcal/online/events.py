"""Online recalibration of a stream of structured events (an :class:`~structcal.events.EventTable`).

The structured setting of Kuleshov & Liang (2015) pools the events of interest of every
input -- "the MAP labelling is right" (one per input), "position j is right" (one per
node), ... -- into one table. Online, those events arrive in some order (e.g. input by
input, each input's events together) and each one is forecast before its outcome is
revealed. :func:`recalibrate_events` runs Algorithm 1 of Kuleshov & Ermon (2017) over such
a stream with the model's own probability ``P_theta(E | x)`` as the base forecast and one
independent recalibrator per group of events (by default per event kind).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int_array, describe
from ..exceptions import ParameterError, ParameterTypeError
from .recalibrator import OnlineRecalibration, recalibrate_online

__all__ = ["recalibrate_events"]


def recalibrate_events(
    table,
    *,
    order=None,
    by="kind",
    n_grid: int = 10,
    n_buckets: int | None = None,
    method: str = "regret",
    random_state=None,
    log_eps: float = 1e-4,
) -> OnlineRecalibration:
    """Recalibrate the events of an :class:`~structcal.events.EventTable` online, as a stream.

    The base forecast of each event is its raw model probability (``table.raw``), the
    outcome ``table.outcome``; the events are streamed in ``order`` and recalibrated by
    :func:`recalibrate_online` with one Algorithm 1 recalibrator per group.

    Parameters
    ----------
    table : EventTable
        Built with ``raw=True`` and with true labelings (``y_true``), so that both the
        ``raw`` and the ``outcome`` columns are filled.
    order : array-like of int, optional
        Rows of ``table`` in stream order (a permutation of the rows, or a selection of
        them; a row may not repeat). Default: the table's own row order.
    by : {'kind', 'position', 'label', 'length'}, array-like or None, default='kind'
        Groups with independent recalibrators (see :meth:`EventTable.group_codes`); an
        array of shape (n_events,) is indexed like the table's rows (not like ``order``).
        ``None`` pools every event into one recalibrator. Per-kind groups are the
        natural choice: a MAP event and a marginal event with the same raw probability
        need not be right equally often, and calibration of every group implies
        calibration of the pooled stream (the pooled calibration error is at most the
        sum of the groups' errors, each weighted by its share of the stream).
    n_grid, n_buckets, method, random_state, log_eps
        As in :func:`recalibrate_online`.

    Returns
    -------
    OnlineRecalibration
        In stream order; ``group_labels`` are the group names (e.g. the kind names), so
        ``result.subset("marginal")`` is the marginal events' sub-stream.

    References
    ----------
    .. [1] V. Kuleshov and S. Ermon. Estimating uncertainty online against an adversary.
       AAAI 2017.
    .. [2] V. Kuleshov and P. Liang. Calibrated structured prediction. NIPS 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.prediction import StructuredPrediction
    >>> from structcal.events import MAPEvent, MarginalEvent, build_events
    >>> from structcal.potentials import ChainPotentials
    >>> from structcal.online import recalibrate_events
    >>> rng = np.random.default_rng(0)
    >>> lengths = rng.integers(2, 6, size=300)
    >>> pots = ChainPotentials.from_list([rng.normal(size=(n, 3)) for n in lengths],
    ...                                  pairwise=rng.normal(size=(3, 3)))
    >>> pred = StructuredPrediction(pots)
    >>> y_true = rng.integers(0, 3, size=int(lengths.sum()))
    >>> table = build_events(pred, [MAPEvent(), MarginalEvent()], y_true=y_true,
    ...                      features=["raw"])
    >>> r = recalibrate_events(table, order=rng.permutation(table.n_events), random_state=0)
    >>> r.group_labels.tolist(), r.subset("map").forecasts.shape
    (['map', 'marginal'], (300,))
    """
    if not (hasattr(table, "raw") and hasattr(table, "outcome") and hasattr(table, "group_codes")):
        raise ParameterTypeError(f"`table` must be an EventTable; got {describe(table)}")
    if table.raw is None:
        raise ParameterError("`table` has no raw probabilities: build it with raw=True")
    if table.outcome is None:
        raise ParameterError("`table` has no outcomes: build it with y_true")
    n = table.n_events
    if order is None:
        rows = np.arange(n, dtype=np.int64)
    else:
        rows = as_int_array(order, "order", ndim=1, low=0, high=max(n, 1))
        if np.unique(rows).shape[0] != rows.shape[0]:
            raise ParameterError("`order` must not repeat a row of the table")
    raw = table.raw[rows]
    nan = np.isnan(raw)
    if nan.any():
        bad = int(rows[np.flatnonzero(nan)[0]])
        raise ParameterError(
            f"`table.raw` is NaN at row {bad} (kind {table.kind_names[table.kind[bad]]!r}): "
            "that kind has no model probability; select the events that have one"
        )
    if by is None:
        groups = None
    else:
        codes, names = table.group_codes(by)
        labels = np.asarray(names)
        groups = labels[codes[rows]]
    return recalibrate_online(
        raw, table.outcome[rows], groups=groups, n_grid=n_grid, n_buckets=n_buckets,
        method=method, random_state=random_state, log_eps=log_eps,
    )
