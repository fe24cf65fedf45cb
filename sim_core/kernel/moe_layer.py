"""One fused MoE layer's time from the step's own physics (its slots in the cost vector: kernel/moe_params.py), for the kernel rows of validation/moe_kernels.csv
(sim_core/studies/moe_kernels.py)."""

from __future__ import annotations

from .cost_constants import (
    ELEMENTWISE_BW,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    MOE_LAYER_ELEMENTWISE_BYTES,
    MOE_LAYERS,
)
from .cost_model import expert_gemms_s
from .jit import entry
from .layer_kernels import (
    MOE_EXTRA_ELEMENTWISE_PER_LAYER,
)


@entry
def moe_layer_s(p, tokens):
    """One fused MoE layer's time at `tokens` tokens, as the step charges it: its share of the step's grouped
    expert GEMMs (expert_gemms_s over one layer), then its routing kernels (top-k, the sort, the sum: layer_kernels'
    MOE_EXTRA_ELEMENTWISE_PER_LAYER) and the experts' SiLU-and-mul, each at its launch floor, their bytes at the
    step's elementwise bandwidth. The router's gate GEMM is not in it (kernel benchmarks hand it the logits)."""
    experts = expert_gemms_s(p, tokens)[0] / p[MOE_LAYERS]
    return experts + (MOE_EXTRA_ELEMENTWISE_PER_LAYER + 1) * ELEMENTWISE_LAUNCH_FLOOR_S \
        + tokens * p[MOE_LAYER_ELEMENTWISE_BYTES] / p[ELEMENTWISE_BW]
