"""Online recalibration against an adversary (Kuleshov & Ermon, 2017).

At each step ``t`` a base model gives a raw probability ``p^F_t``, the recalibrator
answers ``p_t`` and only then the outcome ``y_t`` in {0, 1} is revealed. Nothing is
assumed about how the outcomes are generated: they may drift, or be chosen by an adversary
who knows the algorithm, the past and the recalibrator's mixed forecast (but not its
private coin). Algorithm 1 of the paper (:class:`OnlineRecalibrator`) splits the raw
forecasts into ``M`` buckets and runs an independent *online calibration subroutine* in
each; its forecasts are calibrated and, for any bounded proper loss, almost as accurate as
the raw forecasts.

Public API
----------
:class:`OnlineRecalibrator`
    The estimator: ``forecast(p_raw)`` then ``update(p_raw, y)`` (one step),
    ``forecast_stream(p_raw, y)`` / ``partial_fit(X, y)`` (a whole stream, compiled),
    ``predict_proba(X)`` (the current mean forecast, read-only).
:func:`recalibrate_online`
    A stream of ``(p_raw, y)`` pairs, optionally with a group label per step (one
    recalibrator per group), recalibrated in one call, with running metrics.
:func:`recalibrate_events`
    The events of an :class:`~structcal.events.EventTable` (e.g. OCR marginal and MAP
    events) as a stream, with their raw model probabilities as base forecasts and one
    recalibrator per event kind.
:func:`running_metrics`, :func:`running_regret`
    Calibration error ``C_t^1``, ``C_t^2`` on the grid, l2 / log / misclassification
    losses and regret against a base forecaster, as arrays over time.

The two calibration subroutines
-------------------------------
Both forecast on the grid ``a_i = i/N``, i = 0..N, and keep two numbers per grid point,
so both the forecast and the update are cheap. Write ``w_t`` for the forecaster's mixed
strategy at step ``t`` (a distribution over the grid) and ``l(y, a) = (y - a)^2``.

``method="regret"`` (default) -- internal-regret minimisation. The classical reduction
(Foster & Vohra 1998; Cesa-Bianchi & Lugosi 2006, §4.5) treats "forecast ``a_i``" as
``N + 1`` experts with loss ``l(y, a_i)`` and plays a mixed strategy with small *internal*
regret. Generic internal-regret algorithms -- Blum & Mansour's (2007) swap-regret
reduction, or the potential-based forecaster of Cesa-Bianchi & Lugosi (2006, §4.4) --
track all ``N(N+1)`` swaps ``i -> j`` and must compute the stationary distribution of an
``(N+1) x (N+1)`` Markov matrix every step: ``O(N^2)`` memory updates and an ``O(N^3)``
solve (``O(N^2)`` per power iteration). We use two facts about the squared loss instead:

1. The expected regret of a swap depends on two sufficient statistics per grid point,
   ``A_i = sum_t w_{t,i}`` and ``B_i = sum_t w_{t,i} y_t``, because ``y^2 = y``:
   ``R_{i->j} = A_i (a_i^2 - a_j^2) - 2 B_i (a_i - a_j)``.
2. Neighbour swaps suffice. With the deficit ``D_i = B_i - a_i A_i``,
   ``R_{i->i+1} = (2/N)(D_i - A_i/(2N))`` and ``R_{i->i-1} = -(2/N)(D_i + A_i/(2N))``.
   Keeping the ``2N`` neighbour regrets ``o(T)`` forces ``|D_i| <= A_i/(2N) + o(T)`` for
   every ``i``, i.e. ``C_T^1 <= 1/(2N) + o(1)`` -- and then every swap ``i -> j`` has
   regret at most ``A_i/(4N^2) + o(T)``, which is all that full internal-regret
   minimisation guarantees for a grid of step ``1/N`` anyway.

We minimise the neighbour regrets with the quadratic potential
``Phi(R) = sum (R_{i->j})_+^2`` (regret matching; Hart & Mas-Colell 2000; Cesa-Bianchi &
Lugosi 2006, §2.1 and §4.4): the mixed strategy must satisfy the balance equations
``sum_j w_i (R_{i->j})_+ = sum_j w_j (R_{j->i})_+``, which make the expected regret
increment orthogonal to ``grad Phi`` (Blackwell's condition), so
``||R_+||_2^2 <= sum_t ||r_t||_2^2 <= 8T/N^2``. For neighbour swaps the chain is a
birth-death chain, and since ``R_{i->i+1} + R_{i->i-1} = -2A_i/N^2 <= 0`` each grid point
pushes in at most one direction; a solution is a point mass on a grid point that pushes
nowhere, or a two-point distribution on neighbours ``lo`` (pushing right with strength
``u``) and ``lo+1`` (pushing left with strength ``d``) with ``w_lo = d / (u + d)``. Such a
point or pair always exists (point 0 never pushes left, point N never right) and is found
by a walk of at most ``N`` steps from a starting point; the update touches two entries.
Bound: ``C_T^1 <= 1/(2N) + 2 sqrt(N/T)`` for the mixed forecasts (the realised ones add a
martingale term of order ``sqrt(N/T)``). The statistics, hence the mixed forecasts, do
not depend on the coin.

``method="blackwell"`` -- Foster's (1999) approachability forecaster. The vector payoff
is the realised deficit ``D_i = sum_{t: p_t = a_i} (y_t - a_i)``; choosing a point with
``D_i = 0``, or neighbours ``lo, lo+1`` with ``D_lo > 0 > D_lo+1`` and
``w_lo D_lo = -w_lo+1 D_lo+1``, gives ``<D, E r_t> = w_lo D_lo / N`` whatever ``y_t`` is,
which is at most ``||D||_2 / (2 sqrt(2) N)``: Blackwell's condition for the ball of radius
``1/(2 sqrt(2) N)``, so ``||D/T||_2`` approaches it at rate ``O(1/sqrt(T))``. It is the
same walk with no resting band (Mannor & Stoltz 2010 give the general construction); its
statistics are the realised counts, so they depend on the coin. A binary search could
find *a* valid pair in ``O(log N)`` (the paper's Table 1); the walk from the bucket's
home point is ``O(N)`` at worst but keeps forecasts near the bucket's centre.

Work per step, both methods: forecast ``O(distance walked) <= O(N)``, update ``O(1)``;
memory ``2 (N + 1)`` floats per bucket (per group).

The adversary in the guarantees may see the mixed forecast but not the coin. One that
sees the realised forecast defeats every forecaster: against ``y_t = 1[p_t <= 1/2]``
every forecast at most 1/2 is followed by a 1 and every larger one by a 0, so
``C_T^1 >= 1/2`` -- this is why calibrated online forecasters must randomise
(Oakes 1985; Foster & Vohra 1998).

References
----------
- V. Kuleshov and S. Ermon. Estimating uncertainty online against an adversary.
  AAAI 2017.
- D. P. Foster and R. V. Vohra. Asymptotic calibration. Biometrika 85(2):379-390,
  1998.
- D. P. Foster. A proof of calibration via Blackwell's approachability theorem.
  Games and Economic Behavior 29:73-78, 1999.
- N. Cesa-Bianchi and G. Lugosi. Prediction, Learning, and Games. Cambridge
  University Press, 2006.
- A. Blum and Y. Mansour. From external to internal regret. JMLR 8:1307-1324, 2007.
- S. Hart and A. Mas-Colell. A simple adaptive procedure leading to correlated
  equilibrium. Econometrica 68(5):1127-1150, 2000.
- S. Mannor and G. Stoltz. A geometric proof of calibration. Mathematics of
  Operations Research 35(4):721-727, 2010.
"""

from .events import recalibrate_events
from .metrics import RunningMetrics, RunningRegret, running_metrics, running_regret
from .recalibrator import (
    OnlineRecalibration,
    OnlineRecalibrator,
    bucket_homes,
    recalibrate_online,
)

__all__ = [
    "OnlineRecalibration",
    "OnlineRecalibrator",
    "RunningMetrics",
    "RunningRegret",
    "bucket_homes",
    "recalibrate_events",
    "recalibrate_online",
    "running_metrics",
    "running_regret",
]
