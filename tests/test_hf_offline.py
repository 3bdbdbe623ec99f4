"""Hugging Face adapters on hand-made encodings (no transformers needed): pre-split words,
character offsets, and batches whose logits do not match the encoding."""

import numpy as np
import pytest

from structcal.adapters import hf_entities, hf_potentials
from structcal.exceptions import ParameterError

ID2LABEL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


class FakeEncoding:
    """What the adapters read of a BatchEncoding: word_ids(i), offset_mapping, input_ids."""

    def __init__(self, word_ids, offsets):
        self._w = word_ids
        self._d = {"offset_mapping": np.asarray(offsets), "input_ids": np.zeros((len(word_ids), len(word_ids[0])))}
        self.encodings = [object()] * len(word_ids)

    def word_ids(self, i):
        return self._w[i]

    def get(self, key, default=None):
        return self._d.get(key, default)

    def __getitem__(self, key):
        return self._d[key]


def _logits(tags_per_token, n=5):
    L = np.full((len(tags_per_token), n), -6.0)
    for k, t in enumerate(tags_per_token):
        L[k, t] = 6.0
    return L


def test_pre_split_words_give_offsets_into_the_joined_words():
    """is_split_into_words=True: the tokenizer's offsets restart at every word. With words=
    the entities get their words and offsets into " ".join(words); without, no offsets."""
    words = ["George", "Washington", "went", "to", "Washington"]
    # [CLS] George Washington went to Wash ##ington [SEP]
    ids = [None, 0, 1, 2, 3, 4, 4, None]
    offs = [(0, 0), (0, 6), (0, 10), (0, 4), (0, 2), (0, 4), (4, 10), (0, 0)]
    enc = FakeEncoding([ids], [offs])
    L = _logits([0, 1, 2, 0, 0, 3, 4, 0])[None]
    ents = hf_entities(enc, L, ID2LABEL, words=[words])[0]
    text = " ".join(words)
    assert [(e["entity_group"], e["start_word"], e["end_word"], e["word"]) for e in ents] == [
        ("PER", 0, 2, "George Washington"), ("LOC", 4, 5, "Washington")]
    for e in ents:
        assert text[e["start"]:e["end"]] == e["word"]
    bare = hf_entities(enc, L, ID2LABEL)[0]
    assert all("start" not in e for e in bare) and [e["start_word"] for e in bare] == [0, 4]
    with pytest.raises(ParameterError, match=r"`words\[0\]` has 4 words"):
        hf_entities(enc, L, ID2LABEL, words=[words[:4]])


def test_offsets_into_one_text_are_kept():
    text = "Ada Lovelace met Babbage"
    ids = [None, 0, 1, 1, 2, 3, None]
    offs = [(0, 0), (0, 3), (4, 8), (8, 12), (13, 16), (17, 24), (0, 0)]
    enc = FakeEncoding([ids], [offs])
    ents = hf_entities(enc, _logits([0, 1, 2, 2, 0, 1, 0])[None], ID2LABEL)[0]
    assert [text[e["start"]:e["end"]] for e in ents] == ["Ada Lovelace", "Babbage"]


def test_logits_of_another_batch_size_are_refused():
    ids = [None, 0, 1, None]
    offs = [(0, 0), (0, 1), (2, 3), (0, 0)]
    enc = FakeEncoding([ids, ids, ids], [offs] * 3)
    L = np.stack([_logits([0, 1, 0, 0])] * 2)
    with pytest.raises(ParameterError, match="2 sequences but `encoding` holds 3"):
        hf_potentials(enc, L, ID2LABEL)
    with pytest.raises(ParameterError, match="4 sequences but `encoding` holds 3"):
        hf_potentials(enc, np.concatenate([L, L]), ID2LABEL)
    assert hf_potentials(enc, np.concatenate([L, L[:1]]), ID2LABEL).n_chains == 3


def test_hf_tag_names_reads_id2label_or_names_what_is_wrong():
    from structcal.adapters.huggingface import hf_tag_names
    from structcal.exceptions import ParameterError, ParameterTypeError

    assert hf_tag_names({"1": "B-PER", "0": "O", "2": "I-PER"}) == ("O", "B-PER", "I-PER")
    for bad, error in (({0: "O", 2: "B"}, ParameterError), ({"a": "O"}, ParameterError),
                       ({0: None}, ParameterTypeError), ({0: 5, 1: "O"}, ParameterTypeError),
                       ({}, ParameterTypeError), (["O"], ParameterTypeError)):
        with pytest.raises(error, match="id2label"):
            hf_tag_names(bad)
