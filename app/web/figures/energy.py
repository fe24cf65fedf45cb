"""Energy per token (issue #40): what each scheduler's run spent per output token, and, where the scenario sets an
electricity price or a grid's carbon intensity, what that energy cost and emitted, a bar per scheduler side by side
(means over the seeds, with their 95% intervals over several). Each panel is one metric of the catalogue
(sim_core/metric_catalog.py), titled with its name and unit from there. Shown when the scenario has energy on."""

from __future__ import annotations

from sim_core.metric_catalog import BY_KEY, value_at

from ..charts import _ax, _axis, _columns, _empty_note, _layout, _ref, color
from . import Figure, Results

NAME = "energy"
TITLE = "Energy per token"
NEEDS_ENERGY = "Energy per token needs the energy model: set energy (and a price or grid intensity for cost, carbon)."
# The panels, left to right: energy per output token always; the electricity's cost and carbon where the scenario
# sets a price or a grid intensity (the run reports them only then).
PANELS = ("energy.joules_per_output_token", "energy.energy_cost_per_mtok", "energy.gco2_per_1k_requests")


def panel_title(key: str) -> str:
    metric = BY_KEY[key]
    return f"{metric.label} ({metric.unit})"


def energy_figure(results: Results) -> dict:
    layout = _layout(320, barmode="group", hovermode="closest", showlegend=False,
                     margin={"l": 64, "r": 24, "t": 40, "b": 56})
    runs = [(v.scheduler, m.metrics, ci) for v, m, ci in zip(results.views, results.means,
                                                             results.ci95 or [{}] * len(results.views), strict=True)]
    keys = [k for k in PANELS if any(value_at(metrics, k) is not None for _, metrics, _ in runs)]
    if not keys:
        layout["xaxis"], layout["yaxis"] = _axis(""), _axis(panel_title(PANELS[0]), rangemode="tozero")
        layout["annotations"] = [_empty_note(NEEDS_ENERGY)]
        return {"data": [], "layout": layout}
    data = []
    for k, (domain, key) in enumerate(zip(_columns(len(keys), 0.1), keys, strict=True)):
        layout[_ax("x", k)] = _axis("scheduler", domain=domain, anchor=_ref("y", k), type="category")
        layout[_ax("y", k)] = _axis(panel_title(key), anchor=_ref("x", k), rangemode="tozero")
        data.append(panel_bars(key, runs, k))
    return {"data": data, "layout": layout}


def panel_bars(key: str, runs: list[tuple[str, dict, dict]], k: int) -> dict:
    """One panel's bars: each scheduler's mean value of the metric, in its colour, with its 95% interval over the
    seeds as an error bar where there is one."""
    metric = BY_KEY[key]
    names = [name for name, _, _ in runs]
    values = [value_at(metrics, key) for _, metrics, _ in runs]
    bars = {"type": "bar", "x": names, "y": values, "name": metric.label,
            "marker": {"color": [color(n) for n in names]}, "xaxis": _ref("x", k), "yaxis": _ref("y", k),
            "texttemplate": "%{y:.3~g}", "textposition": "outside", "cliponaxis": False,
            "hovertemplate": f"%{{x}}: %{{y:,.4~g}} {metric.unit}<extra>{metric.label}</extra>"}
    intervals = [value_at(ci, key) for _, _, ci in runs]
    if any(isinstance(i, list | tuple) and None not in i for i in intervals):
        up = [i[1] - v if i and v is not None and None not in i else 0 for i, v in zip(intervals, values, strict=True)]
        down = [v - i[0] if i and v is not None and None not in i else 0 for i, v in zip(intervals, values, strict=True)]
        bars["error_y"] = {"type": "data", "symmetric": False, "array": up, "arrayminus": down,
                           "color": "#495057", "thickness": 1.2}
    return bars


def _explain(results: Results, figure: dict) -> str:
    seeds = results.req.scenario.seeds
    text = ("What each scheduler's run spent per output token: its energy (GPU boards, plus host power and PUE "
            "where set) over the tokens it generated; lower is better.")
    s = results.req.scenario
    if s.energy_price_per_kwh:
        text += f" The electricity per million output tokens at ${s.energy_price_per_kwh:g}/kWh."
    if s.grid_gco2_per_kwh:
        text += f" The carbon per thousand completed requests at {s.grid_gco2_per_kwh:g} gCO2/kWh."
    if seeds > 1:
        text += f" Means over {seeds} seeds, with their 95% intervals."
    return text


FIGURE = Figure(name=NAME, title=TITLE, explain=_explain, order=42, build=energy_figure,
                shown=lambda r: r.req.scenario.energy)
