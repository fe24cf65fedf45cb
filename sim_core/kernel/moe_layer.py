"""A MoE model's routed experts in the cost vector (the slots cost_model.expert_gemms_s reads), and one fused MoE
layer's time from the step's own physics, for the kernel rows of validation/moe_kernels.csv
(sim_core/studies/moe_kernels.py)."""

from __future__ import annotations

import math

import numpy as np

from ..catalog import Setup
from .cost_model import (
    ELEMENTWISE_BW,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    EXPERT_ACT_BYTES_PER_PAIR,
    EXPERT_FLOPS_PER_PAIR,
    EXPERT_PAIRS_PER_TOKEN,
    LOCAL_EXPERTS,
    MOE_LAYER_ELEMENTWISE_BYTES,
    MOE_LAYERS,
    expert_gemms_s,
)
from .jit import entry
from .layer_kernels import (
    MOE_EXTRA_ELEMENTWISE_PER_LAYER,
    expert_activation_bytes_per_pair,
    expert_ffn_per_gpu,
    expert_pairs_per_token,
    moe_layer_elementwise_bytes_per_token,
)


def moe_params(p: np.ndarray, setup: Setup) -> None:
    """Fill the routed experts' slots (after kernel/ep_params.py, whose sharding they follow): per MoE layer, the
    experts this GPU holds (all of them, or ceil(E/ep) under expert parallelism), the (token, expert) pairs it
    computes per token, and each pair's FLOPs and activation bytes; and one layer's elementwise bytes per token."""
    m = setup.model
    p[MOE_LAYERS], p[LOCAL_EXPERTS] = m.moe_layers, math.ceil(m.experts / setup.expert_parallel.ep)
    p[EXPERT_PAIRS_PER_TOKEN] = expert_pairs_per_token(setup)
    p[EXPERT_FLOPS_PER_PAIR] = 2.0 * 3.0 * m.hidden * expert_ffn_per_gpu(setup)
    p[EXPERT_ACT_BYTES_PER_PAIR] = expert_activation_bytes_per_pair(setup)
    p[MOE_LAYER_ELEMENTWISE_BYTES] = moe_layer_elementwise_bytes_per_token(setup)


@entry
def moe_layer_s(p, tokens):
    """One fused MoE layer's time at `tokens` tokens, as the step charges it: its share of the step's grouped
    expert GEMMs (expert_gemms_s over one layer), then its routing kernels (top-k, the sort, the sum: layer_kernels'
    MOE_EXTRA_ELEMENTWISE_PER_LAYER) and the experts' SiLU-and-mul, each at its launch floor, their bytes at the
    step's elementwise bandwidth. The router's gate GEMM is not in it (kernel benchmarks hand it the logits)."""
    experts = expert_gemms_s(p, tokens)[0] / p[MOE_LAYERS]
    return experts + (MOE_EXTRA_ELEMENTWISE_PER_LAYER + 1) * ELEMENTWISE_LAUNCH_FLOOR_S \
        + tokens * p[MOE_LAYER_ELEMENTWISE_BYTES] / p[ELEMENTWISE_BW]
