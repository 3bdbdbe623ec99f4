"""GUM: multi-genre English entity mentions with documents and genres, shipped with structcal."""

from __future__ import annotations

from importlib import resources

import numpy as np

from .._validation import check_option
from ..exceptions import ParameterError
from .wnut17 import WNUT17_SPLITS, NERSentences

__all__ = ["GUM_GENRES", "GUM_COLUMNS", "load_gum"]

#: The genres of the shipped subset.
GUM_GENRES = ("academic", "bio", "court", "interview", "news", "voyage")
#: The two tag columns: every outermost mention, or the proper-noun-headed ones.
GUM_COLUMNS = ("all", "named")


def load_gum(split: str | None = None, *, mentions: str = "all", genre=None) -> NERSentences:
    """Load the GUM entity-mention corpus shipped with structcal (108 documents, 6 genres).

    English text of six genres (academic articles, Wikipedia biographies, court
    transcripts, Wikinews interviews and news, Wikivoyage travel guides) from the
    Georgetown University Multilayer corpus (GUM V11.1.0): the documents whose text
    licence the GUM repository states, with GUM's official document-level split (84
    train, 12 dev and 12 test documents: 2 dev and 2 test per genre; 4,636 sentences,
    98,363 tokens). Every sentence keeps its document (``document``, the natural groups
    for validation: pass ``groups`` to :meth:`~structcal.StructuredRecalibrator.fit`) and
    its genre (the natural shifts). Tags are BIO over 10 types (abstract, animal, event,
    object, organization, person, place, plant, substance, time).

    Parameters
    ----------
    split : {'train', 'dev', 'test'}, optional
        Return only this split (by default all sentences).
    mentions : {'all', 'named'}, default='all'
        ``'all'``: every outermost entity mention (GUM annotates names, common-noun
        phrases and pronouns alike); ``'named'``: the outermost mentions headed by a proper
        noun (a heuristic, closer to classic named-entity recognition).
    genre : str or sequence of str, optional
        Return only these genres (of :data:`GUM_GENRES`).

    Returns
    -------
    NERSentences
        With ``document``, ``document_ids`` and ``document_genre`` set.

    Notes
    -----
    Licences: annotations CC BY 4.0 (Amir Zeldes and the GUM annotators); texts CC BY 4.0
    (academic, court), CC BY-SA 3.0 (bio, voyage) and CC BY 2.5 (news, interview), per
    document with authors, titles and sources in
    ``structcal/datasets/data/GUM_documents.txt``; the notice is
    ``structcal/datasets/data/GUM_LICENSE``.

    References
    ----------
    A. Zeldes, *The GUM Corpus: Creating Multilayer Resources in the Classroom*, Language
    Resources and Evaluation 51(3), 2017, pp. 581-612.

    Examples
    --------
    >>> from structcal.datasets import load_gum
    >>> dev = load_gum("dev")
    >>> dev.n_sentences > 300, len(dev.document_ids), dev.tag_names[:3]
    (True, 108, ('O', 'B-abstract', 'I-abstract'))
    >>> sorted(set(load_gum("test", genre="news").genre))
    ['news']
    """
    if split is not None:
        check_option(split, "split", WNUT17_SPLITS)
    check_option(mentions, "mentions", GUM_COLUMNS)
    genres = None
    if genre is not None:
        genres = [genre] if isinstance(genre, str) else list(genre)
        for g in genres:
            check_option(g, "genre", GUM_GENRES)
    ref = resources.files("structcal.datasets").joinpath("data", "gum.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as data:
        text = data["tokens_utf8"].tobytes()
        token_offsets = data["token_offsets"]
        tags = data["tags" if mentions == "all" else "tags_named"].astype(np.int64)
        offsets = data["sentence_offsets"].astype(np.int64)
        sent_doc = data["sentence_doc"].astype(np.int64)
        doc_split = data["doc_split"].astype(np.int64)
        doc_ids = tuple(str(d) for d in data["doc_ids"])
        doc_genre = tuple(str(g) for g in data["doc_genre"])
        tag_names = tuple(str(t) for t in data["tag_names"])
        entity_types = tuple(str(t) for t in data["entity_types"])
        split_names = tuple(str(t) for t in data["split_names"])
    if split_names != WNUT17_SPLITS:
        raise ParameterError(f"unexpected split names {split_names} in gum.npz")
    bounds = token_offsets.tolist()
    tokens = [text[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
    full = NERSentences(
        tokens=tokens, tags=tags, offsets=offsets, split=doc_split[sent_doc],
        sentence_index=np.arange(sent_doc.shape[0], dtype=np.int64), tag_names=tag_names,
        entity_types=entity_types, document=sent_doc, document_ids=doc_ids,
        document_genre=doc_genre,
    )
    keep = np.ones(full.n_sentences, dtype=bool)
    if split is not None:
        keep &= full.split == WNUT17_SPLITS.index(split)
    if genres is not None:
        keep &= np.isin(full.genre, genres)
    return full if keep.all() else full.subset(keep)
