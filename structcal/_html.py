"""Small HTML tables for notebook display (``_repr_html_``), without dependencies."""

from __future__ import annotations

from html import escape

__all__ = ["html_table"]


def html_table(header, rows, *, caption=None, note=None) -> str:
    """Build an HTML table: ``header`` the column titles, ``rows`` lists of cells."""
    parts = ['<div class="structcal-table"><table>']
    if caption:
        parts.append(f"<caption style='text-align:left'><b>{escape(str(caption))}</b></caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header)
                 + "</tr></thead><tbody>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table>")
    if note:
        parts.append(f"<p style='font-size:smaller'>{escape(str(note))}</p>")
    parts.append("</div>")
    return "".join(parts)
