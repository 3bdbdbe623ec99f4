"""Scale-out on Dask: recalibrate chain and graph potentials stored as partitioned Parquet.

Needs the ``dask`` extra (``pip install "structcal[dask]"``: dask[distributed], pyarrow),
imported on first use. The single-process API (:class:`~structcal.StructuredPrediction`
+ :class:`~structcal.StructuredRecalibrator`) is the reference: every event of an item
gets exactly the probability the single-process path gives that item. The recalibrator's
shift check judges the whole dataset as one batch: each partition sends the client a
uniform sample of its events' test columns (at most the recalibrator's cap of 5,000 per
kind, with their groups), the client draws from them a sample of the dataset
proportional to each partition's events and runs the test once, warns once, and every
partition's events of a flagged kind take the one map the client chose for the whole
dataset: under ``shift_policy='adapt'`` (the default) the map refit once on the
recalibration events weighted toward the dataset's sample, under ``'fallback'`` (or
where the weights collapse) the raw probability or isotonic regression on it (and they
are not accepted under a guarantee). The test sees a different random
sample of events than a single process would, so its p-values differ slightly.

**Dataset layout.** A dataset is a directory of Parquet files ``part-*.parquet``, each
one partition holding whole items (chains or graphs). Every file's schema metadata says
how to read it:

==============================  ========================================================
key                             value
==============================  ========================================================
``structcal.format_version``    ``"2"`` (this layout; ``"1"``, chains with a shared
                                transition matrix only, is still read)
``structcal.structure``         ``"chain"`` or ``"graph"``
``structcal.n_states``          ``K``, the number of labels
``structcal.pairwise_form``     chains: ``"shared"`` or ``"per_edge"``; graphs also
                                ``"typed"`` and ``"potts"`` (the forms of
                                :class:`~structcal.GraphPotentials`)
``structcal.pairwise``          JSON: the shared ``(K, K)`` matrix (``"shared"``), the
                                ``(n_types, K, K)`` matrices of the edge types
                                (``"typed"``); absent otherwise
``structcal.node_data``         JSON ``{name: per-node shape}`` of the ``node_data.*``
                                columns (``{}`` if none)
``structcal.version``           the structcal that wrote it (informative)
==============================  ========================================================

**Chains: one row per token**, rows of an item consecutive and in position order:

======================  =================  =================================================
column                  type               meaning
======================  =================  =================================================
``item``                int64              item (sequence) id, unique across the dataset
``position``            int64              position of the token in its item: 0, ..., L-1
``unary``               list<double>       the token's ``K`` unary log-potentials
``pairwise``            list<double>       ``"per_edge"`` only: the ``K * K`` transition
                                           log-potentials (row-major, previous label
                                           first) from position ``t - 1`` to this token;
                                           empty (or null) at position 0
``label``               int64 (optional)   true label, needed to fit a recalibrator
``group``               int64 or string    optional: the item's group (its document), the
                                           same on every row of an item: validation and
                                           the shift test never split a group
``node_data.<name>``    list<numeric>      optional per-token data (``node_data`` of
                                           :class:`~structcal.StructuredPrediction`)
======================  =================  =================================================

Empty chains cannot be stored (they have no rows).

**Graphs: one row per graph**, so a graph can never be split inside a partition:

======================  =================  =================================================
column                  type               meaning
======================  =================  =================================================
``item``                int64              item (graph) id, unique across the dataset
``unary``               list<double>       ``n_nodes * K`` unary log-potentials, node by
                                           node: the graph has ``len(unary) / K`` nodes
                                           (0 for an empty graph)
``edges``               list<int64>        ``2 * n_edges`` local node indices, the pairs
                                           ``(u, v)`` laid end to end (empty: no edges;
                                           nodes in no pair are isolated)
``edge_type``           list<int64>        ``"typed"`` only: the type of each edge
``pairwise``            list<double>       ``"per_edge"`` only: ``n_edges * K * K`` values,
                                           one row-major ``(K, K)`` matrix per edge,
                                           ``[label of u, label of v]``
``potts``               list<double>       ``"potts"`` only: one Potts weight per edge
``label``               list<int64>        optional: the true label of every node
``group``               int64 or string    optional: the graph's group (slide, patient)
``node_data.<name>``    list<numeric>      optional: per-node data, node by node
======================  =================  =================================================

The lists may be ``list``, ``large_list`` or ``fixed_size_list`` columns. Reading checks
everything a mistake could break and fails naming the file and item: a missing column,
another format version, an item split across partitions or (chains) not whole and in
order, list lengths that do not match ``K`` or the graph's size, edges out of range,
self-loops or repeated edges, labels out of range, partitions that disagree on the
metadata. Nothing is read with per-node Python loops: each column is flattened once.

**Output** of :func:`apply_recalibrator`: a directory of Parquet files, one per input
partition, with one row per event:

``item``
    The item id.
``kind``
    The event kind's name (``MAPEvent().name``, ...).
``position``
    Per-node events (marginal, label-at, ...): the node's position in its item - the
    token position in a chain, the node's index in its graph (the order of the
    ``unary`` list, e.g. the row-major pixel index of an image). ``-1`` for per-item
    events (MAP, lexicon, all-objects-found, ...) and for node-set events.
``label``
    Per-node events: the label the event is about (the MAP label for marginal events);
    node-set events (entities, objects): their class; ``-1`` for per-item events.
``members``
    Only when the recalibrator has node-set event kinds (spans, :mod:`objects
    <structcal.events.objects>`): the positions of the nodes the event covers (for an
    object: its pixels), in increasing order; empty for the other events.
``forecast``, ``raw``, ``outcome``
    The calibrated probability, the model's own probability (NaN where it has none) and,
    when the input has labels, whether the event holds.
``accepted``
    Only with a ``guarantee``: whether the event is accepted at the certified precision.

It is written to a temporary sibling directory, with a ``_SUCCESS`` file (JSON: counts,
structcal version, SHA-256 of the recalibrator's saved form), and renamed into place only
when every partition succeeded, the partitions hold disjoint items and agree on their
metadata. A failed run leaves nothing at the destination. :func:`write_chain_dataset` and
:func:`write_graph_dataset` write the same way.

**How the recalibrator reaches the workers:** in its saved form
(:func:`structcal.io.dumps`: the manifest and arrays of :func:`structcal.io.save`, as
bytes; never pickle), inside a task the scheduler can re-run if a worker dies. Each
worker loads it with :func:`structcal.io.loads`, which checks the format version and the
allow-list, and checks that it runs the client's structcal version. A recalibrator that
cannot be saved (a user-defined event kind or predicate off the allow-list) travels as a
Python object instead (Dask serialises it in transit), with the same version check.
:func:`apply_recalibrator` also accepts the path of a saved recalibrator, checked on the
client before anything runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._ragged import offsets_from_lengths
from ._validation import check_random_state
from .exceptions import ParameterError, ParameterTypeError, StructcalError

__all__ = [
    "FORMAT_VERSION",
    "Partition",
    "write_chain_dataset",
    "write_graph_dataset",
    "read_partition",
    "apply_recalibrator",
    "fit_recalibrator",
    "sample_items",
]

#: Version of the dataset layout described in the module docstring (version 1, chains
#: with a shared transition matrix and no ``structure`` key, is still read).
FORMAT_VERSION = 2
_READABLE = ("1", "2")
_KEY = "structcal."
_FORMS = {"chain": ("shared", "per_edge"), "graph": ("shared", "typed", "per_edge", "potts")}
_NODE_DATA = "node_data."


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "structcal.distributed needs pyarrow and dask[distributed]: "
            'pip install "structcal[dask]"'
        ) from exc
    return pa, pc, pq


def _version():
    from . import __version__

    return __version__


# ---------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class _Meta:
    """What a partition's schema metadata says (checked)."""

    version: str
    structure: str
    n_states: int
    form: str
    pairwise: np.ndarray | None  # shared (K, K) or typed (T, K, K) matrices
    node_data: dict = field(default_factory=dict)  # name -> per-node shape (tuple)

    def encode(self) -> dict:
        meta = {
            "format_version": str(FORMAT_VERSION),
            "structure": self.structure,
            "n_states": str(self.n_states),
            "pairwise_form": self.form,
            "node_data": json.dumps({k: list(v) for k, v in self.node_data.items()}),
            "version": _version(),
        }
        if self.pairwise is not None:
            meta["pairwise"] = json.dumps(self.pairwise.tolist())
        return {(_KEY + k).encode(): v.encode() for k, v in meta.items()}

    def key(self) -> tuple:
        """Return what the partitions of one dataset must agree on."""
        pw = None if self.pairwise is None else (self.pairwise.shape, self.pairwise.tobytes())
        return (self.structure, self.n_states, self.form, pw, sorted(self.node_data.items()))


def _meta(raw: dict | None, where: str) -> _Meta:
    raw = {k.decode(): v.decode() for k, v in (raw or {}).items() if k.startswith(_KEY.encode())}
    get = lambda k: raw.get(_KEY + k)  # noqa: E731
    version = get("format_version")
    if version not in _READABLE:
        raise ParameterError(
            f"{where}: dataset format_version {version or '<none>'}; this structcal reads "
            f"{', '.join(_READABLE)} (see structcal.distributed)"
        )

    def matrices(key):
        if get(key) is None:
            raise ParameterError(f"{where}: no {_KEY + key} in the schema metadata")
        try:
            return np.array(json.loads(get(key)), dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise ParameterError(f"{where}: {_KEY + key} is not a JSON matrix: {exc}") from None

    if version == "1":  # chains, one transition matrix
        pw = matrices("transitions")
        if pw.ndim != 2 or pw.shape[0] != pw.shape[1]:
            raise ParameterError(
                f"{where}: {_KEY}transitions must be a square matrix; got shape {pw.shape}"
            )
        return _Meta("1", "chain", pw.shape[0], "shared", pw)
    structure = get("structure")
    if structure not in _FORMS:
        raise ParameterError(
            f"{where}: {_KEY}structure must be 'chain' or 'graph'; got {structure!r}"
        )
    form = get("pairwise_form")
    if form not in _FORMS[structure]:
        raise ParameterError(
            f"{where}: {_KEY}pairwise_form of a {structure} dataset must be one of "
            f"{list(_FORMS[structure])}; got {form!r}"
        )
    try:
        K = int(get("n_states"))
        node_data = {
            str(k): tuple(int(d) for d in v)
            for k, v in json.loads(get("node_data") or "{}").items()
        }
    except (TypeError, ValueError, AttributeError) as exc:
        raise ParameterError(f"{where}: bad {_KEY}n_states or {_KEY}node_data: {exc}") from None
    if K < 1:
        raise ParameterError(f"{where}: {_KEY}n_states must be at least 1; got {K}")
    pw = None
    if form in ("shared", "typed"):
        pw = matrices("pairwise")
        want = (K, K) if form == "shared" else (None, K, K)
        if pw.ndim != len(want) or any(w is not None and w != s for w, s in zip(want, pw.shape)):
            raise ParameterError(
                f"{where}: {_KEY}pairwise ({form}) must have shape "
                f"{'(K, K)' if form == 'shared' else '(n_types, K, K)'} with K={K}; got {pw.shape}"
            )
    return _Meta(version, structure, K, form, pw, node_data)


# ---------------------------------------------------------------------------- Arrow helpers


def _list_array(values: np.ndarray, counts: np.ndarray):
    """Build an Arrow list column: row ``r`` holds the next ``counts[r]`` entries of ``values``."""
    pa, _, _ = _pyarrow()
    offsets = offsets_from_lengths(counts)
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))  # pragma: no cover


def _lists(table, name, where, *, dtype, nullable=False):
    """Return ``(counts, values)`` of a list column, flattened once (no per-row Python)."""
    _, pc, _ = _pyarrow()
    col = table.column(name).combine_chunks()
    if col.null_count and not nullable:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise ParameterError(f"{where}: column {name!r} is null in row {row}")
    try:
        counts = pc.fill_null(pc.list_value_length(col), 0).to_numpy().astype(np.int64)
        values = pc.list_flatten(col).to_numpy(zero_copy_only=False)
    except Exception:  # noqa: BLE001  (ArrowInvalid/NotImplemented for non-list types)
        raise ParameterError(
            f"{where}: column {name!r} must be a list column; got {col.type}"
        ) from None
    if values.dtype.kind not in "biuf" or (
        np.dtype(dtype).kind in "iu" and values.dtype.kind == "f"
    ):
        raise ParameterError(
            f"{where}: column {name!r} must hold numbers of kind {np.dtype(dtype)}; got {col.type}"
        )
    return counts, values


def _scalars(table, name, where):
    col = table.column(name)
    if col.null_count:
        raise ParameterError(f"{where}: column {name!r} has nulls")
    values = col.to_numpy()
    if values.dtype.kind not in "iu":
        raise ParameterError(f"{where}: column {name!r} must hold integers; got {col.type}")
    return values.astype(np.int64)


def _check_counts(counts, want, ids, name, where, what):
    bad = counts != want
    if bad.any():
        r = int(np.argmax(bad))
        raise ParameterError(
            f"{where}: item {int(ids[r])}: column {name!r} holds {int(counts[r])} values; "
            f"expected {int(want[r])} ({what})"
        )


# ---------------------------------------------------------------------------- partitions


@dataclass(frozen=True)
class Partition:
    """The items of one partition, ready for inference.

    Attributes
    ----------
    potentials : ChainPotentials or GraphPotentials
        The items, in file order.
    item_ids : ndarray of shape (n_items,), int64
        Id of each item.
    labels : ndarray of shape (n_nodes,), int64, or None
        True labels of every node laid end to end, when the file has a ``label`` column.
    node_data : dict of str to ndarray
        The ``node_data.*`` columns, one row per node.
    groups : ndarray of shape (n_items,) or None
        The group of each item (document, image), when the file has a ``group`` column.
    """

    potentials: object
    item_ids: np.ndarray
    labels: np.ndarray | None
    node_data: dict
    groups: np.ndarray | None = None

    def prediction(self, **inference_options):
        """Return a :class:`~structcal.StructuredPrediction` of these items and their node data."""
        from .prediction import StructuredPrediction

        return StructuredPrediction(
            self.potentials, node_data=self.node_data or None, **inference_options
        )


def _labels_node_data(table, meta, ids, sizes, per_row, where):
    """Read the label and node-data columns (one value, or list of values, per row)."""
    n_nodes = int(sizes.sum())
    labels = None
    if "label" in table.column_names:
        if per_row:  # chains: one label per token row
            labels = _scalars(table, "label", where)
        else:
            counts, labels = _lists(table, "label", where, dtype=np.int64)
            _check_counts(counts, sizes, ids, "label", where, "one label per node")
            labels = labels.astype(np.int64)
        bad = (labels < 0) | (labels >= meta.n_states)
        if bad.any():
            raise ParameterError(
                f"{where}: labels must lie in [0, {meta.n_states}); "
                f"got {int(labels[np.argmax(bad)])}"
            )
    node_data = {}
    for name, shape in meta.node_data.items():
        column = _NODE_DATA + name
        if column not in table.column_names:
            raise ParameterError(f"{where}: missing column {column!r} (listed in {_KEY}node_data)")
        width = int(np.prod(shape, dtype=np.int64))
        counts, values = _lists(table, column, where, dtype=np.float64)
        _check_counts(counts, sizes * width, ids, column, where, f"{width} per node")
        node_data[name] = values.reshape((n_nodes, *shape))
    return labels, node_data


def _decode_chain(table, meta, where):
    from .potentials import ChainPotentials

    for c in ("item", "position", "unary") + (("pairwise",) if meta.form == "per_edge" else ()):
        if c not in table.column_names:
            raise ParameterError(f"{where}: missing column(s) [{c!r}]; found {table.column_names}")
    item = _scalars(table, "item", where)
    position = _scalars(table, "position", where)
    n, K = item.shape[0], meta.n_states
    # item boundaries: a new item starts where the id changes; positions must run 0..L-1
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]]) if n else np.zeros(0, np.int64)
    offsets = np.r_[starts, n].astype(np.int64)
    ids = item[starts]
    expected = np.arange(n) - np.repeat(starts, np.diff(offsets))
    if np.unique(ids).size != ids.size or not np.array_equal(position, expected):
        bad = ids[0] if ids.size else -1
        if np.unique(ids).size == ids.size:
            bad = item[int(np.argmax(position != expected))]
        raise ParameterError(
            f"{where}: item {int(bad)} is not whole and in order in this partition "
            "(rows of an item must be consecutive with positions 0..L-1; partitions must hold "
            "whole sequences)"
        )
    counts, values = _lists(table, "unary", where, dtype=np.float64)
    _check_counts(counts, np.full(n, K), item, "unary", where, "n_states per token")
    pairwise = meta.pairwise
    if meta.form == "per_edge":
        counts, values_pw = _lists(table, "pairwise", where, dtype=np.float64, nullable=True)
        _check_counts(
            counts,
            np.where(position > 0, K * K, 0),
            item,
            "pairwise",
            where,
            "K * K after position 0, none at position 0",
        )
        pairwise = values_pw.reshape(-1, K, K)
    labels, node_data = _labels_node_data(table, meta, item, np.ones(n, np.int64), True, where)
    try:
        pot = ChainPotentials(values.reshape(n, K), offsets, pairwise)
    except ParameterError as exc:
        raise ParameterError(f"{where}: {exc}") from None
    groups = _group_column(table, starts, offsets, item, where)
    return Partition(pot, ids.astype(np.int64), labels, node_data, groups)


def _decode_graph(table, meta, where):
    from .potentials import GraphPotentials

    extra = {"typed": ("edge_type",), "per_edge": ("pairwise",), "potts": ("potts",)}.get(
        meta.form, ()
    )
    missing = [c for c in ("item", "unary", "edges") + extra if c not in table.column_names]
    if missing:
        raise ParameterError(f"{where}: missing column(s) {missing}; found {table.column_names}")
    ids = _scalars(table, "item", where)
    uniq, counts_id = np.unique(ids, return_counts=True)
    if (counts_id > 1).any():
        raise ParameterError(
            f"{where}: item {int(uniq[np.argmax(counts_id > 1)])} appears in more than one row "
            "(a graph is one row)"
        )
    K = meta.n_states
    counts, unary = _lists(table, "unary", where, dtype=np.float64)
    odd = counts % K != 0
    if odd.any():
        r = int(np.argmax(odd))
        raise ParameterError(
            f"{where}: item {int(ids[r])}: `unary` holds {int(counts[r])} values, not a multiple "
            f"of n_states={K}"
        )
    sizes = counts // K
    offsets = offsets_from_lengths(sizes)
    ecounts, local = _lists(table, "edges", where, dtype=np.int64)
    if (ecounts % 2).any():
        r = int(np.argmax(ecounts % 2))
        raise ParameterError(
            f"{where}: item {int(ids[r])}: `edges` holds an odd number of node indices"
        )
    m = ecounts // 2
    edge_offsets = offsets_from_lengths(m)
    local = local.astype(np.int64).reshape(-1, 2)
    graph_of_edge = np.repeat(np.arange(ids.shape[0]), m)
    outside = (local < 0) | (local >= sizes[graph_of_edge][:, None])
    if outside.any():
        e = int(np.argmax(outside.any(axis=1)))
        g = int(graph_of_edge[e])
        raise ParameterError(
            f"{where}: item {int(ids[g])}: edge {e - int(edge_offsets[g])} = "
            f"{local[e].tolist()} is out of range for its {int(sizes[g])} node(s)"
        )
    edges = local + offsets[graph_of_edge][:, None]
    pairwise, edge_type, potts = meta.pairwise, None, None
    if meta.form == "typed":
        c, edge_type = _lists(table, "edge_type", where, dtype=np.int64)
        _check_counts(c, m, ids, "edge_type", where, "one type per edge")
    elif meta.form == "per_edge":
        c, values = _lists(table, "pairwise", where, dtype=np.float64)
        _check_counts(c, m * K * K, ids, "pairwise", where, "K * K per edge")
        pairwise = values.reshape(-1, K, K)
    elif meta.form == "potts":
        c, potts = _lists(table, "potts", where, dtype=np.float64)
        _check_counts(c, m, ids, "potts", where, "one weight per edge")
        pairwise = None
    labels, node_data = _labels_node_data(table, meta, ids, sizes, False, where)
    try:
        pot = GraphPotentials(
            unary.reshape(-1, K),
            offsets,
            edges,
            edge_offsets,
            pairwise,
            edge_type=edge_type,
            potts=potts,
        )
    except ParameterError as exc:
        raise ParameterError(f"{where}: {exc}") from None
    groups = _group_column(table, np.arange(ids.shape[0]), np.arange(ids.shape[0] + 1), ids,
                           where)
    return Partition(pot, ids, labels, node_data, groups)


_DECODERS = {"chain": _decode_chain, "graph": _decode_graph}


def _open(file, *, items=None, columns=None):
    """``(table, meta, where)`` of one partition, rows filtered to ``items`` if given."""
    pa, pc, pq = _pyarrow()
    where = Path(file).name
    try:
        schema = pq.read_schema(file)
        meta = _meta(schema.metadata, where)
        if "item" not in schema.names:
            raise ParameterError(f"{where}: missing column(s) ['item']; found {schema.names}")
        table = pq.read_table(file, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise ParameterError(f"{where}: cannot read it as Parquet: {exc}") from None
    if items is not None:
        table = table.filter(
            pc.is_in(table.column("item"), value_set=pa.array(np.asarray(items, np.int64)))
        )
    return table, meta, where


def read_partition(file, *, items=None) -> Partition:
    """Read one partition of a chain or graph dataset.

    Parameters
    ----------
    file : str or Path
        One ``part-*.parquet`` file of a dataset in the layout of this module.
    items : array-like of int, optional
        Keep only these item ids.

    Returns
    -------
    Partition
        The potentials, item ids, labels and node data.

    Raises
    ------
    ParameterError
        On a missing column, another format version, items that are not whole (chains:
        and in order) in this partition, list lengths that do not fit, edges out of range
        or labels out of range.
    """
    return _read(file, items=items)[0]


def _group_column(table, starts, offsets, item, where):
    """The optional ``group`` column: one value per item (constant over a chain's rows)."""
    if "group" not in table.column_names:
        return None
    col = table.column("group").to_numpy(zero_copy_only=False)
    if col.dtype == object:
        if any(v is None for v in col.tolist()):
            raise ParameterError(f"{where}: the `group` column has nulls")
        col = col.astype(str)
    elif col.dtype.kind not in "iu" and col.dtype.kind != "U":
        raise ParameterError(f"{where}: the `group` column must hold integers or strings; "
                             f"got {col.dtype}")
    per_item = col[starts]
    if col.shape[0] and not (np.repeat(per_item, np.diff(offsets)) == col).all():
        bad = int(np.flatnonzero(np.repeat(per_item, np.diff(offsets)) != col)[0])
        raise ParameterError(f"{where}: item {int(item[bad])} has several values in the "
                             "`group` column (one group per item)")
    return per_item


def _read(file, *, items=None):
    table, meta, where = _open(file, items=items)
    return _DECODERS[meta.structure](table, meta, where), meta


def _partitions(source):
    source = Path(source)
    if not source.is_dir():
        raise ParameterError(f"`source` must be a directory of Parquet files; got {str(source)!r}")
    files = sorted(source.glob("part-*.parquet"))
    if not files:
        raise ParameterError(f"no part-*.parquet files in {str(source)!r}")
    return files


def _disagreeing(keys, files) -> str | None:
    """Return a message naming two partitions whose metadata differ, or None."""
    for k, f in zip(keys, files):
        if k != keys[0]:
            return (
                f"partitions {Path(files[0]).name} and {Path(f).name} disagree on the dataset "
                "metadata (structure, n_states, pairwise form or matrices, node data)"
            )
    return None


def _disjoint(ids_per_partition):
    ids = np.concatenate(ids_per_partition) if ids_per_partition else np.zeros(0, np.int64)
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ParameterError(
            f"item {int(uniq[np.argmax(counts > 1)])} appears in more than one partition "
            "(partitions must hold whole items)"
        )
    return ids


@contextmanager
def _staging(destination):
    """Yield a temporary sibling of ``destination``; rename it into place if the block succeeds."""
    destination = Path(destination)
    if destination.exists():
        raise ParameterError(f"`destination` {str(destination)!r} exists; choose a new directory")
    tmp = destination.with_name(f".{destination.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        yield tmp
        os.replace(tmp, destination)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------- writing


def _item_args(n_items, n_nodes, n_states, sizes, item_ids, labels, node_data, per):
    """Check the writers' arguments: ``(per, ids, flat labels or None, node_data)``."""
    from ._validation import check_int

    per = check_int(per, "items_per_partition", low=1)
    ids = np.arange(n_items, dtype=np.int64) if item_ids is None else np.asarray(item_ids)
    if ids.shape != (n_items,) or ids.dtype.kind not in "iu" or np.unique(ids).size != n_items:
        raise ParameterError(f"`item_ids` must be {n_items} distinct integers")
    ids = ids.astype(np.int64)
    flat = None
    if labels is not None:
        if isinstance(labels, (list, tuple)):
            if len(labels) != n_items:
                raise ParameterError(
                    f"`labels` must hold one labeling per item ({n_items}); got {len(labels)}"
                )
            got = np.array([np.size(lab) for lab in labels], dtype=np.int64)
            _check_counts(got, sizes, ids, "labels", "`labels`", "one label per node")
            parts = [np.asarray(lab).ravel() for lab in labels]
            flat = np.concatenate(
                [p if p.size else p.astype(np.int64) for p in parts] or [np.zeros(0, np.int64)]
            )
        else:
            flat = np.asarray(labels)
        if flat.shape != (n_nodes,) or (flat.size and flat.dtype.kind not in "iu"):
            raise ParameterError(
                f"`labels` must hold one integer label per node ({n_nodes}); got {flat.shape}"
            )
        flat = flat.astype(np.int64)
        if flat.size and (flat.min() < 0 or flat.max() >= n_states):
            raise ParameterError(f"`labels` must lie in [0, {n_states})")
    data = {}
    for name, value in (node_data or {}).items():
        value = np.asarray(value)
        if value.ndim == 0 or value.shape[0] != n_nodes or value.dtype.kind not in "biuf":
            raise ParameterError(
                f"`node_data[{name!r}]` must be numeric with one row per node ({n_nodes}); got "
                f"{value.dtype} {value.shape}"
            )
        data[str(name)] = np.ascontiguousarray(value)
    return per, ids, flat, data


def _write(path, meta, n_items, per, table_of):
    """Write partitions of ``per`` whole items each (one empty partition if no items)."""
    pa, _, pq = _pyarrow()
    files = []
    with _staging(path) as tmp:
        for part, first in enumerate(range(0, max(n_items, 1), per)):
            table = pa.table(table_of(first, min(first + per, n_items))).replace_schema_metadata(
                meta.encode()
            )
            pq.write_table(table, tmp / f"part-{part:05d}.parquet")
            files.append(Path(path) / f"part-{part:05d}.parquet")
    return files


def _node_columns(data, rows, counts):
    """``node_data.<name>`` list columns of the nodes ``rows`` grouped by ``counts``."""
    out = {}
    for name, value in data.items():
        width = int(np.prod(value.shape[1:], dtype=np.int64))
        out[_NODE_DATA + name] = _list_array(value[rows].ravel(), counts * width)
    return out


def _groups_iv(groups, n):
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != (n,) or g.dtype.kind not in "iuU":
        raise ParameterError(f"`groups` must hold one integer or string id per item, shape "
                             f"({n},); got shape {g.shape} and dtype {g.dtype}")
    return g.astype(np.int64) if g.dtype.kind in "iu" else g


def write_chain_dataset(
    path, potentials, *, items_per_partition, labels=None, item_ids=None, node_data=None,
    groups=None,
):
    """Write a batch of chains as a partitioned Parquet dataset (layout: module docstring).

    Parameters
    ----------
    path : str or Path
        Directory to create (must not exist). Written to a temporary sibling and renamed
        into place when complete.
    potentials : ChainPotentials
        The chains, with one shared transition matrix or one per edge. Empty chains are
        not allowed.
    items_per_partition : int
        Number of whole chains per file.
    labels : list of array-like or array-like of shape (n_tokens,), optional
        True labeling of each chain (stored as the ``label`` column).
    item_ids : array-like of int, optional
        Id of each chain (default ``0..n_chains-1``).
    node_data : dict of str to array-like of shape (n_tokens, ...), optional
        Per-token data for features (``StructuredPrediction(node_data=...)``).
    groups : array-like of shape (n_chains,), optional
        Group of each chain (its document): the ``group`` column.

    Returns
    -------
    list of Path
        The files written, in order.
    """
    from .potentials import ChainPotentials

    pa, _, _ = _pyarrow()
    if not isinstance(potentials, ChainPotentials):
        raise ParameterTypeError(
            f"`potentials` must be a ChainPotentials; got {type(potentials).__name__}"
        )
    lengths = potentials.lengths
    if (lengths == 0).any():
        raise ParameterError(
            f"empty chains cannot be stored; chain {int(np.argmin(lengths))} has length 0"
        )
    K = potentials.n_states
    per, ids, flat, data = _item_args(
        potentials.n_chains,
        potentials.n_tokens,
        K,
        lengths,
        item_ids,
        labels,
        node_data,
        items_per_partition,
    )
    grp = _groups_iv(groups, potentials.n_chains)
    shared = potentials.shared_pairwise
    meta = _Meta(
        str(FORMAT_VERSION),
        "chain",
        K,
        "shared" if shared else "per_edge",
        np.asarray(potentials.pairwise) if shared else None,
        {k: v.shape[1:] for k, v in data.items()},
    )
    offs, eoffs = potentials.offsets, potentials.edge_offsets

    def table_of(first, last):
        s, e = int(offs[first]), int(offs[last])
        position = potentials.position_index[s:e]
        cols = {
            "item": pa.array(np.repeat(ids[first:last], lengths[first:last])),
            "position": pa.array(position),
            "unary": _list_array(potentials.unary[s:e].ravel(), np.full(e - s, K)),
        }
        if not shared:
            pw = potentials.pairwise[int(eoffs[first]) : int(eoffs[last])]
            cols["pairwise"] = _list_array(pw.ravel(), np.where(position > 0, K * K, 0))
        if flat is not None:
            cols["label"] = pa.array(flat[s:e])
        if grp is not None:
            cols["group"] = pa.array(np.repeat(grp[first:last], lengths[first:last]))
        cols.update(_node_columns(data, np.arange(s, e), np.ones(e - s, np.int64)))
        return cols

    return _write(path, meta, potentials.n_chains, per, table_of)


def write_graph_dataset(
    path, potentials, *, items_per_partition, labels=None, item_ids=None, node_data=None,
    groups=None,
):
    """Write a batch of graphs as a partitioned Parquet dataset, one row per graph.

    Parameters
    ----------
    path : str or Path
        Directory to create (must not exist). Written to a temporary sibling and renamed
        into place when complete.
    potentials : GraphPotentials
        The graphs, with any pairwise form (shared, typed, per edge, Potts). Empty
        graphs, isolated nodes and graphs without edges are stored as they are.
    items_per_partition : int
        Number of whole graphs per file.
    labels : list of array-like or array-like of shape (n_nodes,), optional
        True labeling of each graph (stored as the ``label`` column).
    item_ids : array-like of int, optional
        Id of each graph (default ``0..n_graphs-1``).
    node_data : dict of str to array-like of shape (n_nodes, ...), optional
        Per-node data for features, e.g. ``"coords"`` and ``"intensity"`` for the shape
        and contrast features of object events.
    groups : array-like of shape (n_graphs,), optional
        Group of each graph (e.g. the slide or patient): the ``group`` column.

    Returns
    -------
    list of Path
        The files written, in order.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from structcal import GraphPotentials
    >>> from structcal.distributed import read_partition, write_graph_dataset
    >>> p = GraphPotentials.from_list([np.zeros((3, 2)), np.zeros((1, 2))],
    ...                               [[(0, 1), (1, 2)], []], potts=0.5)
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> [f.name for f in write_graph_dataset(root / "d", p, items_per_partition=1)]
    ['part-00000.parquet', 'part-00001.parquet']
    >>> part = read_partition(root / "d" / "part-00000.parquet")
    >>> part.item_ids.tolist(), part.potentials.edges.tolist(), part.potentials.potts.tolist()
    ([0], [[0, 1], [1, 2]], [0.5, 0.5])
    >>> import shutil; shutil.rmtree(root)
    """
    from .potentials import GraphPotentials

    pa, _, _ = _pyarrow()
    if not isinstance(potentials, GraphPotentials):
        raise ParameterTypeError(
            f"`potentials` must be a GraphPotentials; got {type(potentials).__name__}"
        )
    K, sizes, m = potentials.n_states, potentials.sizes, potentials.edge_counts
    per, ids, flat, data = _item_args(
        potentials.n_graphs,
        potentials.n_nodes,
        K,
        sizes,
        item_ids,
        labels,
        node_data,
        items_per_partition,
    )
    grp = _groups_iv(groups, potentials.n_graphs)
    form = {"shared": "shared", "potts": "potts"}.get(potentials.pairwise_kind)
    if form is None:
        form = "per_edge" if potentials.edge_type is None else "typed"
    meta = _Meta(
        str(FORMAT_VERSION),
        "graph",
        K,
        form,
        np.asarray(potentials.pairwise) if form in ("shared", "typed") else None,
        {k: v.shape[1:] for k, v in data.items()},
    )
    offs, eoffs = potentials.offsets, potentials.edge_offsets
    local = potentials.edges - np.repeat(offs[:-1], m)[:, None]

    def table_of(first, last):
        s, e = int(offs[first]), int(offs[last])
        es, ee = int(eoffs[first]), int(eoffs[last])
        cols = {
            "item": pa.array(ids[first:last]),
            "unary": _list_array(potentials.unary[s:e].ravel(), sizes[first:last] * K),
            "edges": _list_array(local[es:ee].ravel(), 2 * m[first:last]),
        }
        if form == "typed":
            cols["edge_type"] = _list_array(potentials.edge_type[es:ee], m[first:last])
        elif form == "per_edge":
            cols["pairwise"] = _list_array(
                potentials.pairwise[es:ee].ravel(), m[first:last] * K * K
            )
        elif form == "potts":
            cols["potts"] = _list_array(potentials.potts[es:ee], m[first:last])
        if flat is not None:
            cols["label"] = _list_array(flat[s:e], sizes[first:last])
        if grp is not None:
            cols["group"] = pa.array(grp[first:last])
        cols.update(_node_columns(data, np.arange(s, e), sizes[first:last]))
        return cols

    return _write(path, meta, potentials.n_graphs, per, table_of)


# ---------------------------------------------------------------------------- in transit


def _pack(recalibrator):
    """Return the recalibrator's saved form (bytes) if it can be saved, else the object itself."""
    from . import io

    try:
        return io.dumps(recalibrator)
    except ParameterTypeError:  # off the allow-list (user event kinds): travels as an object
        return recalibrator


@functools.lru_cache(maxsize=4)
def _loads(blob: bytes):
    from . import io
    from .recalibration import StructuredRecalibrator

    return io.loads(blob, expected_class=StructuredRecalibrator)


def _unpack(payload, version):
    """On a worker: check the structcal version, then load the recalibrator."""
    if version != _version():
        raise StructcalError(f"worker runs structcal {_version()}, the client {version}")
    return _loads(payload) if isinstance(payload, bytes) else payload


def _recalibrator_iv(recalibrator):
    from . import io
    from .recalibration import StructuredRecalibrator

    if isinstance(recalibrator, (str, os.PathLike)):
        return io.load(recalibrator, expected_class=StructuredRecalibrator)
    if not isinstance(recalibrator, StructuredRecalibrator) or not hasattr(
        recalibrator, "forecasters_"
    ):
        raise ParameterError(
            "`recalibrator` must be a fitted StructuredRecalibrator or the path of a saved one; "
            f"got {type(recalibrator).__name__}"
        )
    return recalibrator


# ---------------------------------------------------------------------------- applying


def _single_thread():
    """Run Numba's kernels on this worker thread only.

    Dask's workers and threads are the parallelism; a kernel thread pool per worker would
    oversubscribe the cores.
    """
    import numba

    numba.set_num_threads(1)  # per calling thread


def _predict_partition(payload, file, out_dir, version, inference_options, guarantee=None,
                       shift_cap=0, seed=0):
    """Worker task: calibrated events of one partition, written to ``out_dir``.

    The recalibrator's shift test is not run here: the partition returns, per kind, a
    uniform sample of at most ``shift_cap`` of its events' test columns with their groups,
    the number of events it drew them from, and its groups, for one test of the whole
    dataset on the client (:func:`apply_recalibrator`).
    """
    pa, _, pq = _pyarrow()
    recalibrator = _unpack(payload, version)
    _single_thread()
    part, meta = _read(file)
    table = recalibrator.events(part.prediction(**inference_options), part.labels)
    item_group = part.groups if part.groups is not None else part.item_ids
    out = recalibrator._predict_table(table, item_group, check_shift=False)
    t = out.table
    kind = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(t.kind, dtype=np.int32)), pa.array([str(k) for k in t.kind_names])
    ).cast(pa.string())  # the names, built in Arrow rather than as one Python str per event
    cols = {
        "item": pa.array(part.item_ids[t.item]),
        "kind": kind,
        "position": pa.array(t.position),
        "label": pa.array(t.label),
    }
    from .events.nodesets import NODE_SET_SCOPES

    if NODE_SET_SCOPES & set(t.kind_scopes):  # node-set events (objects, entities)
        # members as positions in their item, grouped per event (empty for other scopes)
        owner = np.repeat(t.item, np.diff(t.member_offsets))
        local = t.members - part.potentials.offsets[owner]
        cols["members"] = _list_array(local, np.diff(t.member_offsets))
    cols["forecast"] = pa.array(out.forecast)
    cols["raw"] = pa.array(t.raw if t.raw is not None else np.full(t.n_events, np.nan))
    if t.outcome is not None:
        cols["outcome"] = pa.array(t.outcome)
    if guarantee is not None:
        from . import io
        from .guarantees import accept_events

        cols["accepted"] = pa.array(accept_events(io.loads(guarantee), out))
    pq.write_table(pa.table(cols), Path(out_dir) / Path(file).name)
    shift = None
    if shift_cap:
        rng = np.random.default_rng(seed)
        rows = recalibrator._shift_rows(t, np.asarray(item_group)[t.item])
        shift = {"groups": np.unique(np.asarray(item_group)), "kinds": {},
                 "explicit_groups": part.groups is not None}
        for key, (values, grp) in rows.items():
            keep = np.sort(rng.choice(grp.shape[0], size=min(shift_cap, grp.shape[0]),
                                      replace=False))
            raw = recalibrator._raw(t, recalibrator._rows(t, key))
            shift["kinds"][key] = (values[keep], grp[keep], int(grp.shape[0]), raw is not None)
    return part.item_ids, t.n_events, meta.key(), shift


def _dataset_shift_test(recalibrator, shifts, seed):
    """One shift test of the whole dataset from the partitions' samples (or None).

    Each kind's sample takes from every partition a share of the cap proportional to the
    partition's number of events (a stratified uniform sample of the dataset's events);
    with fewer than ``_SHIFT_MIN_GROUPS`` groups in the dataset nothing is tested, as for
    a single batch.
    """
    shifts = [x for x in shifts if x is not None]
    if not shifts:
        return None, {}, {}
    groups = np.unique(np.concatenate([x["groups"] for x in shifts]))
    if groups.shape[0] < recalibrator._SHIFT_MIN_GROUPS:
        return None, {}, {}
    rng = np.random.default_rng(seed)
    cap = recalibrator._SHIFT_CAP
    rows, has_raw = {}, {}
    for key in recalibrator.selection_:
        parts = [x["kinds"][key] for x in shifts if key in x["kinds"]]
        if not parts:
            continue
        total = sum(n for _, _, n, _ in parts)
        values, grp = [], []
        for v, g, n, _ in parts:
            take = v.shape[0] if total <= cap else min(v.shape[0], int(round(cap * n / total)))
            pick = np.sort(rng.choice(v.shape[0], size=take, replace=False))
            values.append(v[pick])
            grp.append(g[pick])
        rows[key] = (np.concatenate(values), np.concatenate(grp))
    if not all(x.get("explicit_groups", True) for x in shifts):
        # no groups given: blocks of consecutive inputs over the whole dataset, as the
        # single process makes them for one batch (recalibration._shift_units)
        from .recalibration import _shift_units

        blocks = _shift_units(None, groups.shape[0])
        rows = {k: (v, blocks[np.searchsorted(groups, g)]) for k, (v, g) in rows.items()}
        has_raw[key] = all(h for _, _, _, h in parts)
    return recalibrator._shift_test_rows(rows), has_raw, rows


def _fall_back_partition(payload, version, file, fallback, adapted=None):
    """Worker task: the events of the kinds in ``fallback`` (kind -> the method used
    instead, as :meth:`StructuredRecalibrator._fallback_kinds` gives it) in one written
    output partition take the recalibrator's fallback forecast and are not accepted."""
    pa, pc, pq = _pyarrow()
    recalibrator = _unpack(payload, version)
    table = pq.read_table(file)
    forecast = table.column("forecast").to_numpy().copy()
    raw = table.column("raw").to_numpy()
    hit = np.zeros(forecast.shape[0], dtype=bool)
    for k, how in fallback.items():
        rows = pc.equal(table.column("kind"), k).to_numpy(zero_copy_only=False)
        forecast[rows] = recalibrator._fallback_forecast(k, how, raw[rows], adapted)
        hit |= rows
    table = table.set_column(table.schema.get_field_index("forecast"), "forecast",
                             pa.array(forecast))
    if "accepted" in table.column_names:
        accepted = table.column("accepted").to_numpy().copy()
        accepted[hit] = False
        table = table.set_column(table.schema.get_field_index("accepted"), "accepted",
                                 pa.array(accepted))
    pq.write_table(table, file)
    return int(hit.sum())


def _client(client):
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            'structcal.distributed needs dask[distributed]: pip install "structcal[dask]"'
        ) from exc
    return get_client()  # the current client, or ValueError naming the problem


def _identity(x):
    return x


def apply_recalibrator(recalibrator, source, destination, *, client=None, guarantee=None,
                       **inference_options):
    """Calibrate the events of every item of a chain or graph dataset on a Dask cluster.

    Parameters
    ----------
    recalibrator : StructuredRecalibrator or str or Path
        A fitted recalibrator, or the path of one saved with :func:`structcal.io.save`
        (loaded and checked on the client first). It reaches the workers in its saved
        form (see the module docstring).
    source : str or Path
        Dataset directory (layout in the module docstring).
    destination : str or Path
        Output directory; must not exist. Written only when every partition succeeded.
    client : distributed.Client, optional
        Default: the current client (``distributed.get_client()``).
    guarantee : PrecisionGuarantee, optional
        A fitted :class:`~structcal.guarantees.PrecisionGuarantee` (e.g. from
        :func:`~structcal.guarantees.certify_precision`): the output gets an ``accepted``
        column, the events it accepts.
    **inference_options
        Passed to :class:`~structcal.StructuredPrediction` on the workers: for graphs
        ``marginal_method``, ``map_method``, ``tol``, ``max_iter``, ``damping``, ``warn``
        (:class:`~structcal.prediction.GraphBackend`); chains take none.

    Returns
    -------
    dict
        ``{"destination": Path, "n_items": int, "n_events": int, "n_partitions": int,
        "shift_test": ShiftTest or None, "fallback": list of str}``: the shift test of
        the whole dataset (None with ``shift_check=False`` or fewer than 5 groups) and
        the kinds whose fitted map was replaced (see ``shift_policy`` of
        :class:`~structcal.StructuredRecalibrator`).

    Warns
    -----
    DistributionShiftWarning
        Once, when the dataset's events are distributed unlike the recalibration set's.

    Raises
    ------
    ParameterError
        Bad input: missing columns, another format version, an item split across
        partitions, partitions that disagree on the metadata, a recalibrator file of
        another format version. Nothing is left at ``destination``.
    """
    recalibrator = _recalibrator_iv(recalibrator)
    files = _partitions(source)
    payload = _pack(recalibrator)
    if guarantee is not None:
        from . import io
        from .guarantees import PrecisionGuarantee

        if not isinstance(guarantee, PrecisionGuarantee) or not hasattr(guarantee, "thresholds_"):
            raise ParameterTypeError("`guarantee` must be a fitted PrecisionGuarantee")
        guarantee = io.dumps(guarantee)
    client = _client(client)
    with _staging(destination) as tmp:
        # the payload travels inside a task the scheduler keeps, so a worker lost mid-run
        # is recovered by recomputing it (scattered data would be lost with its worker)
        rec = client.submit(_identity, payload, pure=False)
        shift_cap = recalibrator._SHIFT_CAP if recalibrator.shift_check else 0
        # one seed per partition's shift sample, one for the dataset's
        seeds = check_random_state(recalibrator.random_state).integers(0, 2**31 - 1,
                                                                        size=len(files) + 1)
        futures = [
            client.submit(
                _predict_partition, rec, str(f), str(tmp), _version(), inference_options,
                guarantee, shift_cap, int(seeds[i]), pure=False
            )
            for i, f in enumerate(files)
        ]
        results = client.gather(futures)
        ids = _disjoint([r[0] for r in results])
        problem = _disagreeing([r[2] for r in results], files)
        if problem:
            raise ParameterError(problem)
        test, has_raw, rows = _dataset_shift_test(recalibrator, [r[3] for r in results],
                                                  int(seeds[-1]))
        fallback, adapted = recalibrator._shift_decision(test, rows, has_raw)
        if fallback:  # one decision for the whole dataset, applied to every partition
            client.gather([client.submit(_fall_back_partition, rec, _version(),
                                         str(tmp / Path(f).name), fallback, adapted, pure=False)
                           for f in files])
        if test is not None:
            recalibrator._warn_if_shifted(test, fallback, adapted)
        info = {
            "n_items": int(ids.size),
            "n_events": int(sum(r[1] for r in results)),
            "n_partitions": len(files),
            "shift_test": test,
            "fallback": sorted(fallback),
            "adaptation": {k: info for k, (_, info) in adapted.items()},
        }
        success = {
            **{k: v for k, v in info.items() if k != "shift_test"},
            "shifted": bool(test is not None and test.shifted),
            "structcal_version": _version(),
            "recalibrator_sha256": hashlib.sha256(payload).hexdigest()
            if isinstance(payload, bytes)
            else None,
        }
        (tmp / "_SUCCESS").write_text(json.dumps(success))
    return {"destination": Path(destination), **info}


# ---------------------------------------------------------------------------- fitting


def _item_ids(file):
    table, _, where = _open(file, columns=["item"])
    return np.unique(_scalars(table, "item", where))


def sample_items(source, n_items, *, random_state, client=None):
    """Draw the seeded sample of item ids :func:`fit_recalibrator` uses (sorted).

    Item ids of every partition are read on the workers; ``n_items`` of them are drawn
    uniformly without replacement with ``numpy.random.default_rng(random_state)`` from
    the sorted ids, so the sample depends only on the dataset's ids and the seed, not on
    the partitioning or the cluster.
    """
    from ._validation import check_int

    files = _partitions(source)
    n_items = check_int(n_items, "n_items", low=1)
    client = _client(client)
    all_ids = np.sort(_disjoint(client.gather(client.map(_item_ids, [str(f) for f in files]))))
    if n_items >= all_ids.size:
        return all_ids
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(all_ids, size=n_items, replace=False))


def _read_sample(file, items):
    """Worker task: the rows of the sampled items of one partition (checked), as Arrow."""
    table, meta, where = _open(file, items=items)
    if "label" not in table.column_names:
        raise ParameterError(f"{where}: fitting needs the `label` column")
    _DECODERS[meta.structure](table, meta, where)  # fail here, naming the file
    return table, meta.key()


def _fit_on_pieces(payload, version, pieces, files, inference_options):
    """Worker task: the sampled items in id order, and a clone of the recalibrator fit on them."""
    from ._estimator import clone

    pa, _, _ = _pyarrow()
    template = _unpack(payload, version)
    _single_thread()
    problem = _disagreeing([p[1] for p in pieces], files)
    if problem:
        raise ParameterError(problem)
    table = pa.concat_tables([p[0] for p in pieces])
    meta = _meta(pieces[0][0].schema.metadata, "sample")
    keys = [("item", "ascending")] + (
        [("position", "ascending")] if meta.structure == "chain" else []
    )
    table = table.sort_by(keys)  # one mechanism: the sample reads like one partition
    part = _DECODERS[meta.structure](table, meta, "sample")
    fitted = clone(template).fit(part.prediction(**inference_options), part.labels,
                                 groups=part.groups)
    return _pack(fitted)


def fit_recalibrator(
    recalibrator, source, *, n_items, random_state, client=None, **inference_options
):
    """Fit a recalibrator on a seeded random sample of the items of a chain or graph dataset.

    Parameters
    ----------
    recalibrator : StructuredRecalibrator
        Unfitted template (cloned).
    source : str or Path
        Dataset directory with a ``label`` column.
    n_items : int
        Items to sample (all items if the dataset has fewer).
    random_state : int
        Seed of the sample (see :func:`sample_items`).
    client : distributed.Client, optional
        Default: the current client.
    **inference_options
        Passed to :class:`~structcal.StructuredPrediction` (see
        :func:`apply_recalibrator`).

    Returns
    -------
    StructuredRecalibrator
        Fitted, equal to a single-process fit on the same items in id order.

    Notes
    -----
    Workers read the sampled items of their partitions; the fit runs as one task on one
    worker, and the fitted recalibrator comes back in its saved form. Sampling whole
    items keeps each item's events together (per-item events need the whole sequence or
    graph), and a uniform sample of items is an unbiased sample of the events' joint
    distribution of features and outcomes, which is all the forecasters estimate. Their
    error is dominated by the number of events per region (k-NN: k of a few hundred), so
    a sample of 10^4 - 10^5 events already puts the forecasters within noise of a fit on
    all events (see the forecasters' benchmark), while the fit stays on one machine.
    """
    from .recalibration import StructuredRecalibrator

    if not isinstance(recalibrator, StructuredRecalibrator):
        raise ParameterTypeError(
            f"`recalibrator` must be a StructuredRecalibrator; got {type(recalibrator).__name__}"
        )
    client = _client(client)
    chosen = sample_items(source, n_items, random_state=random_state, client=client)
    files = [str(f) for f in _partitions(source)]
    pieces = [client.submit(_read_sample, f, chosen, pure=False) for f in files]
    fitted = client.submit(
        _fit_on_pieces,
        _pack(recalibrator),
        _version(),
        pieces,
        files,
        inference_options,
        pure=False,
    ).result()
    if isinstance(fitted, bytes):  # (not the workers' cache: the caller gets its own object)
        from . import io

        return io.loads(fitted, expected_class=StructuredRecalibrator)
    return fitted
