"""What one forward pass runs, layer by layer: how many GEMM and elementwise kernels (each paying a launch floor in
cost_model), the bytes its elementwise kernels move at the fraction of bandwidth their kind reaches, and the
activations its GEMMs read and write, per token and per GPU. cost_params reads these into the cost vector."""

from __future__ import annotations

import math

from ..catalog import Setup
from .jit import inline

# Fraction of peak DRAM bandwidth each elementwise kernel reaches, per kind of kernel: Vidur's A100 profile of
# Meta-Llama-3-8B (microsoft/vidur data/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv, median kernel
# times at num_tokens=4096, less cost_model's launch floor): RMSNorm 0.107 ms for 67 MB (32%; a reduction per row),
# rotary embedding 0.099 ms for 84 MB (43%), SiLU-and-mul 0.343 ms for 352 MB (51%), residual add 0.056 ms for
# 101 MB (93%: a plain stream). One efficiency for all of them (their 46% aggregate) put the add 2.2x and the norm
# 0.7x off on H100; per kind, the H100 rows of validation/kernels.csv are an independent check of these numbers.
NORM_BW_EFFICIENCY = 0.32
ROPE_BW_EFFICIENCY = 0.43
ACTIVATION_BW_EFFICIENCY = 0.51
STREAM_COPY_BW_EFFICIENCY = 0.93
# Elementwise kernels per layer: two fused residual-add + RMSNorm, rotary embedding, SiLU-and-mul, KV-cache write.
ELEMENTWISE_KERNELS_PER_LAYER = 5
# Kernels a layer launches beyond a dense transformer's (QKV and O, gate/up and down: 4 GEMMs), as vLLM's model code
# runs them; each pays its launch floor, their bytes and FLOPs being in the weights already. At small batches these
# floors are most of a step: DeepSeek-R1 on 8 B200s decodes one sequence in 7.2 ms (validation/inferencex.csv),
# ten times its weights' read time.
#  - MLA (vllm/model_executor/models/deepseek_v2.py, the absorbed MLA path): the fused q_a + kv_a down-projection
#    (fused_qkv_a_proj; q_proj and kv_a_proj_with_mqa without a query LoRA), q_b_proj, the absorbed key (W_UK) and
#    value (W_UV) batched matmuls, o_proj: 5 GEMMs where a dense layer has 2; its latent RMSNorms (q_a_layernorm,
#    kv_a_layernorm) add 2 elementwise kernels.
#  - A MoE layer (vllm/model_executor/layers/fused_moe): the router's gate GEMM, then the top-k kernel,
#    moe_align_block_size, two grouped expert GEMMs (gate/up, down) and moe_sum over each token's top-k outputs:
#    3 GEMMs where a dense MLP has 2, and 3 more elementwise kernels; shared experts run beside them as a dense
#    gated MLP, 2 GEMMs and their activation.
MLA_GEMMS_PER_LAYER = 5
MLA_EXTRA_ELEMENTWISE_PER_LAYER = 2
MOE_GEMMS_PER_LAYER = 3
MOE_EXTRA_ELEMENTWISE_PER_LAYER = 3
SHARED_EXPERT_GEMMS = 2
SHARED_EXPERT_EXTRA_ELEMENTWISE = 1
# Bytes per element of the activations GEMMs read and write, and of the all-reduced hidden states (16-bit).
ACTIVATION_BYTES = 2.0


def gemm_kernels(m) -> int:
    """GEMM kernels of one forward pass, lm head apart: attention's projections and each layer's MLP or MoE."""
    attention = MLA_GEMMS_PER_LAYER if m.is_mla else 2
    moe = MOE_GEMMS_PER_LAYER + (SHARED_EXPERT_GEMMS if m.shared_ffn else 0)
    return m.layers * attention + (m.layers - m.moe_layers) * 2 + m.moe_layers * moe


def elementwise_kernels(m) -> int:
    """Elementwise kernels of one forward pass: a dense layer's, plus MLA's latent norms and MoE routing's."""
    mla = MLA_EXTRA_ELEMENTWISE_PER_LAYER * m.layers if m.is_mla else 0
    moe = MOE_EXTRA_ELEMENTWISE_PER_LAYER + (SHARED_EXPERT_EXTRA_ELEMENTWISE if m.shared_ffn else 0)
    return ELEMENTWISE_KERNELS_PER_LAYER * m.layers + mla + m.moe_layers * moe


def expert_pairs_per_token(setup: Setup) -> float:
    """(token, routed expert) pairs one GPU computes per MoE layer, per token of its batch: top-k under tensor
    parallelism (every GPU holds a shard of every expert); under expert parallelism the GPU's share of the pairs,
    k x imbalance / tp (kernel/ep_params.py charges the FLOPs alike)."""
    m, plan = setup.model, setup.expert_parallel
    return m.experts_per_token * plan.imbalance / setup.tp if plan.enabled else float(m.experts_per_token)


def expert_ffn_per_gpu(setup: Setup) -> float:
    """A routed expert's intermediate width on one GPU: a 1/tp shard, or whole under expert parallelism."""
    m = setup.model
    width = m.expert_ffn or m.ffn
    return float(width) if setup.expert_parallel.enabled else width / setup.tp


def expert_activation_bytes_per_pair(setup: Setup) -> float:
    """What the two grouped GEMMs read and write for one (token, expert) pair: the token's hidden state in (each
    expert reads its own copy: the k-fold input a dense MLP of width k x intermediate does not read), gate and up
    out, their product in, the hidden state out (one per expert, summed after: finalize)."""
    return (2.0 * setup.model.hidden + 3.0 * expert_ffn_per_gpu(setup)) * ACTIVATION_BYTES


def linear_activation_bytes_per_token(setup: Setup) -> float:
    """Bytes of activations the GEMMs read and write for one token, all layers, per GPU (a MoE layer's routed
    experts per pair they compute, expert_activation_bytes_per_pair)."""
    m, tp = setup.model, setup.tp
    # Column-parallel QKV and gate/up read the full hidden state and write their shard; row-parallel O and down
    # read a shard and write the full hidden state (before the all-reduce).
    q_out = m.heads * m.head_dim
    qkv_out = (m.heads + 2 * m.kv_heads) * m.head_dim
    attention = (m.hidden + qkv_out / tp) + (q_out / tp + m.hidden)
    if m.experts == 1:
        width = m.mlp_width_per_token
        per_layer = attention + (m.hidden + 2 * width / tp) + (width / tp + m.hidden)
        return m.layers * per_layer * ACTIVATION_BYTES
    mlp = (2 * m.hidden + 3 * m.ffn / tp) * (m.layers - m.moe_layers)  # dense layers' MLPs
    shared = (2 * m.hidden + 3 * m.shared_ffn / tp) if m.shared_ffn else 0.0
    router = m.hidden + m.experts  # the gate GEMM reads the hidden state and writes one logit per expert
    moe = m.moe_layers * (shared + router + expert_pairs_per_token(setup) * expert_activation_bytes_per_pair(setup)
                          / ACTIVATION_BYTES)
    return (m.layers * attention + mlp + moe) * ACTIVATION_BYTES


def moe_routing_bytes_per_token(setup: Setup) -> float:
    """Bytes one MoE layer's routing kernels move per token (0 for a dense model): the permutation copies the
    token's hidden state to each of its experts' rows (read one, write k), finalize reads the k expert outputs back
    and writes their weighted sum (read k, write one)."""
    if setup.model.experts == 1:
        return 0.0
    return 2.0 * (1.0 + expert_pairs_per_token(setup)) * setup.model.hidden * ACTIVATION_BYTES


def moe_layer_elementwise_bytes_per_token(setup: Setup) -> float:
    """Bytes one MoE layer's elementwise kernels move per token: routing (moe_routing_bytes_per_token) and the
    experts' SiLU-and-mul (read gate and up, write one, per pair)."""
    return moe_routing_bytes_per_token(setup) + 3.0 * expert_pairs_per_token(setup) * expert_ffn_per_gpu(setup) \
        * ACTIVATION_BYTES


def elementwise_kernel_bytes(setup: Setup) -> tuple[tuple[float, float], ...]:
    """(bytes per token per layer per GPU, fraction of the DRAM bandwidth it reaches) of each elementwise kernel."""
    m, tp = setup.model, setup.tp
    # Per token per layer, each at its kind's fraction of the DRAM bandwidth: two residual adds and RMSNorms on
    # the full hidden state (vLLM fuses each pair into one kernel; we charge what the two unfused kernels take in
    # Vidur's profile, an upper bound: an RMSNorm reads and writes the state, an add reads two and writes one),
    # rotary embedding in place on q and k, SiLU-and-mul (read gate and up, write one), KV-cache write (read k
    # and v, write them into the cache).
    # Every attention layer writes its new token's KV, windowed or not (in the cache's format).
    kv_per_layer = (setup.kv_growth_bytes_per_token_per_gpu + setup.kv_window_bytes_per_token_per_gpu) / m.layers
    kv_in = 2.0 * max(1, m.kv_heads // tp) * m.head_dim * ACTIVATION_BYTES  # k and v as the QKV GEMM wrote them
    if m.is_mla:  # MLA writes its latent (kv_lora_rank + qk_rope_head_dim), whole on every rank
        kv_in = (m.kv_lora_rank + m.qk_rope_head_dim) * ACTIVATION_BYTES
    kernels = ((2 * 2.0 * m.hidden * ACTIVATION_BYTES, NORM_BW_EFFICIENCY),
               (2 * 3.0 * m.hidden * ACTIVATION_BYTES, STREAM_COPY_BW_EFFICIENCY),
               (2.0 * (m.heads + m.kv_heads) / tp * m.head_dim * ACTIVATION_BYTES, ROPE_BW_EFFICIENCY),
               (3.0 * m.mlp_width_per_token / tp * ACTIVATION_BYTES, ACTIVATION_BW_EFFICIENCY),
               (kv_in + kv_per_layer, STREAM_COPY_BW_EFFICIENCY))
    if m.experts == 1:
        return kernels
    # A MoE layer's permutation and finalize: plain copies and a sum, streaming (averaged over all layers).
    return kernels + ((moe_routing_bytes_per_token(setup) * m.moe_layers / m.layers, STREAM_COPY_BW_EFFICIENCY),)


# How a fused MoE layer's grouped GEMMs tile their rows. Each routed expert multiplies the rows of the tokens routed
# to it, in tiles of BLOCK_SIZE_M rows: moe_align_block_size (vLLM's and SGLang's Triton fused MoE) pads every
# expert's rows up to a multiple of the tile, as CUTLASS's and TensorRT-LLM's grouped GEMMs compute whole tiles; the
# padding rows cost tensor-core time as real ones do. cost_model.expert_gemms_s charges the FLOPs of the padded rows.
#
# The tile heights the kernels choose among: the smallest MMA-friendly one (Triton's tl.dot needs at least 16 rows;
# vLLM's default config takes BLOCK_SIZE_M 16 while tokens <= experts) up to 128 (CUTLASS's and TensorRT-LLM's large
# grouped-GEMM tiles; the largest BLOCK_SIZE_M in vLLM's tuned configs at thousands of tokens). A kernel takes no
# taller tile than an expert's rows need. Evidence for 128 at large batches: FlashInfer's TRT-LLM-gen NVFP4 MoE on a
# B300 (validation/moe_kernels.csv, DeepSeek's 32 experts of an EP8 rank) takes 294, 307 and 312 us at 1,024, 2,048
# and 4,096 tokens, 32, 64 and 128 rows per expert: flat, as 128-row tiles are.
MIN_TILE_ROWS = 16.0
MAX_TILE_ROWS = 128.0


@inline
def tile_rows(rows):
    """An expert's `rows` rows as its grouped GEMM computes them: up to the next power of two (at least
    MIN_TILE_ROWS) while one tile holds them, else up to a multiple of MAX_TILE_ROWS. `rows` is the mean over the
    experts a step touches (uniform routing)."""
    if rows <= 0.0:
        return 0.0
    if rows > MAX_TILE_ROWS:
        return math.ceil(rows / MAX_TILE_ROWS) * MAX_TILE_ROWS
    return max(MIN_TILE_ROWS, 2.0 ** math.ceil(math.log2(rows)))
