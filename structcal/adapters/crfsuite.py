"""CRFsuite / sklearn-crfsuite models as ChainPotentials, with the model's exact weights.

A CRFsuite first-order CRF scores a labeling by state features (attribute, label) times
the attribute's value and transition features (label, label); there is no start or end
score. :class:`CRFsuiteModel` reads the weights from the binary model file, where they are
stored as IEEE doubles: ``Tagger.info()`` and sklearn-crfsuite's ``state_features_`` /
``transition_features_`` go through CRFsuite's text dump, which prints 6 decimals. An
opened ``pycrfsuite.Tagger`` keeps no model file; its weights are measured from its own
probabilities (:meth:`CRFsuiteModel.from_tagger`).

Feature dicts are turned into attributes exactly as python-crfsuite does: a string value
``{"w": "abc"}`` is the attribute ``"w:abc"`` with value 1; a number or bool is the
attribute ``"w"`` with that value; a nested dict or list/set of strings is prefixed with
``"w:"``; an item given as a list of strings has each string with value 1. Attributes the
model has never seen are ignored (as CRFsuite does). The lookup takes the values of one
key across the tokens that share their keys as one column, looked up in the model's
attribute vocabulary in one C-level pass (see :meth:`CRFsuiteModel.attribute_matrix`);
the unary scores are one sparse matrix product.

References
----------
N. Okazaki, *CRFsuite: a fast implementation of Conditional Random Fields*, 2007.
http://www.chokkan.org/software/crfsuite/
"""

from __future__ import annotations

import operator
import os
import struct
from itertools import chain, compress, count, repeat

import numpy as np

from .._validation import as_float_array, describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["CRFsuiteModel", "crfsuite_potentials"]

_HEADER = struct.Struct("<4sI4sI8I")
_CHUNK = struct.Struct("<4sII")
_FEATURE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])


def _cqdb_strings(buf: bytes, offset: int, what: str) -> list[str]:
    """Read the id -> string table of a CRFsuite constant quark database (CQDB) chunk."""
    magic, size, _flag, _order, n, bwd = struct.unpack_from("<4sIIIII", buf, offset)
    if magic != b"CQDB" or offset + size > len(buf):
        raise ParameterError(
            f"not a CRFsuite model: the {what} table (CQDB) is missing or truncated"
        )
    refs = np.frombuffer(buf, dtype="<u4", count=n, offset=offset + bwd)
    out = []
    for i, ref in enumerate(refs.tolist()):
        if ref == 0:
            raise ParameterError(f"CRFsuite model: {what} {i} has no name in the CQDB table")
        key_id, ksize = struct.unpack_from("<II", buf, offset + ref)
        if key_id != i:
            raise ParameterError(f"CRFsuite model: inconsistent {what} table (id {key_id} at {i})")
        start = offset + ref + 8
        out.append(buf[start : start + ksize - 1].decode("utf-8"))
    return out


class CRFsuiteModel:
    """The labels, attributes and exact weights of a CRFsuite model.

    Build it with :meth:`from_file`, :meth:`from_bytes`, :meth:`from_tagger` or
    :meth:`from_model`.

    Attributes
    ----------
    labels : tuple of str
        Label (tag) names in the model's label-id order (as ``Tagger.labels()``).
    attributes : list of str
        Attribute names in the model's attribute-id order.
    state_weights : scipy.sparse.csr_matrix of shape (n_attributes, n_labels)
        Weight of each state feature (attribute, label).
    transitions : ndarray of shape (n_labels, n_labels)
        ``transitions[a, b]``: weight of label ``b`` right after label ``a``.
    """

    def __init__(self, labels, attributes, state_weights, transitions):
        self.labels = tuple(labels)
        self.attributes = list(attributes)
        import scipy.sparse as sp

        L, F = len(self.labels), len(self.attributes)
        if sp.issparse(state_weights):
            w = sp.csr_matrix(state_weights, dtype=np.float64)
            if not np.isfinite(w.data).all():
                raise ParameterError("`state_weights` must be finite")
        else:
            w = sp.csr_matrix(as_float_array(state_weights, "state_weights", ndim=2))
        if w.shape != (F, L):
            raise ParameterError(f"`state_weights` must have shape (n_attributes, n_labels) = "
                                 f"({F}, {L}); got {w.shape}")
        self.state_weights = w
        self.transitions = as_float_array(transitions, "transitions", ndim=2, shape=(L, L))
        self._vocab = None
        self._dense = None
        self._families = None

    @property
    def n_labels(self) -> int:
        """Number of labels."""
        return len(self.labels)

    def __repr__(self) -> str:
        return (
            f"CRFsuiteModel(n_labels={self.n_labels}, n_attributes={len(self.attributes)}, "
            f"n_state_features={self.state_weights.nnz})"
        )

    # ------------------------------------------------------------------ readers

    @classmethod
    def from_bytes(cls, data: bytes) -> "CRFsuiteModel":
        """Read a model from the bytes of a CRFsuite model file.

        Raises
        ------
        ParameterError
            If the bytes are not a well-formed first-order CRFsuite model (bad magic or
            header, truncated, tables out of range, names that are not UTF-8, weights
            that are not finite).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ParameterTypeError(f"`data` must be bytes; got {describe(data)}")
        try:
            return cls._parse(bytes(data))
        except (struct.error, UnicodeDecodeError, IndexError, OverflowError, MemoryError) as exc:
            raise ParameterError(f"not a well-formed CRFsuite model ({type(exc).__name__}: "
                                 f"{exc})") from None
        except ValueError as exc:
            if isinstance(exc, ParameterError):
                raise
            raise ParameterError(f"not a well-formed CRFsuite model ({exc})") from None

    @classmethod
    def _parse(cls, buf: bytes) -> "CRFsuiteModel":
        if len(buf) < _HEADER.size or buf[:4] != b"lCRF":
            raise ParameterError(
                "not a CRFsuite model: the file does not start with the magic bytes b'lCRF'"
            )
        (
            _m,
            size,
            mtype,
            _version,
            _nf,
            n_labels,
            n_attrs,
            off_feat,
            off_labels,
            off_attrs,
            _off_lrefs,
            _off_arefs,
        ) = _HEADER.unpack_from(buf, 0)
        if mtype != b"FOMC":
            raise ParameterError(
                f"unsupported CRFsuite model type {mtype!r} (only first-order 'FOMC')"
            )
        if size != len(buf):
            raise ParameterError(
                f"truncated CRFsuite model: header says {size} bytes, got {len(buf)}"
            )
        chunk, csize, n_feat = _CHUNK.unpack_from(buf, off_feat)
        if chunk != b"FEAT" or csize != _CHUNK.size + n_feat * _FEATURE.itemsize:
            raise ParameterError("not a CRFsuite model: bad feature chunk")
        feats = np.frombuffer(buf, dtype=_FEATURE, count=n_feat, offset=off_feat + _CHUNK.size)
        labels = _cqdb_strings(buf, off_labels, "label")
        attrs = _cqdb_strings(buf, off_attrs, "attribute")
        if len(labels) != n_labels or len(attrs) != n_attrs:
            raise ParameterError("CRFsuite model: label/attribute counts disagree with the header")
        state = feats["type"] == 0
        trans = feats["type"] == 1
        if not (state | trans).all():
            raise ParameterError("CRFsuite model: unknown feature type")
        f_s, f_t = feats[state], feats[trans]
        if not np.isfinite(feats["weight"]).all():
            raise ParameterError("CRFsuite model: a feature weight is NaN or infinite")
        if (
            (f_s["src"] >= n_attrs).any()
            or (f_s["dst"] >= n_labels).any()
            or ((f_t["src"] >= n_labels).any() or (f_t["dst"] >= n_labels).any())
        ):
            raise ParameterError(
                "CRFsuite model: a feature refers to an unknown label or attribute"
            )
        import scipy.sparse as sp

        W = sp.coo_matrix(
            (
                f_s["weight"].astype(np.float64),
                (f_s["src"].astype(np.int64), f_s["dst"].astype(np.int64)),
            ),
            shape=(n_attrs, n_labels),
        ).tocsr()
        T = np.zeros((n_labels, n_labels))
        np.add.at(T, (f_t["src"].astype(np.int64), f_t["dst"].astype(np.int64)), f_t["weight"])
        return cls(labels, attrs, W, T)

    @classmethod
    def from_file(cls, path) -> "CRFsuiteModel":
        """Read a CRFsuite model file (as written by ``pycrfsuite.Trainer.train``)."""
        if not isinstance(path, (str, os.PathLike)):
            raise ParameterTypeError(f"`path` must be a file path; got {describe(path)}")
        if not os.path.isfile(path):
            raise ParameterError(f"`path`: no such CRFsuite model file {os.fspath(path)!r}")
        with open(path, "rb") as f:
            data = f.read()
        try:
            return cls.from_bytes(data)
        except ParameterError as exc:
            raise ParameterError(f"`path` {os.fspath(path)!r}: {exc}") from None

    @classmethod
    def from_tagger(cls, tagger) -> "CRFsuiteModel":
        """Recover the model of an opened ``pycrfsuite.Tagger`` from its own probabilities.

        A Tagger keeps no trace of the file or bytes it was opened with (the Python object
        holds only the C++ tagger), and python-crfsuite shows the weights only through
        ``Tagger.dump()`` / ``Tagger.info()``, which print them with C's ``%f`` (CRFsuite's
        ``crf1dm_dump``): 6 decimals. So the weights are measured instead:

        - state features: a one-token sequence holding only attribute ``a`` (value ``v``)
          has the marginals ``softmax(v * w[a, :])`` (a first-order CRFsuite model has no
          start or end scores), so ``log p(y) - log p(r)`` over ``v`` is
          ``w[a, y] - w[a, r]``; with ``r`` a label ``a`` has no feature for
          (``w[a, r] = 0`` exactly; ``info()`` tells which features exist) that is
          ``w[a, y]``, equal to the file's weight up to floating-point rounding (1e-15 on
          the WNUT-17 model). ``v`` is 1, or smaller where the weights are large enough
          to underflow ``exp``;
        - transitions: a two-token sequence without attributes has
          ``p(a, b) = exp(T[a, b]) / Z``, so ``log p(a, b)`` is ``T[a, b]`` up to one
          constant.

        Where an attribute has a feature for every label, and for the transitions, only
        differences are measured; a constant added to all of an attribute's weights (or to
        all transitions) changes no probability of any labeling, and it is taken from the
        6-decimal ``info()`` values, so those weights are within 1e-6 of the file's and
        every probability is as exact as with the file. Reading the model file
        (:meth:`from_file`) gives the stored weights bit for bit and is faster: for the
        26,636 attributes of ``wnut17_tagger_path()`` this takes 0.8 s CPU, reading the
        file 0.03 s.

        Parameters
        ----------
        tagger : pycrfsuite.Tagger
            An opened tagger. Its current sequence (of ``set`` / ``tag``) is replaced.

        Returns
        -------
        CRFsuiteModel
        """
        import math

        try:
            info = tagger.info()
            labels = tuple(tagger.labels())
        except (RuntimeError, ValueError, OSError) as exc:
            raise ParameterError(f"`tagger`: no model is open in this pycrfsuite.Tagger ({exc})") from None
        n_labels = len(labels)
        label_id = {name: i for i, name in enumerate(labels)}
        attributes = [None] * len(info.attributes)
        for name, i in info.attributes.items():
            attributes[int(i)] = name
        attribute_id = {name: i for i, name in enumerate(attributes)}
        readable = None not in attributes and all(
            a in attribute_id and lab in label_id for a, lab in info.state_features
        ) and all(a in label_id and b in label_id for a, b in info.transitions)
        if not readable:
            raise ParameterError(
                "`tagger`: its dump (Tagger.info()) could not be read back (a label or attribute "
                "name with a newline or ' --> ' in it?); read the model file instead"
            )
        rounded: dict = {}  # attribute -> [(label id, 6-decimal weight)]
        for (a, lab), w in info.state_features.items():
            rounded.setdefault(a, []).append((label_id[lab], w))
        rows, cols, vals = [], [], []
        for a, feats in rounded.items():
            # scores within +-100: exp(-200) does not underflow, log keeps 1e-16 relative
            v = min(1.0, 100.0 / max(1e-300, max(abs(w) for _, w in feats)))
            tagger.set([{a: v}])
            log_p = [math.log(tagger.marginal(labels[y], 0)) for y, _ in feats]
            have = {y for y, _ in feats}
            if len(have) < n_labels:  # a label without a feature: weight 0 exactly
                ref = math.log(tagger.marginal(labels[next(y for y in range(n_labels) if y not in have)], 0))
                w_a = [(lp - ref) / v for lp in log_p]
            else:
                w_a = [lp / v for lp in log_p]
                shift = sum(w - x for (_, w), x in zip(feats, w_a)) / len(feats)
                w_a = [x + shift for x in w_a]
            rows += [attribute_id[a]] * len(feats)
            cols += [y for y, _ in feats]
            vals += w_a
        T = np.zeros((n_labels, n_labels))
        if info.transitions:
            tagger.set([{}, {}])
            pairs = [(label_id[a], label_id[b], w) for (a, b), w in info.transitions.items()]
            with np.errstate(divide="ignore"):
                log_p = np.log([tagger.probability([labels[a], labels[b]]) for a, b, _ in pairs])
            if not np.isfinite(log_p).all():
                raise ParameterError(
                    "`tagger`: transition weights too far apart to measure (exp underflows); "
                    "read the model file instead"
                )
            # pairs without a feature have weight 0: T is known exactly up to one constant
            src, dst, w = (np.array(x) for x in zip(*pairs))
            if len(pairs) < n_labels * n_labels:
                free = np.ones((n_labels, n_labels), dtype=bool)
                free[src, dst] = False
                a0, b0 = np.argwhere(free)[0]
                zero = math.log(tagger.probability([labels[a0], labels[b0]]))
                T[src, dst] = log_p - zero
            else:
                T[src, dst] = log_p + float(np.mean(w - log_p))
        import scipy.sparse as sp

        W = sp.csr_matrix((vals, (rows, cols)), shape=(len(attributes), n_labels))
        return cls(labels, attributes, W, T)

    @classmethod
    def from_model(cls, model) -> "CRFsuiteModel":
        """Read the model behind a path, bytes, a ``sklearn_crfsuite.CRF``, a ``pycrfsuite.Tagger`` or a CRFsuiteModel.

        A path, bytes and a fitted ``sklearn_crfsuite.CRF`` (through its model file) give
        the stored weights bit for bit; a ``pycrfsuite.Tagger`` keeps no model file, and its
        weights are measured from its probabilities (:meth:`from_tagger`).
        """
        if isinstance(model, CRFsuiteModel):
            return model
        if isinstance(model, (str, os.PathLike)):
            return cls.from_file(model)
        if isinstance(model, (bytes, bytearray, memoryview)):
            return cls.from_bytes(model)
        kind = f"{type(model).__module__}.{type(model).__name__}"
        if kind.startswith("sklearn_crfsuite") and hasattr(model, "modelfile"):
            name = getattr(model.modelfile, "name", None)
            if name is None:
                raise ParameterError(
                    "`model`: this sklearn_crfsuite.CRF is not fitted (no model file)"
                )
            return cls.from_file(name)
        if kind.startswith("pycrfsuite") and type(model).__name__ == "Tagger":
            return cls.from_tagger(model)
        raise ParameterTypeError(
            "`model` must be a CRFsuite model file path, its bytes, a fitted sklearn_crfsuite.CRF, "
            f"an opened pycrfsuite.Tagger or a CRFsuiteModel; got {describe(model)}"
        )

    # ------------------------------------------------------------------ features

    def _vocabulary(self):
        """``(by_key, by_name)`` lookups of the attribute ids (built once)."""
        if self._vocab is None:
            by_name = {a: i for i, a in enumerate(self.attributes)}
            by_key: dict = {}
            for a, i in by_name.items():
                k = a.find(":")
                while k >= 0:  # "w:a:b" may be key "w" value "a:b" or key "w:a" value "b"
                    by_key.setdefault(a[:k], {})[a[k + 1 :]] = i
                    k = a.find(":", k + 1)
            self._vocab = (by_key, by_name)
        return self._vocab

    def attribute_matrix(self, X) -> tuple:
        """Attribute values of every token: ``(A of shape (n_tokens, n_attributes), lengths)``.

        Parameters
        ----------
        X : list of sequences of dict (or of list of str)
            Per-token feature dicts of each sentence, as given to ``Tagger.tag`` or
            ``sklearn_crfsuite.CRF.predict``.

        Returns
        -------
        A : scipy.sparse.csr_matrix of shape (n_tokens, n_attributes)
            Attribute values of the tokens of all sentences laid end to end (attributes
            the model has never seen are left out, as CRFsuite does).
        lengths : ndarray of shape (n_sentences,)

        Raises
        ------
        ParameterTypeError
            If a feature name is not a str (bytes are decoded) or a value is of another
            type than python-crfsuite accepts.
        ParameterError
            If a numeric value is NaN or infinite (CRFsuite would score the token NaN).

        Notes
        -----
        Flat feature dicts (str keys; str, bool or number values, or lists of str) take a
        fast path: the tokens are grouped by their keys (a feature extractor gives most
        tokens the same keys), and the values of one key across a group are one column,
        checked and looked up in the model's vocabulary in one C-level pass (``key:value``
        for strings and for each item of a list, the attribute ``key`` for numbers; no
        attribute name is built); the matrix is
        assembled with NumPy. Tokens whose keys vary too much for groups to pay off take
        one lookup per ``(key, value)`` pair. Other inputs (nested dicts, lists, bytes, a
        key with both str and number values) are flattened exactly as python-crfsuite
        does, token by token. Zero values (``False``) are left out of the matrix.
        """
        if isinstance(X, (str, bytes, dict)) or not hasattr(X, "__len__"):
            raise ParameterTypeError(
                f"`X` must be a list of sentences (lists of feature dicts); got {describe(X)}"
            )
        for i, sent in enumerate(X):
            if isinstance(sent, dict):
                raise ParameterTypeError(
                    f"`X` must be a list of sentences, each a list of per-token feature dicts; "
                    f"X[{i}] is a feature dict: to score one sentence, pass [sentence] (as "
                    "sklearn_crfsuite's predict_single does for you)"
                )
            if isinstance(sent, (str, bytes)) or not hasattr(sent, "__len__"):
                raise ParameterTypeError(
                    f"`X[{i}]` must be a sentence (a list of per-token feature dicts); got "
                    f"{describe(sent)}"
                )
            for j, tok in enumerate(sent):
                if not isinstance(tok, (dict, list, tuple)):
                    raise ParameterTypeError(
                        f"`X[{i}][{j}]` must be a token's features: a dict (name -> value) or "
                        f"a list of attribute names; got {describe(tok)}"
                    )
                break  # the first token's type; the rest are checked while flattening
        lengths = np.fromiter((len(s) for s in X), dtype=np.int64, count=len(X))
        tokens = list(chain.from_iterable(X))
        vocab = self._vocabulary()
        A = _fast_matrix(tokens, vocab, len(self.attributes))
        if A is None:  # flatten as python-crfsuite does
            flat = [_flatten(tok) for tok in tokens]  # names -> numeric values
            A = _fast_matrix(flat, vocab, len(self.attributes))
        if self._families is None:
            self._families = _feature_families(self.attributes)
        _warn_unknown_attributes(A, self._families)
        return A, lengths

    def unary(self, X) -> tuple[np.ndarray, np.ndarray]:
        """State scores of every token and label: ``(unary (n_tokens, n_labels), lengths)``."""
        A, lengths = self.attribute_matrix(X)
        return np.ascontiguousarray(A @ self._dense_weights(), dtype=np.float64), lengths

    def _dense_weights(self) -> np.ndarray:
        # (n_attributes, n_labels) dense: a CSR-times-dense product is one pass over A
        if self._dense is None:
            self._dense = self.state_weights.toarray()
        return self._dense

    def potentials(self, X):
        """:class:`~structcal.ChainPotentials` of the sentences ``X`` under this model.

        The potentials carry the model's tag names (``label_names``), so that entity
        event kinds built with the tags in another order are refused.

        Warns
        -----
        UnknownAttributeWarning
            When most tokens match no attribute of the model (see
            :meth:`attribute_matrix`).
        """
        from ..potentials import ChainPotentials

        U, lengths = self.unary(X)
        offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return ChainPotentials(U, offsets, self.transitions, label_names=self.labels)


#: Above this share of tokens with no attribute the model knows,
#: :meth:`CRFsuiteModel.attribute_matrix` warns (:class:`UnknownAttributeWarning`).
UNKNOWN_TOKEN_SHARE = 0.5


#: Below this share of the model's feature names (the part of an attribute before its
#: first ``:``) ever seen in a batch of at least ``FEATURE_NAME_MIN_TOKENS`` tokens,
#: :meth:`CRFsuiteModel.attribute_matrix` warns: the tokens carry other features than the
#: model's, even if each still matches one attribute (a ``bias`` every extractor has).
SEEN_FEATURE_NAME_SHARE = 0.2
FEATURE_NAME_MIN_TOKENS = 200


def _feature_name(attribute: str) -> str:
    return attribute.split(":", 1)[0]


def _feature_families(attributes) -> tuple:
    """``(families, code)``: the sorted feature names of the model's attributes and the
    family of each attribute."""
    names = np.asarray([_feature_name(a) for a in attributes], dtype=object)
    if names.shape[0] == 0:
        return np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    return np.unique(names, return_inverse=True)


def _warn_unknown_attributes(A, families):
    """Warn when most tokens match no attribute of the model, or when the batch uses few of
    the model's feature names (features of another model; ``families`` from
    :func:`_feature_families`)."""
    import warnings

    from ..exceptions import UnknownAttributeWarning

    n = A.shape[0]
    if n == 0:
        return
    blank = int(np.count_nonzero(np.diff(A.indptr) == 0))
    if blank > UNKNOWN_TOKEN_SHARE * n:
        warnings.warn(
            f"{blank} of {n} tokens ({100 * blank / n:.0f}%) match no attribute of the model: "
            "their state scores are all zero, so the tagger sees nothing of them. Are these the "
            "features the model was trained on (same feature function, same names)?",
            UnknownAttributeWarning, stacklevel=4,
        )
        return
    if n < FEATURE_NAME_MIN_TOKENS:
        return
    families, code = families
    if families.shape[0] < 5:
        return
    used = np.zeros(code.shape[0], dtype=bool)
    used[A.indices] = True
    seen = np.zeros(families.shape[0], dtype=bool)
    seen[code[used]] = True
    if seen.mean() < SEEN_FEATURE_NAME_SHARE:
        weight = np.bincount(code, minlength=families.shape[0])
        top = [str(f) for f in families[np.argsort(-weight, kind="stable")][:6]]
        shown = [str(f) for f in families[seen][:4]]
        warnings.warn(
            f"the tokens use {int(seen.sum())} of the model's {families.shape[0]} feature names "
            f"({shown}): the model was trained on other features, such as {top}. Give the "
            "feature function it was trained on (in the CLI, --token-features MODULE:FUNCTION)",
            UnknownAttributeWarning, stacklevel=4,
        )


def _fast_matrix(tokens, vocab, n_attributes: int):
    """CSR attribute matrix of flat feature dicts (None if some value needs flattening).

    ``vocab`` is ``(by_key, by_name)``: ``by_key[key][value]`` is the id of attribute
    ``key:value`` (for every ``:`` in the name) and ``by_name[name]`` the id of ``name``.
    A feature extractor gives most tokens the same keys, so tokens are grouped by their
    keys (:func:`_key_groups`) and each key of a group is one column of values, looked up
    in one C-level pass (:func:`_column_ids`); if the groups are small, every
    ``(key, value)`` pair is looked up instead (:func:`_pair_matrix`). No attribute name
    is built either way.
    """
    if not all(map(dict.__instancecheck__, tokens)):
        return None
    n_tok = len(tokens)
    groups = _key_groups(tokens)
    if groups is None:
        return _pair_matrix(tokens, vocab, n_attributes)
    bad = [int(m[0]) for m, keys, _ in groups if not set(map(type, keys)) <= {str}]
    if bad:
        token = min(bad)
        key = next(k for k in tokens[token] if not isinstance(k, str))
        return _bad_key(key, token)
    width = max((len(keys) for _, keys, _ in groups), default=0)
    ids = np.full((n_tok, width), -1, dtype=np.int64)
    vals = np.zeros((n_tok, width))
    extra_rows, extra_ids = [], []  # list-valued keys: any number of attributes per token
    for members, keys, flat in groups:
        n_k = len(keys)
        id_block = np.full((n_k, members.shape[0]), -1, dtype=np.int64)
        val_block = np.zeros((n_k, members.shape[0]))
        for j, key in enumerate(keys):
            col = flat[j::n_k]
            if type(col[0]) is list:
                got = _list_column_ids(key, col, vocab, members)
                if got is None:
                    return None
                extra_rows.append(got[0])
                extra_ids.append(got[1])
                continue
            col = _column_ids(key, col, vocab, members)
            if col is None:
                return None
            if col is not _UNKNOWN:
                id_block[j], val_block[j] = col
        ids[members, :n_k] = id_block.T
        vals[members, :n_k] = val_block.T
    import scipy.sparse as sp

    known = ids >= 0
    if extra_rows:
        rows = np.concatenate([np.nonzero(known)[0]] + extra_rows)
        cols = np.concatenate([ids[known]] + extra_ids)
        data = np.concatenate([vals[known], np.ones(rows.shape[0] - int(known.sum()))])
        A = sp.coo_matrix((data, (rows, cols)), shape=(n_tok, n_attributes)).tocsr()
        A.sum_duplicates()  # a name listed twice counts twice, as in CRFsuite
        return A
    indptr = np.zeros(n_tok + 1, dtype=np.int64)
    np.cumsum(known.sum(axis=1), out=indptr[1:])
    return sp.csr_matrix((vals[known], ids[known], indptr), shape=(n_tok, n_attributes))


def _key_groups(tokens):
    """Tokens with the same keys: ``[(members, keys, values), ...]``, or None if too many groups.

    ``members`` are the tokens of a group (ascending), ``keys`` its keys and ``values``
    their values laid out token by token (``values[i * len(keys) + j]`` is the value of
    ``keys[j]`` in the group's ``i``-th token). Tokens are first grouped by their number of
    keys; a group is kept whole if every token has the first token's keys (a token with as
    many keys holding all of them has exactly them), else split by key tuple. Groups must
    hold ``_MIN_GROUP`` tokens on average.
    """
    n_tok = len(tokens)
    sizes = np.fromiter(map(len, tokens), dtype=np.int64, count=n_tok)
    order = np.argsort(sizes, kind="stable")
    starts = np.flatnonzero(np.diff(sizes[order], prepend=-1)).tolist() + [n_tok]
    groups = []
    for a, b in zip(starts[:-1], starts[1:]):
        members = order[a:b]
        run = operator.itemgetter(*members.tolist())(tokens) if b - a > 1 else (tokens[order[a]],)
        values = _values_by_keys(run, tuple(run[0]))
        if values is not None:
            groups.append((members, tuple(run[0]), values))
            continue
        shapes = list(map(tuple, run))  # same size, different keys: split by key tuple
        first: dict = {}
        code = np.fromiter(map(first.setdefault, shapes, count()), dtype=np.int64, count=b - a)
        if (len(groups) + len(first)) * _MIN_GROUP > n_tok:
            return None
        for c in first.values():
            rows = np.flatnonzero(code == c)
            sub = [run[i] for i in rows.tolist()]
            groups.append((members[rows], shapes[c], _values_by_keys(sub, shapes[c])))
    if len(groups) * _MIN_GROUP > n_tok:
        return None
    return groups


def _values_by_keys(run, keys):
    """Values of ``keys`` in every dict of ``run``, laid end to end (None if a key is missing)."""
    if not keys:
        return []
    try:
        if len(keys) == 1:
            return list(map(operator.itemgetter(keys[0]), run))
        return list(chain.from_iterable(map(operator.itemgetter(*keys), run)))
    except KeyError:
        return None


def _bad_key(key, token: int):
    """None for a bytes key (flattened later), else the error for a non-str feature name."""
    if isinstance(key, bytes):
        return None
    raise ParameterTypeError(
        f"`X`: feature names must be str; token {token} has the key {describe(key)}"
    )


def _column_ids(key: str, col: list, vocab, tokens: np.ndarray):
    """Attribute ids and values of one key's values (``-1`` where unknown or zero).

    A column of str values is looked up in ``by_key[key]`` (value 1); a column of numbers
    or bools is the attribute ``key`` with those values. Returns None if the column mixes
    the two or holds anything else (the caller then flattens token by token), and
    ``_UNKNOWN`` if the model has no attribute for the key.
    """
    by_key, by_name = vocab
    if type(col[0]) is str:
        try:
            "".join(col)  # TypeError unless every value is a str
        except TypeError:
            return None
        sub = by_key.get(key)
        if sub is None:
            return _UNKNOWN
        return np.fromiter(map(sub.get, col, repeat(-1)), dtype=np.int64, count=len(col)), 1.0
    n_true = col.count(True)
    if n_true + col.count(False) == len(col):  # all 0 or 1 (bools, mostly): no conversion
        values = np.fromiter(col, dtype=bool, count=len(col)).astype(np.float64)
    else:
        values = np.array(col)
        if values.ndim != 1 or values.dtype.kind not in "biuf":
            return None
        values = values.astype(np.float64)
        _check_finite(key, values, tokens)
    j = by_name.get(key)
    if j is None:
        return _UNKNOWN
    return np.where(values != 0, j, -1), values


def _list_column_ids(key: str, col: list, vocab, tokens: np.ndarray):
    """``(rows, ids)`` of one key whose values are lists of str (attributes ``key:item``).

    ``rows`` are the tokens (from ``tokens``) of the known attributes; unknown items are
    left out. Returns None unless every value is a list of str (the caller then flattens
    token by token).
    """
    if not all(map(list.__instancecheck__, col)):
        return None
    items = list(chain.from_iterable(col))
    try:
        "".join(items)  # TypeError unless every item is a str
    except TypeError:
        return None
    counts = np.fromiter(map(len, col), dtype=np.int64, count=len(col))
    sub = vocab[0].get(key, _EMPTY)
    ids = np.fromiter(map(sub.get, items, repeat(-1)), dtype=np.int64, count=len(items))
    keep = ids >= 0
    return np.repeat(tokens, counts)[keep], ids[keep]


def _check_finite(key, values: np.ndarray, tokens: np.ndarray):
    """Raise if a numeric feature value is NaN or infinite (CRFsuite would score it NaN).

    ``tokens`` is the token of each value.
    """
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ParameterError(
            f"`X`: the value of feature {key!r} must be finite; token {int(tokens[bad[0]])} "
            f"has {values[bad[0]]}"
        )


def _pair_matrix(tokens, vocab, n_attributes: int):
    """CSR attribute matrix of flat feature dicts with str keys, one lookup per (key, value).

    Every pass is a C-level ``map`` / ``chain`` / ``compress`` over the batch's keys and
    values (None if some value needs flattening).
    """
    by_key, by_name = vocab
    counts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    keys = list(chain.from_iterable(map(dict.keys, tokens)))
    values = list(chain.from_iterable(map(dict.values, tokens)))
    if not set(map(type, keys)) <= {str}:
        pos = next(i for i, k in enumerate(keys) if not isinstance(k, str))
        return _bad_key(keys[pos], int(np.searchsorted(np.cumsum(counts), pos, side="right")))
    vtypes = list(map(type, values))
    if not set(vtypes) <= _FAST_VALUE_TYPES:
        return None
    n = len(keys)
    is_num = list(map(operator.is_not, vtypes, repeat(str)))
    num = np.fromiter(is_num, dtype=bool, count=n)
    n_num = int(num.sum())
    # string values: attribute key:value (a numeric value finds no str key there)
    idx = np.fromiter(map(dict.get, map(by_key.get, keys, repeat(_EMPTY)), values, repeat(-1)),
                      dtype=np.int64, count=n)
    vals = np.ones(n)
    if n_num:
        idx[num] = np.fromiter(map(by_name.get, compress(keys, is_num), repeat(-1)),
                               dtype=np.int64, count=n_num)
        vals[num] = np.fromiter(compress(values, is_num), dtype=np.float64, count=n_num)
        if not np.isfinite(vals).all():
            bad = int(np.flatnonzero(~np.isfinite(vals))[0])
            token = np.searchsorted(np.cumsum(counts), [bad], side="right")
            _check_finite(keys[bad], vals[bad : bad + 1], token)
    # rows are already in token order: build the CSR arrays directly (no sort)
    known = idx >= 0
    row_of = np.repeat(np.arange(len(tokens), dtype=np.int64), counts)
    indptr = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of[known], minlength=len(tokens)), out=indptr[1:])
    import scipy.sparse as sp

    return sp.csr_matrix((vals[known], idx[known], indptr), shape=(len(tokens), n_attributes))


#: the grouped path of _fast_matrix needs groups of at least this many tokens on average
_MIN_GROUP = 32
_UNKNOWN = object()
_EMPTY: dict = {}
_FAST_VALUE_TYPES = {str, bool, int, float, np.float64, np.bool_}


def _flatten(tok, prefix: str = "") -> dict:
    """python-crfsuite's item conversion: attribute name -> value."""
    out: dict = {}

    def add(name, value):
        out[name] = out.get(name, 0.0) + value

    if isinstance(tok, dict):
        for k, v in tok.items():
            if isinstance(k, bytes):
                k = k.decode("utf-8")
            if not isinstance(k, str):
                raise ParameterTypeError(
                    f"`X`: feature names must be str; got the key {describe(k)}"
                )
            name = prefix + k
            if isinstance(v, (dict, list, set, tuple)):
                for sub, val in _flatten(v, name + ":").items():
                    add(sub, val)
            elif isinstance(v, str):
                add(name + ":" + v, 1.0)
            elif isinstance(v, bytes):
                add(name + ":" + v.decode("utf-8"), 1.0)
            elif isinstance(v, (bool, int, float, np.number, np.bool_)):
                add(name, float(v))
            else:
                raise ParameterTypeError(
                    f"`X`: the value of feature {name!r} must be a str, number, bool, dict or "
                    f"list; got {describe(v)}"
                )
    else:
        for k in tok:
            if isinstance(k, bytes):
                k = k.decode("utf-8")
            if not isinstance(k, str):
                raise ParameterTypeError(f"`X`: attribute names must be str; got {describe(k)}")
            add(prefix + k, 1.0)
    return out


def crfsuite_potentials(model, X):
    """ChainPotentials of sentences under a CRFsuite model, with its exact weights.

    Parameters
    ----------
    model : str, path, bytes, sklearn_crfsuite.CRF, pycrfsuite.Tagger or CRFsuiteModel
        The trained model (read once; pass a :class:`CRFsuiteModel` to reuse it). A
        Tagger's weights are measured from its probabilities
        (:meth:`CRFsuiteModel.from_tagger`).
    X : list of list of dict
        Per-token feature dicts of each sentence (as for ``CRF.predict``).

    Returns
    -------
    potentials : ChainPotentials
        One chain per sentence; labels are the model's label ids.
    labels : tuple of str
        The tag name of each label id.

    Examples
    --------
    >>> from structcal.adapters import CRFsuiteModel, crfsuite_potentials
    >>> import numpy as np, scipy.sparse as sp
    >>> m = CRFsuiteModel(["O", "B-X"], ["w:a"], sp.csr_matrix([[0.0, 2.0]]), np.zeros((2, 2)))
    >>> p, labels = crfsuite_potentials(m, [[{"w": "a"}, {"w": "b"}]])
    >>> p.unary.tolist(), labels
    ([[0.0, 2.0], [0.0, 0.0]], ('O', 'B-X'))
    """
    m = CRFsuiteModel.from_model(model)
    return m.potentials(X), m.labels
