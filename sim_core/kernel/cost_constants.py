"""The cost model's measured constants, the layout of its parameter vector, and the constants a calibration fits,
apart from the jitted kernels that time a step (cost_model.py): what the catalogue, the engines' profiles, hardware
profiles and LoRA read, without compiling or loading the engine."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import Setup
from .gemm_rates import (  # noqa: F401 (re-exported: the GEMM rates' constants and functions)
    FP4_GEMM_GAIN,
    FP8_GEMM_GAIN,
    WEIGHT_ONLY_DEQUANT_OVERHEAD,
    fp16_gemm_rate,
    linear_rate,
)

# ---------------------------------------------------------------------------------------------------------
# Measured constants (the per-GPU ones, bandwidth and GEMM efficiency, live in gpu.GPU).
# ---------------------------------------------------------------------------------------------------------
# Time a kernel takes beyond its roofline when it is tiny (launch inside a CUDA graph, ramp-up, tail wave).
# Vidur's profiles (microsoft/vidur data/profiling/compute, A100 Meta-Llama-3-8B at TP8 and H100 Llama-2-7b,
# M=1): the smallest GEMMs (4-30 MB of weights) take 3-5 us more than their bytes at streaming bandwidth, and
# elementwise kernels on one token take 2-5 us (RMSNorm 4-5, rotary/activation/add 2).
GEMM_LAUNCH_FLOOR_S = 4e-6
ELEMENTWISE_LAUNCH_FLOOR_S = 3e-6
# Fraction of dense tensor peak FlashAttention's forward pass reaches: FlashAttention-2 (Dao, 2023) reports
# 50-73% of the theoretical maximum on A100, FlashAttention-3 (Shah et al., 2024) up to 75% on H100 (740 of
# 989 TFLOPS in FP16), both at long sequences; serving chunks of a few hundred tokens sit at the low end.
FLASH_ATTENTION_EFFICIENCY = 0.5
# Paged attention reads KV blocks through a block table: the vLLM paper (Kwon et al., SOSP 2023, sec. 7.1)
# measures its decode attention kernel 20-26% slower than FasterTransformer's contiguous one. vLLM's value; each
# engine's is in sim_core/data/engines.json (cost_params' DECODE_ATTN_SLOWDOWN).
PAGED_ATTENTION_SLOWDOWN = 1.2
# Serving engines do not all-reduce small activations with NCCL: vLLM's custom all-reduce (vLLM PR #2192) and
# TensorRT-LLM's one-shot/two-shot AllReduce plugin read the peers' buffers over NVLink P2P in one kernel. vLLM
# takes messages up to its default buffer of 8 MiB (CustomAllreduce max_size=8192*1024) among 2, 4, 6 or 8
# NVLink-connected GPUs (docs.vllm.ai, vllm.distributed.device_communicators.custom_all_reduce). Its latency:
# sgl-project/sglang PR #2904 measured vLLM's kernel on H100 (TP 2/4/8, host-timed without CUDA graphs) at
# 8.5-10 us for messages up to 32K elements (TensorRT-LLM's one-shot kernel at 3.7-5.9 us); we take vLLM's, 9 us.
# Beyond that the bytes cross the same links as NCCL's ring, at the same bus bandwidth. NCCL's own small-message
# latency (Vidur: 35-65 us among 4-8 GPUs) is what the kernel rows of the validation set measure, not what a
# serving step pays.
CUSTOM_ALLREDUCE_LATENCY_S = 9e-6
CUSTOM_ALLREDUCE_MAX_BYTES = 8.0 * 1024 * 1024
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)  # vLLM's CustomAllreduce._SUPPORTED_WORLD_SIZES
# The sampler reads the fp32 logits of each sampled row a few times (softmax, top-k/top-p, the draw); with the lm
# head's write, ~4 passes over vocab x 4 bytes. Estimate, from the kernels vLLM's sampler runs.
LOGITS_PASSES = 4.0
SAMPLER_KERNELS = 8
# CPU work per step that the GPU waits for: vLLM's V1 blog (Jan 2025) puts GPU execution of an 8B model on H100
# at ~5 ms per step with the CPU overheads as the bottleneck V1 attacks; the base (catalog
# DEFAULT_STEP_OVERHEAD_MS, 2 ms) grows with the batch, as scheduling, input preparation and output processing
# loop over sequences (vLLM RFC #6854 measured 5-13 ms GPU bubbles per decode step at serving batch sizes in V0).
# Estimate: 10 us per scheduled sequence, 4.5 ms at 256 sequences.
STEP_OVERHEAD_PER_SEQ_S = 10e-6

# ---------------------------------------------------------------------------------------------------------
# Layout of the cost-parameter vector (a plain float64 array keeps the jitted signature small and stable).
# ---------------------------------------------------------------------------------------------------------
(DENSE_WEIGHT_BYTES,  # matmul weights every token touches, per GPU (no lm head)
 EXPERT_WEIGHT_BYTES,  # all routed-expert weights, per GPU (0 for dense models)
 EXPERTS, EXPERTS_PER_TOKEN,
 LINEAR_FLOPS_PER_TOKEN,  # 2 x active matmul params (no lm head), per GPU
 LINEAR_ACT_BYTES_PER_TOKEN,  # GEMM input + output activations of one token, all layers, per GPU
 GEMMS,  # GEMM kernels per step (all layers)
 LINEAR_RATE,  # FLOP/s the GEMMs reach in this weight format
 LM_HEAD_BYTES, LM_HEAD_FLOPS_PER_SAMPLE, LOGITS_BYTES_PER_SAMPLE,
 LM_HEAD_RATE,  # FLOP/s of the 16-bit lm head GEMM
 ATTN_FLOPS_PER_PAIR,  # 4 x layers x heads x head_dim, per GPU (QK^T and AV)
 ATTN_QO_BYTES_PER_TOKEN,  # query read + output write, all layers, per GPU
 KV_BYTES_PER_TOKEN, ATTENTION_RATE,
 ELEMENTWISE_BYTES_PER_TOKEN, ELEMENTWISE_BW, ELEMENTWISE_KERNELS,
 STREAM_BW,  # bytes/s a streaming kernel reaches
 PEAK_BW, PEAK_FLOPS, LAYERS, TP,
 ALLREDUCE_BYTES_PER_TOKEN, ALLREDUCE_LATENCY_S, ALLREDUCE_BUS_BW,
 STEP_OVERHEAD_S, STEP_OVERHEAD_PER_SEQ,
 HOST_LINK_BW,  # effective, for KV swap
 CUSTOM_AR_MAX_BYTES,  # largest all-reduce the engine's one-kernel NVLink all-reduce takes (0: none, NCCL only)
 CPU_OVERLAP,  # 1: the engine prepares the next step on the CPU while the GPU runs this one (0: one after the other)
 STEP_TIME_SCALE,  # every step's time is multiplied by it: 1, except in a model-error ensemble's members
 # Expert parallelism with attention data-parallel (sim_core/expert_parallel.py; all 0 without):
 EP_MOE_LAYERS,  # MoE layers, each paying a dispatch and a combine per step
 EP_DISPATCH_NVLINK_BYTES, EP_DISPATCH_NETWORK_BYTES,  # per token of the step, the busiest GPU's, by link
 EP_COMBINE_NVLINK_BYTES, EP_COMBINE_NETWORK_BYTES,
 EP_NVLINK_BW, EP_NETWORK_BW, EP_LATENCY_S,
 DECODE_ATTN_SLOWDOWN,  # the engine's decode attention kernel: time over its bytes at streaming bandwidth
 DENSE_GEMM_BW,  # bytes/s the GEMMs stream dense weights at, in the weight format (STREAM_BW unless measured lower)
 LM_HEAD_BW,  # ... and the 16-bit lm head's
 EXPERT_BW,  # bytes/s the fused MoE kernels stream routed experts at (STREAM_BW unless measured lower)
 MOE_FIXED_S,  # a step's fused MoE layers' fixed time beyond their grouped GEMMs' launch floors (0: none)
 DECODE_ATTN_FLOOR_S,  # least time of a step's decode attention kernels, one per attention layer (0: launch floors)
 # Windowed attention layers (sliding or chunked; all 0 without): the KV one token of their window holds per GPU,
 # the window, and their FLOPs per query-key pair (ATTN_FLOPS_PER_PAIR and KV_BYTES_PER_TOKEN count the others).
 WINDOW_KV_BYTES_PER_TOKEN, WINDOW_TOKENS, WINDOW_ATTN_FLOPS_PER_PAIR,
 KV_POOL_BYTES_PER_TOKEN,  # what the engine's KV pool holds per token of context (what a swap copies)
 # A MoE model's routed experts as grouped GEMMs of their own (expert_gemms_s; all 0 for a dense model), per MoE layer:
 MOE_LAYERS, LOCAL_EXPERTS,  # routed-expert layers; the routed experts of one layer this GPU holds
 EXPERT_PAIRS_PER_TOKEN,  # (token, expert) pairs this GPU computes, per token of its batch (layer_kernels)
 EXPERT_FLOPS_PER_PAIR, EXPERT_ACT_BYTES_PER_PAIR,  # the two grouped GEMMs' FLOPs and activations of one pair
 MOE_LAYER_ELEMENTWISE_BYTES,  # per token, one MoE layer's routing and activation kernels (also in ELEMENTWISE_*)
 EXPERT_RATE,  # FLOP/s the routed experts' grouped GEMMs reach (LINEAR_RATE unless their activations differ)
 DECODE_ATTN_FLOPS_PER_PAIR,  # ATTN_FLOPS_PER_PAIR of a decoding query (MLA's absorbed form: more; else the same)
 N_COST_PARAMS) = range(60)

# Components of a step, in the order step_components returns them (the CLI's and API's breakdown keys).
COMPONENTS = ("linear", "attention", "elementwise", "lm_head", "communication", "overhead")


@dataclass(frozen=True)
class Constants:
    """The measured constants a user's own hardware may differ on, each a factor on the physics: what
    `sched-sim calibrate` fits and a hardware profile carries. `default_constants` gives the catalog's."""

    compute_efficiency: float  # fraction of the 16-bit dense tensor peak large GEMMs reach
    bandwidth_efficiency: float  # fraction of peak DRAM bandwidth a streaming kernel reaches
    attention_efficiency: float  # fraction of the 16-bit dense tensor peak FlashAttention's forward reaches
    step_overhead_ms: float  # CPU time per step the GPU waits for
    overhead_per_seq_us: float  # ... and per scheduled sequence


# Physical ranges of each constant: efficiencies are fractions of a peak, overheads are times. The upper bounds
# on overheads only keep a fit finite (a second per step is no serving engine).
CONSTANT_BOUNDS = {
    "compute_efficiency": (0.01, 1.0),
    "bandwidth_efficiency": (0.01, 1.0),
    "attention_efficiency": (0.01, 1.0),
    "step_overhead_ms": (0.0, 1000.0),
    "overhead_per_seq_us": (0.0, 10_000.0),
}


def default_constants(setup: Setup) -> Constants:
    """The catalog's constants for the setup's GPU (what every prediction uses without a hardware profile)."""
    g = setup.gpu
    return Constants(g.compute_efficiency, g.bw_efficiency, FLASH_ATTENTION_EFFICIENCY, g.step_overhead_ms,
                     STEP_OVERHEAD_PER_SEQ_S * 1e6)
