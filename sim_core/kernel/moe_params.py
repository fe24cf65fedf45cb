"""A MoE model's routed experts in the cost vector: the slots cost_model.expert_gemms_s reads, written as
kernel/ep_params.py writes expert parallelism's (cost_model.cost_params calls both)."""

from __future__ import annotations

import math

import numpy as np

from ..catalog import Setup
from .cost_constants import (
    EXPERT_ACT_BYTES_PER_PAIR,
    EXPERT_FLOPS_PER_PAIR,
    EXPERT_PAIRS_PER_TOKEN,
    LOCAL_EXPERTS,
    MOE_LAYER_ELEMENTWISE_BYTES,
    MOE_LAYERS,
)
from .layer_kernels import (
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
