"""BBBC039 fluorescence-microscopy nuclei (Caicedo et al. 2019), shipped with structcal."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from .._validation import as_int_array, check_option

__all__ = ["BBBC039_SPLITS", "BBBC039Nuclei", "load_bbbc039"]

#: Names of the splits, in the order of their codes in :attr:`BBBC039Nuclei.split_codes`.
BBBC039_SPLITS = ("train", "val", "test")


@dataclass(frozen=True, eq=False)
class BBBC039Nuclei:
    """Images of U2OS cell nuclei with expert masks (all images have the same size).

    Attributes
    ----------
    images : ndarray of shape (n_images, 130, 174), dtype uint8
        Hoechst-stain intensity, one global square-root map of the 16-bit originals
        (``x ~ 100 + 3995 (u8 / 255)^2``), so intensities are comparable across images.
    masks : ndarray of shape (n_images, 130, 174), dtype uint8
        Expert masks: 1 = nucleus, 0 = background (majority vote over each 4 x 4 block
        of the full-resolution mask).
    fg16 : ndarray of shape (n_images, 130, 174), dtype uint8
        Number of nucleus pixels (0..16) in each 4 x 4 block of the full-resolution mask.
    split_codes : ndarray of shape (n_images,), dtype int64
        0 train, 1 val, 2 test (see :data:`BBBC039_SPLITS`).
    names : ndarray of shape (n_images,), dtype str
        File stem of each source image.
    n_nuclei : ndarray of shape (n_images,), dtype int64
        Number of annotated nuclei at full resolution (touching nuclei counted apart;
        the binary ``masks`` may merge them).
    """

    images: np.ndarray
    masks: np.ndarray
    fg16: np.ndarray
    split_codes: np.ndarray
    names: np.ndarray
    n_nuclei: np.ndarray

    @property
    def groups(self) -> np.ndarray:
        """The group of each image for validation: the image (its name); every nucleus of an
        image is an event of that image, so folds of images keep them together."""
        return np.asarray(self.names)

    @property
    def n_images(self) -> int:
        """Number of images."""
        return int(self.images.shape[0])

    @property
    def shape(self) -> tuple:
        """Height and width of every image."""
        return tuple(int(v) for v in self.images.shape[1:])

    @property
    def soft_masks(self) -> np.ndarray:
        """``fg16 / 16``: the fraction of each pixel covered by nuclei, float64."""
        return self.fg16 / 16.0

    def subset(self, images) -> "BBBC039Nuclei":
        """Return the images selected by an index array or a boolean mask (in that order)."""
        images = np.asarray(images)
        if images.dtype == np.bool_:
            images = np.flatnonzero(images)
        images = as_int_array(images, "images", ndim=1, low=0, high=max(self.n_images, 1))
        return BBBC039Nuclei(
            self.images[images], self.masks[images], self.fg16[images],
            self.split_codes[images], self.names[images], self.n_nuclei[images],
        )

    def split(self, name: str) -> "BBBC039Nuclei":
        """Return the images of one split: ``'train'`` (100), ``'val'`` (50) or ``'test'`` (50)."""
        name = check_option(name, "name", BBBC039_SPLITS)
        return self.subset(self.split_codes == BBBC039_SPLITS.index(name))

    def __repr__(self) -> str:
        return f"BBBC039Nuclei(n_images={self.n_images}, shape={self.shape})"


def load_bbbc039(split: str | None = None) -> BBBC039Nuclei:
    """Load the BBBC039 nuclei images shipped with structcal (3.3 MB).

    200 fluorescence images of U2OS cells (Hoechst stain) with an expert mask of every
    nucleus, reduced from 520 x 696 to 130 x 174 pixels by a 4 x 4 block mean (a
    nucleus is about 5-7 pixels across). The split is 100 train / 50 val / 50 test, the
    sizes of the official split drawn at random (``numpy.random.default_rng(0)``), not
    its membership. Three training images contain no nuclei.

    Parameters
    ----------
    split : {'train', 'val', 'test'}, optional
        Return only this split. By default all 200 images are returned.

    Returns
    -------
    BBBC039Nuclei

    Notes
    -----
    Licence: CC0 1.0 (public domain); the licence note with the requested citation is
    ``structcal/datasets/data/BBBC039_LICENSE.txt``. Source: BBBC039v1 as copied in
    DeepTrackAI/cell_counting_dataset at commit d460149b.

    References
    ----------
    J. C. Caicedo et al., *Evaluation of deep learning strategies for nucleus
    segmentation in fluorescence images*, Cytometry Part A 95(9), 2019.
    V. Ljosa, K. L. Sokolnicki, A. E. Carpenter, *Annotated high-throughput microscopy
    image sets for validation*, Nature Methods 9(7), 2012.

    Examples
    --------
    >>> from structcal.datasets import load_bbbc039
    >>> test = load_bbbc039("test")
    >>> test.n_images, test.shape, int(test.masks.max())
    (50, (130, 174), 1)
    """
    if split is not None:
        split = check_option(split, "split", BBBC039_SPLITS)
    ref = resources.files("structcal.datasets").joinpath("data", "bbbc039_small.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as z:
        if tuple(z["split_names"].tolist()) != BBBC039_SPLITS:  # pragma: no cover
            raise RuntimeError("bbbc039_small.npz has unexpected split names")
        data = BBBC039Nuclei(
            images=z["images"],
            masks=z["masks"],
            fg16=z["fg16"],
            split_codes=z["split"].astype(np.int64),
            names=z["names"],
            n_nuclei=z["n_nuclei"].astype(np.int64),
        )
    return data if split is None else data.split(split)
