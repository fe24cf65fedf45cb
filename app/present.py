"""What the templates show, computed in Python: the scenario form (built from the Scenario model, so a new
scenario field appears in the "advanced" group without touching a template), the side-by-side metrics table,
and one-line descriptions of a scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES, Scenario
from sim_core.fields import field_info, range_text
from sim_core.policies import BY_NAME

from .inputs import MAX_DURATION_S, MAX_REQUESTS

# Form layout: (group title, fields). Scenario fields not named here (bar `scheduler`, `trace`) go to "advanced".
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Deployment", ("hardware", "model", "quantization", "tp")),
    ("Workload", ("workload", "rate", "duration", "burstiness", "num_requests", "seed")),
    ("Service-level objectives", ("slo_ttft_ms", "slo_tpot_ms")),
)
ADVANCED_FIRST = ("token_budget", "max_seqs", "block_size", "gpu_memory_utilization", "preemption", "kv_blocks",
                  "max_model_len", "swap_space_gb")
NOT_IN_FORM = ("scheduler", "trace")
LABELS = {
    "hardware": ("GPU", ""), "model": ("Model", ""), "quantization": ("Weights", ""),
    "tp": ("Tensor parallel", "GPUs"), "workload": ("Workload preset", ""), "rate": ("Arrival rate", "req/s"),
    "duration": ("Duration", "s"), "burstiness": ("Burstiness (CV)", ""), "num_requests": ("Requests", ""),
    "seed": ("Seed", ""), "slo_ttft_ms": ("TTFT target", "ms"), "slo_tpot_ms": ("TPOT target", "ms"),
    "token_budget": ("Token budget", "tokens/step"), "max_seqs": ("Max sequences", "per step"),
    "block_size": ("Block size", "tokens"), "gpu_memory_utilization": ("Memory utilisation", "fraction"),
    "preemption": ("Preemption", ""), "kv_blocks": ("KV blocks", "blocks"),
    "max_model_len": ("Max model length", "tokens"), "swap_space_gb": ("Swap space", "GB / GPU"),
    "transport_overhead_ms": ("Transport overhead", "ms"), "controller_headroom": ("Controller headroom", ""),
    "aging_rate": ("Aging rate", ""), "degrade_factor": ("Degrade factor", "x"), "admission": ("Admission", ""),
    "adaptive_budget": ("Adaptive budget", ""),
}


@dataclass
class FormField:
    name: str
    label: str
    unit: str
    kind: str  # "select" | "text"
    value: str = ""
    placeholder: str = ""
    options: list[tuple[str, str]] = field(default_factory=list)
    help: str = ""
    error: str = ""
    inputmode: str = "decimal"


@dataclass
class Form:
    groups: list[tuple[str, list[FormField]]]
    advanced: list[FormField]
    advanced_open: bool
    schedulers: list[dict]
    errors: dict[str, str]
    other_errors: list[tuple[str, str]]


def _field_help(name: str) -> str:
    """A field's tooltip: its description and what it accepts."""
    allowed = range_text(name)
    return field_info(name).description + (f": {allowed}" if allowed else "")


def build_form(values: dict[str, Any], errors: dict[str, str], *, page_defaults: dict[str, str]) -> Form:
    """The scenario form showing `values` (raw strings as the user gave them; blank = default)."""
    workload = str(values.get("workload") or page_defaults.get("workload") or "chat")
    preset = PRESETS.get(workload) or PRESETS["chat"]
    hardware = str(values.get("hardware") or page_defaults.get("hardware") or "a100")
    gpu = GPUS.get(hardware)
    selected = _selected_schedulers(values)
    placeholders = {
        "model": f"GPU default ({gpu.default_model})" if gpu else "GPU default",
        "rate": f"{preset.rate:g} ({preset.name} default)",
        "burstiness": f"{preset.burstiness:g} ({preset.name} default)",
        "slo_ttft_ms": f"{preset.slo_ttft_ms:g} ({preset.name} default)",
        "slo_tpot_ms": f"{preset.slo_tpot_ms:g} ({preset.name} default)",
        "num_requests": "rate × duration",
        "token_budget": " · ".join(f"{s}: {BY_NAME[s].default_token_budget or 'max model length'}"
                                   for s in selected if s in BY_NAME) or "per scheduler",
        "kv_blocks": "all that fit in memory",
        "max_model_len": "min(model context, 8192)",
        "duration": f"at most {MAX_DURATION_S:g} on the web",
    }
    fields: dict[str, FormField] = {}
    for name in Scenario.model_fields:
        if name in NOT_IN_FORM:
            continue
        info = field_info(name)
        label, unit = LABELS.get(name, (name.replace("_", " ").capitalize(), ""))
        raw = values.get(name)
        value = "" if raw is None else str(raw)
        choices = [str(c) for c in info.choices] if info.choices else (["false", "true"] if info.is_bool else [])
        f = FormField(name, label, unit, "text", value, help=_field_help(name), error=errors.get(name, ""))
        default = page_defaults.get(name, info.default)
        if name == "hardware":
            f.kind, f.options = "select", [(k, f"{g.name} · {g.mem_gib:g} GB") for k, g in GPUS.items()]
        elif name == "model":
            f.kind = "select"
            f.options = [("", placeholders["model"])] + [
                (k, f"{k} ({m.published_params_b:g}B)" if m.published_params_b else k) for k, m in MODELS.items()]
        elif name == "workload":
            f.kind, f.options = "select", [(k, k) for k in PRESETS]
            f.help = preset.summary
        elif choices:
            f.kind = "select"
            f.options = [(c, c) for c in choices]
            if info.optional:
                f.options.insert(0, ("", "default"))
        else:
            f.inputmode = "numeric" if info.is_int else "decimal"
            f.placeholder = placeholders.get(name, "" if default is None else _fmt(default))
        if f.kind == "select" and not f.value and default is not None:
            f.value = _fmt(default)
        fields[name] = f

    groups = [(title, [fields[n] for n in names if n in fields]) for title, names in GROUPS]
    placed = {n for _, names in GROUPS for n in names}
    advanced = [fields[n] for n in ADVANCED_FIRST if n in fields]
    advanced += [f for n, f in fields.items() if n not in placed and n not in ADVANCED_FIRST]
    form_names = set(fields) | {"schedulers", "upload", "rate_min", "rate_max", "rate_step", "trace"}
    return Form(
        groups=groups, advanced=advanced,
        advanced_open=any(values.get(f.name) not in (None, "") or f.error for f in advanced),
        schedulers=[{"name": s, "checked": s in selected, "summary": BY_NAME[s].summary if s in BY_NAME else ""}
                    for s in SCHEDULER_NAMES],
        errors=errors,
        other_errors=[(k, v) for k, v in errors.items() if k not in form_names],
    )


def _selected_schedulers(values: dict[str, Any]) -> list[str]:
    raw = values.get("schedulers") or values.get("scheduler") or []
    items = raw if isinstance(raw, list | tuple) else [raw]
    return [n.strip() for item in items for n in str(item).split(",") if n.strip()]


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# ----- metrics table -----
Row = tuple[str, str, str, str | None]  # (label, dotted key, format, better: "low" | "high" | None)
METRIC_GROUPS: tuple[tuple[str, tuple[Row, ...]], ...] = (
    ("Requests", (
        ("completed", "completed", "int", "high"),
        ("rejected", "rejected", "int", "low"),
        ("shed (SLO admission)", "shed", "int", "low"),
    )),
    ("Time to first token (ms)", (
        ("TTFT mean", "ttft_ms.mean", "ms", "low"), ("TTFT p50", "ttft_ms.p50", "ms", "low"),
        ("TTFT p99", "ttft_ms.p99", "ms", "low"),
    )),
    ("Time per output token (ms)", (
        ("TPOT mean", "tpot_ms.mean", "ms", "low"), ("TPOT p50", "tpot_ms.p50", "ms", "low"),
        ("TPOT p99", "tpot_ms.p99", "ms", "low"),
    )),
    ("Inter-token latency (ms)", (
        ("ITL mean", "itl_ms.mean", "ms", "low"), ("ITL p50", "itl_ms.p50", "ms", "low"),
        ("ITL p99", "itl_ms.p99", "ms", "low"), ("ITL max", "itl_ms.max", "ms", "low"),
    )),
    ("End-to-end latency (ms)", (
        ("E2EL mean", "e2el_ms.mean", "ms", "low"), ("E2EL p50", "e2el_ms.p50", "ms", "low"),
        ("E2EL p99", "e2el_ms.p99", "ms", "low"),
    )),
    ("Throughput", (
        ("requests / s", "request_throughput", "rate", "high"),
        ("output tokens / s", "output_throughput", "tok", "high"),
        ("goodput, requests / s", "goodput", "rate", "high"),
        ("SLO attainment", "slo_attainment", "pct", "high"),
        ("token goodput, tokens / s", "token_goodput", "tok", "high"),
    )),
    ("GPU", (
        ("MBU (memory bandwidth)", "mbu", "pct", None), ("MFU (compute)", "mfu", "pct", None),
        ("KV cache use, mean", "kv_cache_usage.mean", "pct", None),
        ("KV cache use, peak", "kv_cache_usage.peak", "pct", None),
    )),
    ("Scheduling", (
        ("preemptions", "preemptions", "int", "low"), ("requests preempted", "preempted_requests", "int", "low"),
        ("queue length, mean", "waiting.mean", "num", "low"), ("queue length, peak", "waiting.peak", "int", "low"),
        ("engine steps", "steps", "int", None), ("simulated time (s)", "duration_s", "num", None),
    )),
)


def dig(d: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def fmt_value(v: Any, kind: str) -> str:
    if v is None:
        return "—"
    if not isinstance(v, int | float):
        return str(v)
    if kind == "int":
        return f"{int(v):,}"
    if kind == "pct":
        return f"{v * 100:.1f}%"
    if kind == "ms":
        return f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if kind == "tok":
        return f"{v:,.0f}"
    if kind == "rate":
        return f"{v:,.2f}"
    return f"{v:,.2f}"


def metrics_table(views: list) -> list[list[dict]]:
    """Two columns of row groups (balanced by rows); each row has one cell per scheduler and marks the best
    value when schedulers differ."""
    groups = []
    for title, rows in METRIC_GROUPS:
        out_rows = []
        for label, key, kind, better in rows:
            values = [dig(v.metrics, key) for v in views]
            if all(x is None for x in values):
                continue
            texts = [fmt_value(x, kind) for x in values]
            nums = [x for x in values if isinstance(x, int | float)]
            best = None
            if better and len(views) > 1 and nums:
                best = min(nums) if better == "low" else max(nums)
                if texts.count(fmt_value(best, kind)) > 1:  # a tie as shown is no win
                    best = None
            out_rows.append({"label": label, "cells": [
                {"text": t, "best": best is not None and x == best} for x, t in zip(values, texts, strict=True)]})
        if out_rows:
            groups.append({"title": title, "rows": out_rows})
    total = sum(len(g["rows"]) + 1 for g in groups)
    left, count = [], 0
    for g in groups:
        if count + (len(g["rows"]) + 1) / 2 > total / 2 and left:
            break
        left.append(g)
        count += len(g["rows"]) + 1
    return [left, groups[len(left):]]


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
    n = v.requests
    if upload is not None:
        out.append(f"trace {upload.filename}: {n:,} requests over {upload.info.span_s:,.0f} s")
    else:
        span = f"{s.num_requests:,} requests" if s.num_requests else f"{st['rate']:g} req/s for {s.duration:g} s"
        out.append(f"{s.workload} workload: {span} → {n:,} requests, seed {s.seed}")
    slo, classes = v.metrics.get("slo") or {}, v.metrics.get("per_class") or {}
    if slo.get("by_class") and classes:
        out.append("SLOs per class, TTFT/TPOT ms: " + ", ".join(
            f"{name} {c['slo']['ttft_ms']:g}/{c['slo']['tpot_ms']:g}" for name, c in classes.items()))
    else:
        out.append(f"SLOs: {slo_text(v.metrics)}")
    out.append(f"KV pool {st['num_blocks']:,} blocks × {st['block_size']} tokens")
    return out


LIMITS_TEXT = (f"The web runs at most {MAX_REQUESTS:,} requests per scheduler and {MAX_DURATION_S:g} s of "
               "arrivals; the CLI has no such limits.")
