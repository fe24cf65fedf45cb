"""The twin page's figure (twin_page.py): the scrape's and the simulation's distributions overlaid (latencies and
lengths), one row per distribution (sim_core.twin.DISTRIBUTIONS), each as the fraction of requests (or tokens) at or under each
bucket bound: what the histograms state, drawn as steps, nothing interpolated between bounds."""

from __future__ import annotations

from sim_core.prometheus_parse import Window
from sim_core.twin import DISTRIBUTIONS, cdf

from .charts import SERIES, _axis, _layout, _rows

FIGURE_NAME = "twin"
MEASURED_COLOUR, SIMULATED_COLOUR = SERIES["reference"], SERIES["decode"]
ROW_HEIGHT = 180


def _trace(bounds: list[float], fractions: list[float], name: str, colour: str, k: int, dash: str,
           unit: str) -> dict:
    return {
        "type": "scatter", "mode": "lines+markers", "name": name, "legendgroup": name, "showlegend": k == 0,
        "x": bounds, "y": [round(f * 100, 3) for f in fractions], "line": {"shape": "hv", "color": colour,
                                                                            "dash": dash, "width": 2},
        "marker": {"size": 5, "color": colour}, "xaxis": "x" if k == 0 else f"x{k + 1}",
        "yaxis": "y" if k == 0 else f"y{k + 1}",
        "hovertemplate": f"{name}: %{{y:.1f}}% at or under %{{x:g}} {unit}<extra></extra>",
    }


def overlay_figure(measured: Window, simulated: Window) -> dict:
    """Plotly JSON: a row per distribution, scrape (dashed) and simulation (solid), x in seconds on a log axis."""
    domains = _rows(len(DISTRIBUTIONS), gap=0.07)
    data, layout = [], _layout(ROW_HEIGHT * len(DISTRIBUTIONS) + 60, margin={"l": 64, "r": 16, "t": 40, "b": 44})
    for k, (concept, label, unit, _) in enumerate(DISTRIBUTIONS):
        unit = "s" if unit == "ms" else unit  # the buckets' own unit: their bounds are drawn as they are
        mb, mf = cdf(measured.histograms.get(concept))
        sb, sf = cdf(simulated.histograms.get(concept))
        data.append(_trace(mb, mf, "scrape", MEASURED_COLOUR, k, "dash", unit))
        data.append(_trace(sb, sf, "simulation", SIMULATED_COLOUR, k, "solid", unit))
        suffix = "" if k == 0 else str(k + 1)
        layout["xaxis" + suffix] = _axis(f"{label} ({unit}, log)", type="log", anchor="y" + suffix)
        layout["yaxis" + suffix] = _axis("≤ bound (%)", domain=domains[k], range=[0, 102], anchor="x" + suffix)
    return {"data": data, "layout": layout}
