"""Linear-chain conditional random field trained by maximum likelihood or max-margin.

:class:`ChainCRF` is one producer of :class:`~structcal.potentials.ChainPotentials`
among many: the unary score of label ``k`` at token ``t`` is ``<coef_[k], f(x_t)> +
intercept_[k]`` (``f`` the optional feature map), the pairwise score is
``transitions_[a, b]``, and optional start/end scores are added to the first and last
token of every chain. Everything downstream (inference, events, recalibration) sees only
the potentials, so a user's own model -- e.g. a neural network's ``(n_tokens, n_states)``
logits plus a transition matrix, through :meth:`ChainPotentials.from_scores` -- works
the same way without this class.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from .. import exceptions, io
from .._estimator import ParamsMixin, check_fitted, clone
from .._validation import (
    as_float_array,
    as_int_array,
    check_float,
    check_int,
    check_option,
    check_random_state,
    describe,
    issparse,
)
from ..exceptions import ParameterError, ParameterTypeError
from ..inference import infer, score_labelings, viterbi
from ..inference._chain import padded_width, scaled_exponentials
from ..potentials import ChainPotentials
from . import _chain_kernels
from .features import FEATURE_MAPS

__all__ = ["ChainCRF"]

_METHODS = ("likelihood", "max_margin")
_DEFAULT_MAX_ITER = {"likelihood": 1000, "max_margin": 500}
# max_margin computes the exact duality gap (one loss-augmented Viterbi pass over the data,
# about a quarter of a Frank-Wolfe pass) every this many passes, and at the last one
_GAP_CHECK_EVERY = 5
_DEFAULT_TOL = {"likelihood": 1e-5, "max_margin": 1e-2}
#: Tokens per block when a dense feature map feeds the unary scores (about 1,000 rows of
#: OCR features, 6 MB, were fastest: 0.11 s for 21,000 letters; at once, 0.60-0.68 s in a
#: process's first calls, which fault in 137 MB of fresh memory, 0.15 s after)
_UNARY_BLOCK_ROWS = 1024
# chains per work item of the likelihood kernel: fixed, so results do not depend on the
# number of threads; below _PARALLEL_MIN_CHAINS chains the serial driver is used (a
# parallel region costs more than it saves there, and idle OpenMP workers spinning
# after it slow down the BLAS and L-BFGS calls in between)
_CHUNK = 32
_PARALLEL_MIN_CHAINS = 256


# --------------------------------------------------------------------------- input checks


def _sparse_iv(x, name):
    """A canonical float64 CSR matrix (sorted indices, no duplicates, finite values)."""
    if x.ndim != 2:
        raise ParameterError(f"`{name}` must be 2-d (n_tokens, n_features); got {x.ndim}-d")
    if np.issubdtype(x.dtype, np.complexfloating) or not (
        np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)
        or x.dtype == np.bool_
    ):
        raise ParameterTypeError(f"`{name}` must hold real numbers; got dtype {x.dtype}")
    import scipy.sparse

    x = scipy.sparse.csr_matrix(x, dtype=np.float64, copy=True)
    x.sum_duplicates()  # also sorts the indices
    if not np.isfinite(x.data).all():
        raise ParameterError(f"`{name}` contains NaN or inf")
    return x


def _stacked(X, name):
    """The chains of ``X`` stacked and checked at once, where every chain is a 2-d ndarray of
    one real dtype with the same number of features (None otherwise, or if the check fails:
    the per-chain checks then name the chain)."""
    first = X[0]
    if type(first) is not np.ndarray or first.ndim != 2:
        return None
    dtype, d = first.dtype, first.shape[1]
    if dtype.kind not in "biuf" or not all(
            type(x) is np.ndarray and x.ndim == 2 and x.dtype == dtype and x.shape[1] == d
            for x in X):
        return None
    try:
        return as_float_array(np.concatenate(X, axis=0), name, ndim=2)
    except ParameterError:
        return None


def _sequences_iv(X, lengths, name="X"):
    """Return ``(flat (n_tokens, n_features), offsets, as_list)``.

    ``X`` is a list/tuple of 2-d arrays (one per chain), or a 2-d array of tokens with
    ``lengths`` (``None``: every token is a chain of length one). ``flat`` is a float64
    ndarray, or a canonical CSR matrix when any input is a ``scipy.sparse`` matrix.
    """
    if isinstance(X, (list, tuple)):
        if lengths is not None:
            raise ParameterError(
                f"`lengths` must be None when `{name}` is a list of per-chain arrays (their "
                f"lengths are the chain lengths); got {describe(lengths)}"
            )
        if len(X) == 0:
            raise ParameterError(f"`{name}` must hold at least one chain; got an empty list")
        sparse = any(issparse(x) for x in X)
        flat = None if sparse else _stacked(X, name)
        if flat is not None:
            offsets = np.zeros(len(X) + 1, dtype=np.int64)
            np.cumsum([x.shape[0] for x in X], out=offsets[1:])
            return flat, offsets, True
        parts = []
        for c, x in enumerate(X):
            if issparse(x):
                x = _sparse_iv(x, f"{name}[{c}]")
            else:
                x = as_float_array(x, f"{name}[{c}]", ndim=2)
            if parts and x.shape[1] != parts[0].shape[1]:
                raise ParameterError(
                    f"every chain of `{name}` must have the same number of features; "
                    f"{name}[0] has {parts[0].shape[1]} and {name}[{c}] has {x.shape[1]}"
                )
            parts.append(x)
        if sparse:
            import scipy.sparse

            flat = scipy.sparse.vstack(parts, format="csr", dtype=np.float64)
            flat.sum_duplicates()
        else:
            flat = np.concatenate(parts, axis=0)
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([p.shape[0] for p in parts], out=offsets[1:])
        return flat, offsets, True
    if issparse(X):
        flat = _sparse_iv(X, name)
    elif not isinstance(X, np.ndarray) and not hasattr(X, "__array__"):
        raise ParameterTypeError(
            f"`{name}` must be a list of (length, n_features) arrays or a 2-d array of tokens "
            f"(dense or scipy.sparse); got {describe(X)}"
        )
    else:
        flat = as_float_array(X, name, ndim=2)
    if lengths is None:
        offsets = np.arange(flat.shape[0] + 1, dtype=np.int64)
    else:
        lengths = as_int_array(lengths, "lengths", ndim=1, low=0)
        if lengths.sum() != flat.shape[0]:
            raise ParameterError(
                f"`lengths` must sum to the number of rows of `{name}` ({flat.shape[0]}); "
                f"got {int(lengths.sum())}"
            )
        offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
    if offsets.shape[0] == 1:
        raise ParameterError(f"`{name}` must hold at least one chain; got none")
    return flat, offsets, False


def _labels_iv(y, offsets, n_states=None):
    """Flat int64 labels from a flat array or a list of per-chain arrays."""
    n_chains = offsets.shape[0] - 1
    lengths = np.diff(offsets)
    high = n_states
    if isinstance(y, (list, tuple)) and len(y) and not np.isscalar(y[0]):
        if len(y) != n_chains:
            raise ParameterError(
                f"`y` must hold one label sequence per chain of `X` ({n_chains}); got {len(y)}"
            )
        parts = []
        for c, (lab, L) in enumerate(zip(y, lengths)):
            lab = as_int_array(lab, f"y[{c}]", ndim=1, low=0, high=high)
            if lab.shape[0] != L:
                raise ParameterError(
                    f"`y[{c}]` has {lab.shape[0]} labels but chain {c} of `X` has {L} tokens"
                )
            parts.append(lab)
        return np.concatenate(parts)
    y = as_int_array(y, "y", ndim=1, low=0, high=high)
    if y.shape[0] != offsets[-1]:
        if y.shape[0] == n_chains:
            raise ParameterError(
                f"`y` must hold one label per token ({offsets[-1]}) or one label sequence per "
                f"chain; got a flat array of {y.shape[0]} labels"
            )
        raise ParameterError(
            f"`y` must hold one label per token of `X` ({offsets[-1]}); got {y.shape[0]}"
        )
    return y


def _kernel_tokens(Z):
    """``(X, data, indices, indptr, sparse)``: token features as the max-margin kernels take them."""
    if issparse(Z):
        return (
            np.empty((0, Z.shape[1])), np.ascontiguousarray(Z.data, dtype=np.float64),
            np.ascontiguousarray(Z.indices, dtype=np.int64),
            np.ascontiguousarray(Z.indptr, dtype=np.int64), True,
        )
    empty = np.empty(0, dtype=np.int64)
    return np.ascontiguousarray(Z), np.empty(0), empty, np.zeros(1, dtype=np.int64), False


def _split(values, offsets):
    return [values[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


# --------------------------------------------------------------------------- objectives


class _Layout:
    """Size and views of the flat parameters ``[coef, intercept, transitions, start, end]``."""

    def __init__(self, n_states, n_features):
        self.K, self.d = n_states, n_features
        self.size = n_states * n_features + n_states + n_states * n_states + 2 * n_states

    def unpack(self, theta):
        return _chain_kernels.unpack(theta, self.K, self.d)


class _Likelihood:
    """Negative conditional log-likelihood per chain plus ``alpha / 2 ||theta||^2``.

    ``__call__(theta)`` returns ``(objective, gradient)``. The gradient of each chain's
    ``log Z - score(y)`` is the expected minus the empirical sufficient statistics: token
    marginals minus one-hot labels (times the features, summed), summed edge marginals
    minus transition counts, first/last-token marginals minus first/last labels.
    """

    def __init__(self, Z, offsets, labels, n_states, alpha, start_end):
        self.Z, self.offsets, self.labels = Z, offsets, labels
        # sparse features: products with Z^T go through its CSR transpose (made once), so
        # nothing of size n_tokens x n_features is ever dense
        self.Zt = Z.T.tocsr() if issparse(Z) else None
        self.layout = _Layout(n_states, Z.shape[1])
        self.alpha, self.start_end = alpha, start_end
        K = n_states
        n_tokens = Z.shape[0]
        self.n_chains = offsets.shape[0] - 1
        lengths = np.diff(offsets)
        nonempty = lengths > 0
        self.first = offsets[:-1][nonempty]
        self.last = offsets[1:][nonempty] - 1
        Y = np.zeros((n_tokens, K))
        Y[np.arange(n_tokens), labels] = 1.0
        self.Y = Y
        emp = np.zeros(self.layout.size)
        eW, eb, eT, es, ee = self.layout.unpack(emp)
        eW[:] = Y.T @ Z if self.Zt is None else (self.Zt @ Y).T
        eb[:] = Y.sum(axis=0)
        has_next = np.ones(n_tokens, dtype=bool)
        has_next[offsets[1:][nonempty] - 1] = False
        idx = np.flatnonzero(has_next)
        np.add.at(eT, (labels[idx], labels[idx + 1]), 1.0)
        if start_end:
            es[:] = Y[self.first].sum(axis=0)
            ee[:] = Y[self.last].sum(axis=0)
        self.empirical = emp
        self.chunk = _CHUNK
        self.n_chunks = -(-self.n_chains // self.chunk)
        self.parallel = self.n_chains >= _PARALLEL_MIN_CHAINS
        self.marg = np.empty((n_tokens, K))
        self.edge_sum = np.empty((self.n_chunks, K, K))
        self.logz = np.empty(self.n_chains)
        self.status = np.empty(self.n_chains, dtype=np.int64)

    def unary(self, theta):
        W, b, _, s, e = self.layout.unpack(theta)
        U = np.asarray(self.Z @ W.T)
        U += b
        if self.start_end:
            U[self.first] += s
            U[self.last] += e
        return U

    def __call__(self, theta):
        theta = np.ascontiguousarray(theta)
        _, _, T, _, _ = self.layout.unpack(theta)
        U = self.unary(theta)
        pw = np.ascontiguousarray(T)[None]
        E, ET, colmax, spread = scaled_exponentials(pw, padded_width(pw.shape[1]))
        run = (
            _chain_kernels.expected_statistics if self.parallel
            else _chain_kernels.expected_statistics_serial
        )
        run(
            U, self.offsets, pw, E, ET, colmax, spread, self.chunk,
            self.marg, self.edge_sum, self.logz, self.status,
        )
        gold = np.einsum("ij,ij->", U, self.Y) + np.dot(
            T.ravel(), self.layout.unpack(self.empirical)[2].ravel()
        )
        n = self.n_chains
        obj = (self.logz.sum() - gold) / n + 0.5 * self.alpha * np.dot(theta, theta)
        grad = np.empty_like(theta)
        gW, gb, gT, gs, ge = self.layout.unpack(grad)
        if self.Zt is None:
            np.dot(self.marg.T, self.Z, out=gW)
        else:
            gW[:] = (self.Zt @ self.marg).T
        gb[:] = self.marg.sum(axis=0)
        gT[:] = self.edge_sum.sum(axis=0)
        if self.start_end:
            gs[:] = self.marg[self.first].sum(axis=0)
            ge[:] = self.marg[self.last].sum(axis=0)
        else:
            gs[:] = 0.0
            ge[:] = 0.0
        grad -= self.empirical
        grad /= n
        grad += self.alpha * theta
        return obj, grad


def _structured_hinge(layout, theta, Z, offsets, labels, start_end):
    """``(1 / n) sum_i max_y [Hamming(y_i, y) + score(y) - score(y_i)]`` at ``theta``."""
    W, b, T, s, e = layout.unpack(theta)
    U = np.asarray(Z @ W.T) + b
    lengths = np.diff(offsets)
    p = ChainPotentials.from_scores(
        U, lengths, T, s if start_end else None, e if start_end else None
    )
    aug = p.unary + 1.0
    aug[np.arange(aug.shape[0]), labels] -= 1.0
    best = viterbi(ChainPotentials._trusted(aug, p.offsets, p.pairwise, p.edge_offsets)).map_score
    return float(np.mean(best - score_labelings(p, labels)))


# --------------------------------------------------------------------------- estimator


@io.register(format_version=1)
class ChainCRF(io.SaveLoadMixin, ParamsMixin):
    r"""Linear-chain CRF with linear unary scores, trained by likelihood or max-margin.

    The score of a labeling ``y`` of a chain ``x_1..x_L`` is

    .. math::

        s(x, y) = \sum_t \big(\langle w_{y_t}, f(x_t)\rangle + b_{y_t}\big)
                  + \sum_t T_{y_t, y_{t+1}} + \sigma_{y_1} + \epsilon_{y_L}

    with ``f`` the identity or a fixed feature map (``features``), and
    ``p(y | x) = exp(s(x, y)) / Z(x)``.

    Parameters
    ----------
    method : {'likelihood', 'max_margin'}, default='likelihood'
        ``'likelihood'``: minimise ``(1/n) sum_i -log p(y_i | x_i) + alpha/2 ||theta||^2``
        with L-BFGS (scipy) and the exact gradient from a batched Numba forward-backward.
        ``'max_margin'``: a structured SVM with Hamming loss, ``alpha/2 ||theta||^2 +
        (1/n) sum_i max_y [Hamming(y_i, y) + s(x_i, y) - s(x_i, y_i)]``, solved by
        block-coordinate Frank-Wolfe with loss-augmented Viterbi as the oracle.
        ``theta`` is every parameter (weights, intercepts, transitions, start/end).
    alpha : float, default=1e-3
        L2 regularisation strength (> 0).
    n_states : int, default=None
        Number of labels; labels must be in ``[0, n_states)``. ``None``: ``1 + max(y)``.
    start_end : bool, default=True
        Learn start and end scores (added to the first and last token of every chain).
    features : ImageFeatures, default=None
        A feature map fitted on the training tokens and applied to every input (its
        learned parameters are saved with the model). ``None``: the input features are
        used as they are.
    averaging : bool, default=True
        ``max_margin`` only: return the weighted average of the Frank-Wolfe iterates
        (Lacoste-Julien et al. 2013, sec. 4), which generalises better early on.
    max_iter : int, default=None
        L-BFGS iterations (``likelihood``; ``None`` means 1000) or passes over the data
        (``max_margin``; ``None`` means 500). A :class:`ConvergenceWarning` is raised when it is
        reached before ``tol``.
    tol : float, default=None
        ``likelihood``: stop when the largest gradient entry is below ``tol`` (``None``
        means 1e-5; L-BFGS also stops when the objective stops decreasing).
        ``max_margin``: stop when the duality gap (primal minus dual objective, a
        certificate of suboptimality computed exactly every 5 passes and at the last one)
        is below ``tol`` times the primal objective (``None`` means 1e-2).
    random_state : int, numpy Generator or None, default=None
        Order in which ``max_margin`` visits the chains (likelihood training is
        deterministic).
    verbose : int, default=0
        Print progress every ``verbose`` iterations/passes (0: silent).

    Attributes
    ----------
    coef_ : ndarray of shape (n_states, n_features_out)
        Unary weights (``n_features_out`` is the feature map's output size).
    intercept_ : ndarray of shape (n_states,)
    transitions_ : ndarray of shape (n_states, n_states)
        ``transitions_[a, b]`` scores label ``a`` followed by ``b``.
    start_, end_ : ndarray of shape (n_states,)
        Scores of the first and last label (zeros when ``start_end=False``).
    features_ : ImageFeatures or None
        The fitted feature map.
    n_states_ : int
    classes_ : ndarray of shape (n_states,)
        ``arange(n_states_)``: labels are state indices.
    n_features_in_ : int
        Number of input features per token.
    n_iter_ : int
        L-BFGS iterations or Frank-Wolfe passes run.
    converged_ : bool
        Whether ``tol`` was met.
    objective_ : float
        Final training objective (for ``max_margin``, the primal at the returned weights).
    duality_gap_ : float or None
        ``max_margin``: primal minus dual objective at the end (None for likelihood).
    fit_time_ : float
        Seconds spent in :meth:`fit` (wall clock, feature map included).

    Notes
    -----
    ``X`` is a list of ``(length_i, n_features)`` arrays, or a 2-d array of all tokens
    laid end to end together with ``lengths`` (when ``lengths`` is omitted every row is a
    chain of length one, which makes the model a multinomial logistic regression).
    Outputs follow the input layout: a list in, a list of per-chain arrays out; an array
    in, one flat array out.

    Token features may be ``scipy.sparse`` matrices (any format; used as CSR): one
    ``(length_i, n_features)`` matrix per chain, or one stacked ``(n_tokens, n_features)``
    matrix with ``lengths``. Both training methods then stay sparse (the unary scores
    and the likelihood gradient are sparse-dense products; max-margin reads only the
    stored entries of each token) and give the same model as the dense path, to rounding.
    For text, build the matrix with scikit-learn's vectorisers, e.g. token feature dicts
    -> ``DictVectorizer`` (or ``FeatureHasher`` with ``input_type='dict'``) -> ``ChainCRF``::

        from sklearn.feature_extraction import DictVectorizer

        def token_features(sent, t):
            w = sent[t]
            return {"lower=" + w.lower(): 1, "suffix3=" + w[-3:]: 1,
                    "is_title": w.istitle(), "prev=" + (sent[t - 1].lower() if t else "<s>"): 1}

        vec = DictVectorizer()
        X = vec.fit_transform([token_features(s, t) for s in sents for t in range(len(s))])
        crf = ChainCRF(alpha=1e-3).fit(X, np.concatenate(tags), [len(s) for s in sents])
        X_new = vec.transform([...])          # the same dicts for new sentences

    A feature map (``features=``) takes dense tokens only.

    References
    ----------
    J. Lafferty, A. McCallum, F. Pereira, *Conditional random fields: probabilistic models
    for segmenting and labeling sequence data*, ICML 2001.
    B. Taskar, C. Guestrin, D. Koller, *Max-margin Markov networks*, NIPS 2003.
    S. Lacoste-Julien, M. Jaggi, M. Schmidt, P. Pletscher, *Block-coordinate Frank-Wolfe
    optimization for structural SVMs*, ICML 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.crf import ChainCRF
    >>> X = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0]])]
    >>> y = [np.array([0, 1]), np.array([1])]
    >>> crf = ChainCRF(alpha=0.1).fit(X, y)
    >>> [p.tolist() for p in crf.predict(X)]
    [[0, 1], [1]]
    """

    def __init__(
        self,
        *,
        method="likelihood",
        alpha=1e-3,
        n_states=None,
        start_end=True,
        features=None,
        averaging=True,
        max_iter=None,
        tol=None,
        random_state=None,
        verbose=0,
    ):
        self.method = method
        self.alpha = alpha
        self.n_states = n_states
        self.start_end = start_end
        self.features = features
        self.averaging = averaging
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.features is None  # feature maps take dense tokens
        return tags

    # ------------------------------------------------------------------ validation

    def _params_iv(self):
        method = check_option(self.method, "method", _METHODS)
        alpha = check_float(self.alpha, "alpha", low=0.0, low_inclusive=False)
        n_states = None if self.n_states is None else check_int(self.n_states, "n_states", low=1)
        for name in ("start_end", "averaging"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterTypeError(
                    f"`{name}` must be a bool; got {describe(getattr(self, name))}"
                )
        if self.features is not None and type(self.features).__name__ not in FEATURE_MAPS:
            raise ParameterTypeError(
                f"`features` must be None or one of structcal's feature maps "
                f"{sorted(FEATURE_MAPS)}; got {describe(self.features)}"
            )
        max_iter = (
            _DEFAULT_MAX_ITER[method] if self.max_iter is None
            else check_int(self.max_iter, "max_iter", low=1)
        )
        tol = (
            _DEFAULT_TOL[method] if self.tol is None
            else check_float(self.tol, "tol", low=0.0)
        )
        verbose = check_int(self.verbose, "verbose", low=0)
        return method, alpha, n_states, max_iter, tol, verbose

    def _transform(self, flat):
        if flat.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"X has {flat.shape[1]} features, but ChainCRF is expecting "
                f"{self.n_features_in_} features as input (the number of features per token "
                "seen in fit)"
            )
        if self.features_ is None:
            return flat
        if issparse(flat):
            raise ParameterTypeError(
                f"the feature map {type(self.features_).__name__} takes dense tokens; got a "
                "sparse matrix (pass features=None to use sparse token features as they are)"
            )
        return self.features_.transform(flat)

    # ------------------------------------------------------------------ fit

    def fit(self, X, y, lengths=None):
        """Fit the model to labelled chains.

        Parameters
        ----------
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Token features: one ``(length_i, n_features)`` array per chain, or every
            token laid end to end (see Notes of the class). Dense or ``scipy.sparse``.
        y : list of array-like, or array-like of shape (n_tokens,)
            Integer labels in ``[0, n_states)``: one ``(length_i,)`` array per chain, or
            laid end to end.
        lengths : array-like of shape (n_chains,), default=None
            Chain lengths when ``X`` is a flat 2-d array.

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        method, alpha, n_states, max_iter, tol, verbose = self._params_iv()
        flat, offsets, _ = _sequences_iv(X, lengths)
        labels = _labels_iv(y, offsets, n_states)
        if flat.shape[0] == 0:
            raise ParameterError("`X` must hold at least one token; every chain is empty")
        if flat.shape[1] == 0:
            raise ParameterError(
                f"`X` has 0 feature(s) (shape=({flat.shape[0]}, 0)) while a minimum of 1 is "
                "required."
            )
        K = n_states if n_states is not None else int(labels.max()) + 1
        self.n_features_in_ = flat.shape[1]
        if self.features is not None and issparse(flat):
            raise ParameterTypeError(
                f"the feature map {type(self.features).__name__} takes dense tokens; got a "
                "sparse matrix (pass features=None to use sparse token features as they are)"
            )
        self.features_ = None if self.features is None else clone(self.features).fit(flat)
        Z = self._transform(flat)
        layout = _Layout(K, Z.shape[1])
        if method == "likelihood":
            theta, n_iter, converged, objective = self._fit_likelihood(
                Z, offsets, labels, K, alpha, max_iter, tol, verbose
            )
            gap = None
        else:
            theta, n_iter, converged, objective, gap = self._fit_max_margin(
                Z, offsets, labels, layout, alpha, max_iter, tol, verbose
            )
        W, b, T, s, e = layout.unpack(theta)
        self.coef_ = np.ascontiguousarray(W)
        self.intercept_ = b.copy()
        self.transitions_ = np.ascontiguousarray(T)
        self.start_ = s.copy() if self.start_end else np.zeros(K)
        self.end_ = e.copy() if self.start_end else np.zeros(K)
        self.n_states_ = K
        self.classes_ = np.arange(K)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.objective_ = float(objective)
        self.duality_gap_ = gap
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _fit_likelihood(self, Z, offsets, labels, K, alpha, max_iter, tol, verbose):
        problem = _Likelihood(Z, offsets, labels, K, alpha, bool(self.start_end))
        state = {"it": 0}

        def callback(intermediate_result):
            # scipy >= 1.11 passes an OptimizeResult to a parameter of this name (older
            # versions pass the parameter vector)
            state["it"] += 1
            if verbose and state["it"] % verbose == 0:
                fun = getattr(intermediate_result, "fun", None)
                if fun is None:
                    fun = problem(intermediate_result)[0]
                print(f"ChainCRF likelihood: iter {state['it']:4d}  objective {fun:.6f}")

        import scipy.optimize  # fitting only

        result = scipy.optimize.minimize(
            problem,
            np.zeros(problem.layout.size),
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-12, "maxcor": 20},
        )
        converged = bool(result.success)
        if not converged:
            reason = (
                f"reached max_iter={max_iter}" if result.nit >= max_iter
                else f"L-BFGS stopped: {result.message}"
            )
            warnings.warn(
                f"ChainCRF(method='likelihood') did not converge ({reason}); the largest "
                f"gradient entry is {np.max(np.abs(result.jac)):.3g} > tol={tol:g}. Increase "
                "max_iter or alpha.",
                exceptions.ConvergenceWarning,  # scikit-learn's class: imported when warning
                stacklevel=3,
            )
        return result.x, result.nit, converged, result.fun

    def _fit_max_margin(self, Z, offsets, labels, layout, alpha, max_iter, tol, verbose):
        start_end = bool(self.start_end)
        rng = check_random_state(self.random_state)
        K = layout.K
        n = offsets.shape[0] - 1
        n_tokens = Z.shape[0]
        lengths = np.diff(offsets)
        gram_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths * lengths, out=gram_offsets[1:])
        gram = np.empty(int(gram_offsets[-1]))
        tokens = _kernel_tokens(Z)
        _chain_kernels.chain_grams(*tokens, offsets, gram_offsets, gram)
        theta = np.zeros(layout.size)
        acc = np.zeros(layout.size)  # averaging accumulator, see averaged_iterate
        n_updates = np.zeros(1)
        # the dual starts at alpha_i = delta(y_i): marginals are the one-hot truth
        mu = np.zeros((n_tokens, K))
        mu[np.arange(n_tokens), labels] = 1.0
        edge_mu = np.zeros((n, K, K))
        chain = np.repeat(np.arange(n), lengths)
        has_next = np.ones(n_tokens, dtype=bool)
        has_next[offsets[1:][lengths > 0] - 1] = False
        idx = np.flatnonzero(has_next)
        np.add.at(edge_mu, (chain[idx], labels[idx], labels[idx + 1]), 1.0)
        loss_i = np.zeros(n)
        averaging = bool(self.averaging)
        converged = False
        primal = gap = np.inf
        for it in range(1, max_iter + 1):
            order = rng.permutation(n).astype(np.int64)
            est, _ = _chain_kernels.bcfw_pass(
                *tokens, gram_offsets, gram, offsets, labels, order, alpha * n, start_end,
                theta, mu, edge_mu, loss_i, averaging, acc, n_updates,
            )
            report = verbose and it % verbose == 0
            if not (it % _GAP_CHECK_EVERY == 0 or it == max_iter or report):
                continue
            w = _chain_kernels.averaged_iterate(theta, acc, n_updates) if averaging else theta
            dual = -0.5 * alpha * np.dot(theta, theta) + loss_i.sum()
            primal = 0.5 * alpha * np.dot(w, w) + _structured_hinge(
                layout, w, Z, offsets, labels, start_end
            )
            gap = primal - dual
            if report:
                print(
                    f"ChainCRF max_margin: pass {it:4d}  primal {primal:.6f}  dual {dual:.6f}  "
                    f"gap {gap:.3g} (running estimate {est:.3g})"
                )
            if gap <= tol * primal:
                converged = True
                break
        if not converged:
            warnings.warn(
                f"ChainCRF(method='max_margin') did not converge: reached max_iter={max_iter} "
                f"passes with duality gap {gap:.3g} > tol * primal = {tol * primal:.3g}. "
                "Increase max_iter or alpha.",
                exceptions.ConvergenceWarning,  # scikit-learn's class: imported when warning
                stacklevel=3,
            )
        w = _chain_kernels.averaged_iterate(theta, acc, n_updates) if averaging else theta
        return w.copy(), it, converged, primal, float(gap)

    # ------------------------------------------------------------------ prediction

    def _potentials_flat(self, X, lengths):
        check_fitted(self, "coef_")
        flat, offsets, as_list = _sequences_iv(X, lengths)
        U = self._unary(flat)
        p = ChainPotentials.from_scores(
            U, np.diff(offsets), self.transitions_,
            self.start_ if self.start_end else None, self.end_ if self.start_end else None,
        )
        return p, as_list

    def _unary(self, flat):
        """Unary scores ``features(flat) @ coef_.T + intercept_``.

        A dense feature map is applied a block of tokens at a time: its output for every
        token at once would be written to memory and read back (for 37,000 OCR letters,
        800 features each: 240 MB), while a block stays in the cache.
        """
        if self.features_ is None or issparse(flat) or flat.shape[0] <= _UNARY_BLOCK_ROWS:
            U = np.asarray(self._transform(flat) @ self.coef_.T)
        else:
            U = np.empty((flat.shape[0], self.coef_.shape[0]))
            for a in range(0, flat.shape[0], _UNARY_BLOCK_ROWS):
                b = a + _UNARY_BLOCK_ROWS
                np.matmul(self._transform(flat[a:b]), self.coef_.T, out=U[a:b])
        U += self.intercept_
        return U

    def potentials(self, X, lengths=None) -> ChainPotentials:
        """Chain potentials of the given chains (the input to every inference routine).

        Parameters
        ----------
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Raw token features, as in :meth:`fit` (the fitted feature map is applied
            here).
        lengths : array-like of shape (n_chains,), default=None
            Chain lengths when ``X`` is a flat 2-d array.

        Returns
        -------
        ChainPotentials
            Unary ``(n_tokens, n_states)`` with start/end scores folded into the first and
            last token of each chain, and the shared ``transitions_``.
        """
        return self._potentials_flat(X, lengths)[0]

    def predict(self, X, lengths=None):
        """MAP (Viterbi) labeling of each chain.

        Parameters
        ----------
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Token features, as in :meth:`fit`.
        lengths : array-like of shape (n_chains,), default=None
            Chain lengths when ``X`` is a flat 2-d array.

        Returns
        -------
        list of ndarray, or ndarray of shape (n_tokens,)
            Same layout as ``X`` (a list of ``(length_i,)`` arrays for a list).
        """
        p, as_list = self._potentials_flat(X, lengths)
        labels = viterbi(p).map_labels
        return _split(labels, p.offsets) if as_list else labels

    def predict_marginals(self, X, lengths=None):
        """Marginal probabilities ``p(y_t = k | x)`` of every token.

        Parameters
        ----------
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Token features, as in :meth:`fit`.
        lengths : array-like of shape (n_chains,), default=None
            Chain lengths when ``X`` is a flat 2-d array.

        Returns
        -------
        list of ndarray, or ndarray of shape (n_tokens, n_states)
            Rows sum to one. Same layout as ``X`` (a list of ``(length_i, n_states)``
            arrays for a list).
        """
        p, as_list = self._potentials_flat(X, lengths)
        marg = infer(p, map=False, marginals=True).marginals
        return _split(marg, p.offsets) if as_list else marg

    def score(self, X, y, lengths=None):
        """Per-token accuracy of :meth:`predict`.

        Parameters
        ----------
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Token features, as in :meth:`fit`.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels, as in :meth:`fit`.
        lengths : array-like of shape (n_chains,), default=None
            Chain lengths when ``X`` is a flat 2-d array.

        Returns
        -------
        float
        """
        p, _ = self._potentials_flat(X, lengths)
        labels = _labels_iv(y, p.offsets, self.n_states_)
        if labels.size == 0:
            raise ParameterError("`X` must hold at least one token to score; got none")
        return float(np.mean(viterbi(p).map_labels == labels))

    # ------------------------------------------------------------------ persistence

    def _to_state(self):
        check_fitted(self, "coef_")
        params = self.get_params(deep=False)
        arrays = {
            "coef": self.coef_,
            "intercept": self.intercept_,
            "transitions": self.transitions_,
            "start": self.start_,
            "end": self.end_,
        }
        if self.features is not None:
            params["features"] = {
                "class": type(self.features).__name__,
                "params": _unfitted_params(self.features),
            }
        if self.random_state is not None and not isinstance(self.random_state, int):
            params["random_state"] = None  # a Generator cannot be stored
        fitted = {
            "n_states_": self.n_states_,
            "n_features_in_": self.n_features_in_,
            "n_iter_": self.n_iter_,
            "converged_": self.converged_,
            "objective_": self.objective_,
            "duality_gap_": self.duality_gap_,
            "fit_time_": self.fit_time_,
        }
        if self.features_ is not None:
            fparams, farrays = self.features_._to_state()
            fitted["features_"] = {"class": type(self.features_).__name__, "params": fparams}
            arrays.update({f"features.{k}": v for k, v in farrays.items()})
        params = {"params": params, "fitted": fitted}
        return params, arrays

    @classmethod
    def _from_state(cls, state, arrays):
        try:
            params = dict(state["params"])
            fitted = state["fitted"]
            feat = params.get("features")
            if feat is not None:
                params["features"] = _feature_map_from_params(feat)
            self = cls(**params)
            K = int(fitted["n_states_"])
            self.n_states_ = K
            self.classes_ = np.arange(K)
            self.n_features_in_ = int(fitted["n_features_in_"])
            self.n_iter_ = int(fitted["n_iter_"])
            self.converged_ = bool(fitted["converged_"])
            self.objective_ = float(fitted["objective_"])
            gap = fitted["duality_gap_"]
            self.duality_gap_ = None if gap is None else float(gap)
            self.fit_time_ = float(fitted["fit_time_"])
            fstate = fitted.get("features_")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ParameterError(f"malformed ChainCRF manifest: {exc!r}") from None
        if fstate is None:
            self.features_ = None
            n_out = self.n_features_in_
        else:
            if fstate.get("class") not in FEATURE_MAPS:
                raise ParameterError(
                    f"unknown feature map {fstate.get('class')!r} in the manifest"
                )
            prefix = "features."
            farrays = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            self.features_ = FEATURE_MAPS[fstate["class"]]._from_state(fstate["params"], farrays)
            if self.features_.n_features_in_ != self.n_features_in_:
                raise ParameterError(
                    f"the saved feature map takes {self.features_.n_features_in_} features but "
                    f"the model was fitted on {self.n_features_in_}"
                )
            n_out = self.features_.n_features_out_
        shapes = {
            "coef": (K, n_out),
            "intercept": (K,),
            "transitions": (K, K),
            "start": (K,),
            "end": (K,),
        }
        for key, shape in shapes.items():
            arr = arrays.get(key)
            if arr is None or arr.shape != shape or not np.issubdtype(arr.dtype, np.floating):
                raise ParameterError(
                    f"saved array {key!r} must be a float array of shape {shape}; got "
                    f"{None if arr is None else describe(arr)}"
                )
            if not np.isfinite(arr).all():
                raise ParameterError(f"saved array {key!r} contains NaN or inf")
        self.coef_ = np.ascontiguousarray(arrays["coef"], dtype=np.float64)
        self.intercept_ = np.asarray(arrays["intercept"], dtype=np.float64)
        self.transitions_ = np.ascontiguousarray(arrays["transitions"], dtype=np.float64)
        self.start_ = np.asarray(arrays["start"], dtype=np.float64)
        self.end_ = np.asarray(arrays["end"], dtype=np.float64)
        return self


def _unfitted_params(feature_map):
    params = feature_map.get_params()
    if isinstance(params.get("image_shape"), tuple):
        params["image_shape"] = list(params["image_shape"])
    return params


def _feature_map_from_params(spec):
    if not isinstance(spec, dict) or spec.get("class") not in FEATURE_MAPS:
        raise ParameterError(f"unknown feature map in the manifest: {spec!r}")
    params = dict(spec.get("params", {}))
    if isinstance(params.get("image_shape"), list):
        params["image_shape"] = tuple(params["image_shape"])
    return FEATURE_MAPS[spec["class"]](**params)
