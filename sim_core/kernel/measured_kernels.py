"""The cost-parameter vector's terms for kernels measured to run below the roofline cost_params assumes: gpu.GPU's
gemm_bw_efficiency_* (dense GEMMs and the lm head), moe_bw_efficiency and moe_layer_fixed_us (fused MoE) and
decode_attention_floor_us (docs/MODEL.md, "Hardware and weight formats", the paragraph on measured kernels). A GPU that
measures none of them gets bandwidths equal to the streaming bandwidth and no floors: its steps are exactly what
they were without them."""

from __future__ import annotations

import numpy as np

from ..catalog import Setup
from .cost_constants import (
    DECODE_ATTN_FLOOR_S,
    DENSE_GEMM_BW,
    EXPERT_BW,
    GEMM_LAUNCH_FLOOR_S,
    LM_HEAD_BW,
    MOE_FIXED_S,
    PEAK_BW,
)


def measured_kernel_params(p: np.ndarray, setup: Setup, bandwidth_efficiency: float,
                           attention_kernel: str = "paged") -> None:
    """Fill the measured kernels' slots. Each measured bandwidth keeps its ratio to the catalog's streaming
    efficiency, so a calibrated `bandwidth_efficiency` (a hardware profile's) moves it by the same factor;
    `attention_kernel` is the engine's decode attention kernel (engines.json)."""
    g, m = setup.gpu, setup.model
    stream = p[PEAK_BW] * bandwidth_efficiency
    p[DENSE_GEMM_BW] = stream * (g.gemm_bw_efficiency(setup.quantization, setup.fp8_block_scaled) / g.bw_efficiency)
    p[LM_HEAD_BW] = stream * (g.gemm_bw_efficiency("bf16") / g.bw_efficiency)  # the lm head stays 16-bit
    p[EXPERT_BW] = stream * (g.expert_bw_efficiency(setup.quantization) / g.bw_efficiency)
    # Per step: each MoE layer's fixed time beyond its two grouped GEMMs' launch floors (cost_model charges those).
    p[MOE_FIXED_S] = m.moe_layers * max(0.0, g.moe_fixed_us(setup.quantization) * 1e-6 - 2.0 * GEMM_LAUNCH_FLOOR_S)
    p[DECODE_ATTN_FLOOR_S] = g.decode_attention_floor(attention_kernel) * 1e-6 * m.attn_layers  # one per layer
