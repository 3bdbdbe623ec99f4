"""Plain-Python reference for the online calibration subroutines (the tests' oracle).

Written from the definitions in ``structcal.online``'s docstring, not from the kernels:
the full direction vector is computed first, then the valid supports are enumerated.
"""

from fractions import Fraction

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(state):
    """Return (new_state, output) of SplitMix64 on Python ints."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def uniform(state):
    state, z = splitmix64(state)
    return state, (z >> 11) * (1.0 / 9007199254740992.0)


def bucket_of(p, M):
    """The largest j < M with j/M <= p (boundaries are the doubles j / M)."""
    return max(j for j in range(M) if j / M <= p)


def home(N, M, j):
    centre = Fraction(2 * j + 1, 2 * M)
    dist = [abs(Fraction(i, N) - centre) for i in range(N + 1)]
    best = min(dist)
    cands = [i for i in range(N + 1) if dist[i] == best]
    if len(cands) == 1:
        return cands[0]
    lo, hi = cands
    if abs(Fraction(lo, N) - Fraction(1, 2)) < abs(Fraction(hi, N) - Fraction(1, 2)):
        return lo
    if abs(Fraction(lo, N) - Fraction(1, 2)) > abs(Fraction(hi, N) - Fraction(1, 2)):
        return hi
    return lo


def directions(counts, sums, N, dead):
    """Per grid point: +1 pushes right, -1 pushes left, 0 rests; and push strengths."""
    x = np.array([sums[i] - (i / N) * counts[i] for i in range(N + 1)])
    margin = np.array([dead * counts[i] for i in range(N + 1)])
    d = np.where(x > margin, 1, np.where(x < -margin, -1, 0))
    right = np.where(d == 1, x - margin, 0.0)
    left = np.where(d == -1, -x - margin, 0.0)
    return d, right, left


def valid_supports(counts, sums, N, dead):
    """Every resting point and every right/left neighbour pair, as (lo, w_lo)."""
    d, right, left = directions(counts, sums, N, dead)
    out = [(i, 1.0) for i in range(N + 1) if d[i] == 0]
    for lo in range(N):
        if d[lo] == 1 and d[lo + 1] == -1:
            out.append((lo, left[lo + 1] / (right[lo] + left[lo + 1])))
    return out


def decide(counts, sums, N, dead, h):
    """The support the walk from home ``h`` reaches: nearest in the direction h pushes."""
    d, _, _ = directions(counts, sums, N, dead)
    if d[h] == 0:
        return h, 1.0
    if d[h] == 1:  # first point right of h that does not push right
        k = next(k for k in range(h + 1, N + 1) if d[k] != 1)
        lo = k if d[k] == 0 else k - 1
    else:  # first point left of h that does not push left
        k = next(k for k in range(h - 1, -1, -1) if d[k] != -1)
        lo = k
    if d[k] == 0:
        return k, 1.0
    pairs = [s for s in valid_supports(counts, sums, N, dead) if s[0] == lo and d[lo] == 1]
    assert len(pairs) == 1
    return pairs[0]


def run(p_raw, y, N, M, method, seed_state, groups=None):
    """Algorithm 1, step by step. Returns forecasts, means and the (lo, w) of every step."""
    dead = 0.5 / N if method == "regret" else 0.0
    n_groups = 1 if groups is None else int(max(groups)) + 1
    counts = np.zeros((n_groups, M, N + 1))
    sums = np.zeros((n_groups, M, N + 1))
    homes = [home(N, M, j) for j in range(M)]
    state = int(seed_state)
    forecasts, means, mixed = [], [], []
    for t in range(len(p_raw)):
        g = 0 if groups is None else int(groups[t])
        j = bucket_of(float(p_raw[t]), M)
        lo, w = decide(counts[g, j], sums[g, j], N, dead, homes[j])
        state, u = uniform(state)
        k = lo if u < w else lo + 1
        forecasts.append(k / N)
        means.append((lo + 1.0 - w) / N)
        mixed.append((g, j, lo, w))
        if method == "regret":
            counts[g, j, lo] += w
            sums[g, j, lo] += w * y[t]
            if w < 1.0:
                counts[g, j, lo + 1] += 1.0 - w
                sums[g, j, lo + 1] += (1.0 - w) * y[t]
        else:
            counts[g, j, k] += 1.0
            sums[g, j, k] += y[t]
    return np.array(forecasts), np.array(means), mixed


def calibration_error(p, y, N, q):
    """Eq. (1) of Kuleshov & Ermon, literally: bins = nearest grid point."""
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    T = len(p)
    bins = np.floor(p * N + 0.5).astype(int)
    total = 0.0
    for i in range(N + 1):
        sel = bins == i
        if sel.any():
            total += abs(y[sel].mean() - p[sel].mean()) ** q * sel.sum() / T
    return total
