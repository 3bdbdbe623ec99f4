"""``structcal apply``: calibrated probabilities of every event of a batch, as CSV or Parquet."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ._common import command_parser, finish_parser, reported, say
from ._files import CONLL_FORMAT, EVENTS_FORMAT, NPZ_FORMAT, InputError, atomic_path
from ._model import calibrated_input

__all__ = ["add_parser", "run", "event_columns"]

#: Integer columns that may have empty entries (None): Parquet stores them as int64 with nulls.
_INT_COLUMNS = ("start", "end", "label")

COLUMNS = """\
output columns, one row per event:
  item        index of the chain/graph in the input (0-based)
  start, end  the positions the event is about, half-open: [j, j + 1) for a
              per-position event (marginal, label_at), the span's positions for a
              span event, an entity's tokens for an entity event; empty for an event
              about the whole item (map, any_label, all_entities, contains_entity)
  kind        event kind (map, marginal, any_label=L, entity, ...)
  label       the label asked about (marginal: the predicted label; any_label=L: L;
              entity events: the entity type's index); empty if the event names none
  tag         the label's name: a tag, or an entity's type (CRFsuite input only)
  raw         the model's own probability of the event (nan if it has none)
  calibrated  the recalibrated probability
  outcome     1 if the event holds (only when the input has `labels`)
  accepted    1 if the event is accepted at the certified precision (only with
              --accept-precision)
  members     the item-local positions (nodes) of a node-set event, an entity's
              tokens or an object's pixels, space-separated in CSV and a list in
              Parquet; empty for other events (only when the recalibrator has
              node-set kinds)"""

EXAMPLES = """\
examples:
  structcal apply recalibrator new.npz -o events.csv
  structcal apply recalibrator new.npz -o events.parquet      (needs pyarrow)
  structcal apply rec test.conll --crfsuite ner.crfsuite -o events.csv
  structcal apply rec new.conll --crfsuite ner.crfsuite -o events.csv \\
      --token-features my_features:word2features
"""


def add_parser(sub) -> None:
    """Register ``structcal apply``."""
    p = command_parser(
        sub, "apply", help="calibrated probabilities of the events of new predictions",
        description="Apply a recalibrator saved by `structcal fit` to a batch and write the "
                    "calibrated probability of every event. The output file is written "
                    "atomically: an interrupted run leaves no partial file.",
        epilog=f"{COLUMNS}\n\n{NPZ_FORMAT}\n\n{CONLL_FORMAT}\n\n{EVENTS_FORMAT}\n\n{EXAMPLES}",
        data_help="input .npz (`labels` optional)", model=True,
    )
    p.add_argument("-o", "--output", required=True, help="output file (.csv or .parquet)")
    p.add_argument("--format", choices=["csv", "parquet"], default=None,
                   help="output format (default: from the output file's suffix)")
    p.add_argument("--accept-precision", type=float, default=None, metavar="TARGET",
                   help="also decide which events to accept: an `accepted` column of the "
                        "events whose calibrated probability reaches a threshold certified, "
                        "on the --calibration data, to give precision >= TARGET on new data "
                        "with probability 1 - DELTA (structcal.guarantees.PrecisionGuarantee; "
                        "assumes the new data exchangeable with the calibration data)")
    p.add_argument("--delta", type=float, default=0.1,
                   help="with --accept-precision: the guarantee's failure probability "
                        "(default 0.1)")
    p.add_argument("--calibration", metavar="DATA", default=None,
                   help="with --accept-precision: labelled data (same format as DATA, not "
                        "used to fit the recalibrator) on which the threshold is certified")
    p.add_argument("--accept-by", choices=["kind", "label"], default="kind",
                   help="with --accept-precision: one threshold per event kind (default) or "
                        "per kind and label (entity type, object class)")
    p.add_argument("--no-shift-check", action="store_true",
                   help="do not test whether the data look like the recalibration data "
                        "(the test warns when they do not: the calibrated probabilities may "
                        "not transfer)")
    finish_parser(p, run)


def event_columns(out, kinds=(), tag_names=None) -> dict:
    """The output columns (see ``COLUMNS``) of ``CalibratedEvents`` of ``kinds``."""
    from ..events import SpanEquals
    from ..events.nodesets import NODE_SET_SCOPES

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
    # an event about the whole item has no positions; one that names no label, no label
    whole_item = ~per_node & (sizes == 0)
    label = t.label.astype(np.int64)
    for k, kind in enumerate(kinds):
        rows = t.kind == k
        if isinstance(kind, SpanEquals):
            whole_item[rows] = False
        asked = getattr(kind, "label", None)  # a per-item event about one label (any_label)
        if isinstance(asked, (int, np.integer)):
            label[rows & (label < 0)] = asked
    cols = {
        "item": t.item.astype(np.int64),
        "start": _blank_where(start.astype(np.int64), whole_item),
        "end": _blank_where(end.astype(np.int64), whole_item),
        "kind": np.asarray(t.kind_names, dtype=object)[t.kind],
        "label": _blank_where(label, label < 0),
    }
    if tag_names is not None:  # the label's name: a tag, or an entity type for entities
        tag = np.full(t.n_events, "", dtype=object)
        named = label >= 0
        typed = np.zeros(t.n_events, dtype=bool)
        from ..events.kinds import _TokenKind

        for k, kind in enumerate(kinds):
            # entity events: the label is an entity type (token kinds' labels are tags)
            if getattr(kind, "tag_scheme", None) is not None and not isinstance(kind, _TokenKind):
                rows = (t.kind == k) & named
                tag[rows] = np.asarray(kind.tag_scheme.types, dtype=object)[label[rows]]
                typed |= rows
        rows = named & ~typed
        tag[rows] = np.asarray(tag_names, dtype=object)[label[rows]]
        cols["tag"] = tag
    cols |= {
        "raw": np.full(t.n_events, np.nan) if t.raw is None else t.raw.astype(np.float64),
        "calibrated": np.asarray(out.forecast, dtype=np.float64),
    }
    if t.outcome is not None:
        cols["outcome"] = t.outcome.astype(np.int64)
    if NODE_SET_SCOPES & set(t.kind_scopes):  # node-set events: their nodes, local to the item
        item_first = np.concatenate([[0], np.cumsum(t.item_lengths)])
        members = np.empty(t.n_events, dtype=object)
        for r in range(t.n_events):
            lo, hi = t.member_offsets[r], t.member_offsets[r + 1]
            members[r] = (t.members[lo:hi] - item_first[t.item[r]]).tolist() if hi > lo else None
        cols["members"] = members
    return cols


def _blank_where(values, blank):
    """``values`` as Python ints, None (an empty CSV field, a Parquet null) where ``blank``."""
    out = values.astype(object)
    out[blank] = None
    return out


def _output_format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower()
    if suffix in (".csv", ".parquet", ".pq"):
        return "csv" if suffix == ".csv" else "parquet"
    raise InputError(f"{args.output}: unknown output suffix {suffix!r}: use .csv or .parquet, or --format")


def write_csv(cols, path) -> None:
    """CSV with a header; floats in their shortest exact form (``repr``); members as
    space-separated positions."""
    names = list(cols)
    lists = [c.tolist() for c in cols.values()]
    if "members" in cols:
        i = names.index("members")
        lists[i] = ["" if m is None else " ".join(map(str, m)) for m in lists[i]]
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
    def column(k, v):
        if k == "members":
            return pa.array(v.tolist(), type=pa.list_(pa.int64()))
        if v.dtype == object:
            return pa.array(v.tolist(), type=pa.int64() if k in _INT_COLUMNS else None)
        return pa.array(v)

    table = pa.table({k: column(k, v) for k, v in cols.items()})
    pq.write_table(table, path)


def _accepted(args, rec, out, new_groups=None):
    """Certify the threshold on ``--calibration`` and return the accepted events (0/1).

    When the shift test flags kinds of the new batch, the certificate is weighted toward
    the batch (``certify_precision(..., batch=)``): only then are their events accepted.
    """
    import argparse

    from ..exceptions import StructcalError
    from ..guarantees import accept_events, certify_precision
    from ._model import calibrate, load_batch_for

    groups = args.groups if (args.groups or "").startswith("column:") else None  # a file
    cal_args = argparse.Namespace(**{**vars(args), "data": args.calibration, "groups": groups})
    cal_batch = load_batch_for(rec, cal_args, need_labels=True)
    say(args, f"certifying precision {args.accept_precision:g} (delta {args.delta:g}) on "
              f"{cal_batch.n_items} {cal_batch.units} of {args.calibration} ...")
    cal = calibrate(rec, cal_batch, shift_check=False)
    try:
        shifted = bool(getattr(out, "shifted", ()))
        if shifted:
            say(args, f"the shift test flagged {list(out.shifted)} in the new batch: the "
                      "certificate is weighted toward it")
        g = certify_precision(cal, args.accept_precision, args.delta, groups=cal_batch.groups,
                              by=args.accept_by, batch=out if shifted else None,
                              batch_groups=new_groups if shifted else None)
    except StructcalError as exc:
        raise InputError(f"--accept-precision: {exc}") from None
    for key, c in g.certificates_.items():
        if c.certified:
            print(f"accept {key}: calibrated probability >= {c.threshold:g} (precision >= "
                  f"{args.accept_precision:g} with probability {1 - args.delta:g}; "
                  f"{c.accepted_share:.1%} of the calibration events accepted)")
        else:
            print(f"accept {key}: none (precision {args.accept_precision:g} cannot be "
                  f"certified from {c.n_calibration} calibration events in {c.n_groups} "
                  "groups)")
    return accept_events(g, out).astype(np.int64)


def _check_output_folder(path) -> None:
    import os

    folder = Path(path).parent
    if not folder.is_dir():
        raise InputError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise InputError(f"{path}: the folder {folder} is not writable")


@reported
def run(args) -> int:
    """Run ``structcal apply``."""
    fmt = _output_format(args)
    _check_output_folder(args.output)  # before any inference
    if args.accept_precision is not None and args.calibration is None:
        raise InputError("--accept-precision needs --calibration DATA: labelled data, not used "
                         "to fit the recalibrator, on which the threshold is certified")
    if args.accept_precision is None and args.calibration is not None:
        raise InputError("--calibration goes with --accept-precision TARGET")
    rec, batch, out = calibrated_input(args, need_labels=False)
    cols = event_columns(out, rec.kinds_, batch.tag_names)
    if batch.item_ids is not None:  # an events file: its own item ids
        cols["item"] = batch.item_ids[out.table.item].astype(object)
    if args.accept_precision is not None:
        cols["accepted"] = _accepted(args, rec, out, batch.groups)
    say(args, f"writing {len(cols['item'])} events to {args.output} ...")
    with atomic_path(args.output) as tmp:
        (write_csv if fmt == "csv" else write_parquet)(cols, tmp)
    n = len(cols["item"])
    print(f"wrote {n} events of {batch.n_items} {batch.units} to {args.output}")
    return 0
