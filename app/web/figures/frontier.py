"""Frontier: throughput per GPU against tokens/s per user for several GPUs at once, InferenceX's chart
(sim_core/studies/frontier.py defines the axes and cites theirs). The card proposes GPUs, ISL/OSL and the most
users; "Draw frontier" starts a closed-loop concurrency sweep of the scenario's model on each GPU in the
background (app/web/frontier_page.py), the card polls its progress, then draws one line per GPU, each point a
concurrency, its Pareto front solid."""

from __future__ import annotations

from typing import Any

from sim_core import GPUS, SetupError, resolve

from ..charts import ENGINES, SERIES, _axis, _layout
from . import Figure, Results

TITLE = "Frontier: throughput per GPU vs tokens/s per user"
# GPUs the card ticks beside the scenario's own, where the model fits: the ones InferenceX compares most.
PROPOSED_GPUS = ("h100", "b200", "mi300x")
PROPOSED_COUNT = 3
DEFAULT_ISL = DEFAULT_OSL = 1024  # InferenceX's 1k/1k shape
DEFAULT_WEB_MAX_CONCURRENCY = 64  # the card's default grid: 1 .. 64 users (7 points a GPU), a few seconds


def gpu_color(hw: str) -> str:
    """A GPU's colour, the same in every frontier (by its place in the catalogue)."""
    return ENGINES[list(GPUS).index(hw) % len(ENGINES)]


def proposed_gpus(scenario) -> list[str]:
    """The scenario's GPU and up to two of PROPOSED_GPUS that hold its model at its tp."""
    chosen = [scenario.hardware]
    if scenario.model is None and scenario.model_file is None:  # the page's model, not each GPU's default
        try:
            scenario = scenario.model_copy(update={"model": resolve(scenario).setup.model.key})
        except (SetupError, ValueError):
            return chosen
    for hw in PROPOSED_GPUS:
        if len(chosen) >= PROPOSED_COUNT:
            break
        if hw in chosen:
            continue
        try:
            resolve(scenario.model_copy(update={"hardware": hw, "trace": None, "workload": "random"}))
        except (SetupError, ValueError):
            continue
        chosen.append(hw)
    return chosen


def frontier_figure(points: list[dict], basis: str, cheapest: dict | None = None) -> dict:
    """One line per GPU over its points by tokens/s per user (its Pareto front; points off it as open markers);
    `cheapest` (frontier.cheapest_at's point) ringed."""
    layout = _layout(380, margin={"l": 72, "r": 24, "t": 40, "b": 56})
    layout["xaxis"] = _axis("tokens/s per user (1000 / median TPOT)", rangemode="tozero")
    layout["yaxis"] = _axis(f"{basis} tokens/s per GPU", rangemode="tozero")
    data = []
    for hw in dict.fromkeys(p["hardware"] for p in points):
        mine = sorted((p for p in points if p["hardware"] == hw and p["tokens_per_s_per_user"] is not None),
                      key=lambda p: p["tokens_per_s_per_user"])
        front = [p for p in mine if p.get("pareto")]
        off = [p for p in mine if not p.get("pareto")]
        c = gpu_color(hw)
        for pts, extra in ((front, {"mode": "lines+markers", "line": {"color": c, "width": 2}, "name": hw}),
                           (off, {"mode": "markers", "name": f"{hw} (off its front)", "showlegend": False})):
            if not pts:
                continue
            data.append({"type": "scatter", "x": [round(p["tokens_per_s_per_user"], 3) for p in pts],
                         "y": [round(p["throughput_per_gpu"], 3) for p in pts], "legendgroup": hw,
                         "marker": {"color": c, "size": 7, "symbol": "circle" if pts is front else "circle-open"},
                         "customdata": [[p["concurrency"], _cost(p["cost_per_mtok"])] for p in pts],
                         "hovertemplate": f"{hw}: %{{customdata[0]}} users, %{{x:.1f}} tok/s/user, "
                                          f"%{{y:,.0f}} tok/s/GPU, %{{customdata[1]}}<extra></extra>", **extra})
    if cheapest is not None:
        data.append({"type": "scatter", "mode": "markers", "name": "cheapest at the floor",
                     "x": [round(cheapest["tokens_per_s_per_user"], 3)], "y": [round(cheapest["throughput_per_gpu"], 3)],
                     "marker": {"color": SERIES["reference"], "size": 16, "symbol": "circle-open", "line": {"width": 2}},
                     "hovertemplate": f"cheapest: {cheapest['hardware']}, {cheapest['concurrency']} users, "
                                      f"{_cost(cheapest['cost_per_mtok'])}<extra></extra>"})
    if not data:
        layout["annotations"] = [{"text": "No point to draw", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5, "font": {"color": SERIES["reference"]}}]
    return {"data": data, "layout": layout}


def _cost(cost: float | None) -> str:
    return "no price" if cost is None else f"${cost:.3f}/Mtok"


def frontier_defaults(results: Results) -> dict[str, Any]:
    """The card's form: the GPUs, lengths and users it proposes for the page's scenario."""
    s = results.req.scenario
    random = s.workload == "random" and s.trace is None
    return {"gpus": proposed_gpus(s), "all_gpus": [(k, f"{k} · {g.mem_gib:g} GB") for k, g in GPUS.items()],
            "isl": (s.isl or DEFAULT_ISL) if random else DEFAULT_ISL,
            "osl": (s.osl or DEFAULT_OSL) if random else DEFAULT_OSL,
            "max_concurrency": DEFAULT_WEB_MAX_CONCURRENCY, "basis": "total", "floor": ""}


FIGURE = Figure(
    name="frontier", title=TITLE, order=85, build=frontier_defaults, template="_figure_frontier.html",
    explain="Each point is a closed loop of that many users on the scenario's model and tp, at fixed ISL/OSL "
            "(InferenceX's axes: throughput per GPU against 1000 / median TPOT).",
    embeds=False, simulates=False,
)
