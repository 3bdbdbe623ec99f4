"""``structcal evaluate``: raw vs calibrated probabilities on a labelled batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ._common import command_parser, finish_parser, reported, say
from ._files import CONLL_FORMAT, EVENTS_FORMAT, NPZ_FORMAT, InputError, atomic_path
from ._model import calibrated_input
from ._report import UNITS, report_dict, report_html, report_text

__all__ = ["add_parser", "run"]

EXAMPLES = """\
units: l2 loss, calibration error, sharpness and uncertainty are x100 in every format
(as in Kuleshov & Liang's tables); holds/accuracy is the fraction of events that hold.

examples:
  structcal evaluate recalibrator test.npz
  structcal evaluate recalibrator test.npz -o report.json
  structcal evaluate recalibrator test.npz -o report.html   (diagrams need matplotlib)
  structcal evaluate rec test.conll --crfsuite ner.crfsuite \\
      --token-features feats.py:word2features
"""


def add_parser(sub) -> None:
    """Register ``structcal evaluate``."""
    p = command_parser(
        sub, "evaluate", help="calibration report of a recalibrator on labelled data",
        description="Compare the model's raw event probabilities with the recalibrated "
                    "ones on a labelled batch (not the one used in fit): l2 loss, its "
                    "calibration and sharpness terms, per event kind and pooled.",
        epilog=f"{EXAMPLES}\n{NPZ_FORMAT}\n\n{CONLL_FORMAT}\n\n{EVENTS_FORMAT}",
        data_help="input .npz with `labels`", model=True,
    )
    p.add_argument("-o", "--output", default=None,
                   help="report file (.txt, .json or .html); default: print to stdout")
    p.add_argument("--format", choices=["text", "json", "html"], default=None,
                   help="report format (default: from the output suffix, else text)")
    p.add_argument("--bins", type=int, default=10, help="equal-width buckets (default: 10)")
    p.add_argument("--no-shift-check", action="store_true",
                   help="do not test whether the data look like the recalibration data "
                        "(the test warns when they do not: the calibrated probabilities may "
                        "not transfer)")
    finish_parser(p, run)


def _format(args) -> str:
    if args.format:
        return args.format
    if args.output is None:
        return "text"
    suffix = Path(args.output).suffix.lower()
    formats = {".txt": "text", ".json": "json", ".html": "html", ".htm": "html"}
    if suffix not in formats:
        raise InputError(f"{args.output}: unknown report suffix {suffix!r}: use .txt, .json or .html, or --format")
    return formats[suffix]


@reported
def run(args) -> int:
    """Run ``structcal evaluate``."""
    fmt = _format(args)
    if args.bins < 1:
        raise InputError(f"--bins must be >= 1; got {args.bins}")
    rec, batch, out = calibrated_input(args, need_labels=True)
    forecasts = {"calibrated": out.forecast}
    raw = out.table.raw
    if raw is not None and not (raw != raw).any():
        forecasts = {"raw": raw, **forecasts}
    from ..recalibration import evaluate_events

    say(args, f"scoring {'raw and ' if 'raw' in forecasts else ''}calibrated "
              f"probabilities of {out.table.n_events} events ({args.bins} buckets) ...")
    report = evaluate_events(out.table, forecasts, n_bins=args.bins, groups=batch.groups,
                             n_resamples=200)
    notes = {"recalibrator": args.model, "data": str(batch.path),
             "items": f"{batch.n_items} {batch.units}", "events": out.table.n_events}
    if fmt == "json":
        text = json.dumps({**notes, "units": UNITS, "n_bins": report.n_bins,
                           "results": report_dict(report)}, indent=2) + "\n"
    elif fmt == "html":
        say(args, "drawing the reliability diagrams ...")
        text = report_html(report, title="structcal calibration report", notes=notes)
    else:
        text = f"{batch.n_items} {batch.units} of {batch.path}, {out.table.n_events} events\n"
        text += report_text(report) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        with atomic_path(args.output) as tmp:
            Path(tmp).write_text(text)
        print(f"wrote the {fmt} report to {args.output}")
    return 0
