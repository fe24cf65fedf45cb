"""validation/moe_kernels.csv predicted (group "kernel, MoE"): published timings of one fused MoE layer (vLLM's
benchmark_moe.py, FlashInfer's MoE benchmark; validation/SOURCES.md, "moe_kernels") against the cost model's own
time of one MoE layer at that many tokens (kernel/moe_layer.py moe_layer_s: the grouped expert GEMMs the step
charges, the routing kernels and the experts' activation), on the row's GPU, model, weight format and sharding.

Each row names its shape twice: by the catalogue's model and sharding, and by the kernel's own E, N, K and top-k as
the benchmark printed them; a row whose two disagree is refused (ValueError naming the file, line and field), so a
model's catalogue entry cannot drift from what was timed. No constant was fitted on these rows: the fixed times and
expert bandwidths in sim_core/data/gpus.json come from other timings at 1-32 tokens (scripts/nvidia_moe_kernel_fit.py),
the tile heights from the kernels' configurations (layer_kernels.tile_rows)."""

from __future__ import annotations

import re
import statistics
from functools import cache
from pathlib import Path

import numpy as np

from ..catalog import MODELS, ServingSettings, resolve_setup
from ..expert_parallel import expert_parallel
from ..kernel.cost_model import cost_params
from ..kernel.moe_layer import moe_layer_s
from .check_rows import VALIDATION_DIR, Check, measured_rows
from .row_names import hardware_key, model_key

# Published timings of one fused MoE layer (validation/moe_kernels.csv): their group in the validation set.
GROUP = "kernel, MoE"

FILE = "moe_kernels.csv"
# The benchmarks' weight formats as the catalogue's: W8A8 FP8 (per-tensor scales), 16-bit, NVFP4 (W4A4).
DTYPES = {"fp8_w8a8": "fp8", "bf16": "bf16", "nvfp4": "fp4"}
TOKENS = re.compile(r", (\d+) tokens on ")  # a row's batch size, as moe_kernel_check writes it


@cache
def layer_params(hardware: str, model: str, quantization: str, tp: int, ep: int) -> np.ndarray:
    """The cost vector of the row's deployment: `tp` GPUs, experts spread over `ep` of them (attention TP)."""
    setup = resolve_setup(hardware, model, quantization, tp, ServingSettings(0.9, 16, 8192, 256), "auto",
                          expert_parallel(ep))
    return cost_params(setup)


def shape_mismatch(row: dict, model: str, tp: int, ep: int) -> str:
    """The first of the row's kernel shape fields that the catalogue's model, so sharded, does not give ("" if none):
    the experts' intermediate width is split over tp GPUs, or whole on each of ep GPUs holding ceil(E/ep) experts."""
    m = MODELS[model]
    want = {"experts": m.experts, "topk": m.experts_per_token, "hidden": m.hidden,
            "local_experts": -(-m.experts // ep), "expert_ffn_per_gpu": (m.expert_ffn or m.ffn) // (1 if ep > 1 else tp)}
    return next((f"{field} {row[field]} (the catalogue's {model} at tp={tp} ep={ep}: {value})"
                 for field, value in want.items() if int(row[field]) != value), "")


def moe_kernel_check(line: int, row: dict, reference: float) -> Check:
    hw, model = hardware_key(row["hardware"]), model_key(row["model"])
    tp, ep, tokens = int(row["tp"]), int(row["ep"]), int(row["tokens"])
    what = (f"{row['model']} {row['dtype']} E={row['experts']} N={row['expert_ffn_per_gpu']} K={row['hidden']} "
            f"top-{row['topk']} tp={tp} ep={ep}, {tokens} tokens on {row['hardware']} ({row['kernel']})")
    base = dict(group=GROUP, source=row["source_id"], what=what, reference=reference, unit=row["unit"])
    if hw is None or model is None or row["dtype"] not in DTYPES:
        missing = "GPU" if hw is None else "model" if model is None else f"dtype {row['dtype']!r}"
        return Check(predicted=None, note=f"{missing} not in the catalog", **base)
    wrong = shape_mismatch(row, model, tp, ep)
    if wrong:
        raise ValueError(f"{FILE} line {line}: {wrong}")
    p = layer_params(hw, model, DTYPES[row["dtype"]], tp, ep)
    return Check(predicted=float(moe_layer_s(p, float(tokens))) * 1e6, **base)


def moe_kernel_checks(directory: Path = VALIDATION_DIR) -> list[Check]:
    """Every row of validation/moe_kernels.csv, predicted (none if the file is absent)."""
    return [moe_kernel_check(line, r, reference) for line, r, reference in measured_rows(directory / FILE)]


def errors_by_tokens(rows: list[Check]) -> dict[str, dict]:
    """The group's signed errors by batch size band: rows, median, least and greatest."""
    bands = {"1-64": (1, 64), "65-511": (65, 511), "512-2047": (512, 2047), "2048+": (2048, 1 << 40)}
    tokens = {id(c): int(TOKENS.search(c.what).group(1)) for c in rows if c.group == GROUP and c.error is not None}
    out = {}
    for name, (lo, hi) in bands.items():
        errors = sorted(c.error for c in rows if id(c) in tokens and lo <= tokens[id(c)] <= hi)
        if errors:
            out[name] = {"rows": len(errors), "median_error": statistics.median(errors), "min_error": errors[0],
                         "max_error": errors[-1]}
    return out
