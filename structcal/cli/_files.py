"""Input batches and output files of the CLI commands (private).

Input: one ``.npz`` file (``allow_pickle=False``) holding a batch of chains or graphs as
flat arrays, optionally with gold labels. Every problem is reported as a
:class:`InputError` naming the file; the commands turn it into one line on stderr and
exit code 2. Outputs are written to a temporary file next to the destination and renamed
into place, so an interrupted or failed command leaves no partial file.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..exceptions import StructcalError, UnknownAttributeWarning

__all__ = [
    "InputError", "Batch", "load_batch", "load_conll_batch", "load_events_file",
    "load_token_features", "EVENTS_FORMAT",
    "token_features_of", "atomic_path", "NPZ_FORMAT", "CONLL_FORMAT",
]

#: The input format, as shown in ``--help``.
NPZ_FORMAT = """\
input .npz arrays (a batch of chains or graphs laid end to end, K labels):
  unary                (n_tokens, K) float  log-potentials / scores per token or node
                                              (alias: scores)
  lengths              (n_items,) int       tokens (nodes) per item, or
  offsets              (n_items + 1,) int   item i is rows offsets[i]:offsets[i+1]
  chains:
    transitions        (K, K) float         shared transition log-potentials, or
    pairwise           (K, K) or (n_edges, K, K)  shared or per-edge (edges of each
                                              chain in order, sum(max(L - 1, 0)) of them)
    start, end         (K,) float           optional first/last-label scores
  graphs:
    edges              (n_edges, 2) int     global node indices, grouped by graph
    pairwise           (K, K) or (n_edges, K, K), or
                       (n_types, K, K) with edge_type: one matrix per edge type
    edge_type          (n_edges,) int       optional: each edge's type, in 0..n_types-1
    potts              () or (n_edges,) float  Potts weights
  labels               (n_tokens,) int      gold labels in 0..K-1 (fit, evaluate)
  unstructured_scores  (n_tokens, K) float  optional: an unstructured classifier's
                                              scores (features phi_no1, phi_no2)
  groups               (n_items,) int or str  optional: the group (document, image,
                                              writer) of each item; cross-validation
                                              and intervals never split a group"""

#: The CoNLL input, as shown in ``--help``.
CONLL_FORMAT = """\
CRFsuite model + CoNLL tokens (--crfsuite MODEL, data = a text file):
  one token per line, columns separated by whitespace: the token first, the gold tag
  last (tags are needed by fit and evaluate; with one column there are none); blank
  lines end sentences; -DOCSTART- lines separate documents (the default groups: see
  --groups). With --conll-tags none there are no gold tags and every column is the
  token's own. Event kinds for entities (entity,
  contains_entity, all_entities) use the model's tag names with --scheme (default BIO).
  Each token's CRFsuite features must be those the model was trained on: by default
  structcal.datasets.token_features (word, shape, affixes, letter trigrams, tweet
  marks and a +-2 word window: the shipped WNUT-17 tagger's features); with --token-features MODULE:FUNCTION (or
  path/to/file.py:FUNCTION) your own: FUNCTION(sentences) gets the sentences (lists of
  token strings) and returns one list per sentence holding one feature dict per token
  (or a list of attribute names), as given to pycrfsuite.Trainer.append; if FUNCTION
  takes a second argument it also gets each sentence's rows: per token, the tuple of
  its columns but the gold tag (token, part of speech, chunk, ...). MODULE is
  imported from the Python path (PYTHONPATH, or an installed package). Give the same
  --token-features to fit, apply and evaluate. For example, with a file feats.py:
      def word2features(sentences):
          return [[{"lower": w.lower(), "istitle": w.istitle()} for w in sent]
                  for sent in sentences]
  and give --crfsuite ner.crfsuite --token-features feats.py:word2features."""

_KNOWN = {
    "unary", "scores", "lengths", "offsets", "transitions", "pairwise", "start", "end",
    "edges", "edge_type", "potts", "labels", "unstructured_scores", "groups",
}


class InputError(Exception):
    """A CLI input or option is unusable; the message names the file and the problem."""


@dataclass
class Batch:
    """A loaded input file."""

    path: Path
    prediction: object  # StructuredPrediction
    labels: np.ndarray | None
    structure: str  # "chain", "graph" or "events"
    tag_names: tuple | None = None  # label names (CRFsuite input)
    groups: np.ndarray | None = None  # group of each item (documents, images), if known
    table: object = None  # the events of an events file (structure "events")
    item_ids: np.ndarray | None = None  # the items' ids in an events file

    @property
    def units(self) -> str:
        """What the items are, in the plural: ``chains``, ``graphs`` or ``items``."""
        return "items" if self.structure == "events" else f"{self.structure}s"

    @property
    def n_items(self) -> int:
        """Number of chains, graphs or items."""
        if self.table is not None:
            return int(self.table.n_items)
        return int(self.prediction.n_items)


def _read_npz(path: Path) -> dict:
    from .._npz import NPZError, read_npz

    try:
        return read_npz(path)
    except NPZError as exc:
        raise InputError(str(exc)) from None


def _int_array(arrays, name, path, ndim):
    a = arrays[name]
    if a.ndim != ndim:
        raise InputError(f"{path}: `{name}` must be {ndim}-d; got shape {a.shape}")
    if a.dtype.kind not in "iu":  # as the Python API: nothing is rounded
        hint = (" (floats are not rounded: save integral values as integers, e.g. "
                f"{name}.astype(np.int64))" if a.dtype.kind == "f" else "")
        raise InputError(f"{path}: `{name}` must hold integers; got dtype {a.dtype}{hint}")
    if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
        raise InputError(f"{path}: `{name}` holds values too large for int64")
    return a.astype(np.int64)


def _index_array(arrays, name, path, rows, values):
    """Read integers in ``0..n - 1``, one per row (labels, edge types).

    ``rows`` is ``(n_rows, what a row is)``, ``values`` is ``(n, where n comes from)``,
    both for the messages, which name the file.
    """
    (n_rows, row), (n, source) = rows, values
    a = _int_array(arrays, name, path, 1)
    if a.shape != (n_rows,):
        raise InputError(f"{path}: `{name}` must have shape ({n_rows},) (one per {row}); "
                         f"got {a.shape}")
    bad = (a < 0) | (a >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: `{name}` must lie in 0..{n - 1} ({source}); "
            f"{name}[{i}] = {int(a[i])} ({int(bad.sum())} out of range)"
        )
    return a


def load_batch(path, *, need_labels: bool, graph_options=None, groups=None) -> Batch:
    """Read a batch from an ``.npz`` file (see :data:`NPZ_FORMAT`).

    Parameters
    ----------
    path : path-like
    need_labels : bool
        Whether the array ``labels`` is required.
    graph_options : dict, optional
        Inference options for graphs (``marginal_method``, ``map_method``).
    groups : str, optional
        ``--groups FILE`` (one id per line and item); default: the ``groups`` array.

    Returns
    -------
    Batch

    Raises
    ------
    InputError
        Missing or unknown arrays, wrong shapes or dtypes, labels out of range.
    """
    from .. import ChainPotentials, GraphPotentials
    from ..prediction import StructuredPrediction

    path = Path(path)
    arrays = _read_npz(path)
    unknown = sorted(set(arrays) - _KNOWN)
    if unknown:
        raise InputError(f"{path}: unknown arrays {unknown}; expected some of {sorted(_KNOWN)}")
    if "unary" in arrays and "scores" in arrays:
        raise InputError(f"{path}: give `unary` or `scores`, not both")
    key = "unary" if "unary" in arrays else "scores"
    if key not in arrays:
        raise InputError(f"{path}: missing array `unary` (n_tokens, K) (or `scores`)")
    unary = arrays[key]
    if unary.ndim != 2 or unary.shape[1] < 1:
        raise InputError(f"{path}: `{key}` must have shape (n_tokens, K); got {unary.shape}")
    n_tokens, K = unary.shape
    if ("lengths" in arrays) == ("offsets" in arrays):
        raise InputError(f"{path}: give exactly one of `lengths` (n_items,) and `offsets` (n_items + 1,)")
    if "lengths" in arrays:
        lengths = _int_array(arrays, "lengths", path, 1)
        if (lengths < 0).any():
            raise InputError(f"{path}: `lengths` must be >= 0")
        if lengths.sum() != n_tokens:
            raise InputError(
                f"{path}: `lengths` sum to {int(lengths.sum())} but `{key}` has {n_tokens} rows"
            )
        offsets = np.concatenate([[0], np.cumsum(lengths)])
    else:
        offsets = _int_array(arrays, "offsets", path, 1)
    labels = None
    if "labels" in arrays:
        labels = _index_array(arrays, "labels", path, (n_tokens, f"row of `{key}`"),
                              (K, f"K = {K} columns of `{key}`"))
    elif need_labels:
        raise InputError(f"{path}: missing array `labels` (n_tokens,): gold labels are needed here")
    scores = arrays.get("unstructured_scores")
    if scores is not None and scores.shape != unary.shape:
        raise InputError(
            f"{path}: `unstructured_scores` must have the shape of `{key}` {unary.shape}; "
            f"got {scores.shape}"
        )
    try:
        if "edges" in arrays:
            structure = "graph"
            for name in ("transitions", "start", "end"):
                if name in arrays:
                    raise InputError(f"{path}: `{name}` is for chains; graphs take `pairwise` or `potts`")
            edges = _int_array(arrays, "edges", path, 2)
            if edges.shape[1:] != (2,):
                raise InputError(f"{path}: `edges` must have shape (n_edges, 2); got {edges.shape}")
            if edges.size and (edges.min() < 0 or edges.max() >= n_tokens):
                raise InputError(f"{path}: `edges` must hold node indices in 0..{n_tokens - 1}")
            if edges.size:
                pairs = np.sort(edges, axis=1)
                _, first, counts = np.unique(pairs, axis=0, return_index=True, return_counts=True)
                if (counts > 1).any():
                    dup = pairs[first[counts > 1][0]]
                    rows = np.flatnonzero((pairs == dup).all(axis=1))[:2]
                    raise InputError(
                        f"{path}: `edges` lists an edge twice (in either orientation): rows "
                        f"{int(rows[0])} and {int(rows[1])} join nodes {int(dup[0])} and "
                        f"{int(dup[1])}"
                    )
            graph = np.searchsorted(offsets, edges[:, 0], side="right") - 1 if edges.size else edges[:, 0]
            if edges.size and (np.diff(graph) < 0).any():
                raise InputError(f"{path}: `edges` must be grouped by graph (graph 0's edges first)")
            edge_offsets = np.searchsorted(graph, np.arange(offsets.shape[0]), side="left")
            if ("pairwise" in arrays) == ("potts" in arrays):
                raise InputError(f"{path}: graphs need exactly one of `pairwise` and `potts`")
            edge_type = None
            if "edge_type" in arrays:
                pairwise = arrays.get("pairwise")
                if pairwise is None or pairwise.ndim != 3:
                    got = "`potts`" if pairwise is None else f"`pairwise` of shape {pairwise.shape}"
                    raise InputError(
                        f"{path}: `edge_type` (n_edges,) picks one of the matrices of a 3-d "
                        f"`pairwise` (n_types, K, K); got {got}"
                    )
                n_types = pairwise.shape[0]
                edge_type = _index_array(
                    arrays, "edge_type", path, (edges.shape[0], "row of `edges`"),
                    (n_types, f"n_types = {n_types} matrices in `pairwise`"),
                )
            pot = GraphPotentials(
                unary, offsets, edges, edge_offsets, arrays.get("pairwise"),
                edge_type=edge_type, potts=arrays.get("potts"),
            )
            pred = StructuredPrediction(pot, unstructured_scores=scores, **(graph_options or {}))
        else:
            structure = "chain"
            for name in ("potts", "edge_type"):
                if name in arrays:
                    raise InputError(f"{path}: `{name}` is for graphs (with `edges`)")
            if ("transitions" in arrays) == ("pairwise" in arrays):
                raise InputError(
                    f"{path}: chains need exactly one of `transitions` (K, K) and `pairwise` "
                    "(K, K) or (n_edges, K, K)"
                )
            if "transitions" in arrays:
                pot = ChainPotentials.from_scores(
                    unary, np.diff(offsets), arrays["transitions"], arrays.get("start"), arrays.get("end")
                )
            else:
                if "start" in arrays or "end" in arrays:
                    raise InputError(f"{path}: `start`/`end` go with `transitions`, not `pairwise`")
                pot = ChainPotentials(unary, offsets, arrays["pairwise"])
            pred = StructuredPrediction(pot, unstructured_scores=scores)
    except StructcalError as exc:
        raise InputError(f"{path}: {exc}") from None
    n_items = offsets.shape[0] - 1
    if groups is not None:
        if "groups" in arrays:
            raise InputError(f"{path}: has a `groups` array; give it or --groups, not both")
        group_ids = read_groups_file(groups, n_items, "item")
    elif "groups" in arrays:
        g = arrays["groups"]
        if g.ndim == 1 and g.shape[0] == n_items and g.dtype.kind == "f":
            if not np.isfinite(g).all():
                raise InputError(f"{path}: `groups` holds NaN or infinite ids "
                                 f"({int((~np.isfinite(g)).sum())} of {n_items}): give every "
                                 "item a group id")
            if (g != np.round(g)).any():
                raise InputError(f"{path}: `groups` holds fractional ids: give integer or "
                                 "string ids")
            g = g.astype(np.int64)
        if g.ndim != 1 or g.shape[0] != n_items or g.dtype.kind not in "iuU":
            raise InputError(f"{path}: `groups` must have shape ({n_items},) (one integer or "
                             f"string id per item); got shape {g.shape} and dtype {g.dtype}")
        group_ids = np.unique(g, return_inverse=True)[1].astype(np.int64)
    else:
        group_ids = None
    return Batch(path, pred, labels, structure, groups=group_ids)


@dataclass
class Conll:
    """The contents of a CoNLL file (see :data:`CONLL_FORMAT`)."""

    sentences: list  # lists of tokens (first column)
    rows: list  # per sentence, per token: the tuple of its columns but the gold tag
    tags: list | None  # per sentence, the gold tags (None: the file has none)
    documents: np.ndarray  # document of each sentence (counted from -DOCSTART- lines)
    has_docstart: bool


EVENTS_FORMAT = """\
events file (.csv, or .parquet with pyarrow): one row per event of an outside model
  item          the input the event is about (an id: int or str)
  kind          optional: the event kind (entity, nucleus, field, ...; default "event")
  raw           optional: the model's score of the event, a probability in [0, 1]
  outcome       1 if the event holds, 0 if not (needed by fit and evaluate)
  group         optional: the input's group (document, image); constant per item
  label         optional: a class per event (an integer; -1: none)
  feature.NAME  optional: more features of the event (numbers; empty: none)"""


def load_events_file(path, *, need_labels: bool, groups=None) -> Batch:
    """Read an events file (see :data:`EVENTS_FORMAT`) into an event table."""
    from ..events.external import external_events

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("reading Parquet needs pyarrow: pip install 'structcal[parquet]'") \
                from None
        try:
            t = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001  (pyarrow's errors: not a Parquet file, ...)
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
        cols = {n: t.column(n).to_pylist() for n in t.column_names}
    else:
        import csv

        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InputError(f"{path}: cannot read the CSV file ({exc})") from None
        if not rows:
            raise InputError(f"{path}: the events file has no rows (a header line and one row "
                             "per event are needed)")
        names = list(rows[0].keys())
        cols = {n: [r[n] for r in rows] for n in names}
    if "item" not in cols:
        raise InputError(f"{path}: an events file needs an `item` column; found {sorted(cols)}")
    n = len(cols["item"])

    def numbers(name, empty=np.nan):
        out = np.empty(n)
        for i, v in enumerate(cols[name]):
            if v is None or v == "":
                out[i] = empty
                continue
            try:
                out[i] = float(v)
            except ValueError:
                raise InputError(f"{path}: row {i + 2}: `{name}` = {v!r} is not a number") from None
        return out

    ids, item = np.unique(np.asarray([str(v) for v in cols["item"]]), return_inverse=True)
    kind = [str(v) if v not in (None, "") else "event" for v in cols.get("kind", [None] * n)]
    raw = numbers("raw") if "raw" in cols else None
    outcome = None
    if "outcome" in cols:
        # booleans as pandas and pyarrow write them (True/False) are outcomes too
        spelled = {"true": 1.0, "false": 0.0}
        cols["outcome"] = [spelled.get(v.strip().lower(), v) if isinstance(v, str) else v
                           for v in cols["outcome"]]
        o = numbers("outcome")
        if not np.isin(o, (0.0, 1.0)).all():
            raise InputError(f"{path}: `outcome` must be 0 or 1 on every row")
        outcome = o.astype(bool)
    elif need_labels:
        raise InputError(f"{path}: no `outcome` column: outcomes are needed here")
    label = None
    if "label" in cols:
        lab = numbers("label", empty=-1.0)
        if (lab != np.round(lab)).any():
            raise InputError(f"{path}: `label` must hold integers")
        label = lab.astype(np.int64)
    feats = {name[len("feature."):]: numbers(name) for name in cols if name.startswith("feature.")}
    unknown = sorted(set(cols) - {"item", "kind", "raw", "outcome", "group", "label"}
                     - {f"feature.{k}" for k in feats})
    if unknown:
        raise InputError(f"{path}: unknown columns {unknown}; features are named feature.NAME "
                         "(see --help)")
    group_ids = None
    if groups is not None:
        group_ids = read_groups_file(groups, ids.shape[0], "item (in sorted id order)")
    elif "group" in cols:
        g = np.asarray([str(v) for v in cols["group"]])
        per_item = {}
        for i, v in zip(item.tolist(), g.tolist()):
            if per_item.setdefault(i, v) != v:
                raise InputError(f"{path}: item {ids[i]!r} has several values in `group`")
        group_ids = np.unique(np.asarray([per_item[i] for i in range(ids.shape[0])]),
                              return_inverse=True)[1].astype(np.int64)
    try:
        table = external_events(item, kind=kind, raw=raw, features=feats, outcome=outcome,
                                label=label, n_items=ids.shape[0])
    except StructcalError as exc:
        raise InputError(f"{path}: {exc}") from None
    return Batch(path, None, outcome, "events", groups=group_ids, table=table, item_ids=ids)


def read_conll_file(path: Path, *, tags: str = "last") -> Conll:
    """Read a CoNLL file: sentences, their columns, gold tags, documents.

    ``tags``: ``"last"`` (the last column is the gold tag when there is more than one)
    or ``"none"`` (every column is the token's own: no gold tags).
    """
    if not path.exists():
        raise InputError(f"{path}: no such file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the CoNLL file ({exc})") from None
    sentences, rows, all_tags, documents = [], [], [], []
    sent, sent_rows, sent_tags = [], [], []
    n_columns = None
    doc, doc_used, has_docstart = 0, False, False

    def close():
        nonlocal sent, sent_rows, sent_tags, doc_used
        if sent:
            sentences.append(sent)
            rows.append(sent_rows)
            all_tags.append(sent_tags)
            documents.append(doc)
            doc_used = True
            sent, sent_rows, sent_tags = [], [], []

    for number, line in enumerate(lines + [""], start=1):
        cols = line.split()
        if not cols:
            close()
            continue
        if cols[0] == "-DOCSTART-":
            close()
            has_docstart = True
            if doc_used:
                doc += 1
                doc_used = False
            continue
        if n_columns is None:
            n_columns = len(cols)
        elif len(cols) != n_columns:
            raise InputError(
                f"{path}: line {number} has {len(cols)} column(s) but earlier lines have "
                f"{n_columns}: every token line needs the same columns"
            )
        with_tag = tags == "last" and n_columns > 1
        sent.append(cols[0])
        sent_rows.append(tuple(cols[:-1] if with_tag else cols))
        sent_tags.append(cols[-1] if with_tag else None)
    if not sentences:
        raise InputError(f"{path}: no tokens (expected one token per line, sentences "
                         "separated by blank lines)")
    has_tags = tags == "last" and n_columns is not None and n_columns > 1
    return Conll(sentences, rows, all_tags if has_tags else None,
                 np.asarray(documents, dtype=np.int64), has_docstart)


def read_conll(path: Path) -> tuple[list, list | None]:
    """Sentences (lists of tokens) and their tags (None when there is one column)."""
    data = read_conll_file(path)
    return data.sentences, data.tags


def read_groups_file(spec: str, n_items: int, what: str) -> np.ndarray:
    """Group ids from ``--groups FILE``: one id per line, one line per item."""
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"--groups {spec}: no such file (give a file with one group id per "
                         f"{what}, or column:N for CoNLL input)")
    try:
        ids = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--groups {spec}: cannot read ({exc})") from None
    while ids and not ids[-1]:
        ids.pop()
    if len(ids) != n_items or any(not g for g in ids):
        raise InputError(
            f"--groups {spec}: needs one non-empty group id per {what} ({n_items} lines); got "
            f"{len(ids)} lines" + (" with empty ones" if any(not g for g in ids) else "")
        )
    return np.unique(np.asarray(ids), return_inverse=True)[1].astype(np.int64)


def load_token_features(spec: str):
    """Import the function named by ``--token-features`` (see :data:`CONLL_FORMAT`).

    Parameters
    ----------
    spec : str
        ``module:function`` (imported with :func:`importlib.import_module`, dotted names
        allowed) or ``path/to/file.py:function`` (loaded from that file).

    Returns
    -------
    callable

    Raises
    ------
    InputError
        The spec has no ``:``, the module or file cannot be imported (its own error is
        quoted), it has no such attribute, or the attribute is not callable.
    """
    import importlib
    import importlib.util

    where = f"--token-features {spec}"
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"{where}: expected MODULE:FUNCTION or path/to/file.py:FUNCTION")
    try:
        if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
            file = Path(module_name)
            if not file.is_file():
                raise InputError(f"{where}: no such file {file}")
            name = f"_structcal_token_features_{file.stem}"
            mod_spec = importlib.util.spec_from_file_location(name, file)
            if mod_spec is None or mod_spec.loader is None:
                raise InputError(f"{where}: {file} cannot be imported as a Python module")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = module  # as `import` does (dataclasses, pickling look it up)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except InputError:
        raise
    except Exception as exc:  # the user's module: any error while importing it
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            hint = "; put its folder on PYTHONPATH, or give path/to/file.py:FUNCTION"
        raise InputError(
            f"{where}: cannot import {module_name} ({type(exc).__name__}: {exc}){hint}"
        ) from None
    if not hasattr(module, attr):
        raise InputError(f"{where}: {module_name} has no attribute {attr!r}")
    fn = getattr(module, attr)
    if not callable(fn):
        raise InputError(
            f"{where}: {module_name}.{attr} is not a function (it is of type {type(fn).__name__})"
        )
    return fn


def _sequence(x) -> bool:
    return isinstance(x, (list, tuple))


def _takes_rows(fn) -> bool:
    """Whether ``fn`` accepts a second positional argument (the sentences' columns)."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def token_features_of(fn, spec: str, sentences: list, path: Path, rows=None) -> list:
    """Call ``fn(sentences)`` (or ``fn(sentences, rows)`` when it takes a second argument:
    each token's columns but the gold tag); check one list per sentence of one feature
    dict per token.

    A token's features may also be a list of attribute names (python-crfsuite accepts
    both); the values inside are checked by the CRFsuite adapter. Errors name the option
    and the data file.
    """
    where = f"--token-features {spec}"
    try:
        X = fn(sentences, rows if rows is not None else [[(t,) for t in s] for s in sentences]) \
            if _takes_rows(fn) else fn(sentences)
    except Exception as exc:  # the user's function: whatever it raises is reported
        raise InputError(
            f"{where}: raised {type(exc).__name__}: {exc} (on the sentences of {path})"
        ) from None
    if not _sequence(X):
        raise InputError(
            f"{where}: must return a list (one feature sequence per sentence); got a "
            f"{type(X).__name__} (on {path})"
        )
    if len(X) != len(sentences):
        raise InputError(
            f"{where}: returned {len(X)} feature sequences for the {len(sentences)} "
            f"sentences of {path} (one per sentence)"
        )
    for i, (feats, sent) in enumerate(zip(X, sentences)):
        if not _sequence(feats) or len(feats) != len(sent):
            got = f"{len(feats)} items" if _sequence(feats) else f"a {type(feats).__name__}"
            raise InputError(
                f"{where}: sentence {i} of {path} has {len(sent)} tokens; its features must "
                f"be a list of {len(sent)} feature dicts (one per token); got {got}"
            )
        for j, tok in enumerate(feats):
            if not (isinstance(tok, dict) or (_sequence(tok) and all(
                    isinstance(a, (str, bytes)) for a in tok))):
                raise InputError(
                    f"{where}: token {j} of sentence {i} of {path}: its features must be a "
                    f"dict (or a list of attribute names); got a {type(tok).__name__}"
                )
    return X


def load_conll_batch(path, crfsuite, *, need_labels: bool, token_features=None,
                     conll_tags: str = "last", groups=None) -> Batch:
    """Read CoNLL tokens (see :data:`CONLL_FORMAT`) scored by a CRFsuite model.

    ``token_features`` is the ``--token-features`` spec (``None``: the library's
    :func:`~structcal.datasets.token_features`); ``conll_tags`` says whether the last
    column holds gold tags (``"last"``) or not (``"none"``); ``groups`` is the
    ``--groups`` spec (``None``: the documents that ``-DOCSTART-`` lines separate, if
    any, else each sentence its own group).
    """
    from ..adapters import CRFsuiteModel
    from ..datasets import token_features as default_features
    from ..prediction import StructuredPrediction

    path = Path(path)
    features = None if token_features is None else load_token_features(token_features)
    try:
        model = CRFsuiteModel.from_file(crfsuite)
    except (StructcalError, OSError) as exc:
        raise InputError(f"{crfsuite}: not a readable CRFsuite model ({exc})") from None
    data = read_conll_file(path, tags=conll_tags)
    sentences, tags = data.sentences, data.tags
    group_ids = _conll_groups(data, groups, path)
    labels = None
    if tags is not None:
        index = {t: i for i, t in enumerate(model.labels)}
        flat = [t for sent in tags for t in sent]
        unknown = sorted(set(flat) - set(index))
        if unknown:
            raise InputError(
                f"{path}: tags {unknown[:5]} are not labels of the CRFsuite model "
                f"{crfsuite} ({list(model.labels)})"
            )
        labels = np.array([index[t] for t in flat], dtype=np.int64)
    elif need_labels:
        raise InputError(f"{path}: no gold tags (a second column): they are needed here")
    if features is None:
        X, source = default_features(sentences), ""
    else:
        X = token_features_of(features, token_features, sentences, path, data.rows)
        source = f" (features of --token-features {token_features})"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownAttributeWarning)
            pot = model.potentials(X)
    except UnknownAttributeWarning as exc:
        hint = ("the default features (structcal.datasets.token_features) are not those the "
                "model was trained on: give the model's own --token-features"
                if features is None else "check that --token-features makes the features "
                "the model was trained on")
        raise InputError(f"{path}{source}: {exc}; {hint}") from None
    except StructcalError as exc:
        raise InputError(f"{path}{source}: {exc}") from None
    return Batch(path, StructuredPrediction(pot), labels, "chain", tuple(model.labels),
                 group_ids)


def _conll_groups(data: Conll, spec, path: Path):
    """Group of each sentence: ``--groups column:N`` / ``FILE``, else the documents."""
    if spec is None:  # documents, when -DOCSTART- lines make more than one
        return data.documents if data.has_docstart and data.documents.max() > 0 else None
    if spec.startswith("column:"):
        try:
            col = int(spec.split(":", 1)[1])
        except ValueError:
            raise InputError(f"--groups {spec}: expected column:N with N a column number") from None
        width = len(data.rows[0][0])
        if not 0 <= col < width:
            raise InputError(f"--groups {spec}: {path} has token columns 0..{width - 1} "
                             "(the gold tag excluded)")
        ids = []
        for i, rows in enumerate(data.rows):
            values = {r[col] for r in rows}
            if len(values) != 1:
                raise InputError(f"--groups {spec}: sentence {i} of {path} has several values "
                                 f"in column {col} ({sorted(values)[:3]}); a group id must be "
                                 "the same for every token of a sentence")
            ids.append(values.pop())
        return np.unique(np.asarray(ids), return_inverse=True)[1].astype(np.int64)
    return read_groups_file(spec, len(data.sentences), "sentence")


@contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; rename it to ``path`` on success.

    On any exception (including ``KeyboardInterrupt``) the temporary file is removed and
    ``path`` is left as it was.
    """
    path = Path(path)
    if not path.parent.exists():
        raise InputError(f"{path}: the folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
