"""`sched-sim step-time`: one engine step's predicted time, and its components (GEMMs, attention, elementwise,
lm head, communication, CPU overhead) with their shares."""

from __future__ import annotations

import argparse

from sim_core import ScenarioError
from sim_core.step_time import StepShape, parse_step_shape, step_time_doc

from ..flags import UsageError, add_model_flags, scenario_error_text, scenario_input
from ..report import columns, fmt, pct, print_json, print_lines

NAME = "step-time"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_flags(p, StepShape, "step", "the deployment and the step's batch: one prefill chunk plus "
                                          "decoding sequences")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")


def handle(args: argparse.Namespace) -> int:
    try:
        shape = parse_step_shape(scenario_input(args, StepShape))
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, model=StepShape)) from None
    doc = step_time_doc(shape)
    if args.json:
        print_json(doc)
    else:
        print_lines(step_time_lines(doc))
    return 0


def step_time_lines(doc: dict) -> list[str]:
    """One step's time and its components, largest first, with their shares."""
    batch = []
    if doc["prefill_tokens"]:
        batch.append(f"a {doc['prefill_tokens']:,}-token prefill chunk after {doc['context_tokens']:,} cached")
    if doc["decode_seqs"]:
        batch.append(f"{doc['decode_seqs']:,} decoding sequences of {doc['decode_context']:,} tokens of context")
    formats = doc["quantization"] + (", fp8 KV cache" if doc.get("kv_cache_dtype") == "fp8" else "")
    capped = f" capped at {doc['power_cap_w']:g} W" if doc.get("power_cap_w") is not None else ""
    lines = [f"{doc['model']} ({formats}) on {doc['hardware']}{capped}, tp={doc['tp']}: " + " + ".join(batch),
             f"step time {fmt(doc['step_ms'])} ms, {doc['bound']}-bound (MBU {pct(doc['mbu'])}%, "
             f"MFU {pct(doc['mfu'])}%)", ""]
    if "tensor_parallel" in doc:  # a group over nodes: name the link its all-reduce crosses, as the JSON does
        lines.insert(1, doc["tensor_parallel"])
    total = doc["step_ms"]
    rows = sorted(doc["components_ms"].items(), key=lambda kv: -kv[1])
    lines += ["  " + x for x in columns(["component", "ms", "share %"],
                                         [[k, fmt(v, 3), pct(v / total if total else 0.0)] for k, v in rows],
                                         right={1, 2})]
    lines += [f"warning: {w}" for w in doc.get("warnings", [])]
    return lines
