"""Curves of several variants of a scenario on one plot (/vs: scenario A and scenario B, vs_curves.py):
goodput against offered load and the frontier, each variant's lines in its colour (charts.VARIANTS; a variant of
several schedulers: each scheduler's own colour) and its dash,
named "<variant> · <scheduler>" (goodput) or "<variant> · <GPU>" (frontier), on one pair of axes. The goodput plot
is the results page's (goodput.goodput_figure: bands, knees, the attainment panel) over the variants' sweeps
merged; the frontier draws each variant's envelope per GPU (frontier.envelope, the definition the frontier card
draws and /api/frontier answers)."""

from __future__ import annotations

from sim_core.studies.frontier import envelope

from .charts import SERIES, VARIANT_DASHES, VARIANTS, _axis, _layout, color
from .figures.frontier import _cost
from .figures.goodput import goodput_figure

# A variant's GPUs, told apart by marker (its colour and dash are the variant's).
GPU_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star")


def variant_style(k: int) -> dict:
    """The k-th variant's colour and dash."""
    return {"color": VARIANTS[k % len(VARIANTS)], "dash": VARIANT_DASHES[k % len(VARIANT_DASHES)]}


def series_name(variant: str, what: str) -> str:
    return f"{variant} · {what}"


def variants_goodput_figure(sweeps: list[tuple[str, dict]]) -> dict:
    """(variant name, service.sweep_summary of its sweep) each, over one rate grid: one goodput plot whose lines
    are each variant's schedulers. Raises ValueError if the sweeps were not run over the same rates."""
    grids = {tuple(s["rates"]) for _, s in sweeps}
    if len(grids) != 1:
        raise ValueError("the variants' sweeps must share one rate grid")
    first = sweeps[0][1]
    merged = {"rates": first["rates"], "target_attainment": first["target_attainment"], "slo": first["slo"],
              "schedulers": {}}
    # One scheduler a variant: a colour a variant. Several: each scheduler in its own colour, as every figure draws
    # schedulers, and each variant in its dash.
    several = any(len(s["schedulers"]) > 1 for _, s in sweeps)
    styles = {}
    for k, (variant, sweep) in enumerate(sweeps):
        for scheduler, entry in sweep["schedulers"].items():
            name = series_name(variant, scheduler)
            merged["schedulers"][name] = entry
            styles[name] = {**variant_style(k), **({"color": color(scheduler)} if several else {})}
    return goodput_figure(merged, styles)


def variants_frontier_figure(fronts: list[tuple[str, list[dict]]], basis: str) -> dict:
    """(variant name, its frontier's points) each: every variant's envelope on each of its GPUs (the Pareto front
    over its configurations), on one pair of axes."""
    layout = _layout(420, margin={"l": 72, "r": 24, "t": 40, "b": 56})
    layout["xaxis"] = _axis("tokens/s per user (1000 / median TPOT)", rangemode="tozero")
    layout["yaxis"] = _axis(f"{basis} tokens/s per GPU", rangemode="tozero")
    data = []
    for k, (variant, points) in enumerate(fronts):
        style = variant_style(k)
        for g, hw in enumerate(dict.fromkeys(p["hardware"] for p in points)):
            front = envelope([p for p in points if p["hardware"] == hw])
            if front:
                data.append(_envelope_trace(series_name(variant, hw), front, style, GPU_SYMBOLS[g % len(GPU_SYMBOLS)]))
    if not data:
        layout["annotations"] = [{"text": "No point to draw", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5, "font": {"color": SERIES["reference"]}}]
    return {"data": data, "layout": layout}


def _envelope_trace(name: str, front: list[dict], style: dict, symbol: str) -> dict:
    return {"type": "scatter", "mode": "lines+markers", "name": name, "legendgroup": name,
            "x": [round(p["tokens_per_s_per_user"], 3) for p in front],
            "y": [round(p["throughput_per_gpu"], 3) for p in front],
            "line": {"color": style["color"], "width": 3, "dash": style["dash"]},
            "marker": {"color": style["color"], "size": 8, "symbol": symbol},
            "customdata": [[p.get("config", ""), p["concurrency"], _cost(p["cost_per_mtok"])] for p in front],
            "hovertemplate": f"{name}: %{{customdata[0]}}, %{{customdata[1]}} users, %{{x:.1f}} tok/s/user, "
                             f"%{{y:,.0f}} tok/s/GPU, %{{customdata[2]}}<extra></extra>"}
