"""Power over time (issue #40): the board power of one GPU over the run, per scheduler (and per pool where prefill
and decode run apart), on the comparison's time axis, with the GPU's board limit and the scenario's power cap drawn
as lines. Each point is a bucket of time (app/web/power_series.py): the line is the mean power per held GPU, whose
area is the run's GPU energy, and the band above it reaches the highest power one GPU drew in that bucket, which
never passes the cap. Shown when the scenario has energy on (sim_core/energy_fields.py); a run without it has
no card."""

from __future__ import annotations

from ..charts import SERIES, _axis, _empty_note, _layout, color, rgba
from ..power_series import run_power
from . import Figure, Results

NAME = "power"
TITLE = "Power over time"
NEEDS_ENERGY = "Power over time needs the energy model: set energy (and optionally power_cap_w)."
POOL_DASH = {"prefill": "dot", "decode": "solid"}  # a P/D deployment's two pools, told apart; others solid
PEAK_ALPHA = 0.2
HEADROOM = 1.1  # the power axis ends this far above the highest board limit, so its line and label show


def limit_lines(results: Results) -> dict[float, str]:
    """The reference lines to draw, watts -> label: each pool GPU's board limit, and the scenario's power cap; one
    label where they coincide (a cap at the board limit)."""
    lines: dict[float, list[str]] = {}
    for v in results.views:
        for pool in (v.kept.get(NAME) or {}).get("pools", []):
            lines.setdefault(float(pool["board_w"]), []).append(f"{pool['gpu']} board limit")
    cap = results.req.scenario.power_cap_w
    if cap is not None:
        lines.setdefault(float(cap), []).append("power cap")
    return {w: f"{' = '.join(dict.fromkeys(labels))} {w:,.0f} W" for w, labels in sorted(lines.items())}


def power_figure(results: Results) -> dict:
    layout = _layout(340, hovermode="x unified", margin={"l": 64, "r": 24, "t": 40, "b": 52})
    layout["xaxis"] = _axis("simulated time (s)", **({"range": results.span} if results.span else {}))
    layout["yaxis"] = _axis("board power per GPU (W)", rangemode="tozero")
    runs = [(v.scheduler, v.kept.get(NAME)) for v in results.views]
    if not any(kept for _, kept in runs):
        layout["annotations"] = [_empty_note(NEEDS_ENERGY)]
        return {"data": [], "layout": layout}
    data = []
    for scheduler, kept in runs:
        pools = (kept or {}).get("pools", [])
        for pool in pools:
            data += pool_traces(scheduler, pool, named_by_pool=len(pools) > 1)
    lines = limit_lines(results)
    layout["yaxis"]["range"] = [0, round(max(lines) * HEADROOM, 1)]
    layout["shapes"] = [{"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": w, "y1": w,
                         "name": label, "line": {"color": SERIES["reference"], "width": 1, "dash": "dash"}}
                        for w, label in lines.items()]
    layout["annotations"] = [{"xref": "paper", "yref": "y", "x": 0.005, "y": w, "xanchor": "left",
                              "yanchor": "bottom", "showarrow": False, "text": label,
                              "font": {"size": 10, "color": SERIES["reference"]}} for w, label in lines.items()]
    if not any(t["x"] for t in data):
        layout["annotations"].append(_empty_note("No request arrived in this run: no GPU was held."))
    return {"data": data, "layout": layout}


def pool_traces(scheduler: str, pool: dict, named_by_pool: bool) -> list[dict]:
    """One pool's mean power line and, filled down to it, its peak band (drawn as steps: each bucket's value holds
    over the bucket; the last one repeated at the end)."""
    c = color(scheduler)
    name = f"{scheduler} · {pool['pool']}" if named_by_pool else scheduler
    x = pool["edges"]
    hold = (lambda ys: ys + ys[-1:]) if x else (lambda ys: ys)
    mean, peak, gpus = hold(pool["mean_w"]), hold(pool["peak_w"]), hold(pool["gpus"])
    dash = POOL_DASH.get(pool["pool"], "solid") if named_by_pool else "solid"
    return [
        {"type": "scatter", "mode": "lines", "x": x, "y": mean, "name": name, "legendgroup": name,
         "customdata": gpus, "line": {"color": c, "width": 1.6, "shape": "hv", "dash": dash},
         "hovertemplate": f"{name}: %{{y:,.1f}} W per GPU (mean of %{{customdata:.3~g}} GPUs)<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": x, "y": peak, "name": f"{name} peak", "legendgroup": name,
         "showlegend": False, "fill": "tonexty", "fillcolor": rgba(c, PEAK_ALPHA),
         "line": {"color": rgba(c, PEAK_ALPHA), "width": 0.5, "shape": "hv"},
         "hovertemplate": f"{name} peak: %{{y:,.1f}} W<extra></extra>"},
    ]


def _explain(results: Results, figure: dict) -> str:
    kept = [v.kept.get(NAME) for v in results.views if v.kept.get(NAME)]
    lines = limit_lines(results)
    widths = [(p["edges"][-1] - p["edges"][0]) / (len(p["edges"]) - 1) for k in kept for p in k["pools"] if p["edges"]]
    stretch = f"each {max(widths):.3g} s" if widths else "each stretch of time"
    text = ("One GPU's board power over the run, as the energy model has each step draw it from its work (idle "
            f"power between steps): the line is the mean per held GPU over {stretch}, so its area is the run's GPU "
            "energy; the shaded band above it reaches the highest power one GPU drew then.")
    if lines:
        text += " Dashed: " + "; ".join(lines.values()) + "."
    if results.req.scenario.seeds > 1:
        text += f" The first seed's runs (seed {results.req.scenario.seed})."
    if any(k["stride"] > 1 for k in kept):
        text += " The run's step log keeps a sample of its steps: the line is drawn from that sample."
    return text


FIGURE = Figure(name=NAME, title=TITLE, explain=_explain, order=45, cursor=True, build=power_figure,
                keep=run_power, shown=lambda r: r.req.scenario.energy)
