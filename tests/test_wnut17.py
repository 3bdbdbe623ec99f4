"""The shipped WNUT-17 corpus: counts, format, round trip of the upstream files."""

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from structcal import ParameterError
from structcal.datasets import WNUT17_SPLITS, load_wnut17

RAW = Path("/work/shared/data/wnut17/raw")
COUNTS = {  # sentences, tokens, entities (README of the data set, checked by convert.py)
    "train": (3394, 62730, 1975),
    "dev": (1009, 15733, 836),
    "test": (1287, 23394, 1079),
}


@pytest.fixture(scope="module")
def corpus():
    return load_wnut17()


def test_counts_tags_and_splits(corpus):
    assert corpus.n_sentences == 5690 and corpus.n_tokens == 101857
    assert corpus.tag_names[0] == "O" and len(corpus.tag_names) == 13
    assert corpus.entity_types == (
        "corporation",
        "creative-work",
        "group",
        "location",
        "person",
        "product",
    )
    assert corpus.tag_names[1:] == tuple(f"{p}-{t}" for t in corpus.entity_types for p in "BI")
    for name, (n_s, n_t, n_e) in COUNTS.items():
        part = corpus.split_named(name)
        assert part.n_sentences == n_s and part.n_tokens == n_t
        # valid BIO: every B- starts one entity and every I- follows B-/I- of its type
        assert int(np.isin(part.tags, np.arange(1, 13, 2)).sum()) == n_e
        for t in part.y:
            prev = np.concatenate([[0], t[:-1]])
            inside = t % 2 == 0
            inside &= t > 0
            assert np.all((prev[inside] == t[inside]) | (prev[inside] == t[inside] - 1))
        assert set(part.split.tolist()) == {WNUT17_SPLITS.index(name)}
        assert load_wnut17(name).sentence_index.tolist() == part.sentence_index.tolist()
    assert corpus.sentences[0][:3] == ["@paulwalk", "It", "'s"]
    assert len(corpus.tag_strings[0]) == corpus.lengths[0]


def test_subset_and_bad_input(corpus):
    sub = corpus.subset([5, 2])
    assert sub.sentences == [corpus.sentences[5], corpus.sentences[2]]
    assert sub.sentence_index.tolist() == [5, 2]
    np.testing.assert_array_equal(sub.tags, np.concatenate([corpus.y[5], corpus.y[2]]))
    with pytest.raises(ParameterError, match="split"):
        load_wnut17("validation")
    with pytest.raises(ParameterError, match="sentences"):
        corpus.subset(np.ones(3, dtype=bool))
    assert "NERSentences(n_sentences=5690" in repr(corpus)


def test_licence_and_citation_are_shipped():
    data = resources.files("structcal.datasets").joinpath("data")
    assert "CC BY 4.0" in data.joinpath("WNUT17_LICENSE").read_text()
    assert "W17-4418" in data.joinpath("WNUT17_README.md").read_text()


@pytest.mark.skipif(not RAW.is_dir(), reason="the upstream CoNLL files are not on this machine")
def test_round_trip_of_the_upstream_files(corpus):
    files = {
        "train": "wnut17train.conll",
        "dev": "emerging.dev.conll",
        "test": "emerging.test.annotated",
    }
    for name, fname in files.items():
        toks, tags = [], []
        for line in (RAW / fname).read_text(encoding="utf-8").splitlines():
            if line.strip():
                tok, tag = line.split("\t")
                toks.append(tok)
                tags.append(tag)
        part = corpus.split_named(name)
        assert part.tokens == toks
        assert [corpus.tag_names[t] for t in part.tags] == tags
