"""What the page draws of a cluster run (clusterview.py extracts it from the Result): `cluster_figure` (one
small-multiple row per engine on a shared time axis: the router's choices, each engine's queue and KV use, the KV
transfers between pools), `requests_figure` (per-request bars coloured by engine), and `cluster_context`, what the
page's cluster cards show (both figures, the engine table, a line saying what the cluster is)."""

from __future__ import annotations

from sim_core.runner import CLUSTER_STEP_RECORDS

from .charts import LIGHT_TEXT_BACKGROUNDS, ROW_BARS, SERIES, _axis, _layout, _mix, _readable, _ref, color
from .clusterview import (
    ENGINE_ROW_PX,
    KV_FILL,
    MANY_ENGINES,
    MARGIN,
    QUEUE_COLORS,
    ROUTER_ROW_PX,
    ROW_GAP_PX,
    TRANSFER_ROW_PX,
    TRANSFER_WAIT,
)
from .present import fmt_value
from .runview import RunView


def cluster_figure(view: RunView, span: list[float] | None = None) -> dict:
    """One scheduler's cluster on one time axis, top to bottom: the router's choices (each arrival a mark in
    the row of the engine it was sent to), one row per engine (its waiting and running requests, and KV use in %
    of its pool on the right axis), and for disaggregated runs the KV transfers on each prefill engine's link
    (grey: waiting for the link; coloured by the decode engine receiving it)."""
    c = view.cluster
    engines, routes = c["engines"], c["routes"]
    # A large cluster gets thinner rows, so that its figure stays a few screens tall.
    shrink = min(1.0, MANY_ENGINES / max(1, len(engines)))
    panels = [("router", round(max(8, ROUTER_ROW_PX * shrink) * max(3, len(routes["targets"]))))]
    panels += [("engine", round(max(48, ENGINE_ROW_PX * shrink)))] * len(engines)
    if c["transfers"] is not None:
        panels.append(("transfers", round(max(8, TRANSFER_ROW_PX * shrink) * max(3, c["transfers"]["links"]))))
    plot_px = sum(px for _, px in panels) + ROW_GAP_PX * (len(panels) - 1)
    layout = _layout(plot_px + MARGIN["t"] + MARGIN["b"], margin=MARGIN, hovermode="closest", showlegend=True)
    data: list[dict] = []
    top = 1.0
    n = len(panels)
    for k, (kind, px) in enumerate(panels):
        domain = [round(max(0.0, top - px / plot_px), 5), round(top, 5)]
        top = domain[0] - ROW_GAP_PX / plot_px
        bottom = k == n - 1
        layout[f"xaxis{k + 1 if k else ''}"] = _axis("simulated time (s)" if bottom else "", anchor=_ref("y", k),
                                                      showticklabels=bottom, **({"range": span} if k == 0 and span
                                                                                 else {}),
                                                      **({} if k == 0 else {"matches": "x"}))
        if kind == "router":
            _router_panel(data, layout, k, domain, engines, routes)
        elif kind == "engine":
            _engine_panel(data, layout, k, domain, engines[k - 1], first=k == 1, extra_axis=n + k)
        else:
            _transfer_panel(data, layout, k, domain, engines, c["transfers"])
    return {"data": data, "layout": layout}


def _router_panel(data, layout, k, domain, engines, routes) -> None:
    targets = routes["targets"]
    layout[f"yaxis{k + 1 if k else ''}"] = _axis(
        "routed to", domain=domain, anchor=_ref("x", k), range=[len(targets) - 0.5, -0.5], tickmode="array",
        tickvals=list(range(len(targets))), ticktext=[engines[e]["name"] for e in targets], showgrid=False)
    by_engine: dict[int, list[float]] = {}
    for t, e in zip(routes["t"], routes["engine"], strict=True):
        by_engine.setdefault(e, []).append(t)
    for row, e in enumerate(targets):
        ts = by_engine.get(row, [])
        eng = engines[e]
        data.append({"type": "scattergl" if len(ts) > 2000 else "scatter", "mode": "markers", "x": ts,
                     "y": [row] * len(ts), "name": eng["name"], "showlegend": False,
                     "marker": {"symbol": "line-ns-open", "size": 10, "color": eng["color"], "line": {"width": 1.5}},
                     "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                     "hovertemplate": f"arrival at %{{x:.3f}} s → {eng['name']} "
                                      f"({routes['counts'][row]:,} requests in all)<extra></extra>"})


def _engine_panel(data, layout, k, domain, eng, *, first: bool, extra_axis: int) -> None:
    """One engine's row: waiting and running requests (left axis), KV in use % of its pool (right axis)."""
    y, y_kv = f"yaxis{k + 1}", f"yaxis{extra_axis}"
    layout[y] = _axis(eng["name"], domain=domain, anchor=_ref("x", k), rangemode="tozero", nticks=4)
    # The row's name in its engine's colour, in the shade of it that reads at 4.5:1 (the engines' yellow was 1.9:1)
    layout[y]["title"]["font"]["color"] = _readable(eng["color"], LIGHT_TEXT_BACKGROUNDS, "#000000")
    layout[y_kv] = _axis("", overlaying=_ref("y", k), side="right", range=[0, 100], showgrid=False,
                         tickmode="array", tickvals=[0, 50, 100], ticksuffix="%", anchor=_ref("x", k))
    data.append({"type": "scatter", "mode": "lines", "x": eng["t"], "y": eng["kv_pct"], "name": "KV in use (% of pool)",
                 "legendgroup": "kv", "showlegend": first, "fill": "tozeroy", "fillcolor": _alpha(KV_FILL, 0.35),
                 "line": {"color": KV_FILL, "width": 1, "shape": "hv"}, "xaxis": _ref("x", k),
                 "yaxis": _ref("y", extra_axis - 1),
                 "hovertemplate": f"{eng['name']}: KV %{{y:.1f}}% of {eng['num_blocks']:,} blocks<extra></extra>"})
    for key, label in (("waiting", "waiting requests"), ("running", "running requests")):
        data.append({"type": "scatter", "mode": "lines", "x": eng["t"], "y": eng[key], "name": label,
                     "legendgroup": key, "showlegend": first,
                     "line": {"color": QUEUE_COLORS[key], "width": 1.4, "shape": "hv"},
                     "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                     "hovertemplate": f"{eng['name']}: %{{y:,}} {label}<extra></extra>"})


def _transfer_panel(data, layout, k, domain, engines, tr) -> None:
    """Each prefill engine's link: a transfer waits (grey) from its prefill's end to the link being free, then
    crosses (coloured by the decode engine it goes to)."""
    links = tr["links"]
    layout[f"yaxis{k + 1}"] = _axis("KV link", domain=domain, anchor=_ref("x", k), range=[links - 0.5, -0.5],
                                    tickmode="array", tickvals=list(range(links)),
                                    ticktext=[engines[p]["name"] for p in range(links)], showgrid=False)
    width = max(3, min(12, TRANSFER_ROW_PX * 0.6))
    segs: dict[int, tuple[list, list, list]] = {}
    wait: tuple[list, list, list] = ([], [], [])
    for p, d, ready, start, end in zip(tr["prefill"], tr["decode"], tr["ready"], tr["start"], tr["delivered"],
                                       strict=True):
        if start > ready:
            wait[0].extend([ready, start, None])
            wait[1].extend([p, p, None])
        xs, ys, info = segs.setdefault(d, ([], [], []))
        xs.extend([start, end, None])
        ys.extend([p, p, None])
        ms = round((end - ready) * 1e3, 2)
        info.extend([ms, ms, None])
    if wait[0]:
        data.append({"type": "scatter", "mode": "lines", "x": wait[0], "y": wait[1], "name": "waiting for the link",
                     "line": {"color": TRANSFER_WAIT, "width": width}, "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                     "hovertemplate": "KV waiting for a busy link<extra></extra>"})
    n_prefill = links
    for d, (xs, ys, info) in sorted(segs.items()):
        eng = engines[n_prefill + d]
        # Marks at both ends: a transfer over a fast link lasts milliseconds, too short for its line to show.
        data.append({"type": "scatter", "mode": "lines+markers", "x": xs, "y": ys, "customdata": info,
                     "name": f"KV → {eng['name']}", "line": {"color": eng["color"], "width": width},
                     "marker": {"symbol": "line-ns-open", "size": 12, "color": eng["color"], "line": {"width": 1.5}},
                     "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                     "hovertemplate": f"KV → {eng['name']}: %{{customdata:,.1f}} ms from prefill end"
                                      "<extra></extra>"})


def requests_figure(view: RunView, span: list[float] | None = None) -> dict:
    """One row per sampled request from the times every run records: queued (grey) from arrival to its first
    schedule, then prefill (dark) to its first token and decode to its finish in the colour of the engine that
    served it; disaggregated, the KV transfer (light grey) from the first token to its delivery, then decode in
    the decode engine's colour. A rejected request is an x at its arrival."""
    c = view.cluster
    q, engines = c["requests"], c["engines"]
    shown = len(q["id"])
    height = int(min(760, max(260, 90 + shown * 3.6)))
    row_px = (height - MARGIN["t"] - MARGIN["b"]) / max(1, shown)
    width = round(max(1.0, row_px * 0.8), 2)
    lines: dict[tuple[str, int], tuple[list, list]] = {}

    def add(kind: str, e: int, rid: int, start, end) -> None:
        if start is None or end is None or end < start:
            return
        xs, ys = lines.setdefault((kind, e), ([], []))
        xs.extend([start, end, None])
        ys.extend([rid, rid, None])

    rejected: tuple[list, list] = ([], [])
    for i, rid in enumerate(q["id"]):
        if q["rejected"][i]:
            rejected[0].append(q["arrival"][i])
            rejected[1].append(rid)
            continue
        e = q["engine"][i]
        add("queued", -1, rid, q["arrival"][i], q["scheduled"][i])
        add("prefill", e, rid, q["scheduled"][i], q["first_token"][i])
        if "decode_engine" in q and q["decode_engine"][i] >= 0:
            add("transfer", -1, rid, q["first_token"][i], q["delivered"][i])
            add("decode", q["decode_engine"][i], rid, q["delivered"][i], q["finish"][i])
        else:
            add("decode", e, rid, q["first_token"][i], q["finish"][i])
    data = []
    styles = {"queued": ("queued", TRANSFER_WAIT), "transfer": ("KV transfer", SERIES["transport"])}
    for (kind, e), (xs, ys) in sorted(lines.items(), key=lambda item: (item[0][1], item[0][0])):
        if e < 0:
            name, colour = styles[kind]
        else:
            eng = engines[e]
            name = f"{eng['name']}: {kind}"
            colour = _mix(eng["color"], "#000000", 0.4) if kind == "prefill" else eng["color"]
        data.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": name,
                     "legendgroup": name, "line": {"color": colour, "width": width}, "meta": ROW_BARS,
                     "hovertemplate": f"#%{{y}} {name} %{{x:.3f}} s<extra></extra>"})
    if rejected[0]:
        data.append({"type": "scatter", "mode": "markers", "x": rejected[0], "y": rejected[1], "name": "rejected",
                     "marker": {"symbol": "x-thin", "size": 7, "line": {"width": 2, "color": "#212529"}},
                     "hovertemplate": "#%{y} rejected at %{x:.3f} s<extra></extra>"})
    ids = q["id"] or [0]
    half = (ids[-1] - ids[0]) / max(1, shown - 1) / 2 if shown > 1 else 0.5
    # No legend (one entry per engine and phase would crowd a phone): the colours are the engine table's.
    layout = _layout(height, margin=MARGIN, hovermode="closest", showlegend=False,
                     xaxis=_axis("simulated time (s)", **({"range": span} if span else {"rangemode": "tozero"})),
                     yaxis=_axis("request (by arrival)", range=[ids[-1] + half, ids[0] - half], tickprefix="#",
                                 showgrid=False, nticks=14))
    return {"data": data, "layout": layout}


def _alpha(hex_color: str, a: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{a})"


# ----- the page -----
SHARE_COLUMNS = (  # the engine table's columns: (key in metrics["replicas"], header, kind for present.fmt_value)
    ("requests", "requests", "count"), ("completed", "completed", "count"), ("rejected", "rejected", "count"),
    ("served_tokens", "tokens served", "count"), ("gpu_busy_fraction", "GPU busy", "fraction"),
    ("kv_cache_usage_mean", "KV use, mean", "fraction"), ("waiting_peak", "waiting, peak", "count"),
    ("preemptions", "preemptions", "count"),
)


def cluster_context(views: list[RunView], span: list[float] | None = None) -> list[dict] | None:
    """Per scheduler of a cluster comparison: its cluster figure, per-request figure, engine table and a line
    saying what the cluster is; None when the runs are single engines (the page shows its KV animation)."""
    if not views or getattr(views[0], "cluster", None) is None:
        return None
    out = []
    for v in views:
        c = v.cluster
        rows = [{"name": e["name"], "pool": e["pool"], "color": e["color"],
                 "cells": [fmt_value(e["share"].get(key), kind) for key, _, kind in SHARE_COLUMNS]}
                for e in c["engines"]]
        notes = []
        if max(e["step_stride"] for e in c["engines"]) > 1:
            steps = sum(int(e["share"].get("steps") or 0) for e in c["engines"])
            notes.append(f"an engine's step log keeps {CLUSTER_STEP_RECORDS:,} evenly spaced steps at most "
                         f"({steps:,} steps in all)")
        if any(e["bucketed"] for e in c["engines"]):
            notes.append("each point is the most over its stretch of time")
        out.append({"name": v.scheduler, "color": color(v.scheduler), "engines": len(c["engines"]),
                    "figure": cluster_figure(v, span), "requests": requests_figure(v, span),
                    "request_note": _shown(len(c["requests"]["id"]), c["requests"]["total"]),
                    "route_note": _shown(c["routes"]["shown"], c["routes"]["total"]),
                    "transfer_note": (_shown(c["transfers"]["shown"], c["transfers"]["total"])
                                      if c["transfers"] else ""),
                    "row_note": "; ".join(notes), "table": rows,
                    "headers": [h for _, h, _ in SHARE_COLUMNS], "summary": _summary(v)})
    return out


def _shown(shown: int, total: int) -> str:
    return f"all {total:,}" if shown == total else f"{shown:,} of {total:,}, evenly spaced"


def _summary(view: RunView) -> str:
    c = view.cluster
    m = view.metrics
    pools: dict[str, int] = {}
    for e in c["engines"]:
        pools[e["pool"]] = pools.get(e["pool"], 0) + 1
    shape = (f"{pools.get('prefill', 0)} prefill + {pools.get('decode', 0)} decode engines" if c["disaggregated"]
             else f"{len(c['engines'])} replicas")
    parts = [shape]
    if m.get("gpus"):
        parts.append(f"{m['gpus']} GPUs")
    if isinstance(m.get("load_imbalance"), int | float):
        parts.append(f"load imbalance {m['load_imbalance']:.2f}")
    return " · ".join(parts)
