"""Names in the validation CSVs -> the catalog: a row's GPU, model and number formats as catalog keys."""

from __future__ import annotations

import re

from ..catalog import GPUS, MODELS

# GPUs the rows name, as catalog keys, in the order they are looked for: a text naming two GPUs ("MI355X vs B200")
# takes the first; gb200/gb300 before b200/b300, which they contain; h20 only as a whole name (h200 contains it).
HARDWARE_NAMES = (("h100", "h100"), ("h200", "h200"), ("a100", "a100"), ("l40s", "l40s"), ("gb200", "gb200"),
                  ("gb300", "gb300"), ("b200", "b200"), ("b300", "b300"), ("mi300x", "mi300x"),
                  ("mi325x", "mi325x"), ("mi355x", "mi355x"), (r"h20(?!\d)", "h20"))


def hardware_key(text: str) -> str | None:
    t = text.lower()
    return next((key for pattern, key in HARDWARE_NAMES if re.search(pattern, t)), None)


def model_key(text: str) -> str | None:
    """Llama-3.1/3.3 share their generation's architecture (only the RoPE scaling for long context differs)."""
    t = text.lower().replace("llama2", "llama-2").replace("meta-llama-3", "llama-3")
    for pattern, key in ((r"llama-2-7b", "llama-2-7b"), (r"llama-2-13b", "llama-2-13b"), (r"llama-2-70b", "llama-2-70b"),
                         (r"llama-3(\.1)?-8b", "llama-3-8b"), (r"llama-3(\.3)?-70b", "llama-3-70b")):
        if re.search(pattern, t):
            return key
    # Other models by their catalog key ("DeepSeek-R1-0528" -> deepseek-r1, "openai/gpt-oss-120b"), longest first
    # so that a key another contains does not win.
    return next((key for key in sorted(MODELS, key=len, reverse=True)
                 if re.search(re.escape(key) + r"(?![\w.])", t)), None)


def quantization_of(dtype: str) -> str:
    d = dtype.lower()
    return "fp8" if "fp8" in d else "bf16" if "bf16" in d else "fp16"


def kv_cache_dtype_of(dtype: str) -> str:
    """'fp8 (weights+KV)', 'fp8 weights+KV' -> 'fp8' (an FP8 KV cache); anything else keeps the 16-bit cache."""
    return "fp8" if "+kv" in dtype.lower().replace(" ", "") else "auto"


def quantization_for(dtype: str, gpu: str) -> tuple[str, str]:
    """The row's weight format as a sched-sim quantization, with a note when it is run another way: an MXFP4
    checkpoint on a GPU without FP4 tensor cores runs weight-only (vLLM's Marlin MXFP4 kernel on Hopper,
    VLLM_MXFP4_USE_MARLIN=1 in InferenceX's H100 launcher; on CDNA 3, whose launcher names no backend, vLLM's MXFP4
    MoE oracle, vllm/model_executor/layers/fused_moe/oracle/mxfp4.py, takes AITER's CK or the triton_kernels
    experts, both reading the 4-bit weights and upcasting them in the kernel: W4A16, not BF16 weights), which is
    int4."""
    d = dtype.lower()
    if "fp4" in d:
        if GPUS[gpu].fp4_tflops is None:
            return "int4", "MXFP4 weights run weight-only (no FP4 tensor cores): int4"
        return "fp4", ""
    return ("fp8", "") if "fp8" in d else ("bf16", "")


def row_quantization(dtype: str, hw: str | None, notes: list[str]) -> str:
    """The row's weight format as a quantization: an FP4 checkpoint on a GPU without FP4 tensor cores runs
    weight-only (quantization_for, which says so in `notes`)."""
    if "fp4" in dtype.lower() and hw is not None:
        quantization, note = quantization_for(dtype, hw)
        notes.append(note)
        return quantization
    return quantization_of(dtype)
