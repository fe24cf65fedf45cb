"""KV block sizes of hybrid models (attention + Gated DeltaNet / Mamba layers) as vLLM picks them (issue #39 item 6),
and the scenario field that turns the rule on (a base of sim_core.scenario.Scenario; off by default, so runs without
it page KV in `block_size` blocks as before).

vLLM keeps a linear-attention layer's recurrent state in the same block pool as the attention layers' KV, one
state a page, so an attention page (block_size tokens of one layer's KV) must hold at least one layer's state.
vllm/model_executor/models/config.py, `HybridAttentionMambaModelConfig.verify_and_update_config` (read at commit
1936cf3841edb9781b06c50fc4daf4bac9d3b23e, and in its later form with `mamba_cache_mode`), sets

    attn_page_size_1_token = 2 x num_kv_heads (per TP rank, at least 1) x head_size x KV dtype bytes  (per layer)
    mamba_page_size        = sum over the state's tensors of their elements per TP rank x dtype bytes (per layer)
    block_size             = A x ceil(mamba_page_size / (A x attn_page_size_1_token))

with A = 16 (FlashAttention's block multiple; 64 for MLA; 32 for head size 256 with FlashInfer on Blackwell, which
gives the same sizes as 16 for the models here), raising a user's smaller block_size to it. That is the minimal
size vLLM picks without prefix caching and, for models whose linear layers cannot cache every block's state
(`supports_mamba_prefix_caching` false: Qwen3-Next and Qwen3.5, whose "all" cache mode falls back to "align"), with
it too; in "align" mode the state is kept only at block boundaries (mamba_block_size = block_size), so a prefix
hits only in whole blocks of that size. (Mamba-2 models in "all" mode round up to a multiple of the SSD kernel's
chunk_size instead; no such model is in the catalogue.) A Gated DeltaNet layer's state
(`MambaStateShapeCalculator.gated_delta_net_state_shape`, vllm/model_executor/layers/mamba/mamba_utils.py): a
convolution state of (2 key_heads x key_dim + value_heads x value_dim) / tp x (conv_kernel - 1) elements in the
model's dtype and a recurrent state of value_heads / tp x value_dim x key_dim in mamba_ssm_cache_dtype (the model's
dtype, or the config's `mamba_ssm_dtype`: Qwen3.5's float32, `Qwen3_5ForConditionalGenerationConfig`).

Qwen3-Next-80B-A3B (2 KV heads of 256, BF16; 16 key and 32 value heads of 128, conv 4): 2,048 bytes a token and
1,097,728 bytes of state a layer, so 544-token blocks on one GPU, 272 at tp 4 (one KV head a rank, a quarter of the
state); Qwen3.5's float32 state doubles it (1,056 at tp 1). vLLM's issue #40696 reports 528 for Qwen3.5-4B
(4 KV heads of 256, the same linear layers, float32 state: 16 x ceil(2,146,304 / 65,536) = 528)."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from .architecture import Model
from .catalog import KV_CACHE_DTYPES

# vLLM's attention block multiple for a hybrid model's pages (the function above): FlashAttention's 16, MLA's 64.
BLOCK_ALIGNMENT = 16
MLA_BLOCK_ALIGNMENT = 64


def attention_page_bytes_per_token(model: Model, tp: int, kv_cache_dtype: str) -> float:
    """One attention layer's KV for one token on one GPU (vLLM's attn_page_size_1_token)."""
    kv_heads = max(1, model.kv_heads // tp)  # vLLM replicates KV heads when TP exceeds them
    return model.kv_bytes_per_token_per_layer(kv_heads, KV_CACHE_DTYPES[kv_cache_dtype])


def vllm_block_size(model: Model, tp: int, kv_cache_dtype: str = "auto") -> int | None:
    """The KV block size (tokens) vLLM picks for a hybrid model on `tp` GPUs (module docstring); None for a model
    without linear-attention layers, whose block size vLLM leaves as configured."""
    if not model.linear_layers:
        return None
    align = MLA_BLOCK_ALIGNMENT if model.is_mla else BLOCK_ALIGNMENT
    state = model.linear_state_bytes_per_gpu(tp)
    return align * math.ceil(state / (align * attention_page_bytes_per_token(model, tp, kv_cache_dtype)))


def kv_block_size(block_size: int, hybrid_blocks: bool, model: Model, tp: int, kv_cache_dtype: str) -> int:
    """The engine's KV block size: `block_size`, raised to vLLM's hybrid rule with `hybrid_blocks` (vLLM overrides a
    block size it finds too small and keeps a larger one)."""
    rule = vllm_block_size(model, tp, kv_cache_dtype) if hybrid_blocks else None
    return block_size if rule is None else max(block_size, rule)


class HybridBlockFields(BaseModel):
    hybrid_blocks: bool = Field(
        False,
        description="page a hybrid model's KV (attention + linear-attention layers: Qwen3-Next, Qwen3.5) in blocks "
        "as large as vLLM makes them, one linear layer's state a block (544 tokens for Qwen3-Next on one GPU): "
        "the prefix cache then hits in whole blocks of that size only; other models keep block_size",
    )
