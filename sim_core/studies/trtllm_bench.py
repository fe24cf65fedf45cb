"""How `trtllm-bench throughput` sizes its engine when the command gives no max batch size or max num tokens, as
TensorRT-LLM's performance-overview rows ran (validation/engines.csv, "trtllm-bench").

NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py (calc_engine_setting, finetune_setting; read at commit
04cba882; the same rules in tensorrt_llm/bench/tuning/heuristics.py at 0b42ceaf, which adds attention data-parallel
ranks and MLA's latent cache, both in engine_setting below): the KV cache gets `kv_fraction` of the memory the weights leave (GPU memory x GPUs - parameters x
bytes per element), the requests that fit at the dataset's ISL + OSL set the batch size (at most 4096), and the
token budget is that batch times 1 + ISL/OSL (at most 32768), each rounded up a step ("slightly optimistic"), at
least 64 sequences and 2048 tokens. Without chunked prefill (trtllm-bench's default) the budget is raised to hold
the longest prompt plus a full batch (tensorrt_llm/bench/benchmark/utils/general.py, get_settings).
"""

from __future__ import annotations

import math

from ..catalog import GPUS, MODELS, QUANTIZATIONS
from ..kernel.layer_kernels import ACTIVATION_BYTES
from .check_rows import int_of
from .row_names import hardware_key, kv_cache_dtype_of, model_key, quantization_of, row_quantization

GIB = 1024**3
# trtllm-bench's --kv_cache_free_gpu_mem_fraction default; the perf-overview runs used 0.95 "in many cases"
# (docs/source/performance/perf-overview.md, commit 00f37686; validation/engines.csv says which rows).
DEFAULT_KV_FRACTION = 0.90
MAX_BATCH = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large"
# What trtllm-bench runs a checkpoint it does not size for with: TorchLlmArgs' max_batch_size and max_num_tokens
# defaults (get_benchmark_engine_settings: "Using default settings because quant_algo not supported").
UNTUNED_SETTING = (2048, 8192)


def engine_setting(hardware: str, model: str, quantization: str, tp: int, shape: tuple[int, int],
                   kv_cache_dtype: str = "auto", kv_fraction: float = DEFAULT_KV_FRACTION,
                   attention_dp: bool = False) -> tuple[int, int]:
    """(max batch size, max num tokens) trtllm-bench picks for a dataset of `shape` = (ISL, OSL) requests on `tp`
    GPUs (trtllm-bench's tp_size: every GPU of the deployment). With attention data-parallel each of them is a rank
    with its own KV cache and batch: the memory is one GPU's less its 1/tp share of the weights (heuristics.py at
    0b42ceaf: "max_batch_size is computed per-rank"). MLA caches one latent per token and layer."""
    m, g = MODELS[model], GPUS[hardware]
    isl, osl = shape
    kv_elem = 1.0 if kv_cache_dtype == "fp8" else ACTIVATION_BYTES
    if m.is_mla:
        bytes_per_token = m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * kv_elem / GIB
    else:
        bytes_per_token = 2 * m.layers * max(tp, m.kv_heads) * m.head_dim * kv_elem / GIB
    engine_gib = m.total_params * QUANTIZATIONS[quantization] / GIB
    memory_gib, engine_gib = (g.mem_gib, engine_gib / tp) if attention_dp else (g.mem_gib * tp, engine_gib)
    requests = (memory_gib - engine_gib) * kv_fraction / (bytes_per_token * (isl + osl))
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
    """engine_setting for a validation row (serving.csv, moe_offline.csv) run as its validation/engines.csv entry
    says. A checkpoint in a format trtllm-bench does not size for (MXFP4: its TUNED_QUANTS are NVFP4, FP8, FP8 block
    scales and unquantized) runs at TensorRT-LLM's defaults instead."""
    if "mxfp4" in row["dtype"].lower():
        return UNTUNED_SETTING
    hardware, gpus = hardware_key(row["hardware"]), int_of(row.get("gpus") or row.get("tp") or "1")
    quantization = row_quantization(row["dtype"], hardware, []) if "fp4" in row["dtype"].lower() else \
        quantization_of(row["dtype"])
    return engine_setting(hardware, model_key(row["model"]), quantization, gpus,
                          (int(row["input_len"]), int(row["output_len"])),
                          kv_cache_dtype or kv_cache_dtype_of(row["dtype"]),
                          float(engine_row.get("kv_cache_free_gpu_mem_fraction") or DEFAULT_KV_FRACTION),
                          row.get("attention_dp") == "yes")


def utilization_for(setup, kv_fraction: float) -> float:
    """The gpu_memory_utilization (vLLM's share of all memory, sched-sim's field) that gives the KV pool
    TensorRT-LLM's free_gpu_memory_fraction gives (a share of what the weights and activations leave):
    u M - W - R = f (M - W - R)."""
    total = setup.gpu.mem_gib * GIB
    held = setup.weight_bytes_per_gpu + setup.reserve_bytes
    return min(0.99, (kv_fraction * (total - held) + held) / total)
