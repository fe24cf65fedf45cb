"""`sched-sim list`: the valid names (GPUs, models, workload presets, schedulers) and what each metric measures."""

from __future__ import annotations

import argparse

from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES
from sim_core.metric_catalog import METRICS, Metric
from sim_core.policies import BY_NAME

from ..report import columns, g, print_json, print_lines

NAME = "list"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def handle(args: argparse.Namespace) -> int:
    cat = _catalog()
    if args.json:
        print_json(cat)
        return 0
    print_lines(catalog_lines(cat))
    return 0


def _catalog() -> dict:
    return {
        "gpus": [{"key": gpu.key, "name": gpu.name, "memory_gb": gpu.mem_gib, "bandwidth_gbs": gpu.mem_bw_gbs,
                  "fp16_tflops": gpu.fp16_tflops, "fp8_tflops": gpu.fp8_tflops, "default_model": gpu.default_model,
                  "fp4_tflops": gpu.fp4_tflops}
                 for gpu in GPUS.values()],
        "models": [{"key": m.key, "hf_name": m.hf_name, "params_b": m.published_params_b, "layers": m.layers,
                    "max_context": m.max_context, "experts": m.experts, "attention": m.attention_summary,
                    "kv_bytes_per_token": m.kv_growth_bytes_per_token(),
                    "kv_bytes_per_sequence_fixed": m.kv_fixed_bytes_per_sequence(),
                    "badges": [b.label for b in m.badges]} for m in MODELS.values()],
        "workloads": [{"name": p.name, "rate": p.rate, "burstiness": p.burstiness, "slo_ttft_ms": p.slo_ttft_ms,
                       "slo_tpot_ms": p.slo_tpot_ms, "summary": p.summary} for p in PRESETS.values()],
        "schedulers": [{"name": s.name, "summary": s.summary} for s in (BY_NAME[n] for n in SCHEDULER_NAMES)],
        "metrics": [metric_doc(m) for m in METRICS],
    }


def metric_doc(m: Metric) -> dict:
    """One catalogue entry as `sched-sim list --json` shows it."""
    return {"key": m.doc_key, "label": m.doc_label, "unit": m.unit, "description": m.description,
            "better": m.better, "group": m.group}


def catalog_lines(cat: dict) -> list[str]:
    lines = ["GPUs (--hardware)"]
    lines += ["  " + x for x in columns(
        ["key", "name", "memory", "bandwidth", "TFLOPS fp16", "fp8", "fp4", "default model"],
        [[c["key"], c["name"], f"{g(c['memory_gb'])} GB", f"{g(c['bandwidth_gbs'])} GB/s", g(c["fp16_tflops"]),
          g(c["fp8_tflops"]) if c["fp8_tflops"] else "-", g(c["fp4_tflops"]) if c["fp4_tflops"] else "-",
          c["default_model"]] for c in cat["gpus"]],
        right={2, 3, 4, 5, 6})]
    lines += ["", "Models (--model; --model-config FILE reads a Hugging Face config.json instead)"]
    lines += ["  " + x for x in columns(
        ["key", "params", "layers", "context", "attention", "KV/token", "badges", "hugging face"],
        [[m["key"], f"{g(m['params_b'])}B" + (f" ({m['experts']} experts)" if m["experts"] > 1 else ""),
          str(m["layers"]), f"{m['max_context']:,}", m["attention"], f"{m['kv_bytes_per_token'] / 1024:g} KiB",
          ", ".join(m["badges"]) or "-", m["hf_name"]] for m in cat["models"]],
        right={1, 2, 3, 5})]
    lines += ["", "Workload presets (--workload; --trace FILE replays a CSV instead)"]
    lines += ["  " + x for x in columns(
        ["name", "rate (req/s)", "SLO TTFT", "SLO TPOT", "summary"],
        [[p["name"], g(p["rate"]), f"{g(p['slo_ttft_ms'])} ms", f"{g(p['slo_tpot_ms'])} ms", p["summary"]]
         for p in cat["workloads"]],
        right={1, 2, 3})]
    lines += ["", "Schedulers (--scheduler, --schedulers)"]
    lines += ["  " + x for x in columns(["name", "summary"], [[s["name"], s["summary"]] for s in cat["schedulers"]],
                                        right=set())]
    lines += ["", "Metrics (schedulers.<name>.metrics.<key> in --json output; % metrics are fractions 0-1 there)"]
    lines += metric_lines()
    return lines


def metric_lines() -> list[str]:
    """The catalogue, by table section: name, unit, key and meaning."""
    out = []
    for group in dict.fromkeys(m.group for m in METRICS):
        rows = [[m.doc_label, m.unit, m.doc_key, m.description] for m in METRICS if m.group == group]
        out += ["", f"  {group}"] + ["    " + x for x in columns(["name", "unit", "key", "meaning"], rows, set(),
                                                                 wrap_last=72)]
    return out
