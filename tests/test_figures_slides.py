"""Figures ready for slides (issue #26), without a browser: no colour of something that is not a scheduler is a
scheduler's colour, goodput bands are translucent and clipped to what they measure, coinciding knees share a label,
latency ticks stay short, the plan chart names its criterion, and every figure carries what its export prints
beside the plot (title, caption with seeds and settings, warnings). tests/test_browser_figures.py checks the same
in the browser: the bands as drawn, the export's text size and footer, the metrics embed's fit."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

from app.web import charts, present
from app.web.figures.attribution import PART_STYLE
from app.web.figures.cdf import log_ticks, tick_texts
from app.web.figures.gantt import SEGMENT_STYLE
from app.web.figures.goodput import _ci_bands, _knee_marks, goodput_figure
from app.web.figures.kv import HELD_STATE, KV_STATES
from app.web.figures.step_time import COMPONENT_STYLE
from app.web.inputs import parse_request, query_to_dict
from app.web.pages import results_context
from app.web.plan_page import pareto_figure
from sim_core import SCHEDULER_NAMES

QUERY = "hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"


def lab(hex_color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(hex_color[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def hex_of(colour: str) -> str:
    """#rrggbb of a #rrggbb or rgba(r,g,b,a) colour."""
    m = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*[\d.]+)?\)", colour)
    return "#" + "".join(f"{int(v):02x}" for v in m.groups()) if m else colour.lower()


def nearest_scheduler(colour: str) -> tuple[float, str]:
    """(delta E, name) of the scheduler colour nearest to `colour`."""
    return min((math.dist(lab(hex_of(colour)), lab(charts.color(n))), n) for n in SCHEDULER_NAMES)


def trace_colours(trace: dict) -> list[str]:
    out = [trace.get("fillcolor"), (trace.get("line") or {}).get("color")]
    marker = trace.get("marker") or {}
    out += marker["color"] if isinstance(marker.get("color"), list) else [marker.get("color")]
    out.append((marker.get("line") or {}).get("color"))
    return [c for c in out if isinstance(c, str) and (c.startswith("#") or c.startswith("rgb"))]


def plotly_figures(data) -> list[dict]:
    """Every plotly figure (data and layout) in a card's data, wherever it sits."""
    if isinstance(data, list):
        return [f for item in data for f in plotly_figures(item)]
    if isinstance(data, dict):
        if "data" in data and "layout" in data:
            return [data]
        return [f for value in data.values() for f in plotly_figures(value)]
    return []


def owned_by_a_scheduler(trace: dict) -> bool:
    """A trace drawn in its scheduler's colour: named after it, or in its legend group, or a Gantt segment whose
    style is the scheduler's own (SEGMENT_STYLE: None or "dark")."""
    own = {label for label, style in SEGMENT_STYLE.values() if not (style or "").startswith("#")}
    return trace.get("name") in SCHEDULER_NAMES or trace.get("legendgroup") in SCHEDULER_NAMES or \
        trace.get("name") in own


@pytest.fixture(scope="module")
def every_scheduler():
    req = parse_request(query_to_dict([kv.split("=") for kv in QUERY.split("&")]
                                      + [("schedulers", ",".join(SCHEDULER_NAMES))]))
    return req, results_context(req)


@pytest.fixture(scope="module")
def clusters():
    """A comparison on replicas behind a router, one on prefill and decode pools (the cluster view), and one whose
    load follows a rate schedule (the offered-load figure)."""
    out = []
    for extra in ("replicas=3&router=least_outstanding", "prefill_replicas=2&decode_replicas=1",
                  "rate_schedule=0:2,5:6"):
        pairs = [kv.split("=") for kv in f"{QUERY}&{extra}&schedulers=fcfs,chunked".split("&")]
        out.append(results_context(parse_request(query_to_dict(pairs))))
    return out


def sweep_result(ci: bool = True, knees=(4.0, 4.0)) -> dict:
    """A two-scheduler sweep (service.sweep_summary's shape) whose attainment band passes 100%."""
    def point(rate, good, att):
        p = {"rate": rate, "goodput": good, "slo_attainment": att}
        if ci:
            p["ci95"] = {"goodput": [good - 1.5, good + 1.5], "slo_attainment": [att - 0.2, att + 0.063],
                         "arrival_rate": [rate - 0.5, rate + 0.3]}
        return p

    return {"rates": [2.0, 4.0, 6.0], "target_attainment": 0.9, "schedulers": {
        name: {"knee_rate": knee, "knee_interval": [knee - 2, knee + 2] if ci else None,
               "points": [point(2.0, 1.0, 1.0), point(4.0, 3.0, 0.95), point(6.0, 2.0, 0.5)]}
        for name, knee in zip(("fcfs", "chunked"), knees, strict=True)}}


def test_the_series_palette_keeps_clear_of_every_scheduler_colour():
    styles = [*charts.SERIES.values(), *charts.ENGINES, *(c for _, c in PART_STYLE.values()), *(c for _, c in COMPONENT_STYLE.values()),
              *(c for _, s in SEGMENT_STYLE.values() if s and s.startswith("#") for c in [s]),
              *(c for *_, colours in (*KV_STATES[1:], HELD_STATE) for c in colours)]
    for colour in styles:
        distance, name = nearest_scheduler(colour)
        assert distance >= charts.SCHEDULER_MARGIN, (colour, name, distance)
    # the check itself: a scheduler's colour, or one just off it, is caught
    assert nearest_scheduler(charts.color("fcfs"))[0] == 0 and nearest_scheduler("#e95a0d")[0] < 2


def test_no_figure_draws_something_else_in_a_schedulers_colour(every_scheduler, clusters):
    _, ctx = every_scheduler
    drawn = [(card.figure.name, fig) for c in (ctx, *clusters) for card in c["cards"]
             for fig in plotly_figures(card.data)]
    drawn += [("goodput", goodput_figure(sweep_result()))]
    plans = [SimpleNamespace(cost_per_hour=c, pareto=on, scenario=parse_request({}).scenario,
                             metrics={"ttft_ms": {"p99": t}, "slo_attainment": 0.988, "slo": {"ttft_ms": 500.0}})
             for c, t, on in ((2.0, 620.0, True), (3.0, 700.0, False))]
    drawn += [("plan", pareto_figure(SimpleNamespace(result=SimpleNamespace(plans=plans),
                                                     inputs=SimpleNamespace(attainment=0.95))))]
    names = {name for name, _ in drawn}
    assert {"cdf", "attribution", "step-time", "timeline", "gantt", "kv", "replica-load", "goodput", "plan",
            "offered-load"} <= names
    checked = 0
    for name, fig in drawn:
        for trace in fig["data"]:
            if owned_by_a_scheduler(trace):
                continue
            for colour in trace_colours(trace):
                checked += 1
                distance, near = nearest_scheduler(colour)
                assert distance >= charts.SCHEDULER_MARGIN, (name, trace.get("name"), colour, near)
    assert checked >= 20  # attribution's parts, step time's components, Gantt segments, plans...
    kv = next(card.data for card in ctx["cards"] if card.figure.name == "kv")
    for state in kv["kv"]["states"][1:]:
        assert all(nearest_scheduler(c)[0] >= charts.SCHEDULER_MARGIN for c in state["colors"]), state


def test_goodput_bands_are_translucent_under_the_lines_and_clipped():
    fig = goodput_figure(sweep_result())
    bands = [k for k, t in enumerate(fig["data"]) if t["name"].endswith("95% band")]
    lines = [k for k, t in enumerate(fig["data"]) if t["name"] in ("fcfs", "chunked")]
    assert len(bands) == 8 and len(lines) == 4 and max(bands) < min(lines)  # every band under every line
    for trace in (fig["data"][k] for k in bands if "fill" in fig["data"][k]):
        alpha = float(re.fullmatch(r"rgba\(\d+,\d+,\d+,([\d.]+)\)", trace["fillcolor"]).group(1))
        assert 0 < alpha < 1
        assert hex_of(trace["fillcolor"]) == charts.color(trace["legendgroup"])
    attainment = [y for t in fig["data"] if t["name"].endswith("band") and t.get("yaxis") == "y2" for y in t["y"]]
    goodput = [y for t in fig["data"] if t["name"].endswith("band") and "yaxis" not in t for y in t["y"]]
    assert max(attainment) == 100 and min(attainment) >= 0  # 106.3% before: clipped at 100
    assert min(goodput) == 0  # 1.0 - 1.5 clipped at 0
    # goodput is at most the offered load: 1.0 + 1.5 at 2 req/s offered is clipped at 2 (issue #41: at the
    # arrivals' upper bound 2.3 before, above the offered load)
    high = next(t["y"] for t in fig["data"] if t["name"] == "fcfs 95% band" and "fill" not in t and "yaxis" not in t)
    assert high == [2.0, 4.0, 3.5]
    assert fig["layout"]["yaxis"]["range"] == [0, 6.6]  # the offered 6 req/s and 10% above: no band sets it
    assert "range" not in goodput_figure(sweep_result(ci=False))["layout"]["yaxis"]  # one seed: plotly's own
    assert _ci_bands("fcfs", "#e8590c", sweep_result(ci=False)["schedulers"]["fcfs"]["points"]) == []


def test_coinciding_knees_share_one_label_and_distinct_ones_stack():
    same = goodput_figure(sweep_result(knees=(4.0, 4.0)))["layout"]["annotations"]
    labels = [n for n in same if "knee" in n["text"]]
    assert len(labels) == 1 and "fcfs" in labels[0]["text"] and "chunked" in labels[0]["text"]
    shapes, notes = _knee_marks([(4.0, "fcfs", "#e8590c", ""), (4.0, "chunked", "#1971c2", "")], 6.0)
    assert len({s["line"]["dash"] for s in shapes}) == 2  # both colours show on the one line
    _, notes = _knee_marks([(2.0, "fcfs", "#e8590c", ""), (4.0, "chunked", "#1971c2", "")], 6.0)
    assert len(notes) == 2 and notes[0]["y"] != notes[1]["y"] and all(n["bgcolor"] for n in notes)


def test_latency_ticks_are_short_and_a_dense_axis_labels_some():
    values = log_ticks(3500, 30000)
    texts = tick_texts(values)
    assert "10k" in texts and "20k" in texts and not any("," in t for t in texts)
    assert 3 <= sum(bool(t) for t in texts) < len(values)  # 1-9 ticks: 5k, 10k, 20k, 30k labelled
    assert all(tick_texts(log_ticks(800, 1200)))  # a narrow range keeps every label


def test_the_plan_chart_says_what_plans_are_judged_on():
    plans = [SimpleNamespace(cost_per_hour=2.0, pareto=True, scenario=parse_request({}).scenario,
                             metrics={"ttft_ms": {"p99": 620.0}, "slo_attainment": 0.988, "slo": {"ttft_ms": 500.0}})]
    fig = pareto_figure(SimpleNamespace(result=SimpleNamespace(plans=plans), inputs=SimpleNamespace(attainment=0.95)))
    texts = " ".join(n["text"] for n in fig["layout"]["annotations"])
    assert "≥ 95% SLO attainment" in texts and "criterion" in texts and "allowed" in texts
    assert "98.8%" not in texts and "SLO attainment" in fig["data"][1]["hovertemplate"]


def test_every_figure_carries_its_export_title_caption_and_warnings(every_scheduler):
    req, ctx = every_scheduler
    for card in ctx["cards"]:
        for fig in plotly_figures(card.data):
            info = fig["export"]
            # a Gantt's panel is one scheduler's run: its caption names that scheduler alone
            who = info["title"].split(" — ")[1] + " · " if card.figure.name == "gantt" else "static, fcfs, "
            assert info["title"].startswith(card.figure.title) and info["caption"].startswith(who), info
            assert any("extrapolated" in w for w in info["warnings"])  # the RTX 3050 is outside the validation set
            assert not any("it measures" in w for w in info["warnings"])  # the footer's short form
    kv = next(card.data for card in ctx["cards"] if card.figure.name == "kv")
    assert kv["kv"]["export"]["title"] == "KV-cache blocks over time"
    gantt = next(card.data for card in ctx["cards"] if card.figure.name == "gantt")
    assert gantt[1]["figure"]["export"]["title"].endswith("— fcfs")


def test_a_panels_export_carries_its_own_runs_warnings_alone():
    from app.web.figures import Results, attach_export, export_info

    req = parse_request(query_to_dict([kv.split("=") for kv in (QUERY + "&schedulers=fcfs,chunked").split("&")]))
    views = [SimpleNamespace(scheduler="fcfs", warnings=("extrapolated", "saturated: 8 still waiting")),
             SimpleNamespace(scheduler="chunked", warnings=("extrapolated",))]
    results = Results(req, views)
    panels = [{"name": v.scheduler, "figure": {"data": [], "layout": {}}} for v in views]
    attach_export(panels, export_info(results, "Gantt"), results)
    fcfs, chunked = (p["figure"]["export"] for p in panels)
    assert fcfs["warnings"] == ["extrapolated", "saturated: 8 still waiting"] and fcfs["title"] == "Gantt — fcfs"
    assert chunked["warnings"] == ["extrapolated"] and chunked["caption"].startswith("chunked · ")
    assert export_info(results, "CDF")["warnings"] == ["extrapolated", "fcfs: saturated: 8 still waiting"]


def test_the_export_caption_names_the_seeds_and_the_settings_changed():
    at_defaults = parse_request({"hardware": "a100", "workload": "chat", "num_requests": "30", "seed": "5"})
    assert present.scenario_details(at_defaults) == []
    # 8,192 tokens is not the model's context (131k, which vLLM refuses on this GPU): a reader rerunning the figure
    # must set it, so the caption names it, the page's own deployment included.
    plain = parse_request(query_to_dict([kv.split("=") for kv in QUERY.split("&")]))
    assert present.scenario_details(plain) == ["max model length 8192 tokens"]
    pairs = [kv.split("=") for kv in (QUERY + "&seeds=3&max_seqs=64&preemption=swap&slo_ttft_ms=800").split("&")]
    caption = present.export_caption(parse_request(query_to_dict(pairs)))
    assert caption.startswith(present.scenario_caption(parse_request(query_to_dict(pairs))))
    for phrase in ("means over 3 seeds (5–7)", "max sequences 64 per step", "preemption swap", "ttft target 800 ms"):
        assert phrase in caption, caption


def test_a_warning_only_some_runs_have_names_them():
    views = [SimpleNamespace(scheduler="fcfs", warnings=("extrapolated", "saturated")),
             SimpleNamespace(scheduler="chunked", warnings=("extrapolated",))]
    assert present.warnings_text(views) == ["extrapolated", "fcfs: saturated"]


def test_present_is_an_embed_option_of_0_or_1():
    from app.web.embed_options import parse_embed_options

    assert parse_embed_options({"present": "1"})[0].present and not parse_embed_options({})[0].present
    options, problems = parse_embed_options({"present": "yes"})
    assert not options.present and problems[0][0] == "present" and "must be 0 or 1" in problems[0][1]
