"""Fixed, fast feature maps for the tokens of a chain CRF.

A linear chain CRF on raw pixels scores each letter with one template per label, which
cannot express "these two pixels are on *together*". :class:`ImageFeatures` adds two
cheap kinds of nonlinear features to the pixels of a small image:

- products of neighbouring pixels (horizontal, vertical and both diagonals): for binary
  images, "this stroke segment is present";
- a quadratic expansion of the leading principal components (a low-rank polynomial-kernel
  approximation): the linear scores plus all pairwise products of the top ``k`` whitened
  principal-component scores.

Its learned parameters (the PCA mean and projection) are saved with the model, so
``ChainCRF.potentials(raw_pixels)`` reproduces the training-time features.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import io
from .._estimator import ParamsMixin, check_fitted
from .._validation import as_float_array, check_int, describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["ImageFeatures"]


def _image_shape_iv(image_shape):
    if image_shape is None:
        return None
    if (
        not isinstance(image_shape, (tuple, list))
        or len(image_shape) != 2
        or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in image_shape
        )
        or min(image_shape) < 1
    ):
        raise ParameterError(
            f"`image_shape` must be a pair of positive integers (height, width); got "
            f"{describe(image_shape)}"
        )
    return int(image_shape[0]), int(image_shape[1])


def _tokens_iv(X):
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise ParameterTypeError(
            f"sparse input is not supported: pass `X` as a dense array (e.g. `X.toarray()`); "
            f"got {type(X).__name__}"
        )
    X = as_float_array(X, "X", ndim=2)
    if X.shape[1] == 0:
        raise ParameterError(
            f"`X` has 0 feature(s) (shape=({X.shape[0]}, 0)) while a minimum of 1 is required."
        )
    return X


def _neighbour_products(X, shape, out):
    """Write the products of horizontally, vertically and diagonally adjacent pixels
    (row-major) into the first columns of ``out``; return how many."""
    h, w = shape
    n = X.shape[0]
    im = X.reshape(n, h, w)
    col = 0
    for a, b in (
        (im[:, :, :-1], im[:, :, 1:]),
        (im[:, :-1, :], im[:, 1:, :]),
        (im[:, :-1, :-1], im[:, 1:, 1:]),
        (im[:, :-1, 1:], im[:, 1:, :-1]),
    ):
        width = a.shape[1] * a.shape[2]
        block = out[:, col:col + width].view()
        block.shape = a.shape  # a view of `out` (setting the shape never copies)
        np.multiply(a, b, out=block)
        col += width
    return col


@io.register(format_version=1)
class ImageFeatures(ParamsMixin):
    """Pixels, neighbouring-pixel products and quadratic principal-component features.

    Maps each token (a flattened ``height x width`` image) to the concatenation of

    1. the pixels themselves (``pixels=True``);
    2. the products of every pair of horizontally, vertically and diagonally adjacent
       pixels (``neighbours=True``; ``h(w-1) + (h-1)w + 2(h-1)(w-1)`` features);
    3. the ``k = n_components`` whitened principal-component scores ``q`` of the token
       and the ``k(k+1)/2`` products ``q_i q_j / sqrt(k)``, ``i <= j``
       (``n_components > 0``).

    For 16 x 8 OCR letters with the defaults that is 128 + 442 + 20 + 210 = 800 features.
    All three parts are fixed given the training tokens (the principal components are
    the only thing learned), so they are cheap to compute and to save.

    Parameters
    ----------
    image_shape : tuple of (int, int) or None, default=(16, 8)
        ``(height, width)`` of each token's image, pixels in row-major order. Needed only
        for ``neighbours=True``.
    pixels : bool, default=True
        Include the raw input features.
    neighbours : bool, default=True
        Include products of adjacent pixels.
    n_components : int, default=20
        Number of principal components whose quadratic expansion is included (0 for
        none).

    Attributes
    ----------
    n_features_in_ : int
        Number of input features (``height * width``).
    n_features_out_ : int
        Number of output features.
    mean_ : ndarray of shape ``(n_features_in_,)``
        Per-feature mean of the training tokens.
    projection_ : ndarray of shape ``(n_features_in_, n_components)``
        Maps centred tokens to whitened principal-component scores (unit variance on the
        training tokens); sign fixed so each component's largest entry is positive.

    Examples
    --------
    >>> import numpy as np
    >>> from structcal.crf import ImageFeatures
    >>> X = np.random.default_rng(0).integers(0, 2, size=(50, 6)).astype(float)
    >>> f = ImageFeatures(image_shape=(3, 2), n_components=2).fit(X)
    >>> f.transform(X).shape  # 6 pixels + 11 neighbour pairs + 2 + 3
    (50, 22)
    """

    def __init__(self, image_shape=(16, 8), *, pixels=True, neighbours=True, n_components=20):
        self.image_shape = image_shape
        self.pixels = pixels
        self.neighbours = neighbours
        self.n_components = n_components

    def _check_params(self, n_features):
        shape = _image_shape_iv(self.image_shape)
        for name in ("pixels", "neighbours"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterTypeError(
                    f"`{name}` must be a bool; got {describe(getattr(self, name))}"
                )
        k = check_int(self.n_components, "n_components", low=0)
        if self.neighbours:
            if shape is None:
                raise ParameterError("`image_shape` is needed when `neighbours=True`; got None")
            if shape[0] * shape[1] != n_features:
                raise ParameterError(
                    f"`image_shape`={shape} has {shape[0] * shape[1]} pixels but the tokens "
                    f"have {n_features} features"
                )
        if not (self.pixels or self.neighbours or k):
            raise ParameterError(
                "ImageFeatures produces no features: set `pixels` or `neighbours`, or "
                "`n_components` > 0"
            )
        return shape, k

    def fit(self, X, y=None):
        """Learn the principal components of the tokens ``X``.

        Parameters
        ----------
        X : array-like of shape (n_tokens, n_features)
            Tokens, one flattened image per row.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        X = _tokens_iv(X)
        if X.shape[0] == 0:
            raise ParameterError(f"`X` must hold at least one token; got shape {X.shape}")
        shape, k = self._check_params(X.shape[1])
        if k > min(X.shape):
            raise ParameterError(
                f"`n_components` must be <= min(n_tokens, n_features) = {min(X.shape)}; got {k}"
            )
        self.n_features_in_ = X.shape[1]
        self.mean_ = X.mean(axis=0)
        if k:
            _, s, vt = np.linalg.svd(X - self.mean_, full_matrices=False)
            vt = vt[:k]
            signs = np.sign(vt[np.arange(k), np.argmax(np.abs(vt), axis=1)])
            scale = np.where(s[:k] > 0, s[:k], 1.0) / np.sqrt(X.shape[0])
            self.projection_ = np.ascontiguousarray((vt * signs[:, None]).T / scale)
        else:
            self.projection_ = np.zeros((X.shape[1], 0))
        self.n_features_out_ = self._n_out(shape, k)
        return self

    def _n_out(self, shape, k):
        n = self.n_features_in_ if self.pixels else 0
        if self.neighbours:
            h, w = shape
            n += h * (w - 1) + (h - 1) * w + 2 * (h - 1) * (w - 1)
        return n + (k + k * (k + 1) // 2 if k else 0)

    def fit_transform(self, X, y=None):
        """:meth:`fit` to ``X``, then :meth:`transform` it."""
        return self.fit(X, y).transform(X)

    def __sklearn_tags__(self):
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        tags.transformer_tags = TransformerTags()
        return tags

    def transform(self, X):
        """Map tokens to features.

        Parameters
        ----------
        X : array-like of shape ``(n_tokens, n_features_in_)``

        Returns
        -------
        ndarray of shape ``(n_tokens, n_features_out_)``
        """
        check_fitted(self, "projection_")
        X = _tokens_iv(X)
        if X.shape[1] != self.n_features_in_:
            raise ParameterError(
                f"X has {X.shape[1]} features, but ImageFeatures is expecting "
                f"{self.n_features_in_} features as input (as in fit)"
            )
        shape = _image_shape_iv(self.image_shape)
        out = np.empty((X.shape[0], self.n_features_out_))
        col = 0
        if self.pixels:
            out[:, :X.shape[1]] = X
            col = X.shape[1]
        if self.neighbours:
            col += _neighbour_products(X, shape, out[:, col:])
        k = self.projection_.shape[1]
        if k:
            q = out[:, col:col + k]
            q[:] = (X - self.mean_) @ self.projection_
            iu, ju = np.triu_indices(k)
            products = np.multiply(q[:, iu], q[:, ju], out=out[:, col + k:])
            products /= np.sqrt(k)
        return out

    # ------------------------------------------------------------------ persistence

    def _to_state(self):
        check_fitted(self, "projection_")
        params = self.get_params()
        if params["image_shape"] is not None:
            params["image_shape"] = list(params["image_shape"])
        return params, {"mean": self.mean_, "projection": self.projection_}

    @classmethod
    def _from_state(cls, params, arrays):
        params = dict(params)
        if params.get("image_shape") is not None:
            params["image_shape"] = tuple(params["image_shape"])
        self = cls(**params)
        self.mean_ = np.ascontiguousarray(arrays["mean"], dtype=np.float64)
        self.projection_ = np.ascontiguousarray(arrays["projection"], dtype=np.float64)
        self.n_features_in_ = self.mean_.shape[0]
        shape, k = self._check_params(self.n_features_in_)
        if self.projection_.shape != (self.n_features_in_, k):
            raise ParameterError(
                f"saved `projection` must have shape ({self.n_features_in_}, {k}); got "
                f"{self.projection_.shape}"
            )
        self.n_features_out_ = self._n_out(shape, k)
        return self


#: Feature maps a saved ChainCRF may name (an allow-list: no imports driven by file content).
FEATURE_MAPS = {"ImageFeatures": ImageFeatures}
