"""ChainCRF: objectives against enumeration, learning a known model, persistence, bad input."""

import itertools
import json

import numpy as np
import pytest
import scipy.sparse
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from structcal import ChainPotentials, ParameterError
from structcal.crf import ChainCRF, ImageFeatures, _chain_kernels
from structcal.crf.chain import _kernel_tokens, _Layout, _Likelihood, _structured_hinge
from structcal.exceptions import ConvergenceWarning, NotFittedError, ParameterTypeError
from structcal.inference import forward_backward, infer
from structcal.inference.exact import exact_chain

# --------------------------------------------------------------------------- helpers


def _random_problem(rng, n_chains=6, K=3, d=4, max_len=4, empty=False):
    lengths = rng.integers(1, max_len + 1, size=n_chains)
    if empty:
        lengths[1] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    Z = rng.standard_normal((int(offsets[-1]), d))
    labels = rng.integers(0, K, size=int(offsets[-1])).astype(np.int64)
    return Z, offsets, labels


def _potentials_of(layout, theta, Z, offsets, start_end):
    W, b, T, s, e = layout.unpack(theta)
    return ChainPotentials.from_scores(
        Z @ W.T + b, np.diff(offsets), T, s if start_end else None, e if start_end else None
    )


def _sample_chains(rng, p):
    """Exact samples, one labeling per chain, by enumeration."""
    out = []
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        prob = np.exp(ex.scores - ex.log_partition)
        out.append(ex.labelings[rng.choice(prob.shape[0], p=prob / prob.sum())])
    return np.concatenate(out).astype(np.int64)


def _word_accuracy(pred, labels, offsets):
    ok = pred == labels
    return np.mean([ok[a:b].all() for a, b in zip(offsets[:-1], offsets[1:])])


# --------------------------------------------------------------------------- objectives


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("start_end", [True, False])
def test_likelihood_matches_enumeration_and_gradient_matches_finite_differences(seed, start_end):
    rng = np.random.default_rng(seed)
    Z, offsets, labels = _random_problem(rng, empty=seed == 1)
    K, alpha = 3, 0.3
    problem = _Likelihood(Z, offsets, labels, K, alpha, start_end)
    theta = rng.standard_normal(problem.layout.size)
    obj, grad = problem(theta)
    # objective: mean negative log-likelihood by enumeration + the penalty
    p = _potentials_of(problem.layout, theta, Z, offsets, start_end)
    nll = []
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        lab = labels[offsets[c] : offsets[c + 1]]
        idx = [i for i, y in enumerate(ex.labelings) if np.array_equal(y, lab)]
        nll.append(ex.log_partition - ex.scores[idx[0]])
    np.testing.assert_allclose(obj, np.mean(nll) + 0.5 * alpha * theta @ theta, rtol=1e-12)
    # gradient: central differences
    eps = 1e-6
    fd = np.empty_like(theta)
    for q in range(theta.size):
        e = np.zeros_like(theta)
        e[q] = eps
        fd[q] = (problem(theta + e)[0] - problem(theta - e)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    if not start_end:  # start/end scores take no part: their gradient is the penalty's
        _, _, _, gs, ge = problem.layout.unpack(grad)
        _, _, _, ts, te = problem.layout.unpack(theta)
        np.testing.assert_allclose(gs, alpha * ts)
        np.testing.assert_allclose(ge, alpha * te)


def test_likelihood_gradient_survives_extreme_scores():
    # scores of magnitude 1e3 push the scaled pass into its log-space fallback
    rng = np.random.default_rng(5)
    Z, offsets, labels = _random_problem(rng, n_chains=4)
    problem = _Likelihood(Z, offsets, labels, 3, 1e-3, True)
    theta = 300.0 * rng.standard_normal(problem.layout.size)
    obj, grad = problem(theta)
    assert np.isfinite(obj) and np.isfinite(grad).all()
    p = _potentials_of(problem.layout, theta, Z, offsets, True)
    r = forward_backward(p)
    np.testing.assert_allclose(problem.marg, r.marginals, atol=1e-12)


def test_expected_statistics_sum_the_edge_marginals():
    rng = np.random.default_rng(2)
    Z, offsets, labels = _random_problem(rng, n_chains=9, empty=True)
    problem = _Likelihood(Z, offsets, labels, 3, 1.0, True)
    theta = rng.standard_normal(problem.layout.size)
    problem(theta)
    r = forward_backward(
        _potentials_of(problem.layout, theta, Z, offsets, True), edge_marginals=True
    )
    np.testing.assert_allclose(
        problem.edge_sum.sum(axis=0), r.edge_marginals.sum(axis=0), atol=1e-12
    )
    np.testing.assert_allclose(problem.logz, r.log_partition, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 400.0])  # 400: the log-space fallback
def test_parallel_and_serial_likelihood_kernels_agree_bit_for_bit(scale):
    from structcal.inference._chain import padded_width, scaled_exponentials

    rng = np.random.default_rng(8)
    Z, offsets, labels = _random_problem(rng, n_chains=300, K=4, empty=True)
    U = scale * rng.standard_normal((Z.shape[0], 4))
    pw = scale * rng.standard_normal((1, 4, 4))
    E, ET, colmax, spread = scaled_exponentials(pw, padded_width(4))
    n, chunk = 300, 32
    out = []
    for run in (_chain_kernels.expected_statistics, _chain_kernels.expected_statistics_serial):
        n_chunks = -(-n // chunk)
        res = (np.empty_like(U), np.empty((n_chunks, 4, 4)), np.empty(n), np.empty(n, np.int64))
        run(U, offsets, pw, E, ET, colmax, spread, chunk, *res)
        out.append(res)
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    assert (out[0][3] == 2).any() == (scale > 1)
    r = forward_backward(ChainPotentials(U, offsets, pw[0]), edge_marginals=True)
    np.testing.assert_allclose(out[0][0], r.marginals, atol=1e-12)
    np.testing.assert_allclose(out[0][2], r.log_partition, rtol=1e-12)
    np.testing.assert_allclose(out[0][1].sum(0), r.edge_marginals.sum(0), atol=1e-9)


def test_structured_hinge_matches_enumeration():
    rng = np.random.default_rng(3)
    Z, offsets, labels = _random_problem(rng)
    layout = _Layout(3, Z.shape[1])
    theta = rng.standard_normal(layout.size)
    p = _potentials_of(layout, theta, Z, offsets, True)
    hinge = []
    for c in range(p.n_chains):
        ex = exact_chain(p, c)
        lab = labels[offsets[c] : offsets[c + 1]]
        gold = ex.scores[[np.array_equal(y, lab) for y in ex.labelings]][0]
        hinge.append(np.max((ex.labelings != lab).sum(axis=1) + ex.scores) - gold)
    np.testing.assert_allclose(
        _structured_hinge(layout, theta, Z, offsets, labels, True), np.mean(hinge)
    )


def test_bcfw_factored_dual_reconstructs_the_weights():
    """The kernel's weights equal (1 / (lam n)) sum_i (phi(y_i) - E_mu phi), and ell_i equals
    the dual's expected Hamming loss / n, after any number of block steps."""
    rng = np.random.default_rng(4)
    Z, offsets, labels = _random_problem(rng, n_chains=8, max_len=5)
    K, n, lam = 3, 8, 0.05
    layout = _Layout(K, Z.shape[1])
    lengths = np.diff(offsets)
    goff = np.concatenate([[0], np.cumsum(lengths**2)]).astype(np.int64)
    gram = np.concatenate(
        [(Z[a:b] @ Z[a:b].T + 1).ravel() for a, b in zip(offsets[:-1], offsets[1:])]
    )
    kernel_gram = np.empty_like(gram)
    _chain_kernels.chain_grams(*_kernel_tokens(Z), offsets, goff, kernel_gram)
    np.testing.assert_allclose(kernel_gram, gram, rtol=1e-13)
    Zs = Z.copy()
    Zs[np.abs(Zs) < 0.5] = 0.0  # the sparse path: row dot products by merging indices
    _chain_kernels.chain_grams(*_kernel_tokens(scipy.sparse.csr_matrix(Zs)), offsets, goff, kernel_gram)
    np.testing.assert_allclose(kernel_gram, np.concatenate(
        [(Zs[a:b] @ Zs[a:b].T + 1).ravel() for a, b in zip(offsets[:-1], offsets[1:])]
    ), rtol=1e-13)
    theta, acc, n_up = np.zeros(layout.size), np.zeros(layout.size), np.zeros(1)
    mu = np.eye(K)[labels]
    edge_mu = np.zeros((n, K, K))
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        np.add.at(edge_mu[i], (labels[a : b - 1], labels[a + 1 : b]), 1.0)
    loss_i = np.zeros(n)
    # one block step at a time, to check the averaging accumulator against the recursion
    # avg_m = (1 - rho) avg_{m-1} + rho w_m, rho = 2 / (m + 1)
    avg = np.zeros(layout.size)
    for m, block in enumerate(np.concatenate([rng.permutation(n) for _ in range(7)]), 1):
        _chain_kernels.bcfw_pass(
            *_kernel_tokens(Z), goff, gram, offsets, labels, np.array([block]), lam * n, True,
            theta, mu, edge_mu, loss_i, True, acc, n_up,
        )  # fmt: skip
        avg += 2.0 / (m + 1) * (theta - avg)
    theta_avg = _chain_kernels.averaged_iterate(theta, acc, n_up)
    assert n_up[0] == 7 * n
    np.testing.assert_allclose(theta_avg, avg, rtol=1e-10, atol=1e-12)
    Y = np.eye(K)[labels]
    first, last = offsets[:-1], offsets[1:] - 1
    emp_T = np.zeros((K, K))
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        np.add.at(emp_T, (labels[a : b - 1], labels[a + 1 : b]), 1.0)
    D = Y - mu
    want = np.concatenate(
        [
            (D.T @ Z).ravel(),
            D.sum(0),
            (emp_T - edge_mu.sum(0)).ravel(),
            D[first].sum(0),
            D[last].sum(0),
        ]
    ) / (lam * n)
    np.testing.assert_allclose(theta, want, atol=1e-10)
    expected_hamming = np.add.reduceat(1.0 - mu[np.arange(len(labels)), labels], offsets[:-1])
    np.testing.assert_allclose(loss_i, expected_hamming / n, atol=1e-12)
    np.testing.assert_allclose(mu.sum(axis=1), 1.0)
    assert (mu >= -1e-12).all() and (edge_mu >= -1e-12).all()
    # weak duality: primal at any weights >= dual
    dual = -0.5 * lam * theta @ theta + loss_i.sum()
    for w in (theta, theta_avg):
        primal = 0.5 * lam * w @ w + _structured_hinge(layout, w, Z, offsets, labels, True)
        assert primal >= dual - 1e-12


# --------------------------------------------------------------------------- learning


def _generating_model(rng, K=3, d=3):
    layout = _Layout(K, d)
    theta = np.concatenate(
        [
            1.5 * rng.standard_normal(K * d),
            0.3 * rng.standard_normal(K),
            1.5 * rng.standard_normal(K * K),
            0.5 * rng.standard_normal(2 * K),
        ]
    )
    return layout, theta


def _draw(rng, layout, theta, n_chains):
    lengths = rng.integers(1, 5, size=n_chains)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    Z = rng.standard_normal((int(offsets[-1]), layout.d))
    labels = _sample_chains(rng, _potentials_of(layout, theta, Z, offsets, True))
    return Z, offsets, labels


@pytest.mark.parametrize("seed", range(2))
def test_likelihood_recovers_the_generating_models_marginals(seed):
    rng = np.random.default_rng(seed)
    layout, theta = _generating_model(rng)
    Z, offsets, labels = _draw(rng, layout, theta, 3000)
    crf = ChainCRF(alpha=1e-5).fit(Z, labels, lengths=np.diff(offsets))
    assert crf.converged_
    Zt, offt, _ = _draw(rng, layout, theta, 300)
    true = forward_backward(_potentials_of(layout, theta, Zt, offt, True)).marginals
    fitted = crf.predict_marginals(Zt, lengths=np.diff(offt))
    err = np.abs(fitted - true)
    assert err.mean() < 0.02 and err.max() < 0.12
    # ... and much closer than a model without transitions (the chain structure matters)
    tokens = ChainCRF(alpha=1e-5).fit(Z, labels)  # every token its own chain
    lone = np.abs(tokens.predict_marginals(Zt) - true).mean()
    assert err.mean() < 0.5 * lone


def test_max_margin_converges_to_a_certified_optimum_and_separates():
    rng = np.random.default_rng(7)
    layout, theta = _generating_model(rng)
    theta *= 4.0  # nearly deterministic labels: a margin exists
    Z, offsets, labels = _draw(rng, layout, theta, 400)
    crf = ChainCRF(method="max_margin", alpha=1e-2, tol=1e-3, max_iter=2000, random_state=0)
    crf.fit(Z, labels, lengths=np.diff(offsets))
    assert crf.converged_ and 0.0 <= crf.duality_gap_ <= 1e-3 * crf.objective_
    # the reported primal is the objective at the returned weights
    w = np.concatenate(
        [crf.coef_.ravel(), crf.intercept_, crf.transitions_.ravel(), crf.start_, crf.end_]
    )
    primal = 0.5 * 1e-2 * w @ w + _structured_hinge(layout, w, Z, offsets, labels, True)
    np.testing.assert_allclose(crf.objective_, primal, rtol=1e-12)
    # about as accurate as the generating model's own MAP labels
    best = np.mean(infer(_potentials_of(layout, theta, Z, offsets, True)).map_labels == labels)
    assert crf.score(Z, labels, lengths=np.diff(offsets)) > best - 0.03
    # the likelihood and max-margin models agree on most labels
    ll = ChainCRF(alpha=1e-2).fit(Z, labels, lengths=np.diff(offsets))
    agree = np.mean(
        ll.predict(Z, lengths=np.diff(offsets)) == crf.predict(Z, lengths=np.diff(offsets))
    )
    assert agree > 0.9


@pytest.mark.parametrize("method", ["likelihood", "max_margin"])
def test_convergence_warning_and_verbose(method, capsys):
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng, n_chains=30)
    crf = ChainCRF(method=method, max_iter=2, tol=0.0, verbose=1, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        crf.fit(Z, labels, lengths=np.diff(offsets))
    assert crf.n_iter_ <= 2 and not crf.converged_
    assert "ChainCRF" in capsys.readouterr().out


def test_max_margin_is_reproducible_with_a_seed():
    rng = np.random.default_rng(1)
    Z, offsets, labels = _random_problem(rng, n_chains=30)
    fits = []
    for _ in range(2):
        with pytest.warns(ConvergenceWarning):
            fits.append(
                ChainCRF(method="max_margin", max_iter=5, tol=0.0, random_state=3).fit(
                    Z, labels, lengths=np.diff(offsets)
                )
            )
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)


# --------------------------------------------------------------------------- API


def test_input_layouts_give_the_same_model_and_mirrored_outputs():
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng, n_chains=20)
    lengths = np.diff(offsets)
    X_list = [Z[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    y_list = [labels[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    a = ChainCRF(alpha=0.1).fit(X_list, y_list)
    b = ChainCRF(alpha=0.1).fit(Z, labels, lengths=lengths)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    pred = a.predict(X_list)
    assert isinstance(pred, list) and [len(p) for p in pred] == lengths.tolist()
    np.testing.assert_array_equal(np.concatenate(pred), b.predict(Z, lengths=lengths))
    marg = a.predict_marginals(X_list)
    np.testing.assert_allclose(np.concatenate(marg), b.predict_marginals(Z, lengths=lengths))
    np.testing.assert_allclose(np.concatenate(marg).sum(axis=1), 1.0)
    assert a.score(X_list, y_list) == b.score(Z, labels, lengths=lengths)
    # flat labels with list X are accepted too
    assert a.score(X_list, labels) == a.score(X_list, y_list)
    # without lengths every token is a chain: marginals are the softmax of the unary
    flat = a.predict_marginals(Z)
    p = a.potentials(Z)
    np.testing.assert_allclose(flat, np.exp(p.unary - logsumexp(p.unary, axis=1, keepdims=True)))


def test_a_list_of_chains_is_checked_at_once_or_chain_by_chain_with_the_same_result():
    """A list of 2-d arrays of one dtype is stacked and checked at once; mixed dtypes, lists
    and sparse chains go chain by chain: the same tokens either way, and an invalid chain is
    named whichever way it came."""
    from structcal.crf.chain import _sequences_iv

    rng = np.random.default_rng(0)
    chains = [rng.normal(size=(n, 3)) for n in (4, 0, 1, 6)]
    flat, offsets, as_list = _sequences_iv(chains, None)
    np.testing.assert_array_equal(flat, np.concatenate(chains))
    assert offsets.tolist() == [0, 4, 4, 5, 11] and as_list and flat.dtype == np.float64
    for mixed in ([c.astype(np.float32) for c in chains], [chains[0].tolist()] + chains[1:],
                  [chains[0].astype(np.float32)] + chains[1:],
                  [(c > 0).astype(np.int64) for c in chains]):
        got, got_offsets, _ = _sequences_iv(mixed, None)
        want = np.concatenate([np.asarray(c, dtype=np.float64).reshape(-1, 3) for c in mixed])
        np.testing.assert_array_equal(got, want)
        assert got_offsets.tolist() == offsets.tolist()
    bad = [c.copy() for c in chains]
    bad[2][0, 1] = np.nan
    with pytest.raises(ParameterError, match=r"`X\[2\]` must not contain NaN"):
        _sequences_iv(bad, None)
    with pytest.raises(ParameterError, match=r"same number of features; X\[0\] has 3 and X\[1\]"):
        _sequences_iv([chains[0], rng.normal(size=(2, 4))], None)
    with pytest.raises(ParameterTypeError, match=r"`X\[0\]` must hold real numbers"):
        _sequences_iv([chains[0].astype(complex)] + chains[1:], None)


def test_potentials_fold_start_and_end_scores():
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng, n_chains=10)
    crf = ChainCRF(alpha=0.1).fit(Z, labels, lengths=np.diff(offsets))
    p = crf.potentials(Z, lengths=np.diff(offsets))
    U = Z @ crf.coef_.T + crf.intercept_
    U[offsets[:-1]] += crf.start_
    U[offsets[1:] - 1] += crf.end_
    np.testing.assert_allclose(p.unary, U)
    np.testing.assert_array_equal(p.pairwise, crf.transitions_)
    no_se = ChainCRF(alpha=0.1, start_end=False).fit(Z, labels, lengths=np.diff(offsets))
    assert not no_se.start_.any() and not no_se.end_.any()


def test_external_logits_go_straight_into_inference():
    """A user's own scores (e.g. a neural network's logits and a transition matrix) need no
    ChainCRF: ChainPotentials.from_scores is the whole interface, and inference is exact."""
    rng = np.random.default_rng(11)
    lengths = np.array([3, 1, 4, 2])
    logits = rng.standard_normal((lengths.sum(), 3)) * 2.0
    transitions = rng.standard_normal((3, 3))
    start = rng.standard_normal(3)
    p = ChainPotentials.from_scores(logits, lengths, transitions, start=start)
    r = infer(p)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for c in range(len(lengths)):
        s, t = offsets[c], offsets[c + 1]
        u = logits[s:t].copy()
        u[0] += start
        # brute force from the user's raw arrays
        labs = np.array(list(itertools.product(range(3), repeat=t - s)))
        scores = u[np.arange(t - s), labs].sum(1) + transitions[labs[:, :-1], labs[:, 1:]].sum(1)
        prob = np.exp(scores - logsumexp(scores))
        np.testing.assert_array_equal(r.map_labels[s:t], labs[np.argmax(scores)])
        for j in range(t - s):
            np.testing.assert_allclose(
                r.marginals[s + j], np.bincount(labs[:, j], prob, minlength=3)
            )
    # and a ChainCRF is just one such producer: its potentials are from_scores of its parts
    Z, off, labels = _random_problem(rng, n_chains=12)
    crf = ChainCRF(alpha=0.1).fit(Z, labels, lengths=np.diff(off))
    mine = ChainPotentials.from_scores(
        Z @ crf.coef_.T + crf.intercept_, np.diff(off), crf.transitions_, crf.start_, crf.end_
    )
    np.testing.assert_allclose(
        forward_backward(mine).marginals, crf.predict_marginals(Z, lengths=np.diff(off))
    )


@pytest.mark.parametrize("cls", [ChainCRF, ImageFeatures])
def test_documented_defaults(cls):
    import ast
    import inspect
    import re

    documented = dict(re.findall(r"^    (\w+) : .*default=(.+)$", cls.__doc__, re.M))
    for name, param in inspect.signature(cls).parameters.items():
        assert name in documented, name
        assert ast.literal_eval(documented[name]) == param.default, name


def test_none_defaults_per_method():
    assert ChainCRF()._params_iv()[3:5] == (1000, 1e-5)
    assert ChainCRF(method="max_margin")._params_iv()[3:5] == (500, 1e-2)


def test_clone_and_params():
    crf = ChainCRF(method="max_margin", alpha=0.5, features=ImageFeatures((2, 2), n_components=1))
    c = clone(crf)
    assert c.get_params()["alpha"] == 0.5 and c.features is not crf.features
    assert c.get_params()["features__n_components"] == 1
    c.set_params(alpha=2.0, features__n_components=2)
    assert c.alpha == 2.0 and c.features.n_components == 2 and crf.features.n_components == 1
    with pytest.raises(NotFittedError):
        c.predict([np.zeros((1, 4))])
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng, d=4)
    fitted = ChainCRF(alpha=0.1).fit(Z, labels, lengths=np.diff(offsets))
    assert not hasattr(clone(fitted), "coef_")


@parametrize_with_checks(
    [ChainCRF(), ImageFeatures(image_shape=None, neighbours=False, n_components=1)],
    expected_failed_checks=lambda est: {
        "check_complex_data": "complex input raises ParameterTypeError (a TypeError): "
        "structcal reports a wrong dtype as a TypeError",
        "check_dtype_object": "object arrays are rejected, never converted",
        "check_fit2d_predict1d": "the error names the argument and its shape instead of "
        "sklearn's 'Reshape your data' wording",
        **(
            {
                "check_estimators_nan_inf": "labels must be integer state indices; float "
                "labels are rejected, not rounded (NaN/inf features are tested separately)"
            }
            if isinstance(est, ChainCRF)
            else {}
        ),
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# --------------------------------------------------------------------------- persistence


@pytest.mark.parametrize("method", ["likelihood", "max_margin"])
def test_save_load_round_trip_is_exact(tmp_path, method):
    rng = np.random.default_rng(0)
    X = [rng.integers(0, 2, size=(L, 6)).astype(float) for L in rng.integers(1, 6, size=40)]
    y = [rng.integers(0, 4, size=len(x)) for x in X]
    crf = ChainCRF(
        method=method,
        alpha=0.05,
        n_states=5,
        max_iter=30,
        tol=0.0,
        random_state=np.random.default_rng(1),
        features=ImageFeatures(image_shape=(3, 2), n_components=3),
    )
    with pytest.warns(ConvergenceWarning):
        crf.fit(X, y)
    crf.save(tmp_path / "m", metadata={"note": "test", "accuracy": np.float64(0.5)})
    back = ChainCRF.load(tmp_path / "m.npz")
    assert back.metadata_ == {"note": "test", "accuracy": 0.5}
    assert back.n_states_ == 5 and back.method == method and back.random_state is None
    assert back.get_params()["features__image_shape"] == (3, 2)
    for a, b in zip(crf.predict(X), back.predict(X)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(crf.predict_marginals(X), back.predict_marginals(X)):
        np.testing.assert_array_equal(a, b)
    for attr in ("n_iter_", "converged_", "objective_", "duality_gap_", "n_features_in_"):
        assert getattr(back, attr) == getattr(crf, attr)
    np.testing.assert_array_equal(back.features_.projection_, crf.features_.projection_)
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["class"] == "ChainCRF" and manifest["format_version"] == 1
    # a clone of the loaded model refits the same way
    assert clone(back).get_params(deep=False).keys() == crf.get_params(deep=False).keys()


def test_loading_bad_files(tmp_path):
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng)
    crf = ChainCRF(alpha=0.1).fit(Z, labels, lengths=np.diff(offsets))
    with pytest.raises(ValueError, match="manifest is missing"):
        ChainCRF.load(tmp_path / "nothing")
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "junk.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a structcal model"):
        ChainCRF.load(tmp_path / "junk")
    crf.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m.json").read_text())
    (tmp_path / "m.json").write_text(json.dumps({**manifest, "format_version": 7}))
    with pytest.raises(ValueError, match="format_version 7"):
        ChainCRF.load(tmp_path / "m")
    (tmp_path / "m.json").write_text(json.dumps({**manifest, "class": "ImageFeatures"}))
    with pytest.raises(ValueError, match="not a ChainCRF"):
        ChainCRF.load(tmp_path / "m")
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    arrays = dict(np.load(tmp_path / "m.npz"))
    np.savez(tmp_path / "m.npz", **{**arrays, "coef": arrays["coef"][:, :2]})
    # a rewritten .npz no longer matches the manifest's checksum ...
    with pytest.raises(ValueError, match="SHA-256 differs"):
        ChainCRF.load(tmp_path / "m")
    # ... and without a recorded checksum the shape check still refuses it
    (tmp_path / "m.json").write_text(
        json.dumps({k: v for k, v in manifest.items()
                    if k not in ("arrays_sha256", "manifest_sha256")}))  # an older file
    with pytest.raises(ValueError, match="'coef' must be a float array of shape"):
        ChainCRF.load(tmp_path / "m")
    np.savez(tmp_path / "m.npz", **{**arrays, "transitions": arrays["transitions"] * np.nan})
    with pytest.raises(ValueError, match="NaN or inf"):
        ChainCRF.load(tmp_path / "m")
    unchecked = {k: v for k, v in manifest.items()
                 if k not in ("arrays_sha256", "manifest_sha256")}
    (tmp_path / "m.json").write_text(json.dumps({**unchecked, "params": {"bogus": 1}}))
    with pytest.raises(ValueError, match="malformed ChainCRF manifest"):
        ChainCRF.load(tmp_path / "m")


def test_failed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    Z, offsets, labels = _random_problem(rng)
    crf = ChainCRF(alpha=0.1).fit(Z, labels, lengths=np.diff(offsets))

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("structcal.io.json.dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        crf.save(tmp_path / "m")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(NotFittedError):
        ChainCRF().save(tmp_path / "u")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bad input


def _fitted():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((L, 3)) for L in (2, 3, 1)]
    y = [np.array([0, 1]), np.array([2, 0, 1]), np.array([2])]
    return ChainCRF(alpha=0.1).fit(X, y), X, y


@pytest.mark.parametrize(
    "X,y,kwargs,match",
    [
        (
            [np.zeros((2, 3))],
            [np.zeros(2, int), np.zeros(1, int)],
            {},
            r"one label sequence per chain of `X` \(1\); got 2",
        ),
        (
            [np.zeros((2, 3)), np.zeros((3, 3))],
            [np.zeros(2, int), np.zeros(2, int)],
            {},
            r"`y\[1\]` has 2 labels but chain 1 of `X` has 3 tokens",
        ),
        ([np.zeros((2, 3))], [np.array([0, -1])], {}, r"`y\[0\]` entries must be >= 0"),
        ([np.zeros((2, 3))], [np.array([0, 3])], {"n_states": 3}, r"`y\[0\]` entries must be < 3"),
        ([], [], {}, "at least one chain"),
        ([np.zeros((0, 3))], [np.zeros(0, int)], {}, "at least one token"),
        (np.zeros((0, 3)), np.zeros(0, int), {}, "at least one chain"),
        ([np.array([[0.0, np.nan, 1.0]])], [np.array([0])], {}, r"`X\[0\]` must not contain NaN"),
        ([np.array([[0.0, np.inf, 1.0]])], [np.array([0])], {}, r"`X\[0\]` must not contain \+inf"),
        ([np.array([[0.0, -np.inf, 1.0]])], [np.array([0])], {}, r"`X\[0\]` must be finite"),
        (
            [np.zeros((2, 3)), np.zeros((1, 2))],
            [np.zeros(2, int), np.zeros(1, int)],
            {},
            "same number of features",
        ),
        (np.zeros((3, 2)), np.zeros(2, int), {}, r"one label per token of `X` \(3\); got 2"),
        ([np.zeros((2, 3))], [np.array([0.0, 1.0])], {}, "must be an integer array"),
    ],
)
def test_bad_fit_input(X, y, kwargs, match):
    with pytest.raises(ValueError if "integer" not in match else TypeError, match=match):
        ChainCRF(**kwargs).fit(X, y)


def test_bad_lengths_and_hyperparameters():
    X = np.zeros((3, 2))
    y = np.zeros(3, int)
    with pytest.raises(ParameterError, match="`lengths` must sum to the number of rows"):
        ChainCRF().fit(X, y, lengths=[1, 1])
    with pytest.raises(ParameterError, match="`lengths` must be None when `X` is a list"):
        ChainCRF().fit([X], [y], lengths=[3])
    with pytest.raises(ParameterTypeError, match="ImageFeatures takes dense tokens"):
        ChainCRF(features=ImageFeatures(image_shape=(1, 2))).fit(scipy.sparse.csr_matrix(X), y)
    for params, match in [
        ({"method": "svm"}, "`method` must be one of"),
        ({"alpha": 0.0}, "`alpha` must be > 0"),
        ({"n_states": 0}, "`n_states` must be >= 1"),
        ({"max_iter": 0}, "`max_iter` must be >= 1"),
        ({"tol": -1.0}, "`tol` must be >= 0"),
        ({"features": "pixels"}, "`features` must be None or one of"),
        ({"start_end": 1}, "`start_end` must be a bool"),
    ]:
        with pytest.raises((ParameterError, ParameterTypeError), match=match):
            ChainCRF(**params).fit(X, y)


def test_bad_predict_input():
    crf, X, y = _fitted()
    with pytest.raises(ParameterError, match="X has 2 features, but ChainCRF is expecting 3"):
        crf.predict([np.zeros((2, 2))])
    with pytest.raises(ParameterError, match="must not contain NaN"):
        crf.predict_marginals([np.full((2, 3), np.nan)])
    with pytest.raises(ParameterError, match="at least one chain"):
        crf.potentials([])
    with pytest.raises(ParameterError, match=r"`y\[0\]` entries must be < 3"):
        crf.score(X, [np.array([0, 5]), y[1], y[2]])
    with pytest.raises(ParameterError, match="one label sequence per chain"):
        crf.score(X, y[:2])


# --------------------------------------------------------------------------- features


def test_image_features_match_their_definition():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(200, 12)).astype(float)
    f = ImageFeatures(image_shape=(4, 3), n_components=3).fit(X)
    out = f.transform(X)
    h, w = 4, 3
    im = X.reshape(-1, h, w)
    pairs = [((i, j), (i, j + 1)) for i in range(h) for j in range(w - 1)]
    pairs += [((i, j), (i + 1, j)) for i in range(h - 1) for j in range(w)]
    pairs += [((i, j), (i + 1, j + 1)) for i in range(h - 1) for j in range(w - 1)]
    pairs += [((i, j + 1), (i + 1, j)) for i in range(h - 1) for j in range(w - 1)]
    want_pairs = np.stack([im[:, a[0], a[1]] * im[:, b[0], b[1]] for a, b in pairs], axis=1)
    n_pix, n_pairs = 12, len(pairs)
    assert out.shape[1] == f.n_features_out_ == n_pix + n_pairs + 3 + 6
    np.testing.assert_array_equal(out[:, :n_pix], X)
    np.testing.assert_array_equal(out[:, n_pix : n_pix + n_pairs], want_pairs)
    q = out[:, n_pix + n_pairs : n_pix + n_pairs + 3]
    np.testing.assert_allclose(q.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.cov(q.T, bias=True), np.eye(3), atol=1e-10)  # whitened
    iu, ju = np.triu_indices(3)
    np.testing.assert_allclose(out[:, -6:], q[:, iu] * q[:, ju] / np.sqrt(3))
    assert ImageFeatures(image_shape=(4, 3), n_components=0, pixels=False).fit(X).transform(
        X
    ).shape == (200, n_pairs)
    with pytest.raises(ParameterError, match="has 12 pixels but the tokens have 10"):
        ImageFeatures(image_shape=(4, 3)).fit(X[:, :10])
    with pytest.raises(ParameterError, match="produces no features"):
        ImageFeatures(pixels=False, neighbours=False, n_components=0).fit(X)
    with pytest.raises(
        ParameterError, match="X has 11 features, but ImageFeatures is expecting 12"
    ):
        f.transform(X[:, :11])


# --------------------------------------------------------------------------- shipped models


def _shipped(name):
    from structcal.io import pretrained_path

    return pretrained_path(name)


@pytest.mark.parametrize("name", ["ocr_chain_crf", "ocr_chain_crf_max_margin"])
def test_shipped_models_reach_the_papers_accuracy(name):
    from structcal.datasets import load_ocr

    crf = ChainCRF.load(_shipped(name))
    meta = crf.metadata_
    assert meta["training_split"] == "train" and meta["alphabet"] == "abcdefghijklmnopqrstuvwxyz"
    test = load_ocr("test")
    pred = crf.predict(test.pixels, lengths=test.lengths)
    letter = float(np.mean(pred == test.labels))
    word = float(_word_accuracy(pred, test.labels, test.offsets))
    assert letter >= 0.84 and word >= 0.45
    # the numbers in the manifest (and README) are what the model does (up to a rounding-
    # level tie flipping a letter on another machine's BLAS)
    assert letter == pytest.approx(meta["test_accuracy"]["letter"], abs=2e-4)
    assert word == pytest.approx(meta["test_accuracy"]["word"], abs=2e-3)
