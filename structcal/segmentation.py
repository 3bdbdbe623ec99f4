"""Pixel-grid segmentation CRFs: a pixel classifier for the unaries, contrast-sensitive Potts.

:class:`PixelCRFSegmenter` is a small, complete image-segmentation model built from
well-kept parts: local image features from :mod:`scipy.ndimage` (Gaussian-smoothed
intensity, gradient magnitude and Laplacian of Gaussian at several scales), a
scikit-learn logistic regression on them for the unary potentials (its log-probabilities),
and a grid CRF (:meth:`~structcal.potentials.GraphPotentials.from_grid`) with
contrast-sensitive Potts weights ``w_e = a + b exp(-beta (I_s - I_t)^2)``, ``beta = 1 / (2
mean (I_s - I_t)^2)`` per image (Boykov & Jolly 2001), ``a, b`` chosen on a validation
set by :meth:`PixelCRFSegmenter.tune`. :func:`segmentation_scores` gives pixel accuracy,
Dice and object F1 (objects matched at IoU >= 0.5).
"""

from __future__ import annotations

import numpy as np

from ._estimator import ParamsMixin
from ._validation import as_float_array, check_float, check_int, describe
from .exceptions import ParameterError, ParameterTypeError
from .potentials import GraphPotentials, grid_edges
from .potentials.grid import check_connectivity

__all__ = ["pixel_features", "contrast_weights", "PixelCRFSegmenter", "segmentation_scores"]


def _images_iv(images, name="images") -> list:
    """Return a list of 2-d float images (a 3-d array is a batch of same-size images)."""
    if isinstance(images, (list, tuple)):
        out = [as_float_array(im, f"{name}[{g}]", ndim=2) for g, im in enumerate(images)]
    else:
        arr = as_float_array(images, name)
        if arr.ndim == 2:
            out = [arr]
        elif arr.ndim == 3:
            out = list(arr)
        else:
            raise ParameterError(
                f"`{name}` must be an image (height, width), a batch (n_images, height, width) "
                f"or a list of images; got shape {arr.shape}"
            )
    return out


def _masks_iv(masks, images, name="masks") -> list:
    """0/1 masks as int64 arrays, one per image of ``images`` and of its shape (``images``
    None: the masks alone, each of any shape)."""
    if isinstance(masks, (list, tuple)) or np.ndim(masks) in (2, 3):
        ms = list(masks) if isinstance(masks, (list, tuple)) or np.ndim(masks) == 3 else [masks]
    else:
        raise ParameterTypeError(f"`{name}` must be 0/1 masks (a 2-d array, a 3-d array or a list "
                                 f"of 2-d arrays); got {describe(masks)}")
    if images is None:
        images = [np.asarray(m) for m in ms]
    if len(ms) != len(images):
        raise ParameterError(
            f"`{name}` must hold one mask per image ({len(images)}); got {len(ms)}"
        )
    out = []
    for g, (m, im) in enumerate(zip(ms, images)):
        m = np.asarray(m)
        if m.shape != im.shape:
            raise ParameterError(
                f"`{name}[{g}]` must have the shape of its image {im.shape}; got {m.shape}"
            )
        if not (np.issubdtype(m.dtype, np.integer) or m.dtype == np.bool_):
            raise ParameterTypeError(f"`{name}[{g}]` must hold integer labels; got {m.dtype}")
        if m.size and (m.min() < 0 or m.max() > 1):
            raise ParameterError(f"`{name}[{g}]` must hold 0 (background) and 1 (object) only")
        out.append(m.astype(np.int64))
    return out


def pixel_features(images, scales=(1.0, 2.0, 4.0)) -> np.ndarray:
    """Local features of every pixel: intensity and its smoothed versions, edges, blobs.

    Per scale ``s``: ``gaussian_filter``, ``gaussian_gradient_magnitude`` and
    ``gaussian_laplace`` of the image (``scipy.ndimage``, reflecting borders), after the raw
    intensity. Images are used as given (scale them consistently, e.g. ``uint8 / 255``).

    Parameters
    ----------
    images : array-like of shape (height, width) or (n_images, height, width), or list of 2-d array-like
    scales : sequence of float, default=(1.0, 2.0, 4.0)
        Gaussian standard deviations in pixels.

    Returns
    -------
    ndarray of shape (n_pixels, 1 + 3 * len(scales))
        Pixels of the images laid end to end (row-major).
    """
    from scipy import ndimage as ndi

    imgs = _images_iv(images)
    scales = [check_float(s, "scales", low=0.0, low_inclusive=False) for s in scales]
    n = sum(im.size for im in imgs)
    out = np.empty((n, 1 + 3 * len(scales)))
    row = 0
    for im in imgs:
        block = out[row : row + im.size]
        block[:, 0] = im.ravel()
        for k, s in enumerate(scales):
            block[:, 1 + 3 * k] = ndi.gaussian_filter(im, s).ravel()
            block[:, 2 + 3 * k] = ndi.gaussian_gradient_magnitude(im, s).ravel()
            block[:, 3 + 3 * k] = ndi.gaussian_laplace(im, s).ravel()
        row += im.size
    return out


def contrast_weights(images, connectivity: int = 4) -> list:
    """``exp(-beta (I_s - I_t)^2)`` for every grid edge of every image (in ``grid_edges`` order).

    ``beta = 1 / (2 mean (I_s - I_t)^2)`` over the image's edges (1 where the image is
    flat), so the weight is near 1 inside uniform regions and small across edges.

    Returns
    -------
    list of ndarray of shape (n_edges_g,)
    """
    connectivity = check_connectivity(connectivity)
    out = []
    for im in _images_iv(images):
        e, _ = grid_edges(*im.shape, connectivity) if im.size else (np.zeros((0, 2), np.int64), 0)
        flat = im.ravel()
        d2 = (flat[e[:, 0]] - flat[e[:, 1]]) ** 2
        mean = d2.mean() if d2.size else 0.0
        out.append(np.exp(-d2 / (2.0 * mean)) if mean > 0 else np.ones(d2.shape[0]))
    return out


class PixelCRFSegmenter(ParamsMixin):
    """Binary pixel segmentation: logistic-regression unaries + contrast-sensitive Potts grid CRF.

    Parameters
    ----------
    scales : sequence of float, default=(1.0, 2.0, 4.0)
        Gaussian scales of :func:`pixel_features`.
    C : float, default=1.0
        Inverse L2 strength of the logistic regression.
    potts : float, default=0.5
        Constant part ``a`` of every Potts weight.
    contrast : float, default=1.0
        Contrast-sensitive part ``b`` of every Potts weight.
    connectivity : {4, 8}, default=4
    max_pixels : int, default=300000
        Pixels drawn at random (``random_state``) from the training images to fit the
        logistic regression.
    random_state : int or None, default=0

    Attributes
    ----------
    feature_mean_, feature_scale_ : ndarray of shape (n_features,)
        Standardisation of the pixel features.
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        The logistic regression on standardised features (log-odds of "object").
    """

    def __init__(self, *, scales=(1.0, 2.0, 4.0), C=1.0, potts=0.5, contrast=1.0,
                 connectivity=4, max_pixels=300000, random_state=0):
        self.scales = scales
        self.C = C
        self.potts = potts
        self.contrast = contrast
        self.connectivity = connectivity
        self.max_pixels = max_pixels
        self.random_state = random_state

    def fit(self, images, masks):
        """Fit the pixel classifier on images and their 0/1 masks."""
        from sklearn.linear_model import LogisticRegression

        imgs = _images_iv(images)
        ys = _masks_iv(masks, imgs)
        X = pixel_features(imgs, self.scales)
        y = np.concatenate([m.ravel() for m in ys])
        if np.unique(y).size < 2:
            raise ParameterError("`masks` must contain both background and object pixels")
        n = check_int(self.max_pixels, "max_pixels", low=2)
        rng = np.random.default_rng(self.random_state)
        rows = rng.choice(y.shape[0], size=n, replace=False) if y.shape[0] > n else slice(None)
        self.feature_mean_ = X[rows].mean(axis=0)
        self.feature_scale_ = X[rows].std(axis=0)
        self.feature_scale_[self.feature_scale_ == 0] = 1.0
        Z = (X[rows] - self.feature_mean_) / self.feature_scale_
        lr = LogisticRegression(C=check_float(self.C, "C", low=0.0, low_inclusive=False),
                                max_iter=1000).fit(Z, y[rows])
        self.coef_ = lr.coef_[0].copy()
        self.intercept_ = float(lr.intercept_[0])
        return self

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            from .exceptions import NotFittedError  # scikit-learn's class: imported when raised

            raise NotFittedError("this PixelCRFSegmenter is not fitted yet: call fit first")

    def unary(self, images) -> list:
        """Log-probabilities of background and object for every pixel: list of (H, W, 2)."""
        self._check_fitted()
        imgs = _images_iv(images)
        X = pixel_features(imgs, self.scales)
        z = (X - self.feature_mean_) / self.feature_scale_ @ self.coef_ + self.intercept_
        # log sigmoid, stably: log p(1) = -log(1 + e^-z), log p(0) = -log(1 + e^z)
        logp = np.stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)], axis=1)
        out, row = [], 0
        for im in imgs:
            out.append(logp[row : row + im.size].reshape(*im.shape, 2))
            row += im.size
        return out

    def potentials(self, images, *, potts=None, contrast=None, unary=None) -> GraphPotentials:
        """Return the grid CRFs of the images (``potts``/``contrast`` override the parameters)."""
        imgs = _images_iv(images)
        a = self.potts if potts is None else potts
        b = self.contrast if contrast is None else contrast
        weights = [a + b * w for w in contrast_weights(imgs, self.connectivity)]
        return GraphPotentials.from_grid(
            self.unary(imgs) if unary is None else unary, potts=weights,
            connectivity=self.connectivity,
        )

    def tune(self, images, masks, *, potts_grid=(0.0, 0.25, 0.5, 1.0),
             contrast_grid=(0.0, 0.5, 1.0, 2.0)):
        """Choose ``potts`` and ``contrast`` maximising the Dice of the mean-field argmax.

        Sets the two parameters and records every candidate in ``tuning_``
        (rows ``(potts, contrast, dice)``).
        """
        from .inference.graph import mean_field

        imgs = _images_iv(images)
        ys = np.concatenate([m.ravel() for m in _masks_iv(masks, imgs)])
        unary = self.unary(imgs)
        rows = []
        for a in potts_grid:
            for b in contrast_grid:
                p = self.potentials(imgs, potts=a, contrast=b, unary=unary)
                lab = mean_field(p, tol=1e-4, max_iter=50, warn=False).marginals.argmax(axis=1)
                rows.append((float(a), float(b), _dice(lab, ys)))
        self.tuning_ = np.asarray(rows)
        best = int(np.argmax(self.tuning_[:, 2]))
        self.potts, self.contrast = float(self.tuning_[best, 0]), float(self.tuning_[best, 1])
        return self


def _dice(pred, gold):
    inter = np.sum((pred == 1) & (gold == 1))
    total = np.sum(pred == 1) + np.sum(gold == 1)
    return float(2 * inter / total) if total else 1.0


def segmentation_scores(
    labels, masks, *, connectivity: int = 4, iou_threshold: float = 0.5
) -> dict:
    """Pixel accuracy, Dice and object precision / recall / F1 of binary segmentations.

    Objects are the connected components of the object class (``connectivity``-connected),
    matched one to one at IoU >= ``iou_threshold`` (>= 0.5 makes matches unique).

    Parameters
    ----------
    labels, masks : list of 2-d int arrays, or 3-d arrays
        Predicted and gold 0/1 segmentations.

    Returns
    -------
    dict with ``pixel_accuracy``, ``dice``, ``object_precision``, ``object_recall``,
    ``object_f1``, ``n_predicted``, ``n_gold``, ``n_matched``.
    """
    from scipy import ndimage as ndi

    from .events.objects import match_objects

    iou_threshold = check_float(iou_threshold, "iou_threshold", low=0.5, high=1.0)
    structure = ndi.generate_binary_structure(2, 1 if check_connectivity(connectivity) == 4 else 2)
    preds = _masks_iv(labels, None, name="labels")
    golds = _masks_iv(masks, preds)
    tp = n_p = n_g = 0
    for p, g in zip(preds, golds):
        cp, kp = ndi.label(p == 1, structure)
        cg, kg = ndi.label(g == 1, structure)
        best, _ = match_objects(cp.ravel() - 1, kp, cg.ravel() - 1, kg)
        tp += int((best >= iou_threshold).sum())
        n_p += kp
        n_g += kg
    flat_p = np.concatenate([p.ravel() for p in preds])
    flat_g = np.concatenate([g.ravel() for g in golds])
    prec = tp / n_p if n_p else 1.0
    rec = tp / n_g if n_g else 1.0
    return {
        "pixel_accuracy": float(np.mean(flat_p == flat_g)),
        "dice": _dice(flat_p, flat_g),
        "object_precision": prec,
        "object_recall": rec,
        "object_f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "n_predicted": n_p, "n_gold": n_g, "n_matched": tp,
    }
