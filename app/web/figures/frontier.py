"""Frontier: throughput per GPU against tokens/s per user for several GPUs at once, InferenceX's chart
(sim_core/studies/frontier.py defines the axes and cites theirs). The card proposes GPUs, ISL/OSL and the most
users; "Draw frontier" starts a closed-loop concurrency sweep of the scenario's model in every configuration
that fits each GPU in the background (app/web/frontier_page.py), the card polls its progress, then draws each
GPU's envelope over its configurations as a bold line in the GPU's colour, and each configuration's own curve
(a point per concurrency) thin and pale beneath it."""

from __future__ import annotations

from typing import Any

from sim_core import GPUS, SetupError, resolve
from sim_core.studies.frontier import TP_CHOICES, envelope

from ..charts import ENGINES, SERIES, _axis, _layout
from . import Figure, Results

TITLE = "Frontier: throughput per GPU vs tokens/s per user"
# GPUs the card ticks beside the scenario's own, where the model fits: the ones InferenceX compares most.
PROPOSED_GPUS = ("h100", "b200", "mi300x")
PROPOSED_COUNT = 3
DEFAULT_ISL = DEFAULT_OSL = 1024  # InferenceX's 1k/1k shape
DEFAULT_WEB_MAX_CONCURRENCY = 64  # the card's default grid: 1 .. 64 users (7 points a configuration)
# Each configuration's curve is told apart from the others of its GPU by its dash and marker, in turn.
CONFIG_DASHES = ("dot", "dash", "dashdot", "longdash", "longdashdot", "solid")
CONFIG_SYMBOLS = ("circle-open", "square-open", "diamond-open", "triangle-up-open", "cross-open", "star-open")


def gpu_color(hw: str) -> str:
    """A GPU's colour, the same in every frontier (by its place in the catalogue)."""
    return ENGINES[list(GPUS).index(hw) % len(ENGINES)]


def proposed_gpus(scenario) -> list[str]:
    """The scenario's GPU and up to two of PROPOSED_GPUS that hold its model at some tp the frontier tries."""
    chosen = [scenario.hardware]
    if scenario.model is None and scenario.model_file is None:  # the page's model, not each GPU's default
        try:
            scenario = scenario.model_copy(update={"model": resolve(scenario).setup.model.key})
        except (SetupError, ValueError):
            return chosen
    for hw in PROPOSED_GPUS:
        if len(chosen) >= PROPOSED_COUNT:
            break
        if hw not in chosen and _fits_some_tp(scenario, hw):
            chosen.append(hw)
    return chosen


def _fits_some_tp(scenario, hw: str) -> bool:
    for tp in TP_CHOICES:
        try:
            resolve(scenario.model_copy(update={"hardware": hw, "tp": tp, "ep": 1, "attention_dp": False,
                                                "moe_imbalance": None, "trace": None, "workload": "random"}))
        except (SetupError, ValueError):
            continue
        return True
    return False


def frontier_figure(points: list[dict], basis: str, cheapest: dict | None = None) -> dict:
    """Each GPU's envelope over its configurations (a bold line; hover names the configuration and users of each
    point), then each configuration's curve (thin, pale, by concurrency); `cheapest` (frontier.cheapest_at's
    point) ringed. The envelopes come first, so the figure's text summary reads them first; zorder draws them
    on top."""
    layout = _layout(420, margin={"l": 72, "r": 24, "t": 40, "b": 56})
    layout["xaxis"] = _axis("tokens/s per user (1000 / median TPOT)", rangemode="tozero")
    layout["yaxis"] = _axis(f"{basis} tokens/s per GPU", rangemode="tozero")
    gpus = list(dict.fromkeys(p["hardware"] for p in points))
    data = [_envelope_trace(hw, [p for p in points if p["hardware"] == hw]) for hw in gpus]
    data = [t for t in data if t is not None]
    for hw in gpus:
        mine = [p for p in points if p["hardware"] == hw]
        for k, config in enumerate(dict.fromkeys(p.get("config", "") for p in mine)):
            curve = sorted((p for p in mine if p.get("config", "") == config and p["tokens_per_s_per_user"] is not None),
                           key=lambda p: p["concurrency"])
            if curve:
                data.append(_config_trace(hw, config, k, curve))
    if cheapest is not None:
        data.append({"type": "scatter", "mode": "markers", "name": "cheapest at the floor", "zorder": 3,
                     "x": [round(cheapest["tokens_per_s_per_user"], 3)], "y": [round(cheapest["throughput_per_gpu"], 3)],
                     "marker": {"color": SERIES["reference"], "size": 16, "symbol": "circle-open", "line": {"width": 2}},
                     "hovertemplate": f"cheapest: {cheapest['hardware']} {cheapest.get('config', '')}, "
                                      f"{cheapest['concurrency']} users, {_cost(cheapest['cost_per_mtok'])}"
                                      "<extra></extra>"})
    if not data:
        layout["annotations"] = [{"text": "No point to draw", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5, "font": {"color": SERIES["reference"]}}]
    return {"data": data, "layout": layout}


def _envelope_trace(hw: str, points: list[dict]) -> dict | None:
    """The GPU's envelope: the Pareto front of all its configurations' points (frontier.envelope)."""
    front = envelope(points)
    if not front:
        return None
    c = gpu_color(hw)
    return {"type": "scatter", "mode": "lines+markers", "name": hw, "legendgroup": hw, "zorder": 2,
            "x": [round(p["tokens_per_s_per_user"], 3) for p in front],
            "y": [round(p["throughput_per_gpu"], 3) for p in front],
            "line": {"color": c, "width": 3}, "marker": {"color": c, "size": 8, "symbol": "circle"},
            "customdata": [[p.get("config", ""), p["concurrency"], _cost(p["cost_per_mtok"])] for p in front],
            "hovertemplate": f"{hw} envelope: %{{customdata[0]}}, %{{customdata[1]}} users, %{{x:.1f}} tok/s/user, "
                             f"%{{y:,.0f}} tok/s/GPU, %{{customdata[2]}}<extra></extra>"}


def _config_trace(hw: str, config: str, k: int, curve: list[dict]) -> dict:
    """One configuration's curve on one GPU, by concurrency: thin and pale under its GPU's envelope."""
    c = gpu_color(hw)
    return {"type": "scatter", "mode": "lines+markers", "name": f"{hw} {config}".strip(), "legendgroup": hw,
            "showlegend": False, "opacity": 0.55, "zorder": 1,
            "x": [round(p["tokens_per_s_per_user"], 3) for p in curve],
            "y": [round(p["throughput_per_gpu"], 3) for p in curve],
            "line": {"color": c, "width": 1.2, "dash": CONFIG_DASHES[k % len(CONFIG_DASHES)]},
            "marker": {"color": c, "size": 6, "symbol": CONFIG_SYMBOLS[k % len(CONFIG_SYMBOLS)]},
            "customdata": [[p["concurrency"], _cost(p["cost_per_mtok"])] for p in curve],
            "hovertemplate": f"{hw} {config}: %{{customdata[0]}} users, %{{x:.1f}} tok/s/user, "
                             f"%{{y:,.0f}} tok/s/GPU, %{{customdata[1]}}<extra></extra>"}


def _cost(cost: float | None) -> str:
    return "no price" if cost is None else f"${cost:.3f}/Mtok"


def frontier_defaults(results: Results) -> dict[str, Any]:
    """The card's form: the GPUs, lengths and users it proposes for the page's scenario."""
    s = results.req.scenario
    random = s.workload == "random" and s.trace is None
    return {"gpus": proposed_gpus(s), "all_gpus": [(k, f"{k} · {g.mem_gib:g} GB") for k, g in GPUS.items()],
            "isl": (s.isl or DEFAULT_ISL) if random else DEFAULT_ISL,
            "osl": (s.osl or DEFAULT_OSL) if random else DEFAULT_OSL,
            "max_concurrency": DEFAULT_WEB_MAX_CONCURRENCY, "basis": "total", "floor": "", "tp": "", "ep": ""}


FIGURE = Figure(
    name="frontier", title=TITLE, order=85, build=frontier_defaults, template="_figure_frontier.html",
    explain="Each GPU in every configuration (tp, ep, attention data-parallel) that holds the scenario's model: a "
            "thin curve per configuration, a point per closed loop of that many users at fixed ISL/OSL, and the "
            "GPU's envelope over them in bold (InferenceX's axes: throughput per GPU against 1000 / median TPOT).",
    embeds=False, simulates=False,
)
