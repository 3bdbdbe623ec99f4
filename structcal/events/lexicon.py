"""A lexicon of admissible labelings (e.g. English words), stored as a trie."""

from __future__ import annotations

import numpy as np

from .._validation import as_int_array, check_int, describe
from ..exceptions import ParameterError, ParameterTypeError
from ..potentials import ChainPotentials

__all__ = ["Lexicon"]


#: Steps of the tier rule (:mod:`structcal._tier`) per token of a lexicon lookup in NumPy:
#: one trie step per position for the whole batch at once
CONTAINS_STEP_COST = 4


def _contains(children, terminal, labels, offsets):
    """:meth:`Lexicon.contains` in NumPy, every labeling's trie walk one position at a
    time (the kernel's walk, so the same answers)."""
    lengths = np.diff(offsets)
    node = np.zeros(lengths.shape[0], dtype=np.int64)
    starts = offsets[:-1]
    for t in range(int(lengths.max(initial=0))):
        walk = np.flatnonzero((lengths > t) & (node >= 0))
        node[walk] = children[node[walk], labels[starts[walk] + t]]
    out = np.zeros(lengths.shape[0], dtype=np.bool_)
    found = node >= 0
    out[found] = terminal[node[found]]
    return out


class Lexicon:
    """A finite set of admissible labelings G, stored as a trie over labels.

    Used by the admissibility feature ``phi_mp2`` (``I[MAP in G]``) and the event
    :class:`~structcal.events.InLexicon` (``{y : y in G}``), whose exact probability under
    a chain CRF comes from one pass over the trie (shared prefixes are scored once).

    Parameters
    ----------
    words : iterable of str or of sequences of int
        The admissible labelings. Strings are mapped to labels through ``alphabet``.
    n_states : int
        Number of labels.
    alphabet : str, optional
        ``alphabet[a]`` is the character of label ``a``; required for string words.

    Attributes
    ----------
    n_words : int
        Number of distinct words.
    children : ndarray of shape (n_nodes, n_states), int64
        Child of each trie node for each label, ``-1`` where absent; node 0 is the root.
    terminal : ndarray of shape (n_nodes,), bool
        Whether the path to a node spells a word.

    Examples
    --------
    >>> from structcal.events import Lexicon
    >>> lex = Lexicon(["ab", "abc", "b"], n_states=3, alphabet="abc")
    >>> lex.n_words, lex.contains([0, 1, 1, 0, 1, 2], [0, 2, 3, 6]).tolist()
    (3, [True, True, True])
    """

    def __init__(self, words, *, n_states: int, alphabet: str | None = None):
        if isinstance(words, (str, bytes)) or not hasattr(words, "__iter__"):
            raise ParameterTypeError(f"`words` must be an iterable of words; got {describe(words)}")
        n_states = check_int(n_states, "n_states", low=1)
        if alphabet is not None and len(alphabet) != n_states:
            raise ParameterError(
                f"`alphabet` must have n_states={n_states} characters; got {len(alphabet)}"
            )
        index = {ch: a for a, ch in enumerate(alphabet)} if alphabet is not None else None
        seqs = set()
        for w in words:
            if isinstance(w, str):
                if index is None:
                    raise ParameterError("string words need an `alphabet`")
                bad = [ch for ch in w if ch not in index]
                if bad:
                    raise ParameterError(f"word {w!r} has characters {bad} not in the alphabet")
                seqs.add(tuple(index[ch] for ch in w))
            else:
                # (a list, not np.asarray(w): an empty list is an empty word, as "" is)
                seq = as_int_array(w, "word", ndim=1, low=0, high=n_states)
                seqs.add(tuple(seq.tolist()))
        self.n_states = int(n_states)
        self.alphabet = alphabet
        self.n_words = len(seqs)
        self._build(sorted(seqs, key=lambda s: (len(s), s)))

    def _build(self, seqs):
        K = self.n_states
        max_len = max((len(s) for s in seqs), default=0)
        # breadth-first: all prefixes of length d, sorted, get consecutive ids
        ids = {(): 0}
        parent, label, levels = [-1], [-1], [1]
        for d in range(1, max_len + 1):
            prefixes = sorted({s[:d] for s in seqs if len(s) >= d})
            for pre in prefixes:
                ids[pre] = len(parent)
                parent.append(ids[pre[:-1]])
                label.append(pre[-1])
            levels.append(len(parent))
        n = len(parent)
        self.parent = np.asarray(parent, dtype=np.int64)
        self.label = np.asarray(label, dtype=np.int64)
        self.levels = np.asarray(levels, dtype=np.int64)
        self.children = np.full((n, K), -1, dtype=np.int64)
        self.children[self.parent[1:], self.label[1:]] = np.arange(1, n)
        self.terminal = np.zeros(n, dtype=np.bool_)
        self.terminal[[ids[s] for s in seqs]] = True

    def _check_loaded(self):
        """A lexicon read from a file: its trie must be the trie of its own words."""
        from .._loadcheck import array, integer

        K = integer(self, "n_states", low=1)
        parent = array(self, "parent", ndim=1, kind="iu")
        n = parent.shape[0]
        array(self, "label", ndim=1, shape=(n,), kind="iu", low=-1, high=K - 1)
        array(self, "terminal", ndim=1, shape=(n,), kind="b")
        array(self, "children", ndim=2, shape=(n, K), kind="iu")
        if n < 1 or parent[0] != -1 or ((parent[1:] < 0) | (parent[1:] >= np.arange(1, n))).any():
            raise ValueError("Lexicon.parent must point to earlier trie nodes")
        words = []
        for node in np.flatnonzero(self.terminal).tolist():
            w = []
            while node > 0:
                w.append(int(self.label[node]))
                node = int(parent[node])
            words.append(w[::-1])
        fresh = Lexicon(words, n_states=K)
        for name in ("parent", "label", "levels", "children", "terminal"):
            mine = getattr(self, name)
            if not isinstance(mine, np.ndarray) or not np.array_equal(mine, getattr(fresh, name)):
                raise ValueError(f"Lexicon.{name} is not the trie of the lexicon's words")
        integer(self, "n_words", low=len(words), high=len(words))

    @property
    def n_nodes(self) -> int:
        """Number of trie nodes (distinct prefixes, including the empty one)."""
        return int(self.parent.shape[0])

    def contains(self, labels, offsets) -> np.ndarray:
        """Whether each labeling is in the lexicon.

        Parameters
        ----------
        labels : array-like of shape (n_nodes,)
            Labelings laid end to end.
        offsets : array-like of shape (n_items + 1,)
            Item ``i`` is ``labels[offsets[i]:offsets[i + 1]]``.

        Returns
        -------
        ndarray of shape (n_items,), bool
        """
        from .._validation import check_offsets

        labels = as_int_array(labels, "labels", ndim=1, low=0, high=self.n_states)
        offsets = check_offsets(offsets, "offsets", labels.shape[0])
        from .._tier import numpy_tier

        if numpy_tier(labels.shape[0] * CONTAINS_STEP_COST, kernel="events/_lexicon.contains_batch"):
            return _contains(self.children, self.terminal, labels, offsets)
        out = np.zeros(offsets.shape[0] - 1, dtype=np.bool_)
        from . import _lexicon  # Numba: imported on first use, not with structcal.events

        _lexicon.contains_batch(self.children, self.terminal, labels, offsets, out, work=labels.shape[0])
        return out

    def log_mass(self, potentials: ChainPotentials) -> np.ndarray:
        """``log sum_{w in G, |w| = L} exp(score(w))`` for each chain (``-inf`` if no word fits).

        ``exp(log_mass - log_partition)`` is the exact probability that the chain's
        labeling is in the lexicon.
        """
        if not isinstance(potentials, ChainPotentials):
            raise ParameterTypeError(
                f"exact lexicon probabilities need ChainPotentials; got {describe(potentials)}"
            )
        if potentials.n_states != self.n_states:
            raise ParameterError(
                f"the lexicon has n_states={self.n_states} but the potentials have "
                f"{potentials.n_states}"
            )
        pw, stride = potentials._pairwise3()
        out = np.empty(potentials.n_chains)
        from . import _lexicon

        _lexicon.log_mass_batch(
            self.parent, self.label, self.terminal, self.levels, potentials.unary,
            potentials.offsets, potentials.edge_offsets, pw, stride, out,
            work=potentials.n_chains * 64,
        )
        return out

    def __repr__(self) -> str:
        return f"Lexicon(n_words={self.n_words}, n_nodes={self.n_nodes}, n_states={self.n_states})"
