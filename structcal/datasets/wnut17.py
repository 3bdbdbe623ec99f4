"""WNUT-17 Emerging and Rare Entities (English NER, BIO tags), shipped with structcal."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import numpy as np

from .._ragged import ragged_rows
from .._validation import as_int_array, check_option
from ..exceptions import ParameterError

__all__ = ["WNUT17_SPLITS", "NERSentences", "load_wnut17", "token_features", "wnut17_tagger_path"]

#: The official splits, in order.
WNUT17_SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class NERSentences:
    """A batch of tagged sentences, stored flat with offsets.

    Attributes
    ----------
    tokens : list of str
        Every token, sentences laid end to end.
    tags : ndarray of shape (n_tokens,), int64
        Gold tag of each token, an index into ``tag_names``.
    offsets : ndarray of shape (n_sentences + 1,), int64
        Sentence ``s`` is tokens ``offsets[s]:offsets[s + 1]``.
    split : ndarray of shape (n_sentences,), int64
        Split of each sentence: an index into :data:`WNUT17_SPLITS` (0 train, 1 dev, 2 test).
    sentence_index : ndarray of shape (n_sentences,), int64
        Position of each sentence in the full corpus (stable across subsets).
    tag_names : tuple of str
        The BIO tag set (``'O'`` first, then ``B-``/``I-`` per entity type).
    entity_types : tuple of str
        The entity types, sorted.
    document : ndarray of shape (n_sentences,), int64, or None
        The document of each sentence, an index into ``document_ids`` (None for corpora
        without documents, such as WNUT-17).
    document_ids : tuple of str or None
    document_genre : tuple of str or None
        The genre of each document.
    """

    tokens: list
    tags: np.ndarray
    offsets: np.ndarray
    split: np.ndarray
    sentence_index: np.ndarray
    tag_names: tuple
    entity_types: tuple
    document: np.ndarray | None = None
    document_ids: tuple | None = None
    document_genre: tuple | None = None

    @property
    def groups(self) -> np.ndarray:
        """The group of each sentence for validation: its document, or (without documents)
        the sentence itself. Pass it as ``groups=`` to
        :meth:`~structcal.StructuredRecalibrator.fit` and the guarantees."""
        return self.document if self.document is not None else self.sentence_index

    @property
    def genre(self) -> np.ndarray:
        """The genre of each sentence (its document's), as an array of str."""
        if self.document is None or self.document_genre is None:
            raise ParameterError("this corpus has no genres")
        return np.asarray(self.document_genre, dtype=object)[self.document]

    @property
    def n_sentences(self) -> int:
        """Number of sentences."""
        return int(self.offsets.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        """Number of tokens over all sentences."""
        return int(self.tags.shape[0])

    @property
    def lengths(self) -> np.ndarray:
        """Number of tokens of each sentence, shape (n_sentences,)."""
        return np.diff(self.offsets)

    @property
    def sentences(self) -> list[list[str]]:
        """The tokens of each sentence."""
        return [
            self.tokens[a:b] for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist())
        ]

    @property
    def y(self) -> list[np.ndarray]:
        """Per-sentence tag arrays (views of :attr:`tags`)."""
        return [self.tags[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @property
    def tag_strings(self) -> list[list[str]]:
        """The tags of each sentence as strings (the input sklearn-crfsuite expects)."""
        names = np.asarray(self.tag_names, dtype=object)
        return [names[t].tolist() for t in self.y]

    def subset(self, sentences) -> "NERSentences":
        """Return the sentences selected by an index array or a boolean mask over sentences."""
        sentences = np.asarray(sentences)
        if sentences.dtype == np.bool_:
            if sentences.shape != (self.n_sentences,):
                raise ParameterError(
                    f"boolean `sentences` must have shape ({self.n_sentences},); got {sentences.shape}"
                )
            sentences = np.flatnonzero(sentences)
        sentences = as_int_array(sentences, "sentences", ndim=1, low=0, high=self.n_sentences)
        rows, offsets = ragged_rows(self.offsets, sentences)
        tokens = self.tokens
        return NERSentences(
            tokens=[tokens[i] for i in rows.tolist()],
            tags=self.tags[rows],
            offsets=offsets,
            split=self.split[sentences],
            sentence_index=self.sentence_index[sentences],
            tag_names=self.tag_names,
            entity_types=self.entity_types,
            document=None if self.document is None else self.document[sentences],
            document_ids=self.document_ids,
            document_genre=self.document_genre,
        )

    def split_named(self, name: str) -> "NERSentences":
        """Return the sentences of one split (``'train'``, ``'dev'`` or ``'test'``)."""
        check_option(name, "name", WNUT17_SPLITS)
        return self.subset(self.split == WNUT17_SPLITS.index(name))

    def __repr__(self) -> str:
        counts = np.bincount(self.split, minlength=len(WNUT17_SPLITS))
        parts = ", ".join(f"{n}: {c}" for n, c in zip(WNUT17_SPLITS, counts) if c)
        docs = "" if self.document is None else \
            f", n_documents={np.unique(self.document).shape[0]}"
        return (f"NERSentences(n_sentences={self.n_sentences} ({parts}), "
                f"n_tokens={self.n_tokens}{docs})")


def load_wnut17(split: str | None = None) -> NERSentences:
    """Load the WNUT-17 named-entity corpus shipped with structcal.

    English user-generated text (Twitter, Reddit, YouTube, StackExchange) tagged in BIO
    with six entity types (corporation, creative-work, group, location, person, product).
    Official splits: ``train`` 3,394 sentences / 62,730 tokens / 1,975 entities, ``dev``
    1,009 / 15,733 / 836, ``test`` 1,287 / 23,394 / 1,079. The test set comes from other
    sources and periods than train (the task is *emerging* entities), so expect low
    entity F1 and a shift between train and test. The corpus has no document ids; one
    sentence is the unit of grouping.

    The shipped archive ``structcal/datasets/data/wnut17.npz`` (loaded with
    ``allow_pickle=False``) holds ``tokens_utf8`` (uint8, all tokens UTF-8 encoded and
    concatenated), ``token_offsets`` (int64, n_tokens + 1), ``tags`` (int8, index into
    ``tag_names``), ``tag_names``, ``entity_types``, ``sentence_offsets`` (int64,
    n_sentences + 1), ``sentence_split`` (int8: 0 train, 1 dev, 2 test), ``split_names``,
    ``split_offsets``, ``source_files``, ``source_sha256`` and ``format_version`` (1).

    Parameters
    ----------
    split : {'train', 'dev', 'test'}, optional
        Return only this split. By default all sentences are returned.

    Returns
    -------
    NERSentences
        Tokens, tags (int), sentence offsets, the split of each sentence, the tag names
        (``'O', 'B-corporation', 'I-corporation', ...``, the order of the Hugging Face
        ``wnut_17`` loader) and the entity types.

    Notes
    -----
    Licence: CC BY 4.0 (notice, attribution and full text in
    ``structcal/datasets/data/WNUT17_LICENSE``). Source:
    https://github.com/leondz/emerging_entities_17 at commit ``e52a2d2a``; converted
    without change of any token or tag.

    References
    ----------
    L. Derczynski, E. Nichols, M. van Erp, N. Limsopatham, *Results of the WNUT2017
    Shared Task on Novel and Emerging Entity Recognition*, Proceedings of the 3rd Workshop
    on Noisy User-generated Text (W-NUT), 2017, pp. 140-147. doi:10.18653/v1/W17-4418

    Examples
    --------
    >>> from structcal.datasets import load_wnut17
    >>> test = load_wnut17("test")
    >>> test.n_sentences, test.n_tokens, test.tag_names[:3]
    (1287, 23394, ('O', 'B-corporation', 'I-corporation'))
    """
    if split is not None:
        check_option(split, "split", WNUT17_SPLITS)
    ref = resources.files("structcal.datasets").joinpath("data", "wnut17.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as data:
        if int(data["format_version"]) != 1:
            raise ParameterError(
                f"unsupported wnut17.npz format_version {int(data['format_version'])}"
            )
        text = data["tokens_utf8"].tobytes()
        token_offsets = data["token_offsets"]
        tags = data["tags"].astype(np.int64)
        offsets = data["sentence_offsets"].astype(np.int64)
        split_codes = data["sentence_split"].astype(np.int64)
        tag_names = tuple(str(t) for t in data["tag_names"])
        entity_types = tuple(str(t) for t in data["entity_types"])
        split_names = tuple(str(t) for t in data["split_names"])
    if split_names != WNUT17_SPLITS:
        raise ParameterError(f"unexpected split names {split_names} in wnut17.npz")
    bounds = token_offsets.tolist()
    tokens = [text[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
    full = NERSentences(
        tokens=tokens,
        tags=tags,
        offsets=offsets,
        split=split_codes,
        sentence_index=np.arange(split_codes.shape[0], dtype=np.int64),
        tag_names=tag_names,
        entity_types=entity_types,
    )
    return full if split is None else full.split_named(split)


_STOPWORDS = frozenset(
    "a an the and or but of to in on at for with from by is are was were be been i you he she "
    "it we they me my your his her its our their this that these those not no so just do does "
    "did have has had will would can could rt".split()
)
_SHAPE_CLASSES = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "X" * 26 + "x" * 26 + "d" * 10,
)
_REPEATS = re.compile(r"(.)\1+")


def _first_two(match) -> str:
    return match.group()[:2]


def _word_shape(w: str) -> str:
    """Upper case -> ``X``, lower case -> ``x``, digits -> ``d``; runs cut to two."""
    # (a function replacement: the template r"\1\1" is expanded anew for every match)
    return _REPEATS.sub(_first_two, w.translate(_SHAPE_CLASSES))


def _context(w: str, p: str, shape: str) -> dict:
    return {p + "lower": w.lower(), p + "shape": shape, p + "istitle": w.istitle(),
            p + "isupper": w.isupper(), p + "suf3": w[-3:].lower(), p + "pre3": w[:3].lower()}


def token_features(sentences) -> list[list[dict]]:
    """Compute CRF token features for English tweets and text, as python-crfsuite feature dicts.

    The features of the shipped WNUT-17 tagger (:func:`wnut17_tagger_path`), the usual
    ones of feature-based NER taggers, without word clusters or gazetteers. For each token:

    - the word: a bias, its lower case, its shape (``X`` upper, ``x`` lower, ``d`` digit, runs cut
      to two), case flags (title, upper,
      first letter upper and not the first token), digits, letters only, hyphen, a stop
      word, the length (capped at 10), prefixes and suffixes of 1 to 4 letters (and the
      5-letter suffix), its letter trigrams (of ``<lower case>``, a list under the key
      ``c3``: one attribute ``c3:abc`` each);
    - tweet marks: @mention, #hashtag, URL, and for a mention or hashtag its body (lower
      case, shape, title case);
    - its position (the first token) and whether the previous token is ``@``, *at*, *in*,
      *from* or *to*;
    - the two words on each side: lower case, shape, title, upper, 3-letter prefix and
      suffix (``-2:pad`` ... ``+2:pad`` past the sentence ends); the word bigrams with the previous
      and the next word.

    Parameters
    ----------
    sentences : list of list of str

    Returns
    -------
    list of list of dict
        One dict per token (string values become ``key:value`` attributes, lists of
        strings one ``key:item`` attribute per item, booleans and numbers numeric
        attributes), usable by :mod:`pycrfsuite`, ``sklearn_crfsuite``,
        :func:`structcal.adapters.crfsuite_potentials` and scikit-learn's
        ``DictVectorizer(separator=":")``.

    Examples
    --------
    >>> from structcal.datasets import token_features
    >>> f = token_features([["Hello", "@bob"]])
    >>> f[0][0]["lower"], f[0][0]["shape"], f[0][1]["mention"], f[0][1]["-1:lower"], f[0][1]["+1:pad"]
    ('hello', 'Xxx', True, 'hello', True)
    """
    word_cache: dict = {}
    context_cache: dict = {}
    shape_cache: dict = {}

    def shape(w):
        out = shape_cache.get(w)
        if out is None:
            out = shape_cache[w] = _word_shape(w)
        return out

    def word(w):  # the features of the token itself that do not depend on its position
        f = word_cache.get(w)
        if f is None:
            low = w.lower()
            f = {"bias": 1.0, "lower": low, "shape": shape(w), "istitle": w.istitle(),
                 "isupper": w.isupper(), "isdigit": w.isdigit(), "mention": w.startswith("@"),
                 "hashtag": w.startswith("#"), "url": w.startswith(("http", "www.")),
                 "hyphen": "-" in w, "len": min(len(w), 10)}
            for k in (1, 2, 3, 4):
                f[f"suf{k}"], f[f"pre{k}"] = low[-k:], low[:k]
            if w.startswith(("#", "@")):
                f["tagbody"] = low[1:]
            f["stop"] = low in _STOPWORDS
            f["allalpha"] = w.isalpha()
            f["suf5"] = low[-5:]
            body = w.lstrip("#@")
            if body and body != w:
                f["tagbody_title"] = body[:1].isupper()
                f["tagbody_shape"] = shape(body)
            padded = "<" + low + ">"  # a list value: one attribute c3:abc per trigram
            f["c3"] = list(dict.fromkeys(padded[k:k + 3] for k in range(len(padded) - 2)))
            word_cache[w] = f
        return f

    def context(w, d):
        f = context_cache.get((w, d))
        if f is None:
            f = context_cache[(w, d)] = _context(w, f"{d:+d}:", shape(w))
        return f

    out = []
    for sent in sentences:
        n = len(sent)
        lows = [w.lower() for w in sent]
        feats = []
        for i, w in enumerate(sent):
            f = dict(word(w))
            for d in (-2, -1, 1, 2):
                j = i + d
                if 0 <= j < n:
                    f.update(context(sent[j], d))
                else:
                    f[f"{d:+d}:pad"] = True
            if i > 0:
                f["bigram-1"] = lows[i - 1] + "|" + lows[i]
            if i < n - 1:
                f["bigram+1"] = lows[i] + "|" + lows[i + 1]
            f["capnotfirst"] = w[:1].isupper() and i > 0
            f["first"] = i == 0
            f["prevat"] = i > 0 and lows[i - 1] in ("@", "at", "in", "from", "to")
            feats.append(f)
        out.append(feats)
    return out


def wnut17_tagger_path():
    """Path of the shipped CRFsuite NER model trained on WNUT-17 (``wnut17_crfsuite.crfsuite``).

    Trained by ``benchmarks/train_wnut17_tagger.py`` with python-crfsuite (L-BFGS,
    ``c1=0.02, c2=0.01, max_iterations=300``, all possible transitions) on the whole train
    split with :func:`token_features`; entity F1 17.2 on the test split (precision 36.9,
    recall 11.2). See ``structcal/pretrained/README.md``. Open it with ``sklearn_crfsuite.CRF(model_filename=...)``,
    ``pycrfsuite.Tagger().open(...)`` or :class:`structcal.adapters.CRFsuiteModel`.

    Returns
    -------
    pathlib.Path
    """
    from ..io import _pretrained_root

    path = _pretrained_root() / "wnut17_crfsuite.crfsuite"
    if not path.is_file():
        raise ParameterError(f"the shipped WNUT-17 tagger is missing: {path}")
    return path
