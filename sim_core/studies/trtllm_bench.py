"""How `trtllm-bench throughput` sizes its engine when the command gives no max batch size or max num tokens, as
TensorRT-LLM's performance-overview rows ran (validation/engines.csv, "trtllm-bench").

NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py (calc_engine_setting, finetune_setting; read at commit
04cba882): the KV cache gets `kv_fraction` of the memory the weights leave (GPU memory x GPUs - parameters x
bytes per element), the requests that fit at the dataset's ISL + OSL set the batch size (at most 4096), and the
token budget is that batch times 1 + ISL/OSL (at most 32768), each rounded up a step ("slightly optimistic"), at
least 64 sequences and 2048 tokens. Without chunked prefill (trtllm-bench's default) the budget is raised to hold
the longest prompt plus a full batch (tensorrt_llm/bench/benchmark/utils/general.py, get_settings).
"""

from __future__ import annotations

import math

from ..catalog import GPUS, MODELS, QUANTIZATIONS
from ..kernel.layer_kernels import ACTIVATION_BYTES

GIB = 1024**3
# trtllm-bench's --kv_cache_free_gpu_mem_fraction default; the perf-overview runs used 0.95 "in many cases"
# (docs/source/performance/perf-overview.md, commit 00f37686; validation/engines.csv says which rows).
DEFAULT_KV_FRACTION = 0.90
MAX_BATCH = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large"


def engine_setting(hardware: str, model: str, quantization: str, tp: int, isl: int, osl: int,
                   kv_cache_dtype: str = "auto", kv_fraction: float = DEFAULT_KV_FRACTION) -> tuple[int, int]:
    """(max batch size, max num tokens) trtllm-bench picks for a dataset of `isl`/`osl` requests."""
    m, g = MODELS[model], GPUS[hardware]
    kv_elem = 1.0 if kv_cache_dtype == "fp8" else ACTIVATION_BYTES
    bytes_per_token = 2 * m.layers * max(tp, m.kv_heads) * m.head_dim * kv_elem / GIB
    engine_gib = m.total_params * QUANTIZATIONS[quantization] / GIB
    cache_gib = (g.mem_gib * tp - engine_gib) * kv_fraction
    requests = cache_gib / (bytes_per_token * (isl + osl))
    return finetune(requests, isl, osl)


def finetune(requests: float, isl: int, osl: int) -> tuple[int, int]:
    """tuning.py's finetune_setting (one pipeline stage, optimistic tuning), then get_settings' floor for
    unchunked prompts."""
    raw_bs = min(requests, MAX_BATCH)
    raw_tokens = min(raw_bs * (1 + isl / osl), MAX_TOKENS)
    if raw_bs < 256:
        batch = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        batch = 128 * math.ceil(raw_bs / 128)
    else:
        batch = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, max(tokens, isl + batch)


def row_setting(row: dict, engine_row: dict, kv_cache_dtype: str) -> tuple[int, int]:
    """engine_setting for a validation row (serving.csv) run as its validation/engines.csv entry says."""
    from .validation import hardware_key, int_of, kv_cache_dtype_of, model_key, quantization_of

    return engine_setting(hardware_key(row["hardware"]), model_key(row["model"]), quantization_of(row["dtype"]),
                          int_of(row.get("tp") or "1"), int(row["input_len"]), int(row["output_len"]),
                          kv_cache_dtype or kv_cache_dtype_of(row["dtype"]),
                          float(engine_row.get("kv_cache_free_gpu_mem_fraction") or DEFAULT_KV_FRACTION))


def utilization_for(setup, kv_fraction: float) -> float:
    """The gpu_memory_utilization (vLLM's share of all memory, sched-sim's field) that gives the KV pool
    TensorRT-LLM's free_gpu_memory_fraction gives (a share of what the weights and activations leave):
    u M - W - R = f (M - W - R)."""
    total = setup.gpu.mem_gib * GIB
    held = setup.weight_bytes_per_gpu + setup.reserve_bytes
    return min(0.99, (kv_fraction * (total - held) + held) / total)
