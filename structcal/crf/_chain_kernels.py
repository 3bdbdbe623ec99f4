"""Numba training kernels for :class:`~structcal.crf.ChainCRF` (private: inputs are trusted).

Both kernels reuse the chain dynamic programs of :mod:`structcal.inference._chain` (the
scaled forward/backward passes with their exact log-space fallback, and Viterbi); nothing
here re-implements a sweep. Layout as in that module: ``unary`` (n_tokens, K) with chains
``offsets[c]:offsets[c + 1]``; one transition matrix ``trans`` (K, K) shared by every edge.

``expected_statistics`` (and ``expected_statistics_serial``, the same on one thread)
    One forward-backward per chain (``prange`` over chunks of chains). Writes the node
    marginals and the log-partition of each chain, and *sums* the edge marginals of every
    edge into one (K, K) matrix per chunk, so the (n_edges, K, K) array of edge marginals
    is never materialised. These are the expected sufficient statistics of the
    conditional log-likelihood gradient.
``bcfw_pass``
    One pass of block-coordinate Frank-Wolfe over the examples of a structured SVM with
    Hamming loss, with each block's dual variable stored in factored form (per-token and
    summed-edge "marginals" of the dual distribution, Taskar et al. 2003), so memory is
    O(n_tokens K + n_chains K^2) rather than one weight vector per example.
"""

import numpy as np

from .._numba import kernel, parallel_kernel, prange
from ..inference._chain import (
    _BLOCK,
    STATUS_FALLBACK,
    STATUS_OK,
    _backward_scaled,
    _forward_backward_log,
    _forward_scaled,
    _viterbi_chain,
    zeros_rows,
)


@kernel
def _expected_statistics_chunk(
    unary, offsets, trans, E, ET, colmax, spread, c0, c1, marg, edge_sum, logz, status
):
    """Forward-backward on chains ``c0:c1``; adds their edge marginals into ``edge_sum`` (K, K).

    Scratch is allocated once, sized for the longest of these chains; the edge marginals
    of one chain at a time go to a small scratch array and are summed from there.
    """
    K = unary.shape[1]
    Kp = E.shape[2]
    Lmax = 1
    for c in range(c0, c1):
        Lmax = max(Lmax, offsets[c + 1] - offsets[c])
    nb = min(Lmax, _BLOCK)
    u = zeros_rows(nb, Kp)
    thr = np.empty(nb)
    o = zeros_rows(1, Kp)
    z = np.empty(Lmax)
    beta = zeros_rows(1, Kp)
    w = zeros_rows(1, Kp)
    lb = np.empty((2, K))
    tmp = np.empty(K)
    no_mask = np.empty(0, dtype=np.int64)
    no_allowed = np.empty((0, K), dtype=np.bool_)
    edge = np.empty((Lmax, K, K))
    for c in range(c0, c1):
        s = offsets[c]
        L = offsets[c + 1] - s
        if L == 0:
            logz[c] = 0.0
            status[c] = STATUS_OK
            continue
        lz, ok = _forward_scaled(
            unary, s, L, trans, 0, 0, E, ET, colmax, spread, False,
            False, no_mask, no_mask, no_allowed, tmp, u, thr, o, marg, s, True, z,
        )
        if ok:
            ok = _backward_scaled(
                unary, s, L, trans, 0, 0, E, ET, colmax, spread, False, tmp, u, z,
                beta, w, marg, edge, 0, True, no_mask, no_allowed,
            )
        if ok:
            status[c] = STATUS_OK
        else:
            lz = _forward_backward_log(
                unary, s, L, trans, 0, 0, False, no_mask, no_mask, no_allowed, tmp,
                marg, s, True, lb, edge, 0, True,
            )
            status[c] = STATUS_FALLBACK
        logz[c] = lz
        for t in range(L - 1):
            for i in range(K):
                for j in range(K):
                    edge_sum[i, j] += edge[t, i, j]


@parallel_kernel
def expected_statistics(unary, offsets, trans, E, ET, colmax, spread, chunk, marg, edge_sum, logz, status):
    """Node marginals, per-chunk summed edge marginals and log-partition of every chain.

    ``prange`` over chunks of ``chunk`` chains. With a chunk size that does not depend
    on the number of threads, the result does not either (each chunk's sum is formed in
    chain order).

    Parameters
    ----------
    unary : ndarray of shape (n_tokens, K)
        Unary log-potentials (start/end scores already folded in).
    offsets : ndarray of shape (n_chains + 1,), int64
    trans : ndarray of shape (1, K, K)
        The shared transition log-potentials.
    E, ET, colmax, spread : ndarray
        ``scaled_exponentials(trans, padded_width(K))``.
    chunk : int
        Chains per parallel work item.
    marg : ndarray of shape (n_tokens, K)
        Output: node marginals.
    edge_sum : ndarray of shape (n_chunks, K, K)
        Output: ``edge_sum[b]`` is the sum of the edge marginals of chunk ``b``'s chains.
    logz : ndarray of shape (n_chains,)
        Output: log-partition of each chain.
    status : ndarray of shape (n_chains,), int64
        Output: 0 = scaled pass, 2 = log-space fallback (chains are always feasible: the
        potentials are finite).
    """
    n_chains = offsets.shape[0] - 1
    n_chunks = (n_chains + chunk - 1) // chunk
    for b in prange(n_chunks):
        edge_sum[b] = 0.0
        _expected_statistics_chunk(
            unary, offsets, trans, E, ET, colmax, spread, b * chunk, min(n_chains, (b + 1) * chunk),
            marg, edge_sum[b], logz, status,
        )


@kernel
def expected_statistics_serial(
    unary, offsets, trans, E, ET, colmax, spread, chunk, marg, edge_sum, logz, status
):
    """:func:`expected_statistics` on one thread (same arguments, same result bit for bit)."""
    n_chains = offsets.shape[0] - 1
    n_chunks = (n_chains + chunk - 1) // chunk
    for b in range(n_chunks):
        edge_sum[b] = 0.0
        _expected_statistics_chunk(
            unary, offsets, trans, E, ET, colmax, spread, b * chunk, min(n_chains, (b + 1) * chunk),
            marg, edge_sum[b], logz, status,
        )


# Token features reach the max-margin kernels either dense, ``X`` (n_tokens, d), or as
# the CSR arrays ``data, indices, indptr`` of a sparse matrix with ``sparse=True`` (then
# ``X`` is an empty (0, d) array that only carries ``d``, and with ``sparse=False`` the
# CSR arrays are empty). The three helpers below are the only places that read a token.


@kernel
def _row_dot(X, data, indices, indptr, sparse, r1, r2):
    """``<x_r1, x_r2>`` (sparse rows: a merge of their sorted column indices)."""
    acc = 0.0
    if sparse:
        p, q = indptr[r1], indptr[r2]
        p1, q1 = indptr[r1 + 1], indptr[r2 + 1]
        while p < p1 and q < q1:
            if indices[p] == indices[q]:
                acc += data[p] * data[q]
                p += 1
                q += 1
            elif indices[p] < indices[q]:
                p += 1
            else:
                q += 1
    else:
        for f in range(X.shape[1]):
            acc += X[r1, f] * X[r2, f]
    return acc


@kernel
def _row_scores(X, data, indices, indptr, sparse, r, W, out):
    """``out[k] = <W[k], x_r>`` for every label ``k``."""
    K = W.shape[0]
    for k in range(K):
        out[k] = 0.0
    if sparse:
        for p in range(indptr[r], indptr[r + 1]):
            f = indices[p]
            v = data[p]
            for k in range(K):
                out[k] += W[k, f] * v
    else:
        for k in range(K):
            acc = 0.0
            for f in range(X.shape[1]):
                acc += W[k, f] * X[r, f]
            out[k] = acc


@kernel
def _add_row(X, data, indices, indptr, sparse, r, a, w):
    """``w += a * x_r`` (``w`` a weight row of length d)."""
    if sparse:
        for p in range(indptr[r], indptr[r + 1]):
            w[indices[p]] += a * data[p]
    else:
        for f in range(X.shape[1]):
            w[f] += a * X[r, f]


@kernel
def chain_grams(X, data, indices, indptr, sparse, offsets, gram_offsets, gram):
    """Write each chain's token Gram matrix ``X_i X_i^T + 1`` (row-major) into ``gram``."""
    n = offsets.shape[0] - 1
    for i in range(n):
        s = offsets[i]
        L = offsets[i + 1] - s
        g0 = gram_offsets[i]
        for t in range(L):
            for t2 in range(t, L):
                acc = 1.0 + _row_dot(X, data, indices, indptr, sparse, s + t, s + t2)
                gram[g0 + t * L + t2] = acc
                gram[g0 + t2 * L + t] = acc


@kernel
def unpack(theta, K, d):
    """Return views ``(W (K, d), b (K,), trans (K, K), start (K,), end (K,))`` of ``theta``."""
    o = K * d
    W = theta[:o].reshape((K, d))
    b = theta[o : o + K]
    o += K
    trans = theta[o : o + K * K].reshape((K, K))
    o += K * K
    return W, b, trans, theta[o : o + K], theta[o + K : o + 2 * K]


@kernel
def _bcfw_step(
    X, data, indices, indptr, sparse, s, L, i, gamma, step, delta, dedge, ell_s, use_start_end,
    theta, mu, edge_mu, loss_i, acc, acc_weight,
):
    """Move block ``i`` a fraction ``gamma`` towards its Frank-Wolfe corner.

    ``w += gamma (w_s - w_i)`` (``step`` is ``gamma / (lam n)``), and the block's dual
    variables (``mu``, ``edge_mu``, ``loss_i``) likewise. The same change of the
    parameters, times ``acc_weight``, is added to ``acc`` (the averaging accumulator; skip
    with ``acc_weight = 0``).
    """
    K = mu.shape[1]
    d = X.shape[1]
    W, b, trans, start, end = unpack(theta, K, d)
    AW, Ab, Atrans, Astart, Aend = unpack(acc, K, d)
    do_acc = acc_weight != 0.0
    # w_s - w_i = -(1 / (lam n)) (phi(y*) - E_mu phi): token, edge, start and end parts.
    # delta is sparse (the truth, y* and the few labels the dual has put mass on): one
    # axpy per non-zero beats a dense (K x L) @ (L x d) product.
    for t in range(L):
        for k in range(K):
            dk = delta[t, k]
            if dk != 0.0:
                sdk = step * dk
                _add_row(X, data, indices, indptr, sparse, s + t, -sdk, W[k])
                b[k] -= sdk
                if do_acc:
                    adk = acc_weight * sdk
                    _add_row(X, data, indices, indptr, sparse, s + t, -adk, AW[k])
                    Ab[k] -= adk
    for k in range(K):
        for j in range(K):
            trans[k, j] -= step * dedge[k, j]
            if do_acc:
                Atrans[k, j] -= acc_weight * step * dedge[k, j]
    if use_start_end:
        for k in range(K):
            start[k] -= step * delta[0, k]
            end[k] -= step * delta[L - 1, k]
            if do_acc:
                Astart[k] -= acc_weight * step * delta[0, k]
                Aend[k] -= acc_weight * step * delta[L - 1, k]
    for t in range(L):
        for k in range(K):
            mu[s + t, k] += gamma * delta[t, k]
    for k in range(K):
        for j in range(K):
            edge_mu[i, k, j] += gamma * dedge[k, j]
    loss_i[i] += gamma * (ell_s - loss_i[i])


@kernel
def bcfw_pass(
    X, data, indices, indptr, sparse, gram_offsets, gram, offsets, labels, order, lam_n,
    use_start_end, theta, mu, edge_mu, loss_i, averaged, acc, n_updates,
):
    """One pass of block-coordinate Frank-Wolfe for the Hamming-loss structured SVM.

    The primal is ``lam / 2 ||w||^2 + (1 / n) sum_i max_y [Delta(y_i, y) + <w, psi_i(y)>]``
    with ``psi_i(y) = phi(x_i, y) - phi(x_i, y_i)`` and ``Delta`` the number of wrong
    tokens. Block ``i``'s part of ``w`` is ``w_i = (1 / (lam n)) (phi(x_i, y_i) -
    E_{alpha_i} phi(x_i, y))`` and ``E_{alpha_i} phi`` depends only on the dual
    distribution's token marginals ``mu`` (rows of chain ``i``) and summed edge marginals
    ``edge_mu[i]``, which is what is stored.

    Parameters
    ----------
    X : ndarray of shape (n_tokens, d), or (0, d) when ``sparse``
        Token features (the bias is an implicit constant feature 1).
    data, indices, indptr : ndarray
        With ``sparse``, the token features as a CSR matrix (float64, int64, int64;
        sorted indices); else empty and unused.
    sparse : bool
        Which representation holds the features.
    gram_offsets : ndarray of shape (n_chains + 1,), int64
        Chain ``i``'s (L_i, L_i) token Gram matrix ``X_i X_i^T + 1`` is
        ``gram[gram_offsets[i]:gram_offsets[i + 1]]`` (row-major).
    gram : ndarray of shape (sum L_i^2,)
    offsets : ndarray of shape (n_chains + 1,), int64
    labels : ndarray of shape (n_tokens,), int64
        The true labels.
    order : ndarray of shape (n_steps,), int64
        The blocks to visit, in order (a permutation of the chains for one pass).
    lam_n : float
        ``lam * n``.
    use_start_end : bool
        Whether ``start``/``end`` scores are part of the model.
    theta : ndarray of shape (K * d + K + K * K + 2 * K,)
        The parameters, laid out as in :func:`unpack`; updated in place.
    mu : ndarray of shape (n_tokens, K)
        Token marginals of the dual variables; updated in place.
    edge_mu : ndarray of shape (n_chains, K, K)
        Summed edge marginals of the dual variables; updated in place.
    loss_i : ndarray of shape (n_chains,)
        ``ell_i``, block ``i``'s share of the dual's linear term; updated in place.
    averaged : bool
        Also maintain the weighted average of the iterates (Lacoste-Julien et al. 2013,
        sec. 4), through ``acc``.
    acc : ndarray like ``theta``
        Averaging accumulator (start at zeros with ``theta``); see
        :func:`averaged_iterate`. Updated in place when ``averaged``.
    n_updates : ndarray of shape (1,)
        Number of block steps so far (a float); updated in place when ``averaged``.

    Returns
    -------
    gap : float
        Sum over blocks of the Frank-Wolfe gap of each block at the time it was visited
        (an estimate of the duality gap of the primal above).
    n_wrong : int
        Number of tokens whose loss-augmented label differed from the truth.
    """
    d = X.shape[1]
    K = mu.shape[1]
    W, b, trans, start, end = unpack(theta, K, d)
    n = offsets.shape[0] - 1
    Lmax = 1
    for i in range(n):
        Lmax = max(Lmax, offsets[i + 1] - offsets[i])
    unary = np.empty((Lmax, K))
    aug = np.empty((Lmax, K))
    v = np.empty((Lmax, K))
    ystar = np.empty(Lmax, dtype=np.int64)
    delta = np.empty((Lmax, K))
    dedge = np.empty((K, K))
    gap = 0.0
    n_wrong = 0
    pw = trans.reshape((1, K, K))
    for oi in range(order.shape[0]):
        i = order[oi]
        s = offsets[i]
        L = offsets[i + 1] - s
        if L == 0:
            continue
        # unary scores <W_k, x_t> + b_k (+ start/end) and the loss-augmented version
        if sparse:
            for t in range(L):
                _row_scores(X, data, indices, indptr, sparse, s + t, W, unary[t])
        else:
            unary[:L] = np.dot(X[s : s + L], W.T)
        for t in range(L):
            for k in range(K):
                unary[t, k] += b[k]
            if use_start_end and t == 0:
                for k in range(K):
                    unary[t, k] += start[k]
            if use_start_end and t == L - 1:
                for k in range(K):
                    unary[t, k] += end[k]
            for k in range(K):
                aug[t, k] = unary[t, k] + 1.0
            aug[t, labels[s + t]] -= 1.0
        _viterbi_chain(aug, 0, L, pw, 0, 0, v, 0, v[:0], ystar)
        # direction: delta = e_{y*} - mu (tokens), dedge = counts(y*) - edge_mu
        hamming = 0.0
        for t in range(L):
            for k in range(K):
                delta[t, k] = -mu[s + t, k]
            delta[t, ystar[t]] += 1.0
            if ystar[t] != labels[s + t]:
                hamming += 1.0
        n_wrong += int(hamming)
        for k in range(K):
            for j in range(K):
                dedge[k, j] = -edge_mu[i, k, j]
        for t in range(L - 1):
            dedge[ystar[t], ystar[t + 1]] += 1.0
        # lam n <w_i - w_s, w> = <phi(y*) - E_mu phi, w> = <delta, scores> + <dedge, trans>
        inner = 0.0
        for t in range(L):
            for k in range(K):
                inner += delta[t, k] * unary[t, k]
        for k in range(K):
            for j in range(K):
                inner += dedge[k, j] * trans[k, j]
        # ||w_i - w_s||^2 * (lam n)^2
        sq = 0.0
        g0 = gram_offsets[i]
        for t in range(L):
            for t2 in range(L):
                dd = 0.0
                for k in range(K):
                    dd += delta[t, k] * delta[t2, k]
                sq += gram[g0 + t * L + t2] * dd
        for k in range(K):
            for j in range(K):
                sq += dedge[k, j] * dedge[k, j]
        if use_start_end:
            for k in range(K):
                sq += delta[0, k] * delta[0, k] + delta[L - 1, k] * delta[L - 1, k]
        # ell_s = Hamming / n;  block gap = lam <w_i - w_s, w> - ell_i + ell_s
        ell_s = hamming / n
        block_gap = inner / n - loss_i[i] + ell_s
        gap += block_gap
        gamma = 0.0
        if sq > 0.0:
            gamma = min(max(block_gap * lam_n * n / sq, 0.0), 1.0)
        acc_weight = 0.0
        if averaged:
            # step m (1-based) adds m (m - 1) / 2 times its change to the accumulator
            n_updates[0] += 1.0
            acc_weight = 0.5 * n_updates[0] * (n_updates[0] - 1.0)
        if gamma > 0.0:
            _bcfw_step(
                X, data, indices, indptr, sparse, s, L, i, gamma, gamma / lam_n, delta, dedge,
                ell_s, use_start_end,
                theta, mu, edge_mu, loss_i, acc, acc_weight,
            )
    return gap, n_wrong


def averaged_iterate(theta, acc, n_updates):
    """Return the weighted average of the iterates from the accumulator of :func:`bcfw_pass`.

    With ``w_m`` the parameters after block step ``m`` (``w_0 = 0``) and ``c`` steps so
    far, the average ``(2 / (c (c + 1))) sum_{m <= c} m w_m`` equals
    ``w_c - (2 / (c (c + 1))) sum_m (m (m - 1) / 2) (w_m - w_{m-1})``; the kernel keeps
    the sum (``acc``), which changes only where the parameters do, so averaging costs no
    dense pass over the weights per step.
    """
    c = float(n_updates[0])
    if c == 0.0:
        return theta.copy()
    return theta - acc * (2.0 / (c * (c + 1.0)))
