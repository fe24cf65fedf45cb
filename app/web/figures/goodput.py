"""Goodput vs arrival rate: a rate sweep (a full simulation per rate and scheduler, run in the background by
service.start_sweep) drawn as goodput and SLO attainment per offered rate, each scheduler's knee marked. The card
proposes a range around the scenario's rate and draws the curves on request (/goodput polls the sweep's
progress); an embed sweeps at once, the proposed range unless the query gives one."""

from __future__ import annotations

from typing import Any

from sim_core import ScenarioError, resolve
from sim_core.validity import coverage_warnings

from .. import present, service
from ..charts import SERIES, _axis, _columns, _layout, color, rgba, text_colors_of
from ..inputs import WebRequest
from . import Figure, Results

TITLE = "Goodput vs arrival rate"
# A 95% band over seeds: its scheduler's colour, this opaque, under the lines (every band is drawn before every
# line, so no band hides a line or another band).
BAND_ALPHA = 0.18
# Knees closer than this share of the rate axis read as one: one label names their schedulers.
SAME_KNEE = 0.02
KNEE_DASHES = ("dot", "dash", "dashdot", "longdash")
Y_HEADROOM = 1.1  # over seeds, the goodput axis ends this far above the highest line or offered rate


def goodput_figure(sweep: dict, styles: dict[str, dict] | None = None) -> dict:
    """Goodput and SLO attainment per offered rate, a line per entry of sweep["schedulers"], each in its
    scheduler's colour; `styles` gives an entry its own {"color", "dash"} instead (/vs: a line per variant and
    scheduler, vs_curves.py)."""
    styles = styles or {}
    rates = sweep["rates"]
    layout = _layout(360, margin={"l": 64, "r": 24, "t": 40, "b": 56})
    dom = _columns(2, 0.1)
    layout["xaxis"] = _axis("offered load (requests/s)", domain=dom[0], anchor="y", rangemode="tozero")
    layout["yaxis"] = _axis("goodput (requests/s)", anchor="x", rangemode="tozero")
    layout["xaxis2"] = _axis("offered load (requests/s)", domain=dom[1], anchor="y2", rangemode="tozero")
    layout["yaxis2"] = _axis("SLO attainment (%)", anchor="x2", range=[0, 105])
    top = max(rates) if rates else 1
    data = [{"type": "scatter", "mode": "lines", "x": [0, top], "y": [0, top], "name": "every request on time",
             "line": {"color": SERIES["ideal"], "dash": "dot", "width": 1}, "hoverinfo": "skip"}]
    target = sweep["target_attainment"] * 100
    shapes = [{"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1, "y0": target, "y1": target,
               "line": {"color": SERIES["reference"], "dash": "dash", "width": 1}}]
    notes = [{"xref": "x2 domain", "yref": "y2", "x": 0.01, "y": target, "yanchor": "top", "showarrow": False,
              "text": f"{target:.0f}% target", "font": {"size": 10, "color": SERIES["reference"]}}]
    lines, knees = [], []
    for name, s in sweep["schedulers"].items():
        c = styles.get(name, {}).get("color") or color(name)
        line = {"color": c, "width": 2, "dash": styles.get(name, {}).get("dash", "solid")}
        x = [p["rate"] for p in s["points"]]
        data += _ci_bands(name, c, s["points"])
        lines.append({"type": "scatter", "mode": "lines+markers", "x": x, "y": [p["goodput"] for p in s["points"]],
                      "name": name, "legendgroup": name, "line": line, "marker": {"size": 6},
                      "hovertemplate": f"{name}: %{{y:.2f}} req/s good at %{{x:g}} req/s offered<extra></extra>"})
        lines.append({"type": "scatter", "mode": "lines+markers", "x": x, "showlegend": False, "legendgroup": name,
                      "y": [round(p["slo_attainment"] * 100, 2) for p in s["points"]], "name": name,
                      "xaxis": "x2", "yaxis": "y2", "line": line, "marker": {"size": 6},
                      "hovertemplate": f"{name}: %{{y:.1f}}% on time at %{{x:g}} req/s<extra></extra>"})
        band = s.get("knee_interval")
        if band and band[0] is not None and band[1] is not None and band[1] > band[0]:
            for xref, yref in (("x", "y domain"), ("x2", "y2 domain")):
                shapes.append({"type": "rect", "xref": xref, "yref": yref, "x0": band[0], "x1": band[1], "y0": 0,
                               "y1": 1, "fillcolor": c, "opacity": 0.08, "line": {"width": 0}, "layer": "below"})
        if s["knee_rate"] is not None:
            interval = (f" ({_knee_text(band[0])}–{_knee_text(band[1])})" if band and band[0] != band[1] else "")
            knees.append((s["knee_rate"], name, c, interval))
    if any(t.get("fill") for t in data):  # over seeds: the axis spans the lines and the offered load; a band past
        # them (a few seeds' Student-t interval is wide) runs off the top instead of squeezing the lines flat
        y_max = max([top] + [y for t in lines if "yaxis" not in t for y in t["y"]])
        layout["yaxis"]["range"] = [0, round(y_max * Y_HEADROOM, 4)]
    knee_shapes, knee_notes = _knee_marks(knees, top)
    layout.update(shapes=shapes + knee_shapes, annotations=notes + knee_notes)
    return {"data": data + lines, "layout": layout}


def _knee_marks(knees: list[tuple[float, str, str, str]], top: float) -> tuple[list[dict], list[dict]]:
    """Each knee's dotted line across both panels and its label in the goodput panel. Knees that coincide (within
    SAME_KNEE of the axis) share one label naming each scheduler in its colour, and their lines take different
    dashes, so that every colour shows; labels stack down from the top, on a white ground the lines pass under,
    each name in its scheduler's text shade (charts.text_colors: 4.5:1 on white)."""
    groups: list[list[tuple[float, str, str, str]]] = []
    for knee in sorted(knees):
        if groups and knee[0] - groups[-1][0][0] <= SAME_KNEE * max(top, 1e-9):
            groups[-1].append(knee)
        else:
            groups.append([knee])
    shapes, notes = [], []
    for row, group in enumerate(groups):
        for k, (rate, _, c, _) in enumerate(group):
            for xref in ("x", "x2"):
                shapes.append({"type": "line", "xref": xref, "yref": "paper", "x0": rate, "x1": rate, "y0": 0,
                               "y1": 1, "line": {"color": c, "dash": KNEE_DASHES[k % len(KNEE_DASHES)],
                                                 "width": 1.5}})
        rate = group[0][0]
        if len(group) == 1:
            _, name, _, interval = group[0]
            text, ink = f"{name} knee {rate:g} req/s{interval}", text_colors_of(group[0][2])[0]
        else:
            who = ", ".join(f"<span style='color:{text_colors_of(c)[0]}'>{name}</span>" for _, name, c, _ in group)
            text, ink = f"{who} knees {rate:g} req/s", SERIES["reference"]
        # a label right of a knee in the right half would stretch the rate axis past the sweep (plotly ranges an
        # axis over its annotations too): there it reads leftwards
        right_half = rate > top / 2
        notes.append({"xref": "x", "yref": "paper", "x": rate, "y": 1 - 0.08 * row, "yanchor": "top",
                      "xanchor": "right" if right_half else "left", "xshift": -3 if right_half else 3,
                      "showarrow": False, "text": text,
                      "bgcolor": "rgba(255,255,255,0.85)", "borderpad": 1, "font": {"size": 10, "color": ink}})
    return shapes, notes


def _knee_text(knee: float | None) -> str:
    return "none" if knee is None else f"{knee:g}"


def _ci_bands(name: str, c: str, points: list[dict]) -> list[dict]:
    """Over seeds: the 95% band of goodput and of SLO attainment around each mean line, translucent in the
    scheduler's colour (nothing for one seed). A band is its upper edge, then its lower edge filled up to it. An
    interval is clipped to what the quantity can be: attainment within [0, 100] %, goodput from 0 to the offered
    load (_offered_top: a 2-seed Student-t band reached 19 req/s at 6 req/s offered and stretched the axis past
    every line; one at 5 offered reached 5.84)."""
    if not points or any("ci95" not in p for p in points):
        return []
    x = [p["rate"] for p in points]
    out = []
    for key, axes, scale in (("goodput", {}, 1.0), ("slo_attainment", {"xaxis": "x2", "yaxis": "y2"}, 100.0)):
        tops = [100.0 if key == "slo_attainment" else _offered_top(p) for p in points]

        def clip(v: float, hi: float) -> float:
            return round(max(0.0, min(hi, v)), 4)

        low = [clip(p["ci95"].get(key, [p[key]] * 2)[0] * scale, hi) for p, hi in zip(points, tops, strict=True)]
        high = [clip(p["ci95"].get(key, [p[key]] * 2)[1] * scale, hi) for p, hi in zip(points, tops, strict=True)]
        edge = {"type": "scatter", "mode": "lines", "x": x, "line": {"width": 0, "color": rgba(c, 0)},
                "showlegend": False, "legendgroup": name, "hoverinfo": "skip", **axes}
        out.append({**edge, "y": high, "name": f"{name} 95% band"})
        out.append({**edge, "y": low, "name": f"{name} 95% band", "fill": "tonexty",
                    "fillcolor": rgba(c, BAND_ALPHA)})
    return out


def _offered_top(point: dict) -> float:
    """The most goodput a sweep point's band reaches: the offered load. The band is an interval for the mean
    goodput, which is at most the mean arrival rate, and that is the offered rate (a run's arrivals are drawn at
    it); a Student-t interval over a few seeds knows nothing of that bound and overshoots it, so the band stops at
    the offered load (intersecting an interval with the values the quantity can take keeps its coverage). A mean
    of a few seeds may still sit a little above the offered rate (their arrivals drawn above it): the band then
    reaches up to the mean line, never below it."""
    return max(float(point["rate"]), point["goodput"])


def goodput_context(req: WebRequest) -> dict:
    """The card's state for a request: the range it proposes, and with a sweep in the request, the sweep's job
    (started now or found) and its progress or curves; `disabled` says why there are no curves for this scenario."""
    try:
        rates = req.sweep or service.proposed_sweep(req)
    except ScenarioError as e:  # no sensible range around this scenario's rate; the run itself is fine
        return {"disabled": f"Goodput-vs-rate curves: {e.problems[0][1]}."}
    ctx: dict[str, Any] = {"range": rates, "job": None, "error": None, "query": req.query(sweep=False)}
    if req.sweep is not None:
        try:
            ctx["job"] = job = service.start_sweep(req)
        except ScenarioError as e:  # more work than the web sweeps
            return {"disabled": f"Goodput-vs-rate curves: {e.problems[0][1]}."}
        except service.BusyError as e:
            ctx["error"] = str(e)
            return ctx
        ctx.update(sweep_status(job))
    return ctx


def sweep_status(job: service.SweepJob) -> dict:
    """The card's state from ONE reading of the job: it may end while the page renders, and a card that read it
    running but drew no curves would neither poll nor show them (a cold server's page renders for a minute)."""
    result, error = job.result, job.error
    if result is None and job.cancelled:  # its Cancel button: no error, the form draws it again
        return {"job": job, "error": None, "figure": None, "cancelled": True, "running": False}
    out: dict[str, Any] = {"job": job, "error": error, "figure": None, "running": result is None and error is None}
    if result is not None:
        out["figure"] = goodput_figure(result)
        out["figure"]["export"] = {"title": TITLE, "caption": present.export_caption(job.request),
                                   "warnings": sweep_warnings(job.request)}
        out["knees"] = [(name, s["knee_rate"]) for name, s in result["schedulers"].items()]
        out["embed_query"] = job.request.query()
    return out


def sweep_warnings(req: WebRequest) -> list[str]:
    """An exported sweep's warnings: the deployment's, if outside the validation set (points past the knee are
    saturated by design: that is no warning here)."""
    try:
        setup = resolve(req.scenario).setup
    except ScenarioError:
        return []
    return [present.short_warning(w) for w in coverage_warnings(setup.gpu.key, setup.model.key, setup.quantization)]


def sweep_request(req: WebRequest) -> WebRequest:
    """What an embed draws: the curves of the embed's schedulers (one scheduler's: a sweep of it alone), over the
    query's range or the proposed one."""
    return WebRequest(req.scenario, req.schedulers, req.upload, req.sweep or service.proposed_sweep(req))


def _explain(results: Results, g: dict) -> str:
    slo = present.slo_text(results.views[0].metrics) if results.views else "the SLO"
    return ("Each point is a full simulation at that rate. The knee is the highest rate up to which at least "
            f"{service.KNEE_TARGET:.0%} of requests meet {slo}.")


FIGURE = Figure(
    name="goodput", title=TITLE, order=80, build=lambda r: goodput_context(r.req),
    explain=_explain, template="_figure_goodput.html", simulates=False, embed_request=sweep_request,
)
