"""``structcal apply``: calibrated probabilities of every event of a batch, as CSV or Parquet."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ._common import command_parser, finish_parser, reported, say
from ._files import CONLL_FORMAT, NPZ_FORMAT, InputError, atomic_path
from ._model import calibrated_input

__all__ = ["add_parser", "run", "event_columns"]

COLUMNS = """\
output columns, one row per event:
  item        index of the chain/graph in the input (0-based)
  start, end  the positions the event is about, half-open: [j, j + 1) for a
              per-position event (marginal), [0, length) for a per-item event
              (map, any_label, ...); label_at/span/entity events give their positions
              (for an entity, its tokens)
  kind        event kind (map, marginal, any_label=L, entity, ...)
  label       the label asked about (-1 for per-item events)
  tag         its name: a tag, or an entity's type (CRFsuite input only)
  raw         the model's own probability of the event (nan if it has none)
  calibrated  the recalibrated probability
  outcome     1 if the event holds (only when the input has `labels`)"""

EXAMPLES = """\
examples:
  structcal apply recalibrator new.npz -o events.csv
  structcal apply recalibrator new.npz -o events.parquet      (needs pyarrow)
  structcal apply rec test.conll --crfsuite ner.crfsuite -o events.csv
"""


def add_parser(sub) -> None:
    """Register ``structcal apply``."""
    p = command_parser(
        sub, "apply", help="calibrated probabilities of the events of new predictions",
        description="Apply a recalibrator saved by `structcal fit` to a batch and write the "
                    "calibrated probability of every event. The output file is written "
                    "atomically: an interrupted run leaves no partial file.",
        epilog=f"{COLUMNS}\n\n{NPZ_FORMAT}\n\n{CONLL_FORMAT}\n\n{EXAMPLES}",
        data_help="input .npz (`labels` optional)", model=True,
    )
    p.add_argument("-o", "--output", required=True, help="output file (.csv or .parquet)")
    p.add_argument("--format", choices=["csv", "parquet"], default=None,
                   help="output format (default: from the output file's suffix)")
    finish_parser(p, run)


def event_columns(out, kinds=(), tag_names=None) -> dict:
    """The output columns (see ``COLUMNS``) of ``CalibratedEvents`` of ``kinds``."""
    from ..events import SpanEquals

    t = out.table
    lengths = t.item_lengths[t.item]
    per_node = t.node >= 0
    start = np.where(per_node, t.position, 0)
    end = np.where(per_node, t.position + 1, lengths)
    for k, kind in enumerate(kinds):
        if isinstance(kind, SpanEquals):  # a fixed span: its positions in each item
            rows = t.kind == k
            first = np.where(kind.start < 0, lengths[rows] + kind.start, kind.start)
            start[rows], end[rows] = first, first + kind.labels.shape[0]
    sizes = np.diff(t.member_offsets)
    has = np.flatnonzero(sizes > 0)  # node-set events (entities): the range of their nodes
    if has.size:
        item_first = np.concatenate([[0], np.cumsum(t.item_lengths)])[t.item[has]]
        lo = np.minimum.reduceat(t.members, t.member_offsets[has])
        hi = np.maximum.reduceat(t.members, t.member_offsets[has])
        start[has], end[has] = lo - item_first, hi + 1 - item_first
    cols = {
        "item": t.item.astype(np.int64),
        "start": start.astype(np.int64),
        "end": end.astype(np.int64),
        "kind": np.asarray(t.kind_names, dtype=object)[t.kind],
        "label": t.label.astype(np.int64),
    }
    if tag_names is not None:  # the label's name: a tag, or an entity type for entities
        tag = np.full(t.n_events, "", dtype=object)
        node_rows = (t.node >= 0) & (t.label >= 0)
        tag[node_rows] = np.asarray(tag_names, dtype=object)[t.label[node_rows]]
        for k, kind in enumerate(kinds):
            rows = (t.kind == k) & (sizes > 0) & (t.label >= 0)
            if rows.any() and hasattr(kind, "tag_scheme"):
                tag[rows] = np.asarray(kind.tag_scheme.types, dtype=object)[t.label[rows]]
        cols["tag"] = tag
    cols |= {
        "raw": np.full(t.n_events, np.nan) if t.raw is None else t.raw.astype(np.float64),
        "calibrated": np.asarray(out.forecast, dtype=np.float64),
    }
    if t.outcome is not None:
        cols["outcome"] = t.outcome.astype(np.int64)
    return cols


def _output_format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower()
    if suffix in (".csv", ".parquet", ".pq"):
        return "csv" if suffix == ".csv" else "parquet"
    raise InputError(f"{args.output}: unknown output suffix {suffix!r}: use .csv or .parquet, or --format")


def write_csv(cols, path) -> None:
    """CSV with a header; floats in their shortest exact form (``repr``)."""
    names = list(cols)
    lists = [c.tolist() for c in cols.values()]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows(zip(*lists))


def write_parquet(cols, path) -> None:
    """Parquet through pyarrow (optional dependency)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            "Parquet output needs pyarrow: pip install 'structcal[parquet]' (or write .csv)"
        ) from None
    table = pa.table({k: pa.array(v.tolist() if v.dtype == object else v) for k, v in cols.items()})
    pq.write_table(table, path)


@reported
def run(args) -> int:
    """Run ``structcal apply``."""
    fmt = _output_format(args)
    rec, batch, out = calibrated_input(args, need_labels=False)
    cols = event_columns(out, rec.kinds_, batch.tag_names)
    say(args, f"writing {len(cols['item'])} events to {args.output} ...")
    with atomic_path(args.output) as tmp:
        (write_csv if fmt == "csv" else write_parquet)(cols, tmp)
    n = len(cols["item"])
    print(f"wrote {n} events of {batch.n_items} {batch.structure}s to {args.output}")
    return 0
