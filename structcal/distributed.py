"""Scale-out on Dask: recalibrate chain potentials stored as partitioned Parquet.

Needs the ``dask`` extra (``pip install "structcal[dask]"``: dask[distributed], pyarrow),
imported on first use. The single-process API (:class:`~structcal.StructuredPrediction`
+ :class:`~structcal.StructuredRecalibrator`) is the reference: every event of an item
gets exactly the probability the single-process path gives that item.

Dataset format (``format_version`` 1): a directory of Parquet files ``part-*.parquet``,
each one partition, with one row per token:

=============  ==================  =======================================================
column         type                meaning
=============  ==================  =======================================================
``item``       int64               item (sequence) id, unique across the dataset
``position``   int64               position of the token in its item: 0, 1, ..., L-1
``unary``      list<double>        the token's unary log-potentials (``n_states`` values)
``label``      int64 (optional)    true label, needed to fit a recalibrator
=============  ==================  =======================================================

Rows of an item are consecutive and in position order, and an item lies in one partition
(partitions are groups of whole sequences); both are checked, and a violation fails the
run. The shared transition matrix is stored in every file's schema metadata
(``structcal.transitions``, JSON), with ``structcal.format_version``. Empty items cannot
be stored (they have no rows).

Output of :func:`apply_recalibrator`: a directory of Parquet files, one per input
partition, with one row per event: ``item``, ``kind`` (event kind name), ``position``
and ``label`` (-1 for per-item events), ``forecast`` (the calibrated probability),
``raw`` (the model's probability) and, when the input has labels, ``outcome``. It is
written to a temporary sibling directory and renamed into place only when every
partition succeeded and the partitions were checked to hold disjoint items; then a
``_SUCCESS`` file is written. A failed run leaves no directory at the destination.

Workers receive the fitted recalibrator as a Python object through Dask (serialised in
transit inside a task the scheduler can re-run, never as a pickle file on disk); until the project's versioned save/load lands,
that is how it travels, and workers check that they run the same structcal version as
the client.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from .exceptions import ParameterError, ParameterTypeError, StructcalError

__all__ = [
    "FORMAT_VERSION",
    "write_chain_dataset",
    "read_chain_partition",
    "apply_recalibrator",
    "fit_recalibrator",
]

#: Version of the Parquet dataset layout described in the module docstring.
FORMAT_VERSION = 1
_REQUIRED = ("item", "position", "unary")


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "structcal.distributed needs pyarrow and dask[distributed]: "
            'pip install "structcal[dask]"'
        ) from exc
    return pa, pq


def _version():
    from . import __version__

    return __version__


def write_chain_dataset(path, potentials, *, items_per_partition, labels=None, item_ids=None):
    """Write a batch of chains as a partitioned Parquet dataset (format above).

    Parameters
    ----------
    path : str or Path
        Directory to create (must not exist).
    potentials : ChainPotentials
        The chains, with one shared transition matrix. Empty chains are not allowed.
    items_per_partition : int
        Number of whole chains per file.
    labels : list of array-like, optional
        True labeling of each chain (stored as the ``label`` column).
    item_ids : array-like of int, optional
        Id of each chain (default ``0..n_chains-1``).

    Returns
    -------
    list of Path
        The files written, in order.
    """
    from ._validation import check_int
    from .potentials import ChainPotentials

    pa, pq = _pyarrow()
    if not isinstance(potentials, ChainPotentials):
        raise ParameterTypeError(f"`potentials` must be a ChainPotentials; got {type(potentials).__name__}")
    if potentials.pairwise.ndim != 2:
        raise ParameterError("write_chain_dataset stores one shared transition matrix; got per-edge pairwise")
    per = check_int(items_per_partition, "items_per_partition", low=1)
    lengths = np.diff(potentials.offsets)
    if (lengths == 0).any():
        raise ParameterError(f"empty chains cannot be stored; chain {int(np.argmin(lengths))} has length 0")
    n_items, K = potentials.n_chains, potentials.n_states
    ids = np.arange(n_items) if item_ids is None else np.asarray(item_ids, dtype=np.int64)
    if ids.shape != (n_items,) or np.unique(ids).size != n_items:
        raise ParameterError(f"`item_ids` must be {n_items} distinct integers")
    if labels is not None:
        if len(labels) != n_items:
            raise ParameterError(f"`labels` must hold one labeling per chain ({n_items}); got {len(labels)}")
        flat = np.concatenate([np.asarray(lab, dtype=np.int64).ravel() for lab in labels])
        if flat.shape[0] != potentials.n_tokens:
            raise ParameterError("`labels` must have one label per token")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=False)
    meta = {
        b"structcal.format_version": str(FORMAT_VERSION).encode(),
        b"structcal.transitions": json.dumps(potentials.pairwise.tolist()).encode(),
        b"structcal.version": _version().encode(),
    }
    files = []
    for part, first in enumerate(range(0, n_items, per)):
        last = min(first + per, n_items)
        s, e = int(potentials.offsets[first]), int(potentials.offsets[last])
        item = np.repeat(ids[first:last], lengths[first:last])
        position = np.arange(e - s) - np.repeat(potentials.offsets[first:last] - s, lengths[first:last])
        unary = pa.FixedSizeListArray.from_arrays(pa.array(potentials.unary[s:e].ravel()), K)
        cols = {"item": pa.array(item), "position": pa.array(position), "unary": unary.cast(pa.list_(pa.float64()))}
        if labels is not None:
            cols["label"] = pa.array(flat[s:e])
        table = pa.table(cols).replace_schema_metadata(meta)
        f = path / f"part-{part:05d}.parquet"
        pq.write_table(table, f)
        files.append(f)
    return files


def _partitions(source):
    source = Path(source)
    if not source.is_dir():
        raise ParameterError(f"`source` must be a directory of Parquet files; got {str(source)!r}")
    files = sorted(source.glob("part-*.parquet"))
    if not files:
        raise ParameterError(f"no part-*.parquet files in {str(source)!r}")
    return files


def read_chain_partition(file, *, items=None):
    """Read one partition as ``(potentials, item_ids, labels)``.

    Parameters
    ----------
    file : str or Path
        One ``part-*.parquet`` file of a dataset in the format above.
    items : array-like of int, optional
        Keep only these item ids.

    Returns
    -------
    potentials : ChainPotentials
    item_ids : ndarray of int64
    labels : list of ndarray or None
        Per-item true labels when the file has a ``label`` column.

    Raises
    ------
    ParameterError
        On a missing column, a file of another format version, or items that are not
        whole and consecutive in this partition.
    """
    from .potentials import ChainPotentials

    pa, pq = _pyarrow()
    table = pq.read_table(file)
    missing = [c for c in _REQUIRED if c not in table.column_names]
    meta = table.schema.metadata or {}
    if missing:
        raise ParameterError(f"{Path(file).name}: missing column(s) {missing}; found {table.column_names}")
    version = meta.get(b"structcal.format_version", b"<none>").decode()
    if version != str(FORMAT_VERSION):
        raise ParameterError(
            f"{Path(file).name}: dataset format_version {version}; this structcal reads {FORMAT_VERSION}"
        )
    if b"structcal.transitions" not in meta:
        raise ParameterError(f"{Path(file).name}: no structcal.transitions in the schema metadata")
    pairwise = np.array(json.loads(meta[b"structcal.transitions"]), dtype=np.float64)
    item = table.column("item").to_numpy()
    position = table.column("position").to_numpy()
    if items is not None:
        keep = np.isin(item, np.asarray(items, dtype=np.int64))
        table, item, position = table.filter(pa.array(keep)), item[keep], position[keep]
    n = item.shape[0]
    # item boundaries: a new item starts where the id changes; positions must run 0..L-1
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]]) if n else np.zeros(0, np.int64)
    offsets = np.r_[starts, n].astype(np.int64)
    ids = item[starts]
    expected = np.arange(n) - np.repeat(starts, np.diff(offsets))
    if np.unique(ids).size != ids.size or not np.array_equal(position, expected):
        bad = ids[0] if ids.size else -1
        if np.unique(ids).size == ids.size:
            r = int(np.argmax(position != expected))
            bad = item[r]
        raise ParameterError(
            f"{Path(file).name}: item {int(bad)} is not whole and in order in this partition "
            "(rows of an item must be consecutive with positions 0..L-1; partitions must hold "
            "whole sequences)"
        )
    unary_col = table.column("unary").combine_chunks()
    values = unary_col.flatten().to_numpy()
    K = pairwise.shape[0]
    if values.shape[0] != n * K:
        raise ParameterError(f"{Path(file).name}: every `unary` entry must hold {K} values (n_states)")
    pot = ChainPotentials(values.reshape(n, K), offsets, pairwise)
    labels = None
    if "label" in table.column_names:
        lab = table.column("label").to_numpy().astype(np.int64)
        labels = [lab[offsets[i]:offsets[i + 1]] for i in range(ids.size)]
    return pot, ids.astype(np.int64), labels


def _predict_partition(recalibrator, file, out_dir, version, inference_options):
    """Worker task: calibrated events of one partition, written to ``out_dir``.

    Runs Numba's kernels on this worker thread only: Dask's workers and threads are the
    parallelism, and a kernel thread pool per worker would oversubscribe the cores.
    """
    import numba

    from .prediction import StructuredPrediction

    pa, pq = _pyarrow()
    if version != _version():
        raise StructcalError(f"worker runs structcal {_version()}, the client {version}")
    numba.set_num_threads(1)  # per calling thread
    pot, ids, labels = read_chain_partition(file)
    out = recalibrator.predict(StructuredPrediction(pot, **inference_options), labels)
    t = out.table
    kind = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(t.kind, dtype=np.int32)), pa.array([str(k) for k in t.kind_names])
    ).cast(pa.string())  # the names, built in Arrow rather than as one Python str per event
    cols = {
        "item": pa.array(ids[t.item]),
        "kind": kind,
        "position": pa.array(t.position),
        "label": pa.array(t.label),
        "forecast": pa.array(out.forecast),
        "raw": pa.array(t.raw if t.raw is not None else np.full(t.n_events, np.nan)),
    }
    if t.outcome is not None:
        cols["outcome"] = pa.array(t.outcome)
    target = Path(out_dir) / Path(file).name
    pq.write_table(pa.table(cols), target)
    return ids, t.n_events


def _identity(x):
    return x


def _client(client):
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('structcal.distributed needs dask[distributed]: pip install "structcal[dask]"') from exc
    return get_client()  # the current client, or ValueError naming the problem


def apply_recalibrator(recalibrator, source, destination, *, client=None, **inference_options):
    """Calibrate the events of every item of a Parquet dataset on a Dask cluster.

    Parameters
    ----------
    recalibrator : StructuredRecalibrator
        A fitted recalibrator (shipped to the workers as an object through Dask).
    source : str or Path
        Dataset directory (format in the module docstring).
    destination : str or Path
        Output directory; must not exist. Written only when every partition succeeded.
    client : distributed.Client, optional
        Default: the current client (``distributed.get_client()``).
    **inference_options
        Passed to :class:`~structcal.StructuredPrediction` on the workers.

    Returns
    -------
    dict
        ``{"destination": Path, "n_items": int, "n_events": int, "n_partitions": int}``.

    Raises
    ------
    ParameterError
        Bad input: missing columns, another format version, an item split across
        partitions or out of order. Nothing is left at ``destination``.
    """
    if not hasattr(recalibrator, "forecasters_"):
        raise ParameterError("`recalibrator` must be a fitted StructuredRecalibrator")
    files = _partitions(source)
    destination = Path(destination)
    if destination.exists():
        raise ParameterError(f"`destination` {str(destination)!r} exists; choose a new directory")
    client = _client(client)
    tmp = destination.with_name(f".{destination.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        # the object travels inside a task the scheduler keeps, so a worker lost mid-run
        # is recovered by recomputing it (scattered data would be lost with its worker)
        rec = client.submit(_identity, recalibrator, pure=False)
        futures = [
            client.submit(_predict_partition, rec, str(f), str(tmp), _version(), inference_options,
                          pure=False)
            for f in files
        ]
        results = client.gather(futures)
        ids = np.concatenate([r[0] for r in results])
        uniq, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise ParameterError(
                f"item {int(uniq[np.argmax(counts > 1)])} appears in more than one partition "
                "(partitions must hold whole sequences)"
            )
        os.replace(tmp, destination)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (destination / "_SUCCESS").write_text(json.dumps({"n_partitions": len(files)}))
    return {
        "destination": destination,
        "n_items": int(ids.size),
        "n_events": int(sum(r[1] for r in results)),
        "n_partitions": len(files),
    }


def _item_ids(file):
    pa, pq = _pyarrow()
    table = pq.read_table(file, columns=["item"])
    return np.unique(table.column("item").to_numpy())


def _read_sample(file, items):
    pot, ids, labels = read_chain_partition(file, items=items)
    if labels is None:
        raise ParameterError(f"{Path(file).name}: fitting needs the `label` column")
    return pot, ids, labels


def _fit_on_pieces(recalibrator, pieces, inference_options):
    """Worker task: concatenate sampled items (by id) and fit a clone of the recalibrator."""
    from sklearn.base import clone

    from .potentials import ChainPotentials
    from .prediction import StructuredPrediction

    unaries, labels, ids, pairwise = [], [], [], None
    for pot, piece_ids, piece_labels in pieces:
        pairwise = pot.pairwise
        for i in range(piece_ids.size):
            unaries.append(pot.unary[pot.offsets[i]:pot.offsets[i + 1]])
        labels.extend(piece_labels)
        ids.append(piece_ids)
    order = np.argsort(np.concatenate(ids), kind="stable")
    pot = ChainPotentials.from_list([unaries[i] for i in order], pairwise)
    return clone(recalibrator).fit(StructuredPrediction(pot, **inference_options), [labels[i] for i in order])


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
    all_ids = np.sort(np.concatenate(client.gather(client.map(_item_ids, [str(f) for f in files]))))
    if n_items >= all_ids.size:
        return all_ids
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(all_ids, size=n_items, replace=False))


def fit_recalibrator(recalibrator, source, *, n_items, random_state, client=None, **inference_options):
    """Fit a recalibrator on a seeded random sample of the items of a Parquet dataset.

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
        Passed to :class:`~structcal.StructuredPrediction`.

    Returns
    -------
    StructuredRecalibrator
        Fitted, equal to a single-process fit on the same items in id order.

    Notes
    -----
    Workers read the sampled items of their partitions; the fit runs as one task on one
    worker. Sampling whole items keeps each item's events together (per-item events need
    the whole sequence), and a uniform sample of items is an unbiased sample of the
    events' joint distribution of features and outcomes, which is all the forecasters
    estimate. Their error is dominated by the number of events per region (k-NN: k of
    a few hundred), so a sample of 10^4 - 10^5 events already puts the forecasters within
    noise of a fit on all events (see the forecasters' benchmark), while the fit stays on
    one machine.
    """
    client = _client(client)
    chosen = sample_items(source, n_items, random_state=random_state, client=client)
    pieces = [client.submit(_read_sample, str(f), chosen, pure=False) for f in _partitions(source)]
    fitted = client.submit(_fit_on_pieces, recalibrator, pieces, inference_options, pure=False)
    return fitted.result()
