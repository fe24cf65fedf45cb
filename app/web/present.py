"""What the templates show, computed in Python: the side-by-side metrics table and one-line descriptions of a
scenario. The scenario form is app/web/form.py's (re-exported here for the pages that import it from here).
"""

from __future__ import annotations

import re
from typing import Any

from sim_core import Scenario, resolve
from sim_core.expert_parallel import pool_ranks_text
from sim_core.fields import field_info
from sim_core.metric_catalog import BY_KEY, Metric, table_sections, value_at
from sim_core.metrics import deployment

from .form import GROUPS, LABELS, NOT_IN_FORM, Form, FormField, _fmt, build_form, model_label  # noqa: F401
from .inputs import MAX_DURATION_S, MAX_REQUESTS


# ----- metrics table -----
def fmt_value(v: Any, kind: str) -> str:
    """One cell of the metrics table, formatted by the catalogue's display kind."""
    if v is None:
        return "—"
    if isinstance(v, bool) or kind == "flag":
        return "yes" if v else "no"
    if not isinstance(v, int | float):
        return str(v)
    if kind == "count":
        return f"{int(v):,}"
    if kind == "fraction":
        return f"{v * 100:.1f}%"
    if kind == "ms":
        return f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if kind == "tokens":
        return f"{v:,.0f}"
    if kind == "average":
        return f"{v:,.1f}"
    return f"{v:,.2f}"


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _best(values: list, texts: list[str], metric: Metric, eligible: list[bool] | None = None) -> float | None:
    """The winning value among the `eligible` runs (all by default) where they differ as shown; None for a tie,
    a metric with no better side, or fewer than two values to compare (a blank is no value: "4 shed" against
    none is not a win)."""
    contenders = [(x, t) for x, t, ok in zip(values, texts, eligible or [True] * len(values), strict=True)
                  if ok and _is_number(x)]
    if not metric.better or len(contenders) < 2:
        return None
    best = (min if metric.better == "lower" else max)(x for x, _ in contenders)
    return None if [t for _, t in contenders].count(fmt_value(best, metric.kind)) > 1 else best


def share_text(x: float) -> str:
    """A share (0-1) of requests as a percentage that reads 0% or 100% only when it is exactly that: 3 of 18,112
    is "< 0.1%", not "0%" (which says none); whole percents from 1% to 99%, a decimal closer to the ends."""
    if x <= 0 or x >= 1:
        return f"{min(max(x, 0.0), 1.0):.0%}"
    if x < 0.001:
        return "< 0.1%"
    if x > 0.999:
        return "> 99.9%"
    if x < 0.01 or x > 0.99:
        return f"{x:.1%}"
    return f"{x:.0%}"


def unserved_share(metrics: dict) -> float:
    """The share of a run's requests it never completed (rejected or shed)."""
    n = metrics.get("num_requests") or 0
    return 1 - (metrics.get("completed") or 0) / n if n else 0.0


def _unfair_win(x: Any, values: list, served_all: list[bool], better: str) -> bool:
    """Whether `x`, the value of a run that left requests unserved, is at least as good as every run's that
    served them all (or, if none did, as every run's)."""
    rivals = [v for v, ok in zip(values, served_all, strict=True) if ok and _is_number(v)] or \
        [v for v in values if _is_number(v)]
    pick = min if better == "lower" else max
    return _is_number(x) and bool(rivals) and pick(rivals + [x]) == x


def metrics_table(views: list, ci95: list[dict] | None = None, model_ci: list[dict] | None = None
                  ) -> list[list[dict]]:
    """The catalogue's table rows for these runs, as two columns of row groups (balanced by rows); each row
    has one cell per scheduler and marks the best value when schedulers differ. A latency counts only the
    requests a run served, so on those rows only runs that served every request can win; a run that left some
    unserved and would have won gets its unserved share flagged beside the value instead. With `ci95` (means
    over seeds), each value is followed by its 95% interval's half-width; with `model_ci` (model_uncertainty),
    each cell carries the model's interval as `model` ("low–high")."""
    unserved = [unserved_share(v.metrics) for v in views]
    served_all = [u == 0 for u in unserved]
    groups = []
    for section in table_sections([v.metrics for v in views]):
        rows = []
        for row in section.rows:
            m = row.metric
            texts = [fmt_value(x, m.kind) for x in row.values]
            fair = m.served_only and not all(served_all)
            best = _best(row.values, texts, m, served_all if fair else None)
            cells = []
            shown = [t + _half_width(ci, m.key, m.kind) for t, ci in zip(texts, ci95 or [{}] * len(texts), strict=True)]
            model = [_range_text(ci, m.key, m.kind) for ci in model_ci or [{}] * len(texts)]
            for x, t, u, r in zip(row.values, shown, unserved, model, strict=True):
                flag = fair and u > 0 and m.better is not None and _unfair_win(x, row.values, served_all, m.better)
                cells.append({"text": t, "best": best is not None and x == best and (not fair or u == 0),
                              "flag": f"{share_text(u)} not served" if flag else "", "model": r})
            rows.append({"label": m.label, "unit": m.unit_text, "description": m.description, "cells": cells})
        groups.append({"title": section.title, "rows": rows})
    total = sum(len(g["rows"]) + 1 for g in groups)
    left, count = [], 0
    for g in groups:
        if count + (len(g["rows"]) + 1) / 2 > total / 2 and left:
            break
        left.append(g)
        count += len(g["rows"]) + 1
    return [left, groups[len(left):]]


def _range_text(model_ci: dict, key: str, kind: str) -> str:
    """A metric's model interval as "low–high" ("" where it has none, or where the model does not move it at the
    value's precision: a count of requests is the same under every member)."""
    interval = value_at(model_ci, key)
    if not (isinstance(interval, list) and len(interval) == 2 and all(_is_number(v) for v in interval)):
        return ""
    low, high = fmt_value(interval[0], kind), fmt_value(interval[1], kind)
    return "" if low == high else f"{low}–{high}"


def _half_width(ci95: dict, key: str, kind: str) -> str:
    interval = value_at(ci95, key)
    if not (isinstance(interval, list) and len(interval) == 2 and all(_is_number(v) for v in interval)):
        return ""
    if interval[0] == interval[1]:  # the same in every seed (a deployment's GPUs, a fixed count): no "± 0"
        return ""
    return f" ± {fmt_value((interval[1] - interval[0]) / 2, kind)}"


def seeds_note(scenario) -> str:
    """Over several seeds: what the table and the figures show."""
    if scenario.seeds <= 1:
        return ""
    return (f"Table: means over {scenario.seeds} seeds ({scenario.seed} to {scenario.seed + scenario.seeds - 1}), "
            f"± the half-width of their 95% confidence interval (none where every seed gives the same). "
            f"Figures: seed {scenario.seed}.")


def bounds_note(views: list) -> str:
    """One sentence under the takeaway: each scheduler's goodput as a share of what a clairvoyant scheduler could
    reach on the same requests (metrics.bounds, sim_core/bounds.py); empty where no run has the bound."""
    shares = [(v.scheduler, value_at(v.metrics, "bounds.goodput_fraction"), value_at(v.metrics, "bounds.goodput_upper"))
              for v in views]
    shares = [(name, share, upper) for name, share, upper in shares if _is_number(share) and _is_number(upper)]
    if not shares:
        return ""
    uppers = {f"{upper:.3g}" for _, _, upper in shares}
    if len(uppers) == 1:  # one bound for all (open-loop requests, same step-size limit)
        parts = [f"{name} reaches {share:.0%}" for name, share, _ in shares]
        return (f"Against a clairvoyant scheduler (at most {uppers.pop()} req/s of goodput on these requests): "
                + ", ".join(parts) + " of the achievable goodput.")
    parts = [f"{name} reaches {share:.0%} of its {upper:.3g} req/s" for name, share, upper in shares]
    return "Against a clairvoyant scheduler's goodput on each run's requests: " + ", ".join(parts) + "."


# The metrics a takeaway may be about: the tails people tune schedulers for, and goodput.
TAKEAWAY_KEYS = ("itl_ms.p99", "ttft_ms.p99", "tpot_ms.p99", "e2el_ms.p99", "goodput")
SAME_THROUGHPUT = 0.03  # throughputs closer than this (relative) read as "the same"
NOTABLE = 1.15  # a difference smaller than this factor is not a takeaway


def takeaway(views: list) -> str:
    """One sentence saying what the comparison shows: the metric on which the schedulers differ most (by ratio),
    best against worst, and what it costs in throughput. Latencies are compared only among runs that served every
    request when at least two did; a run that left requests unserved is said to, and so are runs past
    saturation."""
    names = [v.scheduler for v in views]
    unserved = {v.scheduler: unserved_share(v.metrics) for v in views}
    left_out = [n for n in names if unserved[n] > 0]
    note = "".join(f"; {n} leaves {share_text(unserved[n])} of requests unserved (rejected or shed)" for n in left_out)
    return _headline(views, note) + saturation_sentence(views)


def _headline(views: list, note: str) -> str:
    names = [v.scheduler for v in views]
    unserved = {v.scheduler: unserved_share(v.metrics) for v in views}
    if len(views) < 2:
        v = views[0]
        ttft, itl = value_at(v.metrics, "ttft_ms.p99"), value_at(v.metrics, "itl_ms.p99")
        return (f"{v.scheduler} serves {v.metrics.get('completed', 0):,} of {v.requests:,} requests with a P99 TTFT "
                f"of {fmt_value(ttft, 'ms')} ms and a P99 ITL of {fmt_value(itl, 'ms')} ms; tick another "
                "scheduler to compare.")
    served = [v for v in views if unserved[v.scheduler] == 0]
    best_pick = None
    for key in TAKEAWAY_KEYS:
        m = BY_KEY[key]
        pool = views if key == "goodput" or len(served) < 2 else served
        vals = [(value_at(v.metrics, key), v) for v in pool]
        vals = [(x, v) for x, v in vals if isinstance(x, int | float) and x > 0]
        if len(vals) < 2:
            continue
        lo, hi = min(vals, key=lambda p: p[0]), max(vals, key=lambda p: p[0])
        ratio = hi[0] / lo[0]
        if best_pick is None or ratio > best_pick[0]:
            best, worst = (lo, hi) if m.better == "lower" else (hi, lo)
            best_pick = (ratio, m, best, worst)
    if best_pick is None or best_pick[0] < NOTABLE:
        return f"{_names(names)} are within {NOTABLE - 1:.0%} of each other on tail latencies and goodput here{note}."
    _, m, (bx, bv), (wx, wv) = best_pick
    unit = f" {m.unit}" if m.unit_text else ""
    verb = "cuts" if m.better == "lower" else "raises"
    sentence = (f"{bv.scheduler} {verb} {m.label} from {fmt_value(wx, m.kind)}{unit} ({wv.scheduler}) to "
                f"{fmt_value(bx, m.kind)}{unit}")
    tb, tw = bv.metrics.get("request_throughput") or 0, wv.metrics.get("request_throughput") or 0
    if tw > 0 and abs(tb / tw - 1) <= SAME_THROUGHPUT:
        sentence += " at the same throughput"
    elif tw > 0:
        sentence += f" with {abs(tb / tw - 1):.0%} {'more' if tb > tw else 'less'} throughput"
    return sentence + note + "."


def saturation_sentence(views: list) -> str:
    """A second sentence for the runs sim_core.validity found saturated (RunView.saturation): the headline says
    they run past saturation, what they serve of the rate offered ("" when none is)."""
    hit = [v for v in views if getattr(v, "saturation", "")]
    if not hit:
        return ""
    names, one = _names([v.scheduler for v in hit]), len(hit) == 1
    served = [v.metrics.get("request_throughput") for v in hit]
    offered = hit[0].metrics.get("arrival_rate")
    sentence = f" {names} {'runs' if one else 'run'} past saturation"
    if all(_is_number(x) for x in served) and _is_number(offered):
        sentence += (f": {'it serves' if one else 'they serve'} {_names([f'{x:.2f}' for x in served])} of the "
                     f"{offered:.2f} req/s offered")
    return sentence + "."


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def slo_text(metrics: dict) -> str:
    """Which targets goodput and SLO attainment used."""
    slo = metrics.get("slo") or {}
    classes = metrics.get("per_class") or {}
    if slo.get("by_class") and classes:
        parts = [f"{name} TTFT ≤ {c['slo']['ttft_ms']:g} ms, TPOT ≤ {c['slo']['tpot_ms']:g} ms"
                 for name, c in classes.items()]
        return "its class's targets (" + "; ".join(parts) + ")"
    ttft, tpot = slo.get("ttft_ms"), slo.get("tpot_ms")
    if isinstance(ttft, int | float) and isinstance(tpot, int | float):
        return f"TTFT ≤ {ttft:g} ms and TPOT ≤ {tpot:g} ms"
    return "its TTFT and TPOT targets"


def scenario_summary(req, views: list, upload=None) -> list[str]:
    """Short phrases describing what was simulated."""
    s = req.scenario
    v = views[0]
    st = v.setup
    out = [f"{st['model']} · {st['quantization']} · {st['tp']}× {st['gpu']}"]
    if phrase := cluster_phrase(s):  # the line above is one engine's deployment
        out.append(phrase)
    n = v.requests
    if upload is not None:
        out.append(f"trace {upload.filename}: {n:,} requests over {upload.info.span_s:,.0f} s")
    else:
        out.append(f"{s.workload} workload: {arrivals_phrase(v.metrics, n) or _asked_load(s, st)}, seed {s.seed}")
    slo, classes = v.metrics.get("slo") or {}, v.metrics.get("per_class") or {}
    if slo.get("by_class") and classes:
        out.append("SLOs per class, TTFT/TPOT ms: " + ", ".join(
            f"{name} {c['slo']['ttft_ms']:g}/{c['slo']['tpot_ms']:g}" for name, c in classes.items()))
    else:
        out.append(f"SLOs: {slo_text(v.metrics)}")
    pools: dict[int, list[str]] = {}
    for view in views:  # the token budget changes the pool: schedulers of one comparison can differ
        pools.setdefault(view.setup["num_blocks"], []).append(view.scheduler)
    if len(pools) == 1:
        out.append(f"KV pool {st['num_blocks']:,} blocks × {st['block_size']} tokens")
    else:
        out.append("KV pool " + ", ".join(f"{blocks:,} blocks ({', '.join(names)})" for blocks, names in pools.items())
                   + f" × {st['block_size']} tokens")
    return out


def arrivals_phrase(metrics: dict, n: int) -> str:
    """The load the run was offered, as its arrivals went: how many, at what rate, over how long ("" where the
    metrics do not say). The fields can differ a lot from it: a multiturn workload's `rate` starts sessions, whose
    turns arrive at their own pace, and `num_requests` at a rate runs as long as they take to arrive."""
    rate = metrics.get("arrival_rate")
    if not _is_number(rate) or rate <= 0 or n <= 0:
        return ""
    return f"{n:,} requests at {rate:.3g} req/s over {n / rate:,.0f} s"


def _asked_load(s, st: dict) -> str:
    return f"{s.num_requests:,} requests" if s.num_requests else f"{st['rate']:g} req/s for {s.duration:g} s"


def cluster_phrase(s) -> str:
    """What a deployment of several engines, or an autoscaled fleet, deploys beyond one engine's GPUs, with its
    GPUs in all ("" for one engine of tp GPUs)."""
    if s.autoscaler is not None:
        lo, hi = s.scaling_bounds
        return (f"{s.autoscaler} autoscaler: {lo}–{hi} replicas of {s.tp} GPU{'s' if s.tp > 1 else ''} "
                f"({lo * s.tp}–{hi * s.tp} GPUs), {s.router} router")
    if s.engines == 1 and s.ep == 1:
        return ""
    gpus = f"{deployment(s, resolve(s))[0]:,} GPUs in all"
    if s.disaggregated:
        return (f"{s.prefill_replicas} prefill + {s.decode_replicas} decode engines{pool_ranks_text(s)}, KV over {s.kv_link}, "
                f"{s.router} router to the prefill engines, {gpus}")
    replicas = f"{s.replicas} replica{'s' if s.replicas > 1 else ''}"
    if s.attention_dp:
        return (f"{replicas} of EP{s.ep} with {s.ep // s.tp} attention data-parallel ranks of TP{s.tp}, "
                f"{s.router} router, {gpus}")
    expert = f" of EP{s.ep}" if s.ep > 1 else ""
    return f"{replicas}{expert}, {s.router} router, {gpus}" if s.replicas > 1 else f"{replicas}{expert}, {gpus}"


def scenario_caption(req) -> str:
    """One line under an embedded figure saying what it shows: the schedulers, the deployment and the load."""
    s = req.scenario
    r = resolve(s)
    load = f"{s.num_requests:,} requests" if s.num_requests else f"{r.rate:g} req/s for {s.duration:g} s"
    work = "an uploaded trace" if req.upload else f"{s.workload} workload, {load}"
    setup = r.setup
    cluster = f" · {cluster_phrase(s)}" if cluster_phrase(s) else ""
    return (f"{', '.join(req.schedulers)} · {setup.model.key} · {setup.quantization} · {setup.tp}× {setup.gpu.name}"
            f"{cluster} · {work}, seed {s.seed}")


# Fields a scenario caption already names (or that are not settings): scenario_details leaves them out.
CAPTIONED = ("scheduler", "trace", "hardware", "model", "quantization", "tp", "workload", "rate", "duration",
             "num_requests", "seed", "seeds", "replicas", "router", "prefill_replicas", "decode_replicas", "kv_link")


def scenario_details(req) -> list[str]:
    """What scenario_caption leaves out, as phrases: the seeds (a mean over several) and every other setting away
    from its default (the SLO targets, burstiness, the form's Advanced settings), so an exported figure says what
    it was run with."""
    s = req.scenario
    out = [f"means over {s.seeds} seeds ({s.seed}–{s.seed + s.seeds - 1})"] if s.seeds > 1 else []
    for name in Scenario.model_fields:
        if name in CAPTIONED or name == "model_file":  # the caption names its model (a server path is no setting)
            continue
        value = getattr(s, name)
        if value is None or value == field_info(name).default:
            continue
        label, unit = LABELS.get(name, (name.replace("_", " ").capitalize(), ""))
        out.append(f"{label.lower()} {_fmt(value)}" + (f" {unit}" if unit else ""))
    return out


def export_caption(req) -> str:
    """The footer of an exported figure: the scenario's caption and its details."""
    return " · ".join([scenario_caption(req), *scenario_details(req)])


def warnings_text(views: list) -> list[str]:
    """The runs' warnings (sim_core.validity: extrapolated step times, saturation), each once: one that only some
    of the schedulers' runs have names them."""
    names = [v.scheduler for v in views]
    found: dict[str, list[str]] = {}
    for v in views:
        for w in v.warnings:
            found.setdefault(w, []).append(v.scheduler)
    return [w if len(who) == len(names) else f"{', '.join(who)}: {w}" for w, who in found.items()]


def short_warning(text: str) -> str:
    """A warning for a figure's footer: without the list of what the validation set measures."""
    return re.sub(r" \(it measures [^)]*\)", "", text)


LIMITS_TEXT = (f"The web runs at most {MAX_REQUESTS:,} requests per scheduler and {MAX_DURATION_S:g} s of "
               "arrivals; the CLI has no such limits.")
