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
from ..kernel.cost_model import ACTIVATION_BYTES

GIB = 1024**3
# The KV fraction the perf-overview runs used: "In many cases, we also use a higher KV cache percentage by setting
# --kv_cache_free_gpu_mem_fraction 0.95" (docs/source/performance/perf-overview.md, commit 00f37686).
PERF_OVERVIEW_KV_FRACTION = 0.95
MAX_BATCH = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large"


def engine_setting(hardware: str, model: str, quantization: str, tp: int, isl: int, osl: int,
                   kv_cache_dtype: str = "auto", kv_fraction: float = PERF_OVERVIEW_KV_FRACTION) -> tuple[int, int]:
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
