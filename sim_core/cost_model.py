"""Step time of one forward pass from its batch shape: a roofline of bytes moved over DRAM bandwidth against
FLOPs over tensor throughput, plus a fixed per-step overhead and tensor-parallel all-reduces.

The jitted kernel takes aggregates of the batch, so the engine pays O(1) per step for it:
  prefill_tokens      P: prompt tokens computed this step (all chunks together)
  prefill_attn_pairs  sum over chunks of query-key pairs, c*s + c(c+1)/2 for a chunk of c tokens after s cached
  prefill_ctx_read    sum over chunks of s, the earlier context each chunk re-reads from the KV cache
  decode_seqs         D: sequences decoding one token
  decode_ctx          sum of the decoding sequences' context lengths (each reads its whole KV once)
  samples             sequences that sample a token this step (decodes + prompts finishing), for the lm head
All per-GPU quantities are already divided by the TP degree in the parameter vector.
"""

from __future__ import annotations

import numpy as np

from .catalog import HOST_LINK_EFFICIENCY, QUANTIZATIONS, Setup
from .jit import entry

# Layout of the cost-parameter vector (a plain float64 array keeps the jitted signature small and stable).
DENSE_WEIGHT_BYTES = 0  # matmul weights every token touches, per GPU
EXPERT_WEIGHT_BYTES = 1  # all routed-expert weights, per GPU (0 for dense models)
LM_HEAD_BYTES = 2
EXPERTS = 3
EXPERTS_PER_TOKEN = 4
LINEAR_FLOPS_PER_TOKEN = 5  # 2 x active matmul params (no lm head), per GPU
LM_HEAD_FLOPS_PER_SAMPLE = 6
ATTN_FLOPS_PER_PAIR = 7  # 4 x layers x heads x head_dim, per GPU (QK^T and AV)
KV_BYTES_PER_TOKEN = 8
EFFECTIVE_BW = 9  # bytes/s actually reached
PEAK_BW = 10
EFFECTIVE_FLOPS = 11
PEAK_FLOPS = 12
STEP_OVERHEAD_S = 13
TP = 14
ALLREDUCE_BYTES_PER_TOKEN = 15  # hidden x 2 bytes (activations are all-reduced in 16-bit)
ALLREDUCE_LATENCY_S = 16
TP_LINK_BW = 17
LAYERS = 18
HOST_LINK_BW = 19  # effective, for KV swap
N_COST_PARAMS = 20


def cost_params(setup: Setup) -> np.ndarray:
    m, g, tp = setup.model, setup.gpu, setup.tp
    bpp = QUANTIZATIONS[setup.quantization]
    p = np.zeros(N_COST_PARAMS)
    p[DENSE_WEIGHT_BYTES] = m.dense_matmul_params * bpp / tp
    p[EXPERT_WEIGHT_BYTES] = m.expert_matmul_params * bpp / tp
    p[LM_HEAD_BYTES] = m.lm_head_params * 2.0 / tp
    p[EXPERTS] = m.experts
    p[EXPERTS_PER_TOKEN] = m.experts_per_token
    p[LINEAR_FLOPS_PER_TOKEN] = 2.0 * m.active_matmul_params / tp
    p[LM_HEAD_FLOPS_PER_SAMPLE] = 2.0 * m.lm_head_params / tp
    p[ATTN_FLOPS_PER_PAIR] = 4.0 * m.layers * m.heads * m.head_dim / tp
    p[KV_BYTES_PER_TOKEN] = setup.kv_bytes_per_token_per_gpu
    p[PEAK_BW] = g.mem_bw_gbs * 1e9
    p[EFFECTIVE_BW] = p[PEAK_BW] * g.bw_efficiency
    p[PEAK_FLOPS] = setup.peak_tflops * 1e12
    p[EFFECTIVE_FLOPS] = p[PEAK_FLOPS] * g.compute_efficiency
    p[STEP_OVERHEAD_S] = g.step_overhead_ms * 1e-3
    p[TP] = tp
    p[ALLREDUCE_BYTES_PER_TOKEN] = m.hidden * 2.0
    p[ALLREDUCE_LATENCY_S] = g.allreduce_latency_us * 1e-6
    p[TP_LINK_BW] = g.tp_link_gbs * 1e9
    p[LAYERS] = m.layers
    p[HOST_LINK_BW] = g.host_link_gbs * 1e9 * HOST_LINK_EFFICIENCY
    return p


@entry
def step_cost(p, prefill_tokens, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx, samples):
    """Return (seconds, bytes moved, FLOPs) of one forward pass over the batch described by the aggregates."""
    tokens = prefill_tokens + decode_seqs
    if tokens == 0:
        return 0.0, 0.0, 0.0
    # Weights: dense part read once per step; of the routed experts, only those some token picks are read.
    weight_bytes = p[DENSE_WEIGHT_BYTES] + p[LM_HEAD_BYTES]
    if p[EXPERTS] > 1.0:
        untouched = (1.0 - p[EXPERTS_PER_TOKEN] / p[EXPERTS]) ** tokens
        weight_bytes += p[EXPERT_WEIGHT_BYTES] * (1.0 - untouched)
    kv_read = (decode_ctx + prefill_ctx_read) * p[KV_BYTES_PER_TOKEN]
    kv_write = tokens * p[KV_BYTES_PER_TOKEN]
    moved = weight_bytes + kv_read + kv_write
    flops = p[LINEAR_FLOPS_PER_TOKEN] * tokens + p[LM_HEAD_FLOPS_PER_SAMPLE] * samples
    flops += p[ATTN_FLOPS_PER_PAIR] * (prefill_attn_pairs + decode_ctx)
    seconds = max(moved / p[EFFECTIVE_BW], flops / p[EFFECTIVE_FLOPS]) + p[STEP_OVERHEAD_S]
    tp = p[TP]
    if tp > 1.0:
        # Two all-reduces per layer (after attention and after the MLP), ring algorithm.
        ring_bytes = 2.0 * (tp - 1.0) / tp * tokens * p[ALLREDUCE_BYTES_PER_TOKEN]
        seconds += 2.0 * p[LAYERS] * (p[ALLREDUCE_LATENCY_S] + ring_bytes / p[TP_LINK_BW])
    return seconds, moved, flops


@entry
def swap_seconds(p, tokens):
    """Time to copy `tokens` tokens of KV between GPU and host memory over the host link."""
    return tokens * p[KV_BYTES_PER_TOKEN] / p[HOST_LINK_BW]


def prefill_pairs(chunk: int, cached: int) -> int:
    """Query-key pairs of a causal chunk of `chunk` tokens after `cached` earlier tokens."""
    return chunk * cached + chunk * (chunk + 1) // 2
