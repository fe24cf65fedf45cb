"""Step time of one forward pass, as the sum of the kernels it runs, each timed by its own roofline.

A step runs, per layer: the QKV/O/MLP GEMMs over every batched token, the attention kernels (FlashAttention over
prefill chunks, paged attention over decoding sequences), elementwise kernels (norms, rotary embedding,
activation, KV-cache write) and, with tensor parallelism, two all-reduces; then the lm head and the sampler on
the rows that sample a token; and the engine's CPU work (scheduling, input preparation, output processing),
which vLLM does not overlap with the GPU for a single step. Each GPU kernel group costs

    launch floor x kernels  +  sqrt((bytes / bandwidth)^2 + (FLOPs / tensor rate)^2)

The quadratic blend of the two roofline terms is smooth through the ridge point: where both are equal a kernel
takes ~1.4x either one, which is what measured GEMMs show (Vidur's A100/H100 GEMM profiles take 1.3-1.6x the
larger roofline term at 128-384 rows; a plain max() underestimates them by that much). Far from the ridge it
tends to the larger term. Every constant is named in cost_constants.py with the public measurement it stands on.

The jitted kernels take aggregates of the batch, so the engine pays O(1) per step:
  prefill_tokens      P: prompt tokens computed this step (all chunks together)
  prefill_seqs        sequences with a prefill chunk this step
  prefill_attn_pairs  sum over chunks of query-key pairs, c*s + c(c+1)/2 for a chunk of c tokens after s cached
  prefill_ctx_read    sum over chunks of s, the earlier context each chunk re-reads from the KV cache
  decode_seqs         D: sequences decoding one token
  decode_ctx          sum of the decoding sequences' context lengths (each reads its whole KV once)
  samples             sequences that sample a token this step (decodes + prompts finishing), for the lm head
All per-GPU quantities are already divided by the TP degree in the parameter vector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..catalog import QUANTIZATIONS, Setup
from ..engines import ENGINES
from ..gpu import HOST_LINK_EFFICIENCY
from ..tensor_parallel import allreduce_terms
from .cost_constants import (
    ALLREDUCE_BUS_BW,
    ALLREDUCE_BYTES_PER_TOKEN,
    ALLREDUCE_LATENCY_S,
    ATTENTION_RATE,
    ATTN_FLOPS_PER_PAIR,
    ATTN_QO_BYTES_PER_TOKEN,
    COMPONENTS,
    CPU_OVERLAP,
    CUSTOM_ALLREDUCE_LATENCY_S,
    CUSTOM_ALLREDUCE_MAX_BYTES,
    CUSTOM_ALLREDUCE_WORLD_SIZES,
    CUSTOM_AR_MAX_BYTES,
    DECODE_ATTN_FLOOR_S,
    DECODE_ATTN_FLOPS_PER_PAIR,
    DECODE_ATTN_SLOWDOWN,
    DENSE_GEMM_BW,
    DENSE_WEIGHT_BYTES,
    ELEMENTWISE_BW,
    ELEMENTWISE_BYTES_PER_TOKEN,
    ELEMENTWISE_KERNELS,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    EP_COMBINE_NETWORK_BYTES,
    EP_COMBINE_NVLINK_BYTES,
    EP_DISPATCH_NETWORK_BYTES,
    EP_DISPATCH_NVLINK_BYTES,
    EP_LATENCY_S,
    EP_MOE_LAYERS,
    EP_NETWORK_BW,
    EP_NVLINK_BW,
    EXPERT_ACT_BYTES_PER_PAIR,
    EXPERT_BW,
    EXPERT_FLOPS_PER_PAIR,
    EXPERT_PAIRS_PER_TOKEN,
    EXPERT_RATE,
    EXPERT_WEIGHT_BYTES,
    EXPERTS,
    EXPERTS_PER_TOKEN,
    GEMM_LAUNCH_FLOOR_S,
    GEMMS,
    HOST_LINK_BW,
    KV_BYTES_PER_TOKEN,
    KV_POOL_BYTES_PER_TOKEN,
    LAYERS,
    LINEAR_ACT_BYTES_PER_TOKEN,
    LINEAR_FLOPS_PER_TOKEN,
    LINEAR_RATE,
    LM_HEAD_BW,
    LM_HEAD_BYTES,
    LM_HEAD_FLOPS_PER_SAMPLE,
    LM_HEAD_RATE,
    LOCAL_EXPERTS,
    LOGITS_BYTES_PER_SAMPLE,
    LOGITS_PASSES,
    MOE_FIXED_S,
    MOE_LAYERS,
    N_COST_PARAMS,
    PEAK_BW,
    PEAK_FLOPS,
    SAMPLER_KERNELS,
    STEP_OVERHEAD_PER_SEQ,
    STEP_OVERHEAD_S,
    STEP_TIME_SCALE,
    STREAM_BW,
    TP,
    WINDOW_ATTN_FLOPS_PER_PAIR,
    WINDOW_KV_BYTES_PER_TOKEN,
    WINDOW_TOKENS,
    Constants,
    default_constants,
    fp16_gemm_rate,
    linear_rate,
)
from .ep_params import expert_parallel_params
from .gemm_rates import expert_rate
from .jit import entry, inline, numeric_entry
from .layer_kernels import (
    ACTIVATION_BYTES,
    elementwise_kernel_bytes,
    elementwise_kernels,
    gemm_kernels,
    linear_activation_bytes_per_token,
    tile_rows,
)
from .measured_kernels import measured_kernel_params
from .moe_params import moe_params


def cost_params(setup: Setup, constants: Constants | None = None, cpu_overlap: bool = False,
                time_scale: float = 1.0, engine: str = "vllm") -> np.ndarray:
    """The cost-parameter vector of a deployment, with the catalog's constants or a hardware profile's;
    `cpu_overlap`: the engine schedules asynchronously (its CPU work hides under the GPU's); `time_scale`: every
    step takes that many times the model's time (sim_core.studies.model_error's ensemble members); `engine`: the
    serving engine whose kernels run (sim_core.engines)."""
    m, g, tp = setup.model, setup.gpu, setup.tp
    c = constants or default_constants(setup)
    bpp = QUANTIZATIONS[setup.quantization]
    p = np.zeros(N_COST_PARAMS)
    p[DENSE_WEIGHT_BYTES] = m.dense_matmul_params * bpp / tp
    p[EXPERT_WEIGHT_BYTES] = m.expert_matmul_params * bpp / tp
    p[EXPERTS] = m.experts
    p[EXPERTS_PER_TOKEN] = m.experts_per_token
    p[LINEAR_FLOPS_PER_TOKEN] = 2.0 * m.active_matmul_params / tp
    p[LINEAR_ACT_BYTES_PER_TOKEN] = linear_activation_bytes_per_token(setup)
    p[GEMMS] = gemm_kernels(m)
    p[LINEAR_RATE] = linear_rate(setup, c.compute_efficiency)
    p[LM_HEAD_BYTES] = m.lm_head_params * 2.0 / tp  # the lm head stays 16-bit in quantized checkpoints
    p[LM_HEAD_FLOPS_PER_SAMPLE] = 2.0 * m.lm_head_params / tp
    p[LOGITS_BYTES_PER_SAMPLE] = m.vocab / tp * 4.0 * LOGITS_PASSES
    p[LM_HEAD_RATE] = fp16_gemm_rate(setup, c.compute_efficiency)
    attention_params(p, setup)
    p[ATTENTION_RATE] = g.fp16_tflops * 1e12 * c.attention_efficiency
    kernels = elementwise_kernel_bytes(setup)
    elementwise_bytes = sum(b for b, _ in kernels)
    p[ELEMENTWISE_BYTES_PER_TOKEN] = m.layers * elementwise_bytes
    p[PEAK_BW] = g.mem_bw_gbs * 1e9
    p[STREAM_BW] = p[PEAK_BW] * c.bandwidth_efficiency
    # The bandwidth the mix reaches: bytes over the sum of each kernel's time at its own efficiency.
    p[ELEMENTWISE_BW] = p[PEAK_BW] * elementwise_bytes / sum(b / e for b, e in kernels)
    p[ELEMENTWISE_KERNELS] = elementwise_kernels(m)
    p[PEAK_FLOPS] = setup.peak_tflops * 1e12
    p[LAYERS] = m.layers
    p[TP] = tp
    p[ALLREDUCE_BYTES_PER_TOKEN] = m.hidden * ACTIVATION_BYTES
    # Within one NVLink domain the GPU's own figures; a group across domains adds the network (tensor_parallel.py).
    p[ALLREDUCE_BUS_BW], p[ALLREDUCE_LATENCY_S] = allreduce_terms(
        g, tp, setup.scale_out_link, g.tp_link_gbs * 1e9 * g.allreduce_busbw_efficiency,
        g.allreduce_latency_us(tp) * 1e-6)
    p[STEP_OVERHEAD_S] = c.step_overhead_ms * 1e-3
    p[STEP_OVERHEAD_PER_SEQ] = c.overhead_per_seq_us / 1e6
    p[HOST_LINK_BW] = g.host_link_gbs * 1e9 * HOST_LINK_EFFICIENCY
    custom_ar = g.tp_link_is_nvlink and tp in CUSTOM_ALLREDUCE_WORLD_SIZES
    p[CUSTOM_AR_MAX_BYTES] = CUSTOM_ALLREDUCE_MAX_BYTES if custom_ar else 0.0
    p[CPU_OVERLAP] = 1.0 if cpu_overlap else 0.0
    p[STEP_TIME_SCALE] = time_scale
    if setup.expert_parallel.enabled:
        expert_parallel_params(p, setup, ENGINES[engine])
    if m.moe_layers:
        moe_params(p, setup)
        p[EXPERT_RATE] = expert_rate(setup, ENGINES[engine].mxfp4_moe_activations, c.compute_efficiency)
    p[DECODE_ATTN_SLOWDOWN] = ENGINES[engine].decode_attention_slowdown
    measured_kernel_params(p, setup, c.bandwidth_efficiency, ENGINES[engine].decode_attention_kernel)
    return p


def attention_params(p: np.ndarray, setup: Setup) -> None:
    """The attention slots. Softmax attention runs in the attention layers only (not a hybrid model's
    linear-attention ones): the layers that attend to all context read its KV and pair every query with it; a
    windowed layer (sliding or chunked) reads at most its window (window_attention, docs/MODEL.md). What the KV
    pool holds per token (KV_POOL_BYTES_PER_TOKEN) is the engine's own accounting (catalog.Setup.kv_pool_plan)."""
    m, tp = setup.model, setup.tp
    p[ATTN_FLOPS_PER_PAIR] = 4.0 * m.full_attn_layers * m.heads * m.head_dim / tp
    p[DECODE_ATTN_FLOPS_PER_PAIR] = p[ATTN_FLOPS_PER_PAIR]
    if m.is_mla:
        # A decoding query attends in MLA's latent space, its key projection absorbed into the query and its value
        # projection into the output (DeepSeek-V2, arXiv 2405.04434; vLLM's mla_attention.py, "Data-Movement
        # Friendly Approach": "MQA with QK headdim = Lkv + R, V headdim = Lkv ... less compute-friendly since
        # Lkv > P", the form the MLA decode kernels run): per head and cached token, 2 (Lkv + R) FLOPs for QK and
        # 2 Lkv for AV, against 2 (P + R) and 2 V of the expanded form prefill runs.
        p[DECODE_ATTN_FLOPS_PER_PAIR] = (2.0 * m.full_attn_layers * m.heads
                                         * (2.0 * m.kv_lora_rank + m.qk_rope_head_dim) / tp)
    p[ATTN_QO_BYTES_PER_TOKEN] = 2.0 * m.attn_layers * (m.heads * m.head_dim) / tp * ACTIVATION_BYTES
    p[KV_BYTES_PER_TOKEN] = setup.kv_growth_bytes_per_token_per_gpu
    p[WINDOW_KV_BYTES_PER_TOKEN] = setup.kv_window_bytes_per_token_per_gpu
    p[WINDOW_TOKENS] = m.window if m.window_layers else 0.0
    p[WINDOW_ATTN_FLOPS_PER_PAIR] = 4.0 * m.window_layers * m.heads * m.head_dim / tp
    p[KV_POOL_BYTES_PER_TOKEN] = setup.kv_bytes_per_token_per_gpu


@inline
def roofline_s(moved, flops, bandwidth, rate):
    """A kernel's time from its bytes and FLOPs: the quadratic blend of the two roofline terms."""
    memory_s = moved / bandwidth
    compute_s = flops / rate
    return math.sqrt(memory_s * memory_s + compute_s * compute_s)


@inline
def allreduce_s(p, rows, bytes_per_row):
    """One NCCL ring all-reduce of rows x bytes_per_row bytes among the TP GPUs: latency plus 2(n-1)/n of the
    bytes over the bus bandwidth."""
    tp = p[TP]
    return p[ALLREDUCE_LATENCY_S] + 2.0 * (tp - 1.0) / tp * rows * bytes_per_row / p[ALLREDUCE_BUS_BW]


@inline
def engine_allreduce_s(p, rows, bytes_per_row):
    """One all-reduce as a serving engine runs it: its one-kernel NVLink all-reduce for messages up to its buffer
    (the same bytes over the same links, without NCCL's multi-step latency), NCCL's ring beyond."""
    nccl = allreduce_s(p, rows, bytes_per_row)
    if rows * bytes_per_row > p[CUSTOM_AR_MAX_BYTES]:
        return nccl
    tp = p[TP]
    custom = CUSTOM_ALLREDUCE_LATENCY_S + 2.0 * (tp - 1.0) / tp * rows * bytes_per_row / p[ALLREDUCE_BUS_BW]
    return min(custom, nccl)


@inline
def ep_alltoall_s(p, tokens):
    """One MoE layer's dispatch and combine of this GPU's tokens (sim_core/expert_parallel.py
    all_to_all_seconds): each the fixed cost plus the slower of its NVLink and network shares."""
    dispatch = p[EP_LATENCY_S] + max(tokens * p[EP_DISPATCH_NVLINK_BYTES] / p[EP_NVLINK_BW],
                                     tokens * p[EP_DISPATCH_NETWORK_BYTES] / p[EP_NETWORK_BW])
    combine = p[EP_LATENCY_S] + max(tokens * p[EP_COMBINE_NVLINK_BYTES] / p[EP_NVLINK_BW],
                                    tokens * p[EP_COMBINE_NETWORK_BYTES] / p[EP_NETWORK_BW])
    return dispatch + combine


@inline
def expert_gemms_s(p, tokens):
    """(seconds, bytes, FLOPs) of a step's grouped expert GEMMs (two per MoE layer) over `tokens` tokens: a kernel
    group of their own, after the dense GEMMs, timed by its own roofline. Of the routed experts only those some
    token picks are read (uniform routing), at the fused MoE kernels' bandwidth (EXPERT_BW; their weights count as
    the bytes that would take as long at the streaming one); every (token, expert) pair's activations; the FLOPs
    of each touched expert's rows padded to its tile (layer_kernels.tile_rows) at the GEMMs' rate."""
    stream_bw, layers = p[STREAM_BW], p[MOE_LAYERS]
    touched = 1.0 - (1.0 - p[EXPERTS_PER_TOKEN] / p[EXPERTS]) ** tokens  # fraction of the local experts
    weight_bytes = p[EXPERT_WEIGHT_BYTES] * touched
    pairs = tokens * p[EXPERT_PAIRS_PER_TOKEN]  # per layer
    experts = p[LOCAL_EXPERTS] * touched
    padded_pairs = experts * tile_rows(pairs / experts) if experts > 0.0 else 0.0
    act_bytes = layers * pairs * p[EXPERT_ACT_BYTES_PER_PAIR]
    flops = layers * padded_pairs * p[EXPERT_FLOPS_PER_PAIR]
    seconds = layers * 2.0 * GEMM_LAUNCH_FLOOR_S + roofline_s(weight_bytes * (stream_bw / p[EXPERT_BW]) + act_bytes,
                                                              flops, stream_bw, p[EXPERT_RATE])
    # Each fused MoE layer's fixed time beyond its two grouped GEMMs' launch floors (+ 0.0 unless measured).
    return seconds + p[MOE_FIXED_S], weight_bytes + act_bytes, flops


@inline
def linear_s(p, tokens):
    """(seconds, bytes, FLOPs) of a step's GEMMs over `tokens` tokens: the dense GEMMs (weights every token
    multiplies by, read once, and every token's activations and arithmetic) as one kernel group, then a MoE
    model's grouped expert GEMMs (expert_gemms_s), kernels that run one after the other."""
    flops = tokens * p[LINEAR_FLOPS_PER_TOKEN]
    act_bytes = tokens * p[LINEAR_ACT_BYTES_PER_TOKEN]
    gemms = p[GEMMS]
    expert_s, expert_bytes, expert_flops = 0.0, 0.0, 0.0
    if p[MOE_LAYERS] > 0.0:
        expert_s, expert_bytes, expert_flops = expert_gemms_s(p, tokens)
        pairs = tokens * p[MOE_LAYERS] * p[EXPERT_PAIRS_PER_TOKEN]
        flops -= pairs * p[EXPERT_FLOPS_PER_PAIR]
        act_bytes -= pairs * p[EXPERT_ACT_BYTES_PER_PAIR]
        gemms -= 2.0 * p[MOE_LAYERS]
    moved = p[DENSE_WEIGHT_BYTES] + act_bytes
    # Dense weights whose GEMMs stream them below the streaming bandwidth (DENSE_GEMM_BW) count as the bytes that
    # would take as long at it: +0.0 exactly where the bandwidths are the same.
    slow_bytes = p[DENSE_WEIGHT_BYTES] * (p[STREAM_BW] / p[DENSE_GEMM_BW] - 1.0)
    seconds = gemms * GEMM_LAUNCH_FLOOR_S + roofline_s(moved + slow_bytes, flops, p[STREAM_BW], p[LINEAR_RATE])
    return seconds + expert_s, moved + expert_bytes, flops + expert_flops


@inline
def window_attention(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx):
    """(prefill pairs, prefill context re-read, decode context read) of the windowed layers. A decoding sequence
    reads at most a window of KV (the engines free or detach the blocks that slide out: vLLM's hybrid manager,
    TensorRT-LLM since NVIDIA/TensorRT-LLM#6768; the mean context stands for each sequence's, an upper bound, min
    being concave, and exact once every context passes the window; a chunked layer reads less still, its context
    restarting at each chunk) and a prefill chunk re-reads at most a window of cached context. A prefill's
    query-key pairs stay those of full causal attention: an upper bound, as prefill kernels that visit every
    masked tile of a window were public until lately (sgl-project/sglang#34462's Triton kernel: 1.35-8.2x on a
    window of 1,024 once bounded), and no timing of TensorRT-LLM's windowed context kernel was found."""
    w = p[WINDOW_TOKENS]
    if w <= 0.0:
        return 0.0, 0.0, 0.0
    decode_read = decode_seqs * min(decode_ctx / decode_seqs, w) if decode_seqs > 0 else 0.0
    return prefill_attn_pairs, min(prefill_ctx_read, prefill_seqs * w), decode_read


@inline
def attention_s(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx):
    """(seconds, prefill bytes, prefill FLOPs, decode bytes, decode FLOPs) of a step's attention: prefill chunks
    (causal, over their own tokens and the context they re-read) and decoding sequences (each reads its KV) run as
    separate kernels; neither hides under the GEMMs. Windowed layers attend within their window."""
    stream_bw, layers, kv, wkv = p[STREAM_BW], p[LAYERS], p[KV_BYTES_PER_TOKEN], p[WINDOW_KV_BYTES_PER_TOKEN]
    w_pairs, w_read, w_decode = window_attention(p, prefill_tokens, prefill_seqs, prefill_attn_pairs,
                                                 prefill_ctx_read, decode_seqs, decode_ctx)
    attention = 0.0
    prefill_attn_bytes = 0.0
    # + 0.0 exactly for a model without windowed layers.
    prefill_attn_flops = p[ATTN_FLOPS_PER_PAIR] * prefill_attn_pairs + p[WINDOW_ATTN_FLOPS_PER_PAIR] * w_pairs
    if prefill_tokens > 0:
        prefill_attn_bytes = ((prefill_ctx_read + prefill_tokens) * kv + (w_read + prefill_tokens) * wkv
                              + prefill_tokens * p[ATTN_QO_BYTES_PER_TOKEN])
        attention += layers * GEMM_LAUNCH_FLOOR_S + roofline_s(prefill_attn_bytes, prefill_attn_flops, stream_bw,
                                                                p[ATTENTION_RATE])
    decode_attn_bytes = 0.0
    decode_attn_flops = p[DECODE_ATTN_FLOPS_PER_PAIR] * decode_ctx + p[WINDOW_ATTN_FLOPS_PER_PAIR] * w_decode
    if decode_seqs > 0:
        decode_attn_bytes = decode_ctx * kv + w_decode * wkv + decode_seqs * p[ATTN_QO_BYTES_PER_TOKEN]
        decode_attn = layers * GEMM_LAUNCH_FLOOR_S + roofline_s(decode_attn_bytes * p[DECODE_ATTN_SLOWDOWN],
                                                                 decode_attn_flops, stream_bw, p[ATTENTION_RATE])
        if p[DECODE_ATTN_FLOOR_S] > 0.0:  # each attention layer's kernel takes at least its measured one-sequence time
            decode_attn = max(decode_attn, p[DECODE_ATTN_FLOOR_S])
        attention += decode_attn
    return attention, prefill_attn_bytes, prefill_attn_flops, decode_attn_bytes, decode_attn_flops


@inline
def step_components(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx,
                    samples):
    """(linear, attention, elementwise, lm_head, communication, overhead) seconds of one step, then the bytes it
    moves and the FLOPs it does: the one definition of the step's physics."""
    tokens = prefill_tokens + decode_seqs
    if tokens == 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    stream_bw, layers = p[STREAM_BW], p[LAYERS]
    linear, linear_bytes, linear_flops = linear_s(p, tokens)
    attention, prefill_attn_bytes, prefill_attn_flops, decode_attn_bytes, decode_attn_flops = attention_s(
        p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx)
    # Norms, rotary embedding, activation, KV-cache write: bandwidth only.
    elementwise_bytes = tokens * p[ELEMENTWISE_BYTES_PER_TOKEN]
    elementwise = p[ELEMENTWISE_KERNELS] * ELEMENTWISE_LAUNCH_FLOOR_S + elementwise_bytes / p[ELEMENTWISE_BW]
    # lm head over the sampled rows (a GEMM in 16-bit), then the sampler over their logits.
    lm_head = 0.0
    lm_bytes = 0.0
    lm_flops = p[LM_HEAD_FLOPS_PER_SAMPLE] * samples
    if samples > 0:
        lm_bytes = p[LM_HEAD_BYTES] + samples * p[LOGITS_BYTES_PER_SAMPLE]
        lm_head = (1.0 + SAMPLER_KERNELS) * GEMM_LAUNCH_FLOOR_S
        lm_head += roofline_s(p[LM_HEAD_BYTES], lm_flops, p[LM_HEAD_BW], p[LM_HEAD_RATE])
        lm_head += samples * p[LOGITS_BYTES_PER_SAMPLE] / stream_bw
    # Tensor parallelism: two ring all-reduces of the hidden states per layer (after attention, after the MLP).
    communication = 0.0
    if p[TP] > 1.0:
        communication = 2.0 * layers * engine_allreduce_s(p, tokens, p[ALLREDUCE_BYTES_PER_TOKEN])
    if p[EP_MOE_LAYERS] > 0.0:  # expert parallelism's all-to-all (attention data-parallel)
        communication += p[EP_MOE_LAYERS] * ep_alltoall_s(p, tokens)
    overhead = p[STEP_OVERHEAD_S] + p[STEP_OVERHEAD_PER_SEQ] * (prefill_seqs + decode_seqs)
    if p[CPU_OVERLAP] > 0.0:
        # Asynchronous (overlap) scheduling: the CPU work of the next step runs while the GPU computes this one, so
        # a step takes the longer of the two; only CPU time beyond the GPU's shows (vLLM's async_scheduling,
        # TensorRT-LLM's overlap scheduler, SGLang's zero-overhead scheduler).
        overhead = max(0.0, overhead - (linear + attention + elementwise + lm_head + communication))
    moved = linear_bytes + prefill_attn_bytes + decode_attn_bytes + elementwise_bytes + lm_bytes
    flops = linear_flops + prefill_attn_flops + decode_attn_flops + lm_flops
    return linear, attention, elementwise, lm_head, communication, overhead, moved, flops


@numeric_entry
def step_cost(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx,
              samples):
    """Return (seconds, bytes moved, FLOPs) of one forward pass over the batch described by the aggregates."""
    linear, attention, elementwise, lm_head, communication, overhead, moved, flops = step_components(
        p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx, samples)
    # x 1.0 is exact: without a model-error ensemble, the times are the model's to the last bit.
    seconds = (linear + attention + elementwise + lm_head + communication + overhead) * p[STEP_TIME_SCALE]
    return seconds, moved, flops


@entry
def step_breakdown(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs, decode_ctx,
                   samples):
    """step_components for callers outside the hot path (the CLI and API breakdown)."""
    return step_components(p, prefill_tokens, prefill_seqs, prefill_attn_pairs, prefill_ctx_read, decode_seqs,
                           decode_ctx, samples)


@entry
def swap_seconds(p, tokens):
    """Time to copy `tokens` tokens of KV between GPU and host memory over the host link."""
    return tokens * p[KV_POOL_BYTES_PER_TOKEN] / p[HOST_LINK_BW]


def prefill_pairs(chunk: int, cached: int) -> int:
    """Query-key pairs of a causal chunk of `chunk` tokens after `cached` earlier tokens."""
    return chunk * cached + chunk * (chunk + 1) // 2


def step_aggregates(prefill_tokens: int, context_tokens: int, decode_seqs: int, decode_context: int) -> tuple:
    """step_cost's batch aggregates for one prefill chunk of `prefill_tokens` after `context_tokens` cached, plus
    `decode_seqs` sequences decoding with `decode_context` tokens of context each (the chunk samples a token, as
    a last chunk does)."""
    chunk = 1 if prefill_tokens > 0 else 0
    return (prefill_tokens, chunk, prefill_pairs(prefill_tokens, context_tokens) if chunk else 0,
            context_tokens if chunk else 0, decode_seqs, decode_seqs * decode_context, decode_seqs + chunk)


@dataclass(frozen=True)
class StepTime:
    """One step's time and where it goes: what `sched-sim step-time` and /api/step-time report."""

    seconds: float
    components_s: dict[str, float]  # COMPONENTS -> seconds; they sum to `seconds`
    bytes_moved: float
    flops: float
    mbu: float  # bytes moved / (seconds x peak DRAM bandwidth)
    mfu: float  # FLOPs / (seconds x peak tensor rate of the weight format)

    @property
    def bound(self) -> str:
        """Which resource the step leans on: the one it uses the larger fraction of."""
        return "compute" if self.mfu > self.mbu else "memory"


def step_time(setup: Setup, prefill_tokens: int, context_tokens: int, decode_seqs: int,
              decode_context: int, constants: Constants | None = None, cpu_overlap: bool = False,
              engine: str = "vllm") -> StepTime:
    """A step with one prefill chunk of `prefill_tokens` after `context_tokens` already cached, plus `decode_seqs`
    sequences decoding with `decode_context` tokens of context each (the chunk samples a token, as a last chunk
    does). `constants`: a hardware profile's, else the catalog's; `cpu_overlap`: asynchronous scheduling;
    `engine`: whose kernels run (sim_core.engines)."""
    p = cost_params(setup, constants, cpu_overlap, engine=engine)
    parts = step_breakdown(p, *step_aggregates(prefill_tokens, context_tokens, decode_seqs, decode_context))
    components = dict(zip(COMPONENTS, [float(x) for x in parts[:len(COMPONENTS)]], strict=True))
    seconds = sum(components.values())
    moved, flops = float(parts[-2]), float(parts[-1])
    mbu = moved / (seconds * float(p[PEAK_BW])) if seconds > 0 else 0.0
    mfu = flops / (seconds * float(p[PEAK_FLOPS])) if seconds > 0 else 0.0
    return StepTime(seconds, components, moved, flops, mbu, mfu)
