"""Hybrid models' KV block sizes (sim_core/hybrid_blocks.py, issue #39 item 6): vLLM's rule
(vllm/model_executor/models/config.py, HybridAttentionMambaModelConfig.verify_and_update_config) makes one attention
block hold one linear-attention layer's state, so Qwen3-Next pages KV in 544-token blocks on one or two GPUs; the
prefix cache then hits only in whole blocks of that size, and on a multi-turn workload its hit rate collapses
against a dense model's 16-token blocks."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from sim_core import Scenario, SetupError, resolve, run
from sim_core.catalog import MODELS
from sim_core.hf_config import ModelConfigError, model_from_text
from sim_core.hybrid_blocks import attention_page_bytes_per_token, vllm_block_size
from sim_core.kernel.content_hash import content_hashes

NEXT = "qwen3-next-80b-a3b"
HF_CONFIGS = Path(__file__).resolve().parents[1] / "sim_core" / "data" / "hf_configs"


def config(key: str) -> dict:
    doc = json.loads((HF_CONFIGS / f"{key}.json").read_text(encoding="utf-8"))
    return doc.get("text_config", doc)


def block_from_config(c: dict, tp: int, ssm_bytes: int, kv_heads: int | None = None) -> int:
    """vLLM's rule, written out from the config's numbers alone (no sim_core Model)."""
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    conv = conv_dim // tp * (c["linear_conv_kernel_dim"] - 1) * 2
    ssm = (
        c["linear_num_value_heads"] // tp * c["linear_value_head_dim"] * c["linear_key_head_dim"] * ssm_bytes
    )
    attn = 2 * max(1, (kv_heads or c["num_key_value_heads"]) // tp) * c["head_dim"] * 2
    return 16 * math.ceil((conv + ssm) / (16 * attn))


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_the_rule_gives_the_block_sizes_vllm_logs(tp):
    assert vllm_block_size(MODELS[NEXT], tp) == block_from_config(config(NEXT), tp, 2)
    assert vllm_block_size(MODELS["qwen3.5-35b-a3b"], tp) == block_from_config(
        config("qwen3.5-35b-a3b"), tp, 4
    )
    assert (
        vllm_block_size(MODELS["qwen3-30b-a3b"], tp) is None
    )  # a dense-attention model keeps its block size


def test_qwen3_next_pages_544_token_blocks_and_qwen3_5_4b_the_528_vllm_issue_40696_logged():
    assert [vllm_block_size(MODELS[NEXT], tp) for tp in (1, 2, 4, 8)] == [544, 544, 272, 144]
    # Qwen3.5-4B: Qwen3.5's linear layers and float32 state with 4 KV heads of 256; vLLM 0.19.1 logs "Setting
    # attention block size to 528 tokens" for it (vllm-project/vllm#40696).
    four_b = dataclasses.replace(MODELS["qwen3.5-35b-a3b"], kv_heads=4)
    assert vllm_block_size(four_b, 1) == 528


@pytest.mark.parametrize("key", [NEXT, "qwen3.5-35b-a3b", "qwen3.5-397b-a17b"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_block_holds_one_layers_state_and_is_the_least_multiple_of_16_that_does(key, tp):
    m = MODELS[key]
    block, token = vllm_block_size(m, tp), attention_page_bytes_per_token(m, tp, "auto")
    state = m.linear_state_bytes_per_gpu(tp)
    assert block % 16 == 0 and block * token >= state > (block - 16) * token


def test_fp8_kv_halves_the_attention_page_so_blocks_double():
    m = MODELS[NEXT]
    assert vllm_block_size(m, 1, "fp8") == 16 * math.ceil(m.linear_state_bytes_per_gpu(1) / (16 * 1024))
    assert vllm_block_size(m, 1, "fp8") == 1072


def test_the_config_s_ssm_dtype_is_read_and_a_bad_one_named():
    assert MODELS[NEXT].linear_ssm_bytes == 2.0 and MODELS["qwen3.5-35b-a3b"].linear_ssm_bytes == 4.0
    doc = json.loads((HF_CONFIGS / "qwen3.5-35b-a3b.json").read_text(encoding="utf-8"))
    text = doc.get("text_config", doc)
    text["mamba_ssm_dtype"] = "float64"
    with pytest.raises(ModelConfigError, match="mamba_ssm_dtype"):
        model_from_text(json.dumps(doc), "bad")


SERVER = dict(
    workload="multiturn", hardware="h200", tp=2, prefix_cache="on", num_requests=400, rate=2.0, seed=4
)


def test_the_field_sets_the_engines_block_size_only_for_hybrid_models():
    assert resolve(Scenario(model=NEXT, **SERVER)).setup.block_size == 16  # off by default: runs as before
    assert resolve(Scenario(model=NEXT, hybrid_blocks=True, **SERVER)).setup.block_size == 544
    assert resolve(Scenario(model="qwen3-30b-a3b", hybrid_blocks=True, **SERVER)).setup.block_size == 16
    # At tp 4 a rank holds one KV head and a quarter of the state.
    assert resolve(Scenario(model=NEXT, hybrid_blocks=True, **{**SERVER, "tp": 4})).setup.block_size == 272


def test_pools_that_would_page_differently_are_refused_naming_the_field():
    with pytest.raises(SetupError, match="hybrid_blocks") as caught:
        resolve(
            Scenario(
                model=NEXT,
                hardware="h200",
                hybrid_blocks=True,
                prefill_replicas=1,
                decode_replicas=1,
                prefill_tp=2,
                decode_tp=4,
            )
        )
    assert "544" in str(caught.value) and "272" in str(caught.value)


def test_multi_turn_prefix_hits_collapse_for_qwen3_next_against_a_dense_model():
    """Multi-turn chat (each turn resends its conversation; second turns ~440 tokens): with vLLM's block sizes a
    dense model (Qwen3-30B-A3B, 16-token blocks) reuses what the conversations resend, Qwen3-Next (544-token
    blocks) only the whole 544-token blocks of it."""
    dense = run(Scenario(model="qwen3-30b-a3b", hybrid_blocks=True, **SERVER))
    hybrid = run(Scenario(model=NEXT, hybrid_blocks=True, **SERVER))
    as_dense = run(Scenario(model=NEXT, **SERVER))  # the same hybrid model in 16-token blocks
    d, h = dense.metrics["prefix_cache_hit_rate"], hybrid.metrics["prefix_cache_hit_rate"]
    assert d > 0.5 and h < 0.75 * d
    assert as_dense.metrics["prefix_cache_hit_rate"] == pytest.approx(d, rel=0.02)  # the block size did it
    hit = hybrid.cached_prefix[hybrid.cached_prefix > 0]
    assert len(hit) and (hit % 544 == 0).all()  # whole blocks only
    assert ((dense.cached_prefix[dense.cached_prefix > 0] % 544) != 0).any()
    # What a cache that never evicts serves at each block size: the collapse is the granularity, not eviction.
    assert d == pytest.approx(reachable(dense, 16), rel=0.05)
    assert h == pytest.approx(reachable(hybrid, 544), rel=0.05)
    assert hybrid.metrics["completed"] == dense.metrics["completed"] == SERVER["num_requests"]


def reachable(result, block: int) -> float:
    """The share of prompt tokens found in whole `block`-token blocks that an earlier request's prompt or answer
    held (in arrival order; a prompt's last token is always computed, as vLLM does), from the content alone."""
    reqs = result.requests
    hashes, off = content_hashes(*reqs.content(), block)
    seen, hit = set(), 0
    for i in np.argsort(reqs.arrival_s, kind="stable").tolist():
        full = (int(reqs.prompt_tokens[i]) - 1) // block
        own = hashes[off[i] : off[i + 1]].tolist()
        k = 0
        while k < full and own[k] in seen:
            k += 1
        hit += k * block
        seen.update(own)
    return hit / reqs.prompt_tokens.sum()
