"""Numba kernels for online calibration and recalibration (private: inputs are trusted).

Everything here is sequential -- an online forecaster's step ``t`` depends on steps
``1..t-1`` -- so the kernels are serial and cached (:func:`structcal._numba.kernel`).

State layout
------------
``counts``, ``sums`` : float64 arrays of shape (n_groups, M, N + 1)
    The statistics of one calibration subroutine per (group, bucket) pair, over the grid
    ``a_i = i / N``. For ``method = METHOD_REGRET`` they are the forecast-probability
    weighted counts ``A_i = sum_t w_{t,i}`` and outcome sums ``B_i = sum_t w_{t,i} y_t``;
    for ``METHOD_BLACKWELL`` the realised counts ``n_i`` and outcome sums ``s_i`` of the
    times ``i / N`` was forecast. Either way the *calibration deficit* of grid point ``i``
    is ``x_i = sums_i - a_i * counts_i``.
``homes`` : int64 array of shape (M,)
    Grid index each bucket's subroutine falls back to when several forecasts are valid
    (the grid point nearest the bucket's centre, ties toward 1/2).
``rng`` : uint64 array of shape (1,)
    SplitMix64 state. Every forecast consumes exactly one draw, whether or not it is
    random, so a stream of forecasts is a function of the seed and the inputs only.

The forecasting rule (both methods)
-----------------------------------
Grid point ``i`` *pushes right* when ``x_i > dead * counts_i``, *pushes left* when
``x_i < -dead * counts_i`` and *rests* otherwise, with ``dead = 1 / (2N)`` for the
regret method and ``0`` for the approachability method. Point 0 never pushes left and
point N never pushes right (``0 <= sums <= counts``). Starting at ``home``, the forecaster
walks in the direction ``home`` pushes until it meets a resting point ``k`` (forecast
``k / N``) or a point pushing back (the pair ``lo, lo + 1`` with ``lo`` pushing right with
strength ``u = x_lo - dead * counts_lo`` and ``lo + 1`` pushing left with strength
``d = -x_hi - dead * counts_hi``; forecast ``lo / N`` with probability ``d / (u + d)``,
else ``(lo + 1) / N``). The walk is at most N steps; see :mod:`structcal.online` for why
this distribution is the fixed point the regret and approachability arguments need.
"""

import math

import numpy as np

from .._numba import kernel

METHOD_REGRET = 0
METHOD_BLACKWELL = 1


# --------------------------------------------------------------------------- random numbers


@kernel
def splitmix64_next(rng):
    """Advance the SplitMix64 state ``rng[0]`` and return the next 64-bit output.

    Steele, Lea & Flood (2014), "Fast splittable pseudorandom number generators".
    """
    z = rng[0] + np.uint64(0x9E3779B97F4A7C15)
    rng[0] = z
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@kernel
def uniform(rng):
    """Next uniform double in [0, 1) (the top 53 bits of a SplitMix64 output)."""
    return float(splitmix64_next(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


# --------------------------------------------------------------------------- one subroutine


@kernel
def bucket_of(p, n_buckets):
    """Index ``j`` with ``j/M <= p < (j+1)/M`` (the last bucket is closed).

    The boundaries are the doubles ``j / M``, so ``p = j / M`` computed by the caller lands
    in bucket ``j`` even where ``(j / M) * M`` rounds below ``j`` (e.g. ``M = 49``).
    """
    j = int(math.floor(p * n_buckets))
    if j > n_buckets - 1:
        j = n_buckets - 1
    if j < 0:
        j = 0
    while j > 0 and p < j / n_buckets:
        j -= 1
    while j < n_buckets - 1 and p >= (j + 1) / n_buckets:
        j += 1
    return j


@kernel
def _direction(counts, sums, i, n_grid, dead):
    """+1 if grid point ``i`` pushes right, -1 if it pushes left, 0 if it rests."""
    x = sums[i] - (i / n_grid) * counts[i]
    margin = dead * counts[i]
    if x > margin:
        return 1
    if x < -margin:
        return -1
    return 0


@kernel
def decide(counts, sums, n_grid, dead, home):
    """The subroutine's mixed forecast: ``(lo, w_lo)``.

    The forecast is ``lo / N`` with probability ``w_lo`` and ``(lo + 1) / N`` otherwise
    (``w_lo == 1.0`` for a deterministic forecast). ``counts`` and ``sums`` are the
    (N + 1,) statistics of one subroutine.
    """
    s = _direction(counts, sums, home, n_grid, dead)
    if s == 0:
        return home, 1.0
    i = home
    while True:
        k = i + s
        if k < 0 or k > n_grid:  # unreachable: point 0 never pushes left, N never right
            return i, 1.0
        sk = _direction(counts, sums, k, n_grid, dead)
        if sk == 0:
            return k, 1.0
        if sk != s:
            lo = i if s > 0 else k
            hi = lo + 1
            u = (sums[lo] - (lo / n_grid) * counts[lo]) - dead * counts[lo]
            d = -(sums[hi] - (hi / n_grid) * counts[hi]) - dead * counts[hi]
            return lo, d / (u + d)
        i = k


@kernel
def update(counts, sums, lo, w_lo, k, y, method):
    """Feed outcome ``y`` to one subroutine that forecast ``k / N`` from ``(lo, w_lo)``."""
    if method == METHOD_REGRET:
        counts[lo] += w_lo
        sums[lo] += w_lo * y
        if w_lo < 1.0:
            w_hi = 1.0 - w_lo
            counts[lo + 1] += w_hi
            sums[lo + 1] += w_hi * y
    else:
        counts[k] += 1.0
        sums[k] += y


@kernel
def dead_zone(n_grid, method):
    """Half-width of the resting band: ``1 / (2N)`` for regret, 0 for approachability."""
    if method == METHOD_REGRET:
        return 0.5 / n_grid
    return 0.0


# --------------------------------------------------------------------------- Algorithm 1


@kernel
def forecast_step(p, g, counts, sums, homes, n_grid, n_buckets, method, rng):
    """One forecast of Algorithm 1 for raw forecast ``p`` in group ``g``.

    Returns ``(j, lo, w_lo, k)``: the bucket, the mixed forecast and the drawn grid index.
    Consumes one uniform from ``rng``; leaves the statistics untouched.
    """
    j = bucket_of(p, n_buckets)
    lo, w_lo = decide(counts[g, j], sums[g, j], n_grid, dead_zone(n_grid, method), homes[j])
    k = lo if uniform(rng) < w_lo else lo + 1
    return j, lo, w_lo, k


@kernel
def update_step(g, j, lo, w_lo, k, y, counts, sums, method):
    """Feed outcome ``y`` to the subroutine of bucket ``j`` in group ``g``."""
    update(counts[g, j], sums[g, j], lo, w_lo, k, y, method)


@kernel
def run_stream(p_raw, y, groups, counts, sums, homes, n_grid, n_buckets, method, rng,
               out_forecast, out_mean):
    """Run Algorithm 1 over a whole stream: forecast, then learn ``y[t]``, for each ``t``.

    Writes the forecast issued before each outcome (``out_forecast``, on the grid) and the
    mean of the distribution it was drawn from (``out_mean``).
    """
    for t in range(p_raw.shape[0]):
        g = groups[t]
        j, lo, w_lo, k = forecast_step(p_raw[t], g, counts, sums, homes, n_grid, n_buckets,
                                       method, rng)
        out_forecast[t] = k / n_grid
        out_mean[t] = (lo + 1.0 - w_lo) / n_grid
        update(counts[g, j], sums[g, j], lo, w_lo, k, y[t], method)


@kernel
def mean_forecasts(p_raw, groups, counts, sums, homes, n_grid, n_buckets, method, out):
    """Mean of the mixed forecast the current state would issue for each ``p_raw[t]``.

    Read-only: no draw, no update.
    """
    dead = dead_zone(n_grid, method)
    for t in range(p_raw.shape[0]):
        g = groups[t]
        j = bucket_of(p_raw[t], n_buckets)
        lo, w_lo = decide(counts[g, j], sums[g, j], n_grid, dead, homes[j])
        out[t] = (lo + 1.0 - w_lo) / n_grid


# --------------------------------------------------------------------------- metrics


@kernel
def running_calibration(p, y, n_grid, out_c1, out_c2):
    """Calibration errors C_t^1 and C_t^2 after each step ``t`` (eq. (1) of the paper).

    Forecasts are binned to the nearest grid point ``i / N``; bin ``i`` contributes
    ``(n_i / t) * |ybar_i - pbar_i|^q`` where ``pbar_i`` is the mean forecast in the bin
    (``= i / N`` exactly when the forecasts lie on the grid). O(1) per step.
    """
    cnt = np.zeros(n_grid + 1)
    gap = np.zeros(n_grid + 1)  # sum over the bin of (y - p)
    s1 = 0.0
    s2 = 0.0
    for t in range(p.shape[0]):
        b = int(math.floor(p[t] * n_grid + 0.5))
        if b > n_grid:
            b = n_grid
        if cnt[b] > 0.0:
            s1 -= abs(gap[b])
            s2 -= gap[b] * gap[b] / cnt[b]
        cnt[b] += 1.0
        gap[b] += y[t] - p[t]
        s1 += abs(gap[b])
        s2 += gap[b] * gap[b] / cnt[b]
        if s1 < 0.0:
            s1 = 0.0
        if s2 < 0.0:
            s2 = 0.0
        out_c1[t] = s1 / (t + 1)
        out_c2[t] = s2 / (t + 1)
