"""A figure's numbers as text, for people who cannot see it: the visually hidden summary under each plot
(templates: figure_summary), built from the same plotly JSON the browser draws, so it never says other numbers.

Per panel (a pair of axes) one sentence, "<y title> against <x title>: ..." then each named series: its points
("y at x") when there are few, else its range of values over its range of x; a bar chart's value per category. Series plotly shows no hover for
(reference lines, bands, guides) are decoration and left out."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_SERIES = 40  # past this many series a summary says how many more there are rather than reading them all
MAX_POINTS = 12  # a series of at most this many points is read point by point ("y at x"), longer ones as ranges


def _plain(text: Any) -> str:
    """Plotly text (which may carry <b>, <br>) as plain words."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", str(text or ""))).strip()


def _title(axis: dict | None) -> str:
    title = (axis or {}).get("title")
    return _plain(title.get("text") if isinstance(title, dict) else title)


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _numbers(values: Any) -> list[float]:
    out = []
    for v in values or ():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if math.isfinite(v):
            out.append(float(v))
    return out


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return _num(lo) if _num(lo) == _num(hi) else f"{_num(lo)} to {_num(hi)}"


def _series_text(trace: dict) -> str | None:
    name = _plain(trace.get("name"))
    if trace.get("type") == "bar":
        horizontal = trace.get("orientation") == "h"
        cats = trace.get("y" if horizontal else "x") or []
        vals = trace.get("x" if horizontal else "y") or []
        pairs = [f"{_plain(c)} {_num(v)}" for c, v in zip(cats, vals, strict=False)
                 if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
        return f"{name}: {', '.join(pairs)}" if pairs else None
    if trace.get("type") == "heatmap":
        z = _numbers(v for row in trace.get("z") or () for v in (row if isinstance(row, list) else [row]))
        return f"{name}: values {_span(z)}" if z else None
    ys, xs = _numbers(trace.get("y")), _numbers(trace.get("x"))
    if not ys:
        return f"{name}: none"  # a series in the legend with nothing in it (no plan dominated, say)
    labels = trace.get("text") if isinstance(trace.get("text"), list) else []
    points = [(x, y, _plain(labels[i]) if i < len(labels) else "")
              for i, (x, y) in enumerate(zip(trace.get("x") or [], trace.get("y") or [], strict=False))
              if _numbers([x]) and _numbers([y])]
    if len(points) == len(ys) <= MAX_POINTS:
        return f"{name}: " + ", ".join(f"{_num(y)} at {_num(x)}" + (f" ({t})" if t else "") for x, y, t in points)
    return f"{name}: {_span(ys)}" + (f" over {_span(xs)}" if xs else "")


def figure_summary(fig: dict | None, limit: int = MAX_SERIES) -> str:
    """The figure's series and their numbers, one sentence per panel (empty for no figure or no named series)."""
    if not isinstance(fig, dict) or not isinstance(fig.get("data"), list):
        return ""
    layout = fig.get("layout") or {}
    panels: dict[tuple[str, str], list[str]] = {}
    shown = skipped = 0
    for trace in fig["data"]:
        if not isinstance(trace, dict) or not _plain(trace.get("name")) or trace.get("hoverinfo") == "skip":
            continue
        text = _series_text(trace)
        if text is None:
            continue
        if shown >= limit:
            skipped += 1
            continue
        shown += 1
        panels.setdefault((trace.get("xaxis") or "x", trace.get("yaxis") or "y"), []).append(text)
    sentences = []
    for (x, y), parts in panels.items():
        xt, yt = _title(layout.get("xaxis" + x[1:])), _title(layout.get("yaxis" + y[1:]))
        head = f"{yt} against {xt}" if yt and xt else (yt or xt)
        sentences.append((f"{head}: " if head else "") + "; ".join(parts) + ".")
    if skipped:
        sentences.append(f"And {skipped} more series.")
    return " ".join(sentences)
