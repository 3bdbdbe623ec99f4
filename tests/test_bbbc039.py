"""The shipped BBBC039 nuclei data: loader, splits, masks, licence note."""

from importlib import resources

import numpy as np
import pytest

from structcal.datasets import BBBC039_SPLITS, load_bbbc039
from structcal.exceptions import ParameterError


@pytest.fixture(scope="module")
def data():
    return load_bbbc039()


def test_sizes_and_types(data):
    assert data.n_images == 200 and data.shape == (130, 174)
    assert data.images.dtype == np.uint8 and data.masks.dtype == np.uint8
    assert set(np.unique(data.masks).tolist()) == {0, 1}
    assert data.fg16.max() == 16 and data.fg16.min() == 0
    assert data.names.shape == (200,) and len(set(data.names.tolist())) == 200


def test_splits_match_the_dataset_readme(data):
    # counts of images, nuclei and foreground fractions from the dataset's README
    expect = {"train": (100, 12082, 0.204), "val": (50, 5668, 0.191), "test": (50, 5865, 0.196)}
    for name in BBBC039_SPLITS:
        s = data.split(name)
        n, nuclei, fg = expect[name]
        assert s.n_images == n and int(s.n_nuclei.sum()) == nuclei
        assert round(float(s.masks.mean()), 3) == fg
        np.testing.assert_array_equal(s.images, load_bbbc039(name).images)
    empty = data.n_nuclei == 0
    assert empty.sum() == 3 and (data.split_codes[empty] == 0).all()
    assert (data.masks[empty] == 0).all()


def test_masks_are_the_majority_of_fg16(data):
    np.testing.assert_array_equal(data.masks, (data.fg16 >= 8).astype(np.uint8))
    soft = data.soft_masks
    assert soft.dtype == np.float64 and soft.max() == 1.0


def test_subset_and_errors(data):
    s = data.subset([5, 2])
    np.testing.assert_array_equal(s.images[1], data.images[2])
    assert s.names[0] == data.names[5]
    with pytest.raises(ParameterError, match="name"):
        data.split("validation")
    with pytest.raises(ParameterError, match="split"):
        load_bbbc039("nope")
    with pytest.raises(ParameterError, match="images"):
        data.subset([200])


def test_licence_note_is_shipped():
    text = resources.files("structcal.datasets").joinpath("data", "BBBC039_LICENSE.txt").read_text()
    assert "CC0 1.0" in text and "Caicedo" in text and "Ljosa" in text
