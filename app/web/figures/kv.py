"""KV-cache blocks over time: each scheduler's block pool as a grid of cells, coloured by what the request holding
them is doing, played as an animation (static/js/kv_player.js and kv_paint.js paint the frames on canvases; it is no plotly figure).
A run of several engines has a pool per engine: the card shows one engine's, picked from a list (the busiest by
default; kv_engine.py serves another's frames, and the URL's `engine=` keeps the choice), and under it the cluster
view (clusterview.py: the router's choices, each engine's queue and KV use, the KV transfers between pools,
requests by engine). An embed of a cluster's card shows the cluster view alone."""

from __future__ import annotations

import math
from dataclasses import replace

from .. import cluster_page, clusterview
from ..charts import FREE_CELL, SERIES, color, text_style
from ..runview import RunView
from . import Figure, Results

# What a cell's majority owner is doing, with two shades each so that neighbouring requests stay apart.
# static/js/kv_paint.js draws the grids on canvases with these colours (charts.SERIES: no scheduler's); the card's
# legend lists them.
KV_STATES = (
    ("free", "free", (FREE_CELL, FREE_CELL)),
    ("prefill", "prefilling (no token yet)", (SERIES["prefill"], SERIES["prefill_light"])),
    ("decode", "decoding", (SERIES["decode"], SERIES["decode_light"])),
    ("shared", "shared prefix (several requests)", (SERIES["shared"], SERIES["shared_light"])),
    ("cached", "cached prefix, free to evict", (SERIES["cached"], SERIES["cached"])),
    ("swapped", "swapped out to host memory", (SERIES["preempted"], SERIES["preempted_light"])),
)
# Disaggregated serving adds one: a prefill engine's blocks of a request whose prefill is done, held (no running
# request owns them) until a decode engine has pulled its KV (kvstates.CELL_HELD).
HELD_STATE = ("held", "prefilled, held for its KV transfer", (SERIES["held"], SERIES["held_light"]))


def kv_grid(views: list[RunView]) -> tuple[int, int]:
    """(columns, rows) of the grid every scheduler's pool is drawn on. Cells are the same size for all (as is
    the number of blocks in one, see service.compare): a larger pool is a longer grid, not smaller cells."""
    cells = max((v.kv["cells"] for v in views), default=1)
    cols = max(1, math.ceil(math.sqrt(cells)))
    return cols, max(1, math.ceil(cells / cols))


def kv_figure(views: list[RunView]) -> dict:
    """The KV view's drawing spec (not a plotly figure: static/js/kv_paint.js paints canvases): the shared grid and the colours
    of each state. The frames travel beside it (kv_frames)."""
    cols, rows = kv_grid(views)
    states = KV_STATES + ((HELD_STATE,) if views and views[0].cluster and views[0].cluster["disaggregated"] else ())
    return {"grid": {"cols": cols, "rows": rows},
            "states": [{"key": key, "label": label, "colors": list(colors)} for key, label, colors in states]}


def kv_frames(views: list[RunView], span: list[float] | None = None) -> dict:
    """What the KV player needs: per scheduler the cell grid and its run-length coded frames, played over
    `span` (the comparison's time_range)."""
    horizon = span[1] if span else 0.0
    grid_cols, _ = kv_grid(views)
    steps = max((len(v.kv["frame_s"]) for v in views), default=1)
    # Open at the busiest moment (the highest KV use of any scheduler): a still frame worth looking at.
    peaks = [(max(v.kv["usage"]), v.kv["frame_s"][v.kv["usage"].index(max(v.kv["usage"]))])
             for v in views if v.kv["usage"]]
    start = round(max(peaks)[1] / horizon * (steps - 1)) if peaks and horizon > 0 else 0
    return {"horizon": round(horizon, 4), "steps": steps, "start": int(start),
            "schedulers": [dict(v.kv, name=v.scheduler, color=color(v.scheduler), cols=grid_cols,
                                text_style=text_style(v.scheduler), rows=math.ceil(v.kv["cells"] / grid_cols)) for v in views]}


def engine_names(views: list[RunView]) -> list[str]:
    """The engines of a cluster comparison, in order (every scheduler runs the same deployment)."""
    return [kv["engine"] for kv in (views[0].engine_kv or [])] if views else []


def on_engine(views: list[RunView], name: str) -> list[RunView]:
    """The views with engine `name`'s KV data as their `kv` (what the KV view draws for a cluster)."""
    return [replace(v, kv=next(kv for kv in v.engine_kv if kv["engine"] == name)) for v in views]


def engine_kv(views: list[RunView], span: list[float] | None, name: str) -> dict:
    """The KV view's spec and frames for one engine of a cluster, every scheduler's."""
    shown = on_engine(views, name)
    return {"kv": kv_figure(shown), "frames": kv_frames(shown, span)}


def build(results: Results) -> dict:
    views = results.views
    if results.cluster:
        names = engine_names(views)
        picked = names[clusterview.busiest_engine([v.metrics for v in views])]
        return {"cluster": cluster_page.cluster_context(views, results.span), "engines": names, "engine": picked,
                **engine_kv(views, results.span, picked), "k": views[0].kv["k"]}
    return {"cluster": None, "kv": kv_figure(views), "frames": kv_frames(views, results.span),
            "k": views[0].kv["k"] if views else 1}


FIGURE = Figure(
    name="kv", title="KV-cache blocks over time", order=10, build=build, template="_figure_kv.html",
    explain="Each scheduler's pool, coloured by state: what the request holding a block is doing, prefix blocks "
            "several requests share, cached prefixes free to evict; for several engines, the pool of the engine "
            "picked, and the cluster view.",
)
