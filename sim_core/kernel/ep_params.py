"""The cost-parameter vector's terms for expert parallelism (sim_core/expert_parallel.py), written over what
cost_params computed for tensor parallelism; the step's all-to-all is cost_model.ep_alltoall_s."""

from __future__ import annotations

import numpy as np

from .. import expert_parallel as ep_model
from ..catalog import QUANTIZATIONS, Setup
from ..engines import DEFAULT_ENGINE, ENGINES, EngineProfile
from .cost_constants import (
    EP_COMBINE_NETWORK_BYTES,
    EP_COMBINE_NVLINK_BYTES,
    EP_DISPATCH_NETWORK_BYTES,
    EP_DISPATCH_NVLINK_BYTES,
    EP_LATENCY_S,
    EP_MOE_LAYERS,
    EP_NETWORK_BW,
    EP_NVLINK_BW,
    EXPERT_WEIGHT_BYTES,
    EXPERTS_PER_TOKEN,
    LINEAR_FLOPS_PER_TOKEN,
)
from .gemm_rates import w4a8_experts
from .layer_kernels import ACTIVATION_BYTES


def expert_parallel_params(p: np.ndarray, setup: Setup, engine: EngineProfile = ENGINES[DEFAULT_ENGINE]) -> None:
    """Overwrite the routed experts' terms for expert parallelism (sim_core/expert_parallel.py): each GPU holds
    ceil(E/ep) whole experts; with attention data-parallel the experts see the dp ranks' batches together, the
    busiest GPU computes `imbalance` times the mean routed tokens, and each MoE layer pays a dispatch and a combine,
    as the `engine` carries them (engines.json ep_exchange): an all-to-all, or an all-gather and a reduce-scatter
    (gathers) of the activations its experts take (mxfp4_moe_activations)."""
    m, plan, tp = setup.model, setup.expert_parallel, setup.tp
    dp, f = plan.dp(tp), plan.imbalance
    p[EXPERT_WEIGHT_BYTES] = ep_model.expert_bytes_per_gpu(m, plan.ep, QUANTIZATIONS[setup.quantization])
    # The kernel charges the experts a step touches as 1 - (1 - k/E)^T of them; over dp ranks' T tokens each that
    # is (1 - k/E)^(dp T) = (1 - k'/E)^T with k' = E (1 - (1 - k/E)^dp).
    p[EXPERTS_PER_TOKEN] = m.experts * (1.0 - (1.0 - m.experts_per_token / m.experts) ** dp)
    routed = m.active_matmul_params - m.dense_matmul_params
    p[LINEAR_FLOPS_PER_TOKEN] = 2.0 * (m.dense_matmul_params + f * routed) / tp
    if not plan.attention_dp:
        return  # attention TP: every rank holds every token; the MoE output is all-reduced as under TP
    links = ep_model.links_of(setup.gpu, setup.scale_out_link)
    nvlink, network = ep_model.traffic_split(plan.ep, links.domain)
    # Each GPU of a DP rank sends its 1/tp share of the rank's tokens, each to its k experts; or, gathered, to every
    # one of the ep GPUs whatever its routing (so no imbalance), and every GPU's partial outputs of all the tokens
    # are reduce-scattered back in 16 bits: the same bytes a combine of ep copies moves.
    copies = m.experts_per_token * f / tp
    dispatch, combine = ep_model.dispatch_bytes_per_copy(m.hidden), ep_model.combine_bytes_per_copy(m.hidden)
    if gathers(setup, engine.ep_exchange):
        copies = plan.ep / tp
        dispatch = ep_model.gathered_bytes_per_copy(m.hidden, m.experts_per_token,
                                                    *expert_input_format(setup, engine.mxfp4_moe_activations))
    p[EP_MOE_LAYERS] = m.moe_layers
    p[EP_DISPATCH_NVLINK_BYTES], p[EP_DISPATCH_NETWORK_BYTES] = copies * dispatch * nvlink, copies * dispatch * network
    p[EP_COMBINE_NVLINK_BYTES], p[EP_COMBINE_NETWORK_BYTES] = copies * combine * nvlink, copies * combine * network
    p[EP_NVLINK_BW], p[EP_NETWORK_BW], p[EP_LATENCY_S] = (links.nvlink_bytes_per_s, links.network_bytes_per_s,
                                                          links.latency_s)


def gathers(setup: Setup, exchange: str) -> bool:
    """Whether the attention data-parallel ranks all-gather their tokens rather than dispatch them: TensorRT-LLM's
    fused MoE (exchange allgather_off_mnnvl) runs its all-to-all only within a multi-node NVLink domain (GB200/GB300
    NVL72) and with more EP ranks than experts per token (engines.json cites the source)."""
    if exchange != "allgather_off_mnnvl":
        return False
    mnnvl = ep_model.domain_gpus(setup.gpu) > ep_model.NODE_GPUS
    return not (mnnvl and setup.expert_parallel.ep > setup.model.experts_per_token)


def expert_input_format(setup: Setup, mxfp4_activations: str = "fp4") -> tuple[float, int]:
    """(bytes per value, values per scale; 0: no scales) of the activations the experts' GEMMs take, as the cost
    model runs them: MXFP8 for W4A8 experts (gemm_rates.w4a8_experts), FP4 (NVFP4) on FP4 tensor cores, FP8
    (block-scaled where the checkpoint is) on FP8 ones, 16-bit otherwise (weight-only formats dequantise the
    weights, not the activations)."""
    if w4a8_experts(setup, mxfp4_activations):
        return 1.0, ep_model.MX_SCALE_BLOCK
    if setup.uses_fp4_tensor_cores:
        return 0.5, ep_model.NVFP4_SCALE_BLOCK
    if setup.uses_fp8_tensor_cores:
        return 1.0, ep_model.FP8_SCALE_BLOCK if setup.fp8_block_scaled else 0
    return float(ACTIVATION_BYTES), 0
