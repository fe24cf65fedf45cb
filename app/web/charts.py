"""What every figure of the dashboard shares: its colours (a scheduler has the same colour in every figure), axes,
layout and the comparison's time range. The figures themselves, one module each, are in figures/; they are built
server-side as plotly JSON (plain dicts: {"data": [...], "layout": {...}}) and drawn in the browser by the
vendored plotly.js (the KV view paints canvases itself: figures/kv.py).
"""

from __future__ import annotations

import functools
import math

from sim_core import SCHEDULER_NAMES

from .runview import RunView

PALETTE = {
    "static": "#868e96", "fcfs": "#e8590c", "spf": "#9c36b5", "chunked": "#1971c2", "slo": "#2f9e44",
    "fair": "#c2255c",
}
SPARE = ("#0c8599", "#f08c00", "#5c7cfa", "#66a80f", "#e64980", "#495057")
FREE_CELL = "#eceff3"
GRID = "#e9ecef"
AXIS = "#495057"
# The colours of everything drawn that is not a scheduler (the parts of a latency, kernel groups, KV states, Gantt
# segments, plans, reference lines), defined here once. None is a scheduler's colour or close to one (at least
# SCHEDULER_MARGIN apart, CIE76 delta E; tests/test_figure_colors.py checks every figure's traces), so a colour in
# any figure names one scheduler or something else, never both. "_light": a second shade (neighbouring KV cells).
SERIES = {
    "queued": "#ced4da", "prefill": "#fab005", "prefill_light": "#ffd43b", "decode": "#2b3a8c",
    "decode_light": "#91a7ff", "stall": "#9c6644", "preempted": "#e03131", "preempted_light": "#ff8787",
    "transport": "#38d9a9", "shared": "#82c91e", "shared_light": "#c0eb75", "cached": "#66d9e8",
    "held": "#b197fc", "held_light": "#d0bfff", "rejected": "#212529",
    "gemm": "#74c0fc", "attention": "#fcc419", "elementwise": "#94d82d", "lm_head": "#e599f7",
    "communication": "#38d9a9", "overhead": "#ced4da",
    "reference": "#495057",  # SLO targets, the attainment target: dashed lines and their notes
    "ideal": "#ced4da",  # goodput = offered load
    "plan": "#343a40", "dominated": "#ced4da",
    "offered": "#343a40",  # the offered load and its rate schedule
}
# A cluster's engines in order (the cluster view's router row, request bars and KV transfers agree): no
# scheduler's colour nor the KV transfers' (SERIES["transport"]); a cluster of more engines repeats them.
ENGINES = ("#1c2f80", "#fab005", "#087f5b", "#e599f7", "#9c6644", "#74c0fc", "#94d82d", "#5f3dc4", "#ffa94d",
           "#b197fc", "#66d9e8")
# A comparison's variants (/vs: scenario A, scenario B) where one plot draws both: two of the engines' colours, far
# apart in hue and lightness (navy and green read apart under the common colour-vision deficiencies), B's lines
# dashed too, so the pair reads apart in greyscale.
VARIANTS = ("#1c2f80", "#087f5b")
VARIANT_DASHES = ("solid", "dash")
SCHEDULER_MARGIN = 15.0
# A trace's `meta` saying its line width is a row's thickness (a Gantt's bars drawn as thick lines), fitted to the
# figure's height: static/js/slides.js leaves it as it is when it scales a figure's lines for a slide (they would overlap).
ROW_BARS = "rows"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def color(name: str) -> str:
    if name in PALETTE:
        return PALETTE[name]
    k = SCHEDULER_NAMES.index(name) if name in SCHEDULER_NAMES else abs(hash(name))
    return SPARE[k % len(SPARE)]


# Text drawn in a scheduler's colour (its name over its Gantt, its knee, its ticked chip) must read at WCAG AA,
# 4.5:1, which the plot colours above do not all reach (fcfs on white: 3.6:1). Its text shade is the plot colour
# darkened (light theme) or lightened (dark theme) just enough, against every background such text sits on: the
# card and the page, and a ticked chip's tint of the colour itself (app.css: 8% of it over the field).
TEXT_CONTRAST = 4.5
LIGHT_TEXT_BACKGROUNDS = ("#ffffff", "#f4f5f7")  # app.css --card, --bg
DARK_TEXT_BACKGROUNDS = ("#161b22", "#0d1117")  # app.css dark --card, --bg (= --field)
CHIP_TINT = 0.08


def luminance(hex_color: str) -> float:
    """WCAG relative luminance of #rrggbb."""
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(int(hex_color[i:i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _readable(c: str, backgrounds: tuple[str, ...], toward: str) -> str:
    grounds = [*backgrounds, *(_mix(bg, c, CHIP_TINT) for bg in backgrounds)]
    for step in range(101):  # mixed toward black (or white) in 1% steps: the least change that reads
        shade = _mix(c, toward, step / 100)
        if all(contrast(shade, bg) >= TEXT_CONTRAST for bg in grounds):
            return shade
    return toward


@functools.cache
def text_colors(name: str) -> tuple[str, str]:
    """(light theme, dark theme) text shade of a scheduler's colour; the plot lines keep `color(name)`."""
    return text_colors_of(color(name))


@functools.cache
def text_colors_of(c: str) -> tuple[str, str]:
    """(light theme, dark theme) text shade of a plot colour #rrggbb."""
    return _readable(c, LIGHT_TEXT_BACKGROUNDS, "#000000"), _readable(c, DARK_TEXT_BACKGROUNDS, "#ffffff")


def text_style(name: str) -> str:
    """The inline CSS custom properties of an element whose text is in a scheduler's colour (app.css .sched-text,
    .chip): --c the plot colour (swatches, borders), --c-text and --c-text-dark its text shades."""
    light, dark = text_colors(name)
    return f"--c: {color(name)}; --c-text: {light}; --c-text-dark: {dark}"


def rgba(hex_color: str, alpha: float) -> str:
    """A colour made translucent: a band drawn in its scheduler's colour lets the lines under it show."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:g})"


def _mix(hex_color: str, other: str, t: float) -> str:
    a = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b, strict=True))


def _axis(title: str, **extra) -> dict:
    ax = {"title": {"text": title, "font": {"size": 12}}, "gridcolor": GRID, "zeroline": False,
          "linecolor": "#adb5bd", "ticks": "outside", "tickcolor": "#adb5bd", "automargin": True}
    ax.update(extra)
    return ax


def _layout(height: int, **extra) -> dict:
    layout = {
        "height": height, "autosize": True, "font": {"family": FONT, "size": 12, "color": AXIS},
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff",
        "margin": {"l": 64, "r": 24, "t": 40, "b": 52},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "font": {"size": 12}},
        "hoverlabel": {"font": {"family": FONT}},
    }
    layout.update(extra)
    return layout


def _columns(n: int, gap: float = 0.06) -> list[list[float]]:
    width = (1 - gap * (n - 1)) / n
    return [[round(k * (width + gap), 4), round(k * (width + gap) + width, 4)] for k in range(n)]


def _rows(n: int, gap: float = 0.05) -> list[list[float]]:
    """Vertical domains, top row first."""
    height = (1 - gap * (n - 1)) / n
    return [[round(1 - k * (height + gap) - height, 4), round(1 - k * (height + gap), 4)] for k in range(n)]


def _empty_note(text: str) -> dict:
    """A note across the middle of a figure that has nothing to draw (a run in which no request arrived, or none
    finished): an empty plot alone would look like a drawing error."""
    return {"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False, "text": text,
            "font": {"size": 13, "color": AXIS}}


def _ax(kind: str, k: int) -> str:
    """Layout key of the k-th (0-based) x or y axis."""
    return f"{kind}axis" if k == 0 else f"{kind}axis{k + 1}"


def _ref(kind: str, k: int) -> str:
    return kind if k == 0 else f"{kind}{k + 1}"


def time_range(views: list[RunView]) -> list[float] | None:
    """[0, end] of the whole comparison: every per-scheduler time figure (Gantt, engine timeline, KV player) spans
    it, so one moment sits at one place in all of them. None when nothing happened (plotly picks a range)."""
    end = max((v.end_s for v in views), default=0.0)
    for v in views:  # a request rejected on arrival after the last step is drawn too
        for seg in (v.gantt or {}).get("segments", {}).values():
            end = max(end, max(seg["end"], default=0.0))
    return [0.0, round(end, 4)] if end > 0 else None


def _log10(x: float) -> float:
    return math.log10(x) if x > 0 else 0.0
