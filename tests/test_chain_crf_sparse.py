"""ChainCRF on scipy.sparse token features: the same model as the dense path, never densified."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse
from sklearn.feature_extraction import DictVectorizer, FeatureHasher

from structcal.crf import ChainCRF
from structcal.exceptions import ConvergenceWarning, ParameterError


def _sparse_problem(seed, n_chains=120, d=40, K=4, density=0.15):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 7, size=n_chains)  # empty chains included
    n = int(lengths.sum())
    X = (rng.random((n, d)) < density) * rng.standard_normal((n, d))
    W = rng.standard_normal((K, d)) * 2
    y = np.argmax(X @ W.T + rng.gumbel(size=(n, K)), axis=1)
    return X, y, lengths


def _per_chain(M, lengths):
    off = np.r_[0, np.cumsum(lengths)]
    return [M[a:b] for a, b in zip(off[:-1], off[1:])]


def _params(crf):
    return np.concatenate([crf.coef_.ravel(), crf.intercept_, crf.transitions_.ravel(),
                           crf.start_, crf.end_])


@pytest.mark.parametrize("seed", [0, 1])
def test_likelihood_sparse_equals_dense(seed):
    X, y, lengths = _sparse_problem(seed)
    S = scipy.sparse.csr_matrix(X)
    dense = ChainCRF(alpha=1e-2, tol=1e-10).fit(X, y, lengths)
    stacked = ChainCRF(alpha=1e-2, tol=1e-10).fit(S, y, lengths)
    listed = ChainCRF(alpha=1e-2, tol=1e-10).fit(_per_chain(S, lengths), _per_chain(y, lengths))
    for crf in (stacked, listed):
        np.testing.assert_allclose(_params(crf), _params(dense), rtol=1e-8, atol=1e-10)
        assert abs(crf.objective_ - dense.objective_) < 1e-12
    # potentials of one fitted model: dense, stacked sparse, per-chain sparse (CSC, COO too)
    ref = dense.potentials(X, lengths)
    for Xin, kw in ((S, {"lengths": lengths}), (scipy.sparse.csc_matrix(X), {"lengths": lengths}),
                    ([m.tocoo() for m in _per_chain(S, lengths)], {})):
        p = dense.potentials(Xin, **kw)
        np.testing.assert_allclose(p.unary, ref.unary, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(p.offsets, ref.offsets)
    got = stacked.predict_marginals(_per_chain(S, lengths))
    want = dense.predict_marginals(_per_chain(X, lengths))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-8)
    assert stacked.score(S, y, lengths) == dense.score(X, y, lengths)


def test_max_margin_sparse_equals_dense():
    X, y, lengths = _sparse_problem(2, n_chains=80)
    S = scipy.sparse.csr_matrix(X)
    fits = []
    for Xin in (X, S):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(ChainCRF(method="max_margin", alpha=1e-2, max_iter=40, tol=1e-6,
                                 random_state=0).fit(Xin, y, lengths))
    dense, sparse = fits
    assert dense.n_iter_ == sparse.n_iter_
    np.testing.assert_allclose(_params(sparse), _params(dense), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sparse.duality_gap_, dense.duality_gap_, rtol=1e-8, atol=1e-12)


def test_gradient_stays_sparse():
    # 4,000 tokens x 20,000 features: a dense copy of the features (640 MB) or of the
    # n_tokens x n_features gradient would show in the peak traced memory
    rng = np.random.default_rng(0)
    n, d, K = 4000, 20_000, 3
    S = scipy.sparse.random(n, d, density=5e-4, format="csr", random_state=1, dtype=np.float64)
    y = rng.integers(0, K, size=n)
    lengths = np.full(n // 20, 20)  # 200 chains: the serial (cached) kernel
    for method in ("likelihood", "max_margin"):
        tracemalloc.start()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ChainCRF(method=method, alpha=1e-2, max_iter=3, random_state=0).fit(S, y, lengths)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 64e6, (method, peak)  # the parameters are K x d = 0.5 MB


def test_dict_vectorizer_recipe():
    # token feature dicts -> DictVectorizer -> ChainCRF (the recipe of the class docstring)
    def token_features(sentence, t):
        w = sentence[t]
        return {"lower=" + w.lower(): 1, "suffix3=" + w[-3:].lower(): 1, "is_title": w.istitle(),
                "prev=" + (sentence[t - 1].lower() if t else "<s>"): 1}

    sentences = [["John", "lives", "in", "Paris"], ["Mary", "visits", "London"],
                 ["the", "cat", "sleeps"], ["Anna", "left", "Berlin", "today"]] * 10
    tags = [[1, 0, 0, 2], [1, 0, 2], [0, 0, 0], [1, 0, 2, 0]] * 10
    dicts = [[token_features(s, t) for t in range(len(s))] for s in sentences]
    vec = DictVectorizer()
    X = vec.fit_transform([f for sent in dicts for f in sent])      # CSR, one row per token
    lengths = [len(s) for s in sentences]
    crf = ChainCRF(alpha=1e-2).fit(X, np.concatenate(tags), lengths)
    test = [["Paul", "visits", "Rome"]]
    Xt = vec.transform([token_features(s, t) for s in test for t in range(len(s))])
    assert crf.predict(Xt, [3]).tolist() == [1, 0, 2]
    # the hashing trick gives the same kind of input
    hashed = FeatureHasher(n_features=2**12, input_type="dict")
    Xh = hashed.transform([f for sent in dicts for f in sent])
    assert ChainCRF(alpha=1e-2).fit(Xh, np.concatenate(tags), lengths).score(Xh, np.concatenate(tags), lengths) == 1.0


def test_sparse_errors():
    X, y, lengths = _sparse_problem(3, n_chains=10)
    S = scipy.sparse.csr_matrix(X)
    bad = S.copy()
    bad.data[0] = np.nan
    with pytest.raises(ParameterError, match="`X` contains NaN or inf"):
        ChainCRF().fit(bad, y, lengths)
    with pytest.raises(ParameterError, match="`lengths` must sum"):
        ChainCRF().fit(S, y, np.r_[lengths, 1])
    crf = ChainCRF(alpha=1e-1).fit(S, y, lengths)
    with pytest.raises(ParameterError, match="expecting 40 features"):
        crf.potentials(scipy.sparse.csr_matrix((3, 41)), [3])
    with pytest.raises(ParameterError, match="same number of features"):
        ChainCRF().fit([S[:2], scipy.sparse.csr_matrix((2, 3))], [y[:2], y[:2]])
