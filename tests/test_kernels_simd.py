"""The vectorised building blocks of the chain kernels, against NumPy.

``_vecmat`` computes output columns in blocks of 32 (8 vectors) and covers a ragged last
block with vectors clamped to ``K - 4`` that overlap columns already done;
``_vecmat_padded`` works on rows padded to a multiple of 32 columns; ``exp_nonpositive``
runs on float64 and on 4-lane vectors with the same operations. Every remainder of K
modulo 4 and 32 is exercised.
"""

import warnings

import numpy as np
import pytest
from numba import njit

from structcal._numba import exp_nonpositive
from structcal._simd import LANES, data_pointer, vload, vstore
from structcal.inference._chain import (
    _exp_shifted_row,
    _fill_scaled_exponentials,
    _row_mul,
    _row_scale,
    _row_sum,
    _row_sum_minpos,
    _vecmat,
    _vecmat_padded,
    padded_width,
    scaled_exponentials,
    zeros_matrices,
    zeros_rows,
)

K_ALL = list(range(1, 41)) + [47, 64, 65]


@njit
def _vecmat_call(X, xr, M, m, S, sr, O, orow, maxplus, scale):
    # rows of (n, K) arrays and matrices of (n, K, K) ones, as flat offsets into pointers;
    # the kernel is inlined: literal flags give the four specialisations the chain uses
    K = X.shape[1]
    x, mm, sp, o = data_pointer(X), data_pointer(M), data_pointer(S), data_pointer(O)
    if maxplus and scale:
        _vecmat(x, xr * K, mm, m * K * K, sp, sr * K, o, orow * K, K, True, True)
    elif maxplus:
        _vecmat(x, xr * K, mm, m * K * K, sp, sr * K, o, orow * K, K, True, False)
    elif scale:
        _vecmat(x, xr * K, mm, m * K * K, sp, sr * K, o, orow * K, K, False, True)
    else:
        _vecmat(x, xr * K, mm, m * K * K, sp, sr * K, o, orow * K, K, False, False)


@pytest.mark.parametrize("K", K_ALL)
def test_vecmat_max_plus_is_exact(K):
    rng = np.random.default_rng(K)
    X = rng.normal(size=(3, K)) * 10
    M = rng.normal(size=(2, K, K)) * 10
    M[rng.random(M.shape) < 0.3] = -np.inf
    X[0, rng.random(K) < 0.3] = -np.inf
    S = rng.normal(size=(2, K))
    expected = np.max(X[0][:, None] + M[1], axis=0)
    for scale in (False, True):
        O = np.full((3, K), np.nan)
        _vecmat_call(X, 0, M, 1, S, 1, O, 2, True, scale)
        np.testing.assert_array_equal(O[2], expected + S[1] if scale else expected)
        assert np.isnan(O[:2]).all()  # nothing outside the output row is touched
    # input and output rows of one array, as the chain recursion uses them
    Y = X.copy()
    _vecmat_call(Y, 0, M, 1, S, 0, Y, 1, True, True)
    np.testing.assert_array_equal(Y[1], expected + S[0])
    np.testing.assert_array_equal(Y[[0, 2]], X[[0, 2]])


@pytest.mark.parametrize("K", K_ALL)
def test_vecmat_sum_product_matches_numpy(K):
    rng = np.random.default_rng(100 + K)
    X = rng.random((3, K))
    E = rng.random((2, K, K))
    E[rng.random(E.shape) < 0.2] = 0.0
    S = rng.random((2, K))
    expected = X[0] @ E[1]
    for scale in (False, True):
        O = np.full((3, K), np.nan)
        _vecmat_call(X, 0, E, 1, S, 1, O, 2, False, scale)
        np.testing.assert_allclose(O[2], expected * S[1] if scale else expected, rtol=1e-14)
        assert np.isnan(O[:2]).all()


@njit
def _vecmat_padded_call(X, xr, M, m, S, sr, O, orow, maxplus, scale):
    # X (n, K) unpadded; M (n, K, Kp), S and O (n, Kp) padded
    K, Kp = M.shape[1], M.shape[2]
    x, mm, sp, o = data_pointer(X), data_pointer(M), data_pointer(S), data_pointer(O)
    if maxplus and scale:
        _vecmat_padded(x, xr * K, mm, m * K * Kp, sp, sr * Kp, o, orow * Kp, K, Kp, True, True)
    elif maxplus:
        _vecmat_padded(x, xr * K, mm, m * K * Kp, sp, sr * Kp, o, orow * Kp, K, Kp, True, False)
    elif scale:
        _vecmat_padded(x, xr * K, mm, m * K * Kp, sp, sr * Kp, o, orow * Kp, K, Kp, False, True)
    else:
        _vecmat_padded(x, xr * K, mm, m * K * Kp, sp, sr * Kp, o, orow * Kp, K, Kp, False, False)


@pytest.mark.parametrize("K", K_ALL)
def test_vecmat_padded_matches_numpy(K):
    rng = np.random.default_rng(300 + K)
    Kp = padded_width(K)
    assert Kp >= K and (Kp == K if K < 4 else Kp % 32 == 0)
    X = rng.random((3, K))
    pw = rng.normal(size=(2, K, K)) * 3
    pw[rng.random(pw.shape) < 0.2] = -np.inf
    E, ET, colmax, spread = scaled_exponentials(pw, Kp)
    assert E.shape == ET.shape == (2, K, Kp)
    assert E.ctypes.data % 64 == 0 and ET.ctypes.data % 64 == 0
    # padding is zero; E is exp(pw - colmax), ET its transpose
    assert not E[:, :, K:].any() and not ET[:, :, K:].any()
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(E[:, :, :K], np.exp(pw - colmax[:, None, :]), rtol=1e-15)
    np.testing.assert_array_equal(ET[:, :, :K], E[:, :, :K].transpose(0, 2, 1))
    S = np.zeros((2, Kp))
    S[:, :K] = rng.random((2, K))
    expected = X[0] @ E[1, :, :K]
    for scale in (False, True):
        O = np.full((3, Kp), np.nan)
        _vecmat_padded_call(X, 0, E, 1, S, 1, O, 2, False, scale)
        np.testing.assert_allclose(O[2, :K], expected * S[1, :K] if scale else expected, rtol=1e-14)
        np.testing.assert_array_equal(O[2, K:], 0.0)  # padding stays the semiring zero
        assert np.isnan(O[:2]).all()  # nothing outside the output row is touched
    # max-plus on a matrix padded with -inf
    M = np.full((2, K, Kp), -np.inf)
    M[:, :, :K] = pw
    L = np.log(X)
    expected = np.max(L[0][:, None] + pw[1], axis=0)
    O = np.full((3, Kp), np.nan)
    _vecmat_padded_call(L, 0, M, 1, S, 1, O, 2, True, True)
    np.testing.assert_array_equal(O[2, :K], expected + S[1, :K])
    np.testing.assert_array_equal(O[2, K:], -np.inf)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 32), (100, 64)])
def test_zeros_rows_are_aligned_zeros(shape):
    A = zeros_rows(*shape)
    assert A.shape == shape and A.flags.c_contiguous and A.ctypes.data % 64 == 0
    assert not A.any()


@pytest.mark.parametrize("K", K_ALL)
def test_fill_scaled_exponentials_from_an_offset(K):
    """The per-chain fill (per-edge matrices ``m0 .. m0 + n - 1`` into scratch) against
    NumPy: column maxima (0 for a column that is ``-inf`` throughout), exponentials,
    transpose, padding left zero, nothing written past row ``n``."""
    rng = np.random.default_rng(400 + K)
    Kp = padded_width(K)
    pw = rng.normal(size=(5, K, K)) * 20
    pw[rng.random(pw.shape) < 0.2] = -np.inf
    pw[3, :, K // 2] = -np.inf
    E, ET = zeros_matrices(3, K, Kp), zeros_matrices(3, K, Kp)
    assert E.shape == (3, K, Kp) and E.ctypes.data % 64 == 0 and ET.ctypes.data % 64 == 0
    colmax = np.full((3, K), np.nan)
    spread = np.full(3, np.nan)
    _fill_scaled_exponentials(pw, 2, 2, E, ET, colmax, spread, 0)
    want = pw[2:4].max(axis=1)
    want[want == -np.inf] = 0.0
    np.testing.assert_array_equal(colmax[:2], want)
    assert colmax[1, K // 2] == 0.0 and np.isnan(colmax[2]).all() and np.isnan(spread[2])
    finite = np.where(np.isfinite(pw[2:4]), pw[2:4], np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        col_spread = np.nanmax(finite, axis=1) - np.nanmin(finite, axis=1)
    np.testing.assert_array_equal(spread[:2], np.nanmax(np.nan_to_num(col_spread, nan=0.0), axis=1))
    np.testing.assert_allclose(E[:2, :, :K], np.exp(pw[2:4] - want[:, None, :]), rtol=1e-15, atol=0)
    np.testing.assert_array_equal(ET[:2, :, :K], E[:2, :, :K].transpose(0, 2, 1))
    assert not E[:, :, K:].any() and not ET[:, :, K:].any() and not E[2].any() and not ET[2].any()


def test_scaled_exponentials_rejects_a_narrow_width():
    with pytest.raises(ValueError, match="at least n_states=3"):
        scaled_exponentials(np.zeros((1, 3, 3)), 2)


@njit
def _rows(A, B, use_b, U):
    K = A.shape[1]
    a, b, u = data_pointer(A), data_pointer(B), data_pointer(U)
    shifts = np.empty(A.shape[0])
    lows = np.empty(A.shape[0])
    sums = np.empty(A.shape[0])
    sums2 = np.empty(A.shape[0])
    minpos = np.empty(A.shape[0])
    for r in range(A.shape[0]):
        shifts[r], lows[r] = _exp_shifted_row(a, r * K, b, r * K, use_b, u, r * K, K)
        sums[r] = _row_sum(a, r * K, K)
        sums2[r], minpos[r] = _row_sum_minpos(a, r * K, K)
    return shifts, lows, sums, sums2, minpos


@pytest.mark.parametrize("K", K_ALL)
def test_row_helpers_match_numpy(K):
    rng = np.random.default_rng(200 + K)
    A = rng.normal(size=(4, K)) * 50
    B = rng.normal(size=(4, K)) * 50
    A[1, rng.random(K) < 0.5] = -np.inf
    A[2] = -np.inf  # every entry forbidden: shift -inf, row left alone
    for use_b in (False, True):
        U = np.full((4, K), np.nan)
        x = A + B if use_b else A
        shifts, lows, sums, sums2, minpos = _rows(A, B, use_b, U)
        with np.errstate(invalid="ignore"):
            expected = np.max(x, axis=1)
            np.testing.assert_array_equal(shifts, expected)
            ok = [0, 1, 3]
            for r in range(4):
                fin = x[r][np.isfinite(x[r])]
                assert lows[r] == (fin.min() - expected[r] if fin.size else 0.0)
            np.testing.assert_allclose(U[ok], np.exp(x[ok] - expected[ok, None]), rtol=1e-15, atol=0)
        assert np.isnan(U[2]).all()
        # summation order differs from NumPy's: error bounded by eps * sum |a| per term
        np.testing.assert_allclose(
            sums[[0, 3]], A[[0, 3]].sum(axis=1), rtol=0, atol=K * 1e-16 * np.abs(A[[0, 3]]).sum()
        )
    np.testing.assert_array_equal(sums2, sums)
    # the smallest positive entry of each row (inf when none): zeros and negatives skipped
    P = np.abs(A)
    P[:, ::3] = 0.0
    P[0, -1] = 5e-324
    P[3] = -1.0
    _, _, _, _, minpos = _rows(np.ascontiguousarray(P), B, False, np.empty((4, K)))
    for r in range(4):
        pos = P[r][P[r] > 0]
        assert minpos[r] == (pos.min() if pos.size else np.inf)
    O = np.empty((2, K))
    _row_mul_call(A, B, O)
    np.testing.assert_array_equal(O[0], A[0] * B[3] * 0.5)
    np.testing.assert_array_equal(O[1], A[3] * 0.25)


@njit
def _row_mul_call(A, B, O):
    K = A.shape[1]
    a, b, o = data_pointer(A), data_pointer(B), data_pointer(O)
    _row_mul(a, 0, b, 3 * K, 0.5, o, 0, K)
    _row_scale(a, 3 * K, 0.25, o, K, K)


@njit
def _exp_vector(x, out):
    for i in range(0, x.size, LANES):
        vstore(out, i, exp_nonpositive(vload(x, i)))


@njit
def _exp_scalar(x, out):
    for i in range(x.size):
        out[i] = exp_nonpositive(x[i])


def test_exp_nonpositive_scalar_and_vector_agree_and_are_accurate():
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, -np.inf, -1e-320, -5e-324, -1e-300, -0.34657359, -0.34657360,
               -707.99, -708.0, -708.01, -745.2, -1e300, -np.log(2) / 2, -1.0]
    x = np.concatenate([-np.logspace(-16, 2.85, 20000), -rng.random(20000) * 710, special])
    x = np.concatenate([x, np.zeros((-x.size) % LANES)])
    vec, sca = np.empty_like(x), np.empty_like(x)
    _exp_vector(x, vec)
    _exp_scalar(x, sca)
    np.testing.assert_array_equal(vec, sca)
    ref = np.where(x >= -708.0, np.exp(x), 0.0)
    rel = np.abs(vec - ref) / np.where(ref > 0, ref, 1.0)
    assert rel.max() < 5e-16
    assert vec[x == -np.inf].tolist() == [0.0] and (vec[x < -708.0] == 0.0).all()
    assert (vec[x == 0.0] == 1.0).all()
