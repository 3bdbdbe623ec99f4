"""CRFsuite / sklearn-crfsuite models as ChainPotentials, with the model's exact weights.

A CRFsuite first-order CRF scores a labeling by state features (attribute, label) times
the attribute's value and transition features (label, label); there is no start or end
score. :class:`CRFsuiteModel` reads the weights from the binary model file, where they are
stored as IEEE doubles: ``Tagger.info()`` and sklearn-crfsuite's ``state_features_`` /
``transition_features_`` go through CRFsuite's text dump, which prints 6 decimals.

Feature dicts are turned into attributes exactly as python-crfsuite does: a string value
``{"w": "abc"}`` is the attribute ``"w:abc"`` with value 1; a number or bool is the
attribute ``"w"`` with that value; a nested dict or list/set of strings is prefixed with
``"w:"``; an item given as a list of strings has each string with value 1. Attributes the
model has never seen are ignored (as CRFsuite does). The lookup is one
:class:`sklearn.feature_extraction.DictVectorizer` transform with the model's attribute
vocabulary, and the unary scores one sparse matrix product.

References
----------
N. Okazaki, *CRFsuite: a fast implementation of Conditional Random Fields*, 2007.
http://www.chokkan.org/software/crfsuite/
"""

from __future__ import annotations

import os
import struct

import numpy as np
import scipy.sparse as sp

from .._validation import describe
from ..exceptions import ParameterError, ParameterTypeError

__all__ = ["CRFsuiteModel", "crfsuite_potentials"]

_HEADER = struct.Struct("<4sI4sI8I")
_CHUNK = struct.Struct("<4sII")
_FEATURE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])


def _cqdb_strings(buf: bytes, offset: int, what: str) -> list[str]:
    """The id -> string table of a CRFsuite constant quark database (CQDB) chunk."""
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

    Build it with :meth:`from_file`, :meth:`from_bytes` or :meth:`from_model`.

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
        self.state_weights = sp.csr_matrix(state_weights, dtype=np.float64)
        self.transitions = np.ascontiguousarray(transitions, dtype=np.float64)
        self._vectorizer = None

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
        """Read a model from the bytes of a CRFsuite model file."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ParameterTypeError(f"`data` must be bytes; got {describe(data)}")
        buf = bytes(data)
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
        if (
            (f_s["src"] >= n_attrs).any()
            or (f_s["dst"] >= n_labels).any()
            or ((f_t["src"] >= n_labels).any() or (f_t["dst"] >= n_labels).any())
        ):
            raise ParameterError(
                "CRFsuite model: a feature refers to an unknown label or attribute"
            )
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
    def from_model(cls, model) -> "CRFsuiteModel":
        """Read the model behind a path, bytes, a ``sklearn_crfsuite.CRF`` or a CRFsuiteModel.

        A ``pycrfsuite.Tagger`` does not expose its model file; open the file it was opened
        with instead (its ``info()`` weights are rounded to 6 decimals).
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
        if kind.startswith("pycrfsuite"):
            raise ParameterTypeError(
                "`model`: a pycrfsuite.Tagger does not expose its model file, and its info() "
                "weights are rounded to 6 decimals; pass the path of the model file it was opened with"
            )
        raise ParameterTypeError(
            "`model` must be a CRFsuite model file path, its bytes, a fitted sklearn_crfsuite.CRF "
            f"or a CRFsuiteModel; got {describe(model)}"
        )

    # ------------------------------------------------------------------ features

    def _dict_vectorizer(self):
        if self._vectorizer is None:
            from sklearn.feature_extraction import DictVectorizer

            dv = DictVectorizer(separator=":", dtype=np.float64)
            dv.feature_names_ = self.attributes
            dv.vocabulary_ = {a: i for i, a in enumerate(self.attributes)}
            self._vectorizer = dv
        return self._vectorizer

    def attribute_matrix(self, X) -> tuple[sp.csr_matrix, np.ndarray]:
        """Attribute values of every token: ``(A of shape (n_tokens, n_attributes), lengths)``.

        Parameters
        ----------
        X : list of sequences of dict (or of list of str)
            Per-token feature dicts of each sentence, as given to ``Tagger.tag`` or
            ``sklearn_crfsuite.CRF.predict``.
        """
        if isinstance(X, (str, bytes, dict)) or not hasattr(X, "__len__"):
            raise ParameterTypeError(
                f"`X` must be a list of sentences (lists of feature dicts); got {describe(X)}"
            )
        lengths = np.fromiter((len(s) for s in X), dtype=np.int64, count=len(X))
        tokens = [tok for sent in X for tok in sent]
        A = None
        if _plain_dicts(tokens):
            try:
                A = self._dict_vectorizer().transform(tokens)
            except TypeError:  # nested dicts or bytes values
                A = None
        if A is None:  # flatten as python-crfsuite does
            A = self._dict_vectorizer().transform([_flatten(tok) for tok in tokens])
        return sp.csr_matrix(A), lengths

    def unary(self, X) -> tuple[np.ndarray, np.ndarray]:
        """State scores of every token and label: ``(unary (n_tokens, n_labels), lengths)``."""
        A, lengths = self.attribute_matrix(X)
        U = A @ self.state_weights
        return np.asarray(U.toarray() if sp.issparse(U) else U, dtype=np.float64), lengths

    def potentials(self, X):
        """:class:`~structcal.ChainPotentials` of the sentences ``X`` under this model."""
        from ..potentials import ChainPotentials

        U, lengths = self.unary(X)
        offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return ChainPotentials(U, offsets, self.transitions)


def _plain_dicts(tokens) -> bool:
    """Whether every token is a dict with str keys (else: flatten; raise on bad keys)."""
    plain = True
    for i, tok in enumerate(tokens):
        if not isinstance(tok, dict):
            plain = False
            continue
        for k in tok:
            if not isinstance(k, str):
                if isinstance(k, bytes):
                    plain = False
                    continue
                raise ParameterTypeError(
                    f"`X`: feature names must be str; token {i} has the key {describe(k)}"
                )
    return plain


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
            else:
                add(name, float(v))
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
    model : str, path, bytes, sklearn_crfsuite.CRF or CRFsuiteModel
        The trained model (read once; pass a :class:`CRFsuiteModel` to reuse it).
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
