"""Issue #35: the config.json files people upload are read (Mistral without attention_bias, Mixtral, the mistral3
wrapper, Kimi, MiniMax-M2, Qwen3.5), what the simulator does not model is refused naming the key (DeepSeek Sparse
Attention's index_topk, lightning attention, biased MLPs), and a checkpoint's quantization_config gives its weight
format whichever tool wrote it. The published files are in tests/fixtures/hf_configs/ (README.md: where each comes
from) and sim_core/data/hf_configs/."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from sim_core import MODELS
from sim_core.architecture import CHECKPOINT_FORMATS
from sim_core.hf_config import ModelConfigError, model_from_config

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hf_configs"
BUNDLED = Path(__file__).resolve().parent.parent / "sim_core" / "data" / "hf_configs"


def published(name: str) -> dict:
    path = FIXTURES / f"{name}.json"
    return json.loads((path if path.exists() else BUNDLED / f"{name}.json").read_text(encoding="utf-8"))


def architecture(m) -> dict:
    """A Model's fields but its names and published count."""
    return {k: v for k, v in dataclasses.asdict(m).items() if k not in ("key", "hf_name", "published_params_b")}


# ----- the configs people upload -----
def test_mixtral_without_attention_bias_reads_as_the_catalogues_mixtral():
    m = model_from_config(published("mixtral-8x7b-v0.1"))
    assert not m.qkv_bias  # MixtralConfig has no attention_bias: no bias, not "missing"
    assert architecture(m) == architecture(MODELS["mixtral-8x7b"])


def test_mistral_small_3_1_reads_its_language_model_from_the_mistral3_wrapper():
    m = model_from_config(published("mistral-small-3.1-24b-instruct-2503"))
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab) == (40, 5120, 32, 8, 128, 32768,
                                                                                     131072)
    assert (m.max_context, m.qkv_bias, m.window_layers, m.experts) == (131072, False, 0, 1)
    # Model card: 24B, with its 0.4B Pixtral vision encoder that the reader does not count.
    assert m.total_params / 1e9 == pytest.approx(24.0, rel=0.02)


def test_mistral_small_3_is_the_same_language_model_with_a_shorter_context():
    small3 = model_from_config(published("mistral-small-24b-instruct-2501"))
    small31 = model_from_config(published("mistral-small-3.1-24b-instruct-2503"))
    assert architecture(small3) == {**architecture(small31), "max_context": 32768}


def test_a_mistral_config_with_a_sliding_window_reads_it():
    doc = published("mistral-small-24b-instruct-2501")
    doc["sliding_window"] = 4096
    m = model_from_config(doc)
    assert (m.window_kind, m.window, m.window_layers) == ("sliding", 4096, 40)


@pytest.mark.parametrize("name", ["deepseek-v3.2", "glm-5"])
def test_deepseek_sparse_attention_is_refused_naming_index_topk(name):
    with pytest.raises(ModelConfigError) as e:
        model_from_config(published(name))
    assert e.value.key == "index_topk" and "DeepSeek Sparse Attention" in str(e.value)


def test_the_minimax_layers_must_all_be_softmax_attention():
    doc = published("minimax-m2.7")
    assert set(doc["attn_type_list"]) == {1}
    assert model_from_config(doc) == dataclasses.replace(MODELS["minimax-m2.7"], key="custom", hf_name="",
                                                         published_params_b=0.0)
    doc["attn_type_list"][0] = 0  # MiniMax-Text-01's lightning attention
    with pytest.raises(ModelConfigError, match=r"^attn_type_list: MiniMax's lightning"):
        model_from_config(doc)


@pytest.mark.parametrize("name, key, value", [
    ("llama-3.3-70b", "mlp_bias", True), ("qwen3-8b", "kv_lora_rank", 512), ("qwen3-8b", "index_topk", 2048),
    ("qwen3-8b", "hybrid_override_pattern", "M-M-"), ("kimi-k2.5", "text_config.index_topk", 2048),
])
def test_an_architecture_key_the_reader_does_not_model_is_refused_by_name(name, key, value):
    doc = published(name)
    target, leaf = (doc["text_config"], key.split(".", 1)[1]) if "." in key else (doc, key)
    target[leaf] = value
    with pytest.raises(ModelConfigError) as e:
        model_from_config(doc)
    assert e.value.key == key and str(e.value).startswith(key + ": ")


def test_keys_that_change_neither_weights_nor_cache_are_ignored():
    doc = published("llama-3.3-70b")
    before = model_from_config(doc)
    doc.update(partial_rotary_factor=0.5, use_qk_norm=True, num_nextn_predict_layers=1, mlp_bias=False,
               rope_scaling={"rope_type": "yarn", "factor": 4.0}, a_key_from_next_year={"anything": [1, 2]})
    assert model_from_config(doc) == before


# ----- checkpoint formats -----
def _ct(weights: dict, fmt: str = "") -> dict:
    """A compressed-tensors quantization_config as llm-compressor writes it (one config group on the Linears)."""
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}


FORMATS = [
    (_ct({"num_bits": 8, "type": "float", "strategy": "channel"}, "float-quantized"), "fp8"),  # FP8 W8A8
    (_ct({"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"}, "nvfp4-pack-quantized"),
     "nvfp4"),
    (_ct({"num_bits": 4, "type": "float", "group_size": 32}, "mxfp4-pack-quantized"), "mxfp4"),
    (_ct({"num_bits": 4, "type": "int", "group_size": 128, "strategy": "group"}, "pack-quantized"), "int4"),  # W4A16
    (_ct({"num_bits": 8, "type": "int", "strategy": "channel"}, "int-quantized"), "int8"),  # W8A8 int8
    (_ct({"num_bits": 3, "type": "int"}), ""), (_ct({"num_bits": [4], "type": "int"}), ""), (_ct("8 bits"), ""),
    ({"quant_method": "compressed-tensors"}, ""), ({"quant_method": "compressed-tensors", "config_groups": [1]}, ""),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "int4"),
    ({"quant_method": "gptq", "bits": 8}, "int8"), ({"quant_method": "awq", "bits": 4, "version": "gemm"}, "int4"),
    ({"quant_method": "awq", "w_bit": 4}, "int4"), ({"quant_method": "gptq", "bits": True}, ""),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ"}, "int4"),
    ({"quant_method": "modelopt", "quant_algo": None}, ""),
    ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, "fp8"), ({"quant_method": "MXFP4"}, "mxfp4"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ""),  # NF4 is none of the formats
]


@pytest.mark.parametrize("qc, expected", FORMATS)
def test_each_tools_quantization_config_gives_its_weight_format(qc, expected):
    doc = published("qwen3-8b")
    doc["quantization_config"] = qc
    assert model_from_config(doc).checkpoint_format == expected
    assert expected in CHECKPOINT_FORMATS


def test_the_published_checkpoints_formats():
    assert model_from_config(published("qwen3.5-397b-a17b-nvfp4")).checkpoint_format == "nvfp4"  # ModelOpt
    assert MODELS["kimi-k2.5"].checkpoint_format == "int4"  # compressed-tensors W4A16 experts, under text_config
    assert (MODELS["kimi-k2-instruct"].checkpoint_format, MODELS["kimi-k2-instruct"].fp8_weight_block) == ("fp8", 128)
    assert MODELS["minimax-m2.5"].checkpoint_format == "fp8"
    assert {m.checkpoint_format for m in MODELS.values()} <= set(CHECKPOINT_FORMATS)


def test_a_compressed_tensors_fp8_block_scale_is_read():
    doc = published("qwen3-8b")
    doc["quantization_config"] = _ct({"num_bits": 8, "type": "float", "strategy": "block",
                                      "block_structure": [128, 128]}, "float-quantized")
    assert model_from_config(doc).fp8_weight_block == 128
    int4 = copy.deepcopy(doc)
    int4["quantization_config"]["config_groups"]["group_0"]["weights"].update(num_bits=4, type="int")
    assert model_from_config(int4).fp8_weight_block == 0


# ----- the late-2026 catalogue -----
def test_llama_3_3_70b_takes_the_8k_prompts_llama_3_70b_cannot():
    from sim_core import Scenario
    from sim_core.catalog import SetupError
    from sim_core.deployment import resolve

    eight_k_one_k = dict(hardware="h200", quantization="fp8", max_model_len=8192 + 1024)
    assert resolve(Scenario(model="llama-3.3-70b", **eight_k_one_k)).setup.model.max_context == 131072
    with pytest.raises(SetupError, match="at most 8192 for llama-3-70b"):
        resolve(Scenario(model="llama-3-70b", **eight_k_one_k))
    # The same layers and widths as Llama 3 70B: only the context differs.
    assert architecture(MODELS["llama-3.3-70b"]) == {**architecture(MODELS["llama-3-70b"]), "max_context": 131072}


def test_glm_4_6_reads_its_biased_gqa_attention_and_deepseek_style_experts():
    m = model_from_config(published("glm-4.6"))
    assert (m.layers, m.heads, m.kv_heads, m.head_dim, m.qkv_bias) == (92, 96, 8, 128, True)
    assert (m.experts, m.experts_per_token, m.expert_ffn, m.shared_ffn, m.dense_layers) == (160, 8, 1536, 1536, 3)
    # Model card: 355B total, 32B active (the Hub's total counts the MTP layer serving does not load).
    assert m.total_params / 1e9 == pytest.approx(355, rel=0.02)
    assert m.active_params / 1e9 == pytest.approx(32, rel=0.05)
