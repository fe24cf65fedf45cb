"""The cost model against public measurements: each row of validation/*.csv (see validation/SOURCES.md for what
each measured) predicted by the model, with the relative error, and the median and worst absolute error per
group. A row the model cannot predict honestly is kept with the reason it is skipped.

Groups: "kernel" (single CUDA kernels: GEMMs, elementwise ops, NCCL all-reduces), "kernel, MoE" (one fused MoE layer
at 1 to 16,384 tokens, validation/moe_kernels.csv, sim_core/studies/moe_kernels.py), "step" (one engine step or
a few: TTFT, inter-token latency, short whole requests, static-batch decode throughput), "serving" (throughput
of a benchmark run), "serving, MoE" (the engines' published maximum-throughput tables of mixture-of-experts
models, validation/moe_offline.csv, simulated with sim_core/studies/offline.py), "tp/fp8" (the TP-scaling and FP8-vs-BF16 comparison rows), "kernel, measured here" (GEMMs
in 16-bit and FP8 and prefill attention that validation/measure_gpu.py timed on a GPU lent to the project; raw
figures in validation/*_kernels.json, kept apart from the published rows), "energy", "energy: power" and
"energy: throughput" (ML.ENERGY's joules per output token and the same rows' power per GPU and throughput,
sim_core/studies/energy_checks.py).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from ..catalog import GPUS, MODELS, ServingSettings, resolve_setup
from ..engines import DEFAULT_ENGINE, engine_of
from ..kernel.cost_constants import (
    ATTENTION_RATE,
    CUSTOM_AR_MAX_BYTES,
    DENSE_GEMM_BW,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    GEMM_LAUNCH_FLOOR_S,
    LINEAR_RATE,
    PEAK_BW,
    STREAM_BW,
)
from ..kernel.cost_model import allreduce_s, cost_params, prefill_pairs, roofline_s, step_cost
from ..kernel.layer_kernels import (
    ACTIVATION_BW_EFFICIENCY,
    NORM_BW_EFFICIENCY,
    ROPE_BW_EFFICIENCY,
    STREAM_COPY_BW_EFFICIENCY,
)
from .check_rows import VALIDATION_DIR, Check, int_of, read_rows
from .energy_checks import energy_checks
from .gathered import gathered_checks
from .inferencex import inferencex_checks
from .lora_checks import lora_checks
from .moe_kernels import GROUP as MOE_KERNEL_GROUP
from .moe_kernels import moe_kernel_checks
from .offline import (  # noqa: F401 (re-exported: the offline rows' settings)
    CAPACITY_POLICIES,
    OFFLINE_REQUESTS,
    TRTLLM_MAX_BATCH_SIZE,
    TRTLLM_MAX_NUM_TOKENS,
    EngineSettings,
    engine_settings,
    offline_output_rate,
    row_deployment,
)
from .row_names import (  # noqa: F401 (re-exported)
    HARDWARE_NAMES,
    hardware_key,
    kv_cache_dtype_of,
    model_key,
    quantization_of,
    row_quantization,
)

# The engines' own published maximum-throughput tables of mixture-of-experts models (validation/moe_offline.csv).
MOE_OFFLINE_GROUP = "serving, MoE"
GROUPS = ("kernel", MOE_KERNEL_GROUP, "step", "serving", MOE_OFFLINE_GROUP, "tp/fp8", "kernel, measured here")





# Sources whose engines all-reduce with NCCL at every size: TensorRT-LLM v0.5/v0.6's build scripts made the
# one-kernel all-reduce opt-in (examples/llama/build.py: "--use_custom_all_reduce ... Activates latency-optimized
# algorithm for all-reduce instead of NCCL", store_true) and the performance page's build commands do not pass it
# (docs/source/performance.md, commit 138f96d4). The cost model's default is vLLM's custom all-reduce.
NCCL_ONLY_SOURCES = {"trtllm_perf_v061"}
NCCL_NOTE = "engine all-reduces with NCCL (custom all-reduce not enabled in its build)"


@cache
def params(hardware: str, model: str, quantization: str, tp: int, kv_cache_dtype: str = "auto",
           nccl_only: bool = False, engine: str = DEFAULT_ENGINE) -> np.ndarray:
    setup = resolve_setup(hardware, model, quantization, tp, ServingSettings(0.9, 16, 8192, 256), kv_cache_dtype)
    p = cost_params(setup, engine=engine)
    if nccl_only:
        p[CUSTOM_AR_MAX_BYTES] = 0.0
    return p


def middle(text: str) -> int:
    """'2048..4096' -> 3072; '512' -> 512."""
    nums = [int(x) for x in re.findall(r"\d+", text)]
    return sum(nums[:2]) // len(nums[:2])


# ---------------------------------------------------------------------------------------------------------
# Steps and requests from the cost model
# ---------------------------------------------------------------------------------------------------------
def prefill_s(p, seqs: int, prompt: int) -> float:
    """`seqs` prompts of `prompt` tokens prefilled together in one step, each sampling its first token."""
    return step_cost(p, seqs * prompt, seqs, seqs * prefill_pairs(prompt, 0), 0, 0, 0, seqs)[0]


def decode_s(p, seqs: int, context: int) -> float:
    return step_cost(p, 0, 0, 0, 0, seqs, seqs * context, seqs)[0]


def static_batch_s(p, batch: int, prompt: int, output: int) -> float:
    """A static batch: one prefill of every prompt (the first token), then output - 1 decode steps."""
    return prefill_s(p, batch, prompt) + sum(decode_s(p, batch, prompt + j) for j in range(1, output))


# ---------------------------------------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------------------------------------
GEMM_SHAPE = re.compile(r"M=(\d+) N=(\d+) K=(\d+)")
# Elementwise ops Vidur profiles, bytes per token read and written (16-bit): RMSNorm reads and writes the hidden
# state, rotary rewrites q and k, SiLU-and-mul reads gate and up and writes one, the residual add reads two; each
# with the fraction of peak bandwidth its kind of kernel reaches (cost_model).
ELEMENTWISE_OPS = {
    "input_layernorm": (lambda m: 2 * m.hidden * 2, NORM_BW_EFFICIENCY),
    "attn_rope": (lambda m: 2 * (m.heads + m.kv_heads) * m.head_dim * 2, ROPE_BW_EFFICIENCY),
    "mlp_act": (lambda m: 3 * m.ffn * 2, ACTIVATION_BW_EFFICIENCY),
    "add": (lambda m: 3 * m.hidden * 2, STREAM_COPY_BW_EFFICIENCY),
}


def gemm_s(p, m: int, n: int, k: int, operand_bytes: float = 2.0) -> float:
    """One M x K by K x N GEMM as the cost model charges it: the weights and the input in the GEMM's format
    (`operand_bytes` per element), a 16-bit output, at `p`'s bandwidths and tensor rate, plus the launch floor: the
    weights at the GEMMs' own bandwidth, the activations at the streaming one, as cost_model.linear_s charges them."""
    moved = operand_bytes * (n * k + m * k) + 2.0 * m * n
    slow_weight_bytes = operand_bytes * n * k * (p[STREAM_BW] / p[DENSE_GEMM_BW] - 1.0)  # +0.0 where they agree
    return GEMM_LAUNCH_FLOOR_S + roofline_s(moved + slow_weight_bytes, 2.0 * m * n * k, p[STREAM_BW], p[LINEAR_RATE])


def kernel_check(row: dict) -> Check:
    hw, tp = hardware_key(row["hardware"]), int(row["tp"])
    what = f"{row['model_or_op']} {row['shape']} tp={tp} on {hw}"
    ref = float(row["value"])
    base = dict(group="kernel", source=row["source_id"], what=what, reference=ref, unit=row["unit"])
    op = row["model_or_op"]
    if op.startswith("all_reduce"):
        p = params(hw, "llama-3-8b", "fp16", tp)
        nbytes = float(re.search(r"bytes=(\d+)", row["shape"]).group(1))
        return Check(predicted=allreduce_s(p, nbytes, 1.0) * 1e3, **base)
    model_name, kernel = op.split(":")
    p = params(hw, "llama-3-8b", "fp16", 1)  # GPU rates only: the shape comes from the row
    shape = GEMM_SHAPE.search(row["shape"])
    if shape:
        return Check(predicted=gemm_s(p, *(int(x) for x in shape.groups())) * 1e3, **base)
    if kernel in ELEMENTWISE_OPS:
        model = MODELS[model_key(model_name)]
        tokens = int(re.search(r"tokens=(\d+)", row["shape"]).group(1))
        bytes_per_token, efficiency = ELEMENTWISE_OPS[kernel]
        moved = tokens * bytes_per_token(model)
        return Check(predicted=(ELEMENTWISE_LAUNCH_FLOOR_S + moved / (p[PEAK_BW] * efficiency)) * 1e3, **base)
    return Check(predicted=None, note="kernel not modelled on its own", **base)


def step_check(group: str, row: dict, hw: str | None, model: str | None, tp: int, dtype: str) -> Check:
    """A steps.csv or tp_fp8.csv latency row."""
    what_text = row["measured_what"]
    what = f"{row['model']} {dtype} tp={tp} on {row['hardware']}: {what_text}"
    base = dict(group=group, source=row["source_id"], what=what, reference=float(row["value"]), unit=row["unit"])
    if hw is None or model is None:
        return Check(predicted=None, note="hardware or model not in the catalog", **base)
    q = quantization_of(dtype)
    try:
        nccl = row["source_id"] in NCCL_ONLY_SOURCES and tp > 1
        engine = engine_of(row.get("framework", ""))
        p = params(hw, model, q, tp, kv_cache_dtype_of(dtype), nccl, engine)
    except ValueError as e:
        return Check(predicted=None, note=str(e), **base)
    notes = ["client-side: includes HTTP and detokenisation"] if "client-side" in what_text else []
    if nccl:
        notes.append(NCCL_NOTE)
    low = what_text.lower()
    workload = row.get("workload", "")
    shape = end_to_end_shape(row)
    if "tok/s" in row["unit"]:
        m = re.search(r"static batch (\d+), prompt (\d+) / output (\d+)", low)
        batch, prompt, output = (int(x) for x in m.groups())
        predicted = batch * output / static_batch_s(p, batch, prompt, output)
    elif "speed-up" in low and row["unit"] == "x" and shape:
        # A published ratio (no absolute times): the 16-bit engine's whole static batch over this row's.
        p16 = params(hw, model, "fp16", tp, "auto", nccl, engine)
        predicted = static_batch_s(p16, *shape) / static_batch_s(p, *shape)
    elif "end-to-end" in low and shape:
        predicted = static_batch_s(p, *shape) * 1e3
    elif "ttft" in low or "first token" in low:
        predicted = prefill_s(p, 1, int_of(row.get("prefill_tokens") or _isl(workload))) * 1e3
    elif "inter-token" in low or "per-token" in low or "itl" in low:
        context = middle(row.get("decode_context") or _decode_range(workload))
        predicted = decode_s(p, int_of(row.get("decode_seqs") or "1"), context) * 1e3
    else:
        return Check(predicted=None, note="measurement not recognised", **base)
    return Check(predicted=predicted, note="; ".join(notes), **base)


def end_to_end_shape(row: dict) -> tuple[int, int, int] | None:
    """(batch, prompt, output) of a whole-request row: 'N in / M out' or 'N input tokens, M output tokens' in its
    measurement or workload; the batch from 'static batch of B' in the measurement, else decode_seqs, else 1."""
    text = (row["measured_what"] + " " + row.get("workload", "")).lower()
    io = re.search(r"(\d+) (?:in|input)[^\d]+(\d+) (?:out|output)", text)
    if not io:
        return None
    m = re.search(r"static batch of (\d+)", row["measured_what"].lower())
    batch = int(m.group(1)) if m else int_of(row["decode_seqs"]) if row.get("decode_seqs") else 1
    return batch, int(io.group(1)), int(io.group(2))


def _isl(workload: str) -> str:
    return re.search(r"ISL\s*=?\s*(\d+)", workload).group(1)


def _decode_range(workload: str) -> str:
    isl, osl = int(_isl(workload)), int(re.search(r"OSL\s*=?\s*(\d+)", workload).group(1))
    return f"{isl}..{isl + osl}"


def serving_check(group: str, row: dict, simulate: bool, directory: Path = VALIDATION_DIR) -> Check:
    hw, model = hardware_key(row["hardware"]), model_key(row["model"])
    dtype = row["dtype"]
    tp_text = row.get("tp") or row.get("gpus(tp)") or "1"
    tp = int_of(tp_text)
    ep = f" ep={row['ep']}{' attention-DP' if row.get('attention_dp') == 'yes' else ''}" if row.get("ep") else ""
    what = f"{row['model']} {dtype} tp={tp}{ep} on {row['hardware']}: {row['measured_what']}"
    base = dict(group=group, source=row["source_id"], what=what, reference=float(row["value"]), unit=row["unit"])
    if row["source_id"].startswith("mlperf"):
        return Check(predicted=None, note="MLPerf's OpenOrca length distribution was not read: lengths unknown",
                     **base)
    if hw is None or model is None:
        return Check(predicted=None, note="hardware or model not in the catalog", **base)
    workload = row.get("workload", "")
    if row.get("input_len"):
        prompt, output = int(row["input_len"]), int(row["output_len"])
    else:
        prompt, output = int(_isl(workload)), int(re.search(r"OSL\s*=?\s*(\d+)", workload).group(1))
    gpus = int(row.get("gpus") or tp)
    per_gpu = "per gpu" in row["measured_what"].lower() or "/gpu" in row["unit"].lower()
    nccl = row["source_id"] in NCCL_ONLY_SOURCES and tp > 1
    notes = [NCCL_NOTE] if nccl else []
    m = re.search(r"static batch of (\d+)", row["measured_what"])
    kv_dtype = kv_cache_dtype_of(dtype)
    quantization = row_quantization(dtype, hw, notes)
    try:
        if m:
            p = params(hw, model, quantization, tp, kv_dtype, nccl, engine_of(row.get("framework", "")))
            batch = int(m.group(1))
            rate = batch * output / static_batch_s(p, batch, prompt, output)
            notes.append("static batch; KV capacity not checked")
            if "does not say per-gpu" in row["measured_what"].lower() and gpus > 1:
                # Read as per GPU, like the H100 table of the same page: as whole-group rates the TP4 70B rows
                # would be 3.6-5.4x below the model, as per-GPU rates within 35%.
                per_gpu = True
                notes.append("header ambiguous: read as per GPU, like the page's H100 table")
        elif "offline" in row["measured_what"].lower() or "infinite rate" in row["measured_what"].lower():
            if not simulate:
                return Check(predicted=None, note="offline simulation skipped (--quick)", **base)
            engine = engine_settings(row, directory)
            base["engine"] = engine.engine
            rate = offline_rate(row, (model, quantization, engine.kv_cache_dtype or kv_dtype), (prompt, output),
                                    engine, notes)
        else:
            return Check(predicted=None, note="measurement not recognised", **base)
    except ValueError as e:
        return Check(predicted=None, note=str(e), **base)
    if per_gpu:
        rate /= gpus
    return Check(predicted=rate, note="; ".join(n for n in notes if n), **base)


def offline_rate(row: dict, formats: tuple[str, str, str], shape: tuple[int, int], engine: EngineSettings,
                 notes: list[str]) -> float:
    """A row's offline benchmark simulated (sim_core/studies/offline.py): its deployment (`formats`: model,
    quantization, KV-cache format), `shape` (prompt, output), as many requests as it ran where it says
    (num_requests), its engine's settings; the settings go in `notes`."""
    requests = int(row.get("num_requests") or OFFLINE_REQUESTS)
    d = row_deployment(row, *formats)
    notes.append(f"simulated: {requests} requests at t=0, engine {engine.engine}, max batch "
                 f"{engine.max_batch_size}, budget {engine.max_num_tokens}"
                 + (" per attention-DP rank" if d.attention_dp else "") + f", preemption {engine.preemption}"
                 + (", async scheduling" if engine.async_scheduling else "")
                 + (f", {formats[2]} KV cache" if engine.kv_cache_dtype else ""))
    return offline_output_rate(d, *shape, engine, requests)


def checks(directory: Path = VALIDATION_DIR, simulate: bool = True) -> list[Check]:
    """Every row of the validation set, predicted (or skipped with its reason)."""
    out = [kernel_check(r) for r in read_rows(directory / "kernels.csv")]
    for r in read_rows(directory / "steps.csv"):
        out.append(step_check("step", r, hardware_key(r["hardware"]), model_key(r["model"]),
                              int_of(r["gpus(tp)"]), r["dtype"]))
    out += [serving_check("serving", r, simulate, directory) for r in read_rows(directory / "serving.csv")]
    if (directory / "moe_offline.csv").is_file():
        out += [serving_check(MOE_OFFLINE_GROUP, r, simulate, directory)
                for r in read_rows(directory / "moe_offline.csv")]
    return (out + moe_kernel_checks(directory) + comparison_checks(directory, simulate) + measured_kernel_checks(directory)
            + inferencex_checks(directory, simulate) + gathered_checks(directory) + lora_checks(directory, simulate)
            + energy_checks(directory, simulate))


def measured_kernel_checks(directory: Path = VALIDATION_DIR) -> list[Check]:
    """The kernels validation/measure_gpu.py timed, one JSON file per GPU (group "kernel, measured here")."""
    out = []
    for path in sorted(directory.glob("*_kernels.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        hw = hardware_key(run["meta"]["gpu"])
        source = f"{path.name} ({run['meta']['gpu']}, torch {run['meta']['torch']}, CUDA {run['meta']['cuda']})"
        out += [measured_kernel_check(row, hw, source) for row in run["rows"] if row["ms"] is not None]
    return out


# What each measured kernel reads and computes, per its kind (measure_gpu.py): bytes per GEMM operand element.
GEMM_OPERAND_BYTES = {"gemm_bf16": 2.0, "gemm_fp8": 1.0}


def measured_kernel_check(row: dict, hw: str | None, source: str) -> Check:
    kind = row["kind"]
    shape = " ".join(f"{k}={row[k]}" for k in ("M", "N", "K", "heads", "kv_heads", "tokens", "seqs", "context")
                     if k in row)
    what = f"{kind} {row.get('model', '')}:{row.get('op', kind)} {shape} on {hw}"
    base = dict(group="kernel, measured here", source=source, what=what, reference=row["ms"], unit="ms")
    if hw is None:
        return Check(predicted=None, note="GPU not in the catalog", **base)
    if kind in GEMM_OPERAND_BYTES:
        p = params(hw, "llama-3-8b", "fp8" if kind == "gemm_fp8" else "bf16", 1)  # that format's tensor rate
        return Check(predicted=gemm_s(p, row["M"], row["N"], row["K"], GEMM_OPERAND_BYTES[kind]) * 1e3, **base)
    if kind == "prefill_attention":
        # One causal prompt of `tokens` tokens: the cost model's prefill attention for one layer.
        p = params(hw, "llama-3-8b", "bf16", 1)
        t, d = row["tokens"], row["head_dim"]
        flops = 4.0 * row["heads"] * d * prefill_pairs(t, 0)
        moved = 2.0 * t * d * (2 * row["heads"] + 2 * row["kv_heads"])
        seconds = GEMM_LAUNCH_FLOOR_S + roofline_s(moved, flops, p[STREAM_BW], p[ATTENTION_RATE])
        return Check(predicted=seconds * 1e3, **base)
    if kind == "decode_attention":
        # torch's attention at one query token per sequence runs few thread blocks (no split over the context, as
        # serving engines' paged decode kernels do), so it times something no engine runs.
        return Check(predicted=None, note="not a serving engine's decode kernel (no split over the context)", **base)
    return Check(predicted=None, note="a memory-bandwidth probe, not a kernel the model charges", **base)


def comparison_checks(directory: Path = VALIDATION_DIR, simulate: bool = True) -> list[Check]:
    """The tp_fp8.csv rows (group "tp/fp8"), each with the series and variant its speed-up is judged in."""
    out = []
    for r in read_rows(directory / "tp_fp8.csv"):
        what = r["measured_what"].lower()
        if "throughput" in what:
            c = serving_check("tp/fp8", r, simulate, directory)
        else:
            c = step_check("tp/fp8", r, hardware_key(r["hardware"]), model_key(r["model"]), int(r["tp"]),
                           r["dtype"])
        kind = ("throughput" if "throughput" in what else f"TTFT, {_isl(r['workload'])}-token prompt" if "ttft" in what
                else "inter-token latency" if "inter-token" in what else _end_to_end_kind(r))
        variant = f"tp={r['tp']}" if r["comparison_group"].lower().startswith("tp_") else r["dtype"]
        out.append(replace(c, series=f"{r['model']} on {r['hardware']}: {kind}", variant=variant))
    return out


def _end_to_end_kind(row: dict) -> str:
    """'end-to-end latency, 2048 in / 2048 out, batch 64': one series per request shape."""
    shape = end_to_end_shape(row)
    return "end-to-end latency" + (f", {shape[1]} in / {shape[2]} out, batch {shape[0]}" if shape else "")


def speedups(rows: list[Check]) -> list[dict]:
    """The tp/fp8 rows as speed-ups over their series' baseline (the smallest TP measured, tp=1 where there is
    one: a 70B model needs at least two 80 GB GPUs; the fastest bf16 row), measured and predicted: the ratios TP
    scaling and FP8 gains are judged by. Rows published as ratios (unit "x": "speed-up of FP8 over FP16") are
    their own speed-ups, after the others."""
    out = []
    for series in dict.fromkeys(c.series for c in rows if c.series and c.unit != "x"):
        members = [c for c in rows if c.series == series and c.predicted is not None]
        is_rate = any("tok/s" in c.unit for c in members)
        tps = [int(c.variant[3:]) for c in members if c.variant.startswith("tp=")]
        base_pool = ([c for c in members if c.variant == f"tp={min(tps)}"] if tps
                     else [c for c in members if c.variant in ("bf16", "fp16")])
        if not base_pool:
            continue
        base = (max if is_rate else min)(base_pool, key=lambda c: c.reference)
        for c in members:
            if c is base:
                continue
            ratio = (lambda a, b: a / b) if is_rate else (lambda a, b: b / a)
            out.append({"series": series, "variant": c.variant, "baseline": base.variant,
                        "measured": ratio(c.reference, base.reference), "predicted": ratio(c.predicted, base.predicted)})
    return out + [{"series": c.series, "variant": c.variant, "baseline": re.search(r"over (\w+)", c.what).group(1).lower(),
                   "measured": c.reference, "predicted": c.predicted}
                  for c in rows if c.series and c.unit == "x" and c.predicted is not None]


def summary(rows: list[Check]) -> dict[str, dict]:
    """Per group: rows predicted, rows skipped, median and worst absolute relative error."""
    out = {}
    for group in GROUPS + tuple(dict.fromkeys(c.group for c in rows if c.group not in GROUPS)):
        errors = [abs(c.error) for c in rows if c.group == group and c.error is not None]
        skipped = sum(1 for c in rows if c.group == group and c.error is None)
        out[group] = {"rows": len(errors), "skipped": skipped,
                      "median_abs_error": statistics.median(errors) if errors else None,
                      "worst_abs_error": max(errors) if errors else None}
    for engine, source in dict.fromkeys((c.engine, c.source) for c in rows if c.engine not in ("", "vllm")):
        mine = [c for c in rows if (c.engine, c.source) == (engine, source)]  # an engine profile's own rows
        out[f"engine {engine}: {source}"] = summary([replace(c, group="", engine="") for c in mine])[""]
    return out


def coverage(directory: Path = VALIDATION_DIR) -> dict[str, set[str]]:
    """GPUs, models and weight formats that some row of the validation set measured ({} without the set)."""
    if not directory.is_dir():
        return {}
    hw, models, quants = set(), set(), set()
    for name in ("kernels.csv", "steps.csv", "serving.csv", "tp_fp8.csv"):
        for r in read_rows(directory / name):
            hw.add(hardware_key(r["hardware"]))
            models.add(model_key(r.get("model") or r.get("model_or_op", "")))
            quants.add(quantization_of(r["dtype"]))
    for path in directory.glob("*_kernels.json"):  # the GEMMs and attention measured here (measure_gpu.py)
        hw.add(hardware_key(json.loads(path.read_text(encoding="utf-8"))["meta"]["gpu"]))
    return {"hardware": hw & set(GPUS), "model": models & set(MODELS), "quantization": quants}
