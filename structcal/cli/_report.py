"""Calibration reports as text, JSON and HTML, all in the same units (private).

Losses (l2, calibration error, sharpness, uncertainty) are shown x100, as in the paper's
tables and the text output; accuracy ("holds") is the fraction of events that hold. The
JSON states these units under ``"units"``.
"""

from __future__ import annotations

import base64
import html
import io

__all__ = ["SCALE", "UNITS", "report_dict", "report_text", "report_html"]

SCALE = 100.0
UNITS = {
    "l2": "x100", "calibration_error": "x100", "sharpness": "x100", "uncertainty": "x100",
    "accuracy": "fraction of events that hold (0-1)", "n_events": "count",
}
_LOSSES = ("l2", "calibration_error", "sharpness", "uncertainty")


def report_dict(report) -> dict:
    """``{group: {forecaster: {...}}}`` with losses x100 (see ``UNITS``)."""
    out = report.to_dict()
    for group in out.values():
        for entry in group.values():
            for key in _LOSSES:
                entry[key] = entry[key] * SCALE
    return out


def report_text(report) -> str:
    """The report's table, with its units stated."""
    return (f"l2 loss, calibration error and sharpness x100; holds = fraction of events "
            f"that hold ({report.n_bins} equal-width buckets)\n" + report.format(scale=SCALE))


def _figure_png(report, group) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from ..plotting import plot_report

    fig, ax = plt.subplots(figsize=(4, 4))
    plot_report(report, group, ax=ax, scale=SCALE)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def report_html(report, *, title: str, notes: dict) -> str:
    """A self-contained HTML page: the table and one reliability diagram per group."""
    esc = html.escape
    d = report_dict(report)
    rows = []
    for group, entries in d.items():
        for name, e in entries.items():
            rows.append(
                f"<tr><td>{esc(str(group))}</td><td>{esc(name)}</td><td>{e['n_events']}</td>"
                f"<td>{e['accuracy']:.3f}</td><td>{e['l2']:.2f}</td>"
                f"<td>{e['calibration_error']:.3f}</td><td>{e['sharpness']:.2f}</td></tr>"
            )
    figures = []
    missing = False
    for group in report.groups:
        png = _figure_png(report, group)
        if png is None:
            missing = True
            break
        figures.append(f'<figure><img alt="reliability diagram: {esc(str(group))}" '
                       f'src="data:image/png;base64,{png}"/></figure>')
    if missing:
        figures = ["<p>Reliability diagrams need matplotlib (pip install 'structcal[plot]').</p>"]
    meta = "".join(f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in notes.items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
figure{{display:inline-block;margin:0 1em 1em 0}}</style></head>
<body><h1>{esc(title)}</h1><ul>{meta}</ul>
<p>l2 loss, calibration error and sharpness x100; holds = fraction of events that hold;
{report.n_bins} equal-width buckets. Each diagram plots the fraction of events that hold
against the mean forecast per bucket (dot area: number of events; dotted: perfect
calibration).</p>
<table><tr><th>group</th><th>forecasts</th><th>events</th><th>holds</th><th>l2</th>
<th>cal. error</th><th>sharpness</th></tr>
{''.join(rows)}</table>
{''.join(figures)}
</body></html>
"""
