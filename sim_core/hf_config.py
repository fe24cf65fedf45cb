"""A model from its Hugging Face `config.json`: the architecture the cost model and the KV accounting need.

`model_from_config(doc)` reads the keys transformers and vLLM read for each supported `model_type` (the
architecture's text part, under "text_config" for the multimodal wrappers: Llama 4, Gemma 3, Mistral Small 3.1/3.2's
mistral3, Kimi-K2.5 and Qwen3.5):

- the transformer's shape: layers, hidden size, heads, KV heads, head dim, intermediate size, vocabulary, tied
  embeddings, attention biases, context length;
- each layer's attention kind: full, sliding window of W tokens ("sliding_attention": gpt-oss, Gemma 3, Qwen/Mistral
  with a window), chunked local attention of C tokens (Llama 4: three layers in four, the fourth global and without
  RoPE), MLA (DeepSeek-V2/V3: a latent of kv_lora_rank + qk_rope_head_dim per token and layer), or linear attention
  (Qwen3-Next's Gated DeltaNet: a fixed recurrent and convolution state per sequence);
- the mixture of experts: routed experts, experts per token, shared experts, expert intermediate size, and which
  layers keep a dense MLP (DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers / decoder_sparse_step, Llama 4's
  interleave_moe_layer_step).

Keys a model type defines with a default in transformers (Gemma 3's vocabulary, Llama 4's NoPE-layer interval, ...)
take that default when the file leaves them out, as transformers' config classes do; every other key is required.
Anything the reader cannot use raises ModelConfigError naming the key (dotted under "text_config") and what it
expected: an unknown model_type, a missing key, a value of the wrong type or out of range, or a key that changes the
architecture in a way the simulator does not model (UNMODELLED_KEYS: DeepSeek Sparse Attention's index_topk, MiniMax's
lightning-attention layers, biased MLPs, ...). Keys that change neither the weights' shapes nor the KV cache (RoPE
scaling and partial rotary, q/k norms, routing details, multi-token-prediction modules serving does not load) are
ignored. It never raises anything else, whatever JSON it is given (tests/test_hf_config.py fuzzes it).
"""

from __future__ import annotations

import json
from typing import Any

from .architecture import Model

# Per model type: the defaults transformers' config class gives keys a file may leave out (only those the reader
# uses), and whether q/k/v carry biases without a config key saying so (Qwen2's attention always has them).
_QWEN_LIKE = {"tie_word_embeddings": False, "attention_bias": False}
MODEL_TYPES: dict[str, dict[str, Any]] = {
    "llama": {"tie_word_embeddings": False, "attention_bias": False},
    # transformers' MistralConfig and MixtralConfig have no attention_bias: their q/k/v projections never carry one.
    "mistral": {"tie_word_embeddings": False, "sliding_window": None, "attention_bias": False},
    "mixtral": {"tie_word_embeddings": False, "sliding_window": None, "attention_bias": False},
    # MiniMax-M2's configuration_minimax_m2: full softmax attention in every layer (attn_type_list all 1), experts
    # as wide as intermediate_size, no shared expert unless shared_intermediate_size says so.
    "minimax_m2": {"tie_word_embeddings": False, "attention_bias": False, "shared_intermediate_size": 0},
    "qwen2": {"tie_word_embeddings": False, "use_sliding_window": False, "qkv_bias": True},
    "qwen3": {**_QWEN_LIKE, "use_sliding_window": False},
    "qwen3_moe": {**_QWEN_LIKE, "use_sliding_window": False, "decoder_sparse_step": 1, "mlp_only_layers": []},
    "qwen3_next": {**_QWEN_LIKE, "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
                   "linear_conv_kernel_dim": 4},
    # Qwen3.5's text models: Qwen3-Next's hybrid of Gated DeltaNet and gated full attention (attn_output_gate).
    "qwen3_5_moe_text": {**_QWEN_LIKE, "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
                         "linear_conv_kernel_dim": 4, "attn_output_gate": True},
    "qwen3_5_text": {**_QWEN_LIKE, "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
                     "attn_output_gate": True},
    "deepseek_v2": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                    "n_shared_experts": 0, "moe_layer_freq": 1},
    "deepseek_v3": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                    "n_shared_experts": 0, "moe_layer_freq": 1},
    # Kimi K2 is DeepSeek-V3's architecture (its config names DeepseekV3ForCausalLM) with other sizes: 64 heads,
    # 384 experts, one dense layer.
    "kimi_k2": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                "n_shared_experts": 0, "moe_layer_freq": 1},
    # GLM-4.5/4.6/4.7: GQA attention (biased q/k/v in the published configs, partial RoPE) over DeepSeek-V3's MoE
    # keys; Glm4MoeConfig's defaults: one dense layer, one shared expert.
    "glm4_moe": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 1,
                 "n_shared_experts": 1, "moe_layer_freq": 1},
    "gpt_oss": {"tie_word_embeddings": False, "attention_bias": True},
    # Llama 4's text config: one layer in 4 global without RoPE (no_rope_layer_interval), the rest chunked local.
    "llama4_text": {"tie_word_embeddings": False, "attention_bias": False, "interleave_moe_layer_step": 1,
                    "no_rope_layer_interval": 4, "attention_chunk_size": 8192},
    # Gemma3TextConfig's defaults (the published 27B config leaves vocab_size, max_position_embeddings and the
    # 5 local : 1 global pattern to them).
    "gemma3_text": {"tie_word_embeddings": True, "attention_bias": False, "vocab_size": 262208,
                    "max_position_embeddings": 131072, "sliding_window_pattern": 6, "sliding_window": 4096},
}
# Multimodal wrappers whose language model sits under "text_config" (the model type it has when text_config leaves
# model_type out, as the wrapper's config class does).
WRAPPERS = {"llama4": "llama4_text", "gemma3": "gemma3_text", "mistral3": "mistral", "kimi_k25": "kimi_k2",
            "qwen3_5_moe": "qwen3_5_moe_text", "qwen3_5": "qwen3_5_text"}
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2")  # multi-head latent attention, DeepSeek's MoE keys
DEEPSEEK_MOE_TYPES = (*MLA_TYPES, "glm4_moe")  # first_k_dense_replace, moe_layer_freq, n_shared_experts
HYBRID_TYPES = ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text")  # Gated DeltaNet layers between gated attention
QWEN_MOE_TYPES = ("qwen3_moe", "qwen3_next", "qwen3_5_moe_text")
# Model types whose attention the simulator does not model, refused naming the key that makes it so (whether or not
# the file spells it): DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) attends to the index_topk tokens a lightning
# indexer picks, and caches the indexer's keys beside MLA's latent; our attention reads every cached token.
SPARSE_ATTENTION_TYPES = ("deepseek_v32", "glm_moe_dsa")
_DSA = ("DeepSeek Sparse Attention (each query attends to the index_topk tokens an indexer picks) is not modelled: "
        "the simulator's attention reads every cached token, which would overstate its long-context attention time")
# Keys that change the architecture in a way the reader does not model: (the values that leave it unchanged, or
# "all 1" for a list whose every entry must be 1; why it is refused).
UNMODELLED_KEYS: dict[str, tuple[Any, str]] = {
    "index_topk": ((None,), _DSA),
    "attn_type_list": ("all 1", "MiniMax's lightning (linear) attention layers (attn_type_list 0) are not modelled; "
                                "every entry 1 (softmax attention) is"),
    "mlp_bias": ((None, False), "biased MLP projections are not modelled"),
    "sparse_attention_config": ((None,), "sparse attention is not modelled"),
    "hybrid_override_pattern": ((None,), "Mamba layers are not modelled"),
}
LAYER_KINDS = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
MAX_DIM = 1 << 24  # no real width reaches this; it keeps a fuzzed config's products finite
MAX_LAYERS = 4096
GATED_MLP_MATRICES = 3  # gate, up and down projections (SwiGLU/GeGLU) in every supported architecture


class ModelConfigError(ValueError):
    """A config.json the reader cannot use; `key` is the key it is about (dotted under text_config)."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


class _Reader:
    """Typed access to one config object, with the model type's defaults and the prefix error messages use."""

    def __init__(self, doc: dict, defaults: dict, prefix: str):
        self.doc, self.defaults, self.prefix = doc, defaults, prefix

    def name(self, key: str) -> str:
        return self.prefix + key

    def raw(self, key: str, default: Any = ...) -> Any:
        if key in self.doc and self.doc[key] is not None:
            return self.doc[key]
        if key in self.defaults:
            return self.defaults[key]
        if default is not ...:
            return default
        raise ModelConfigError(self.name(key), "missing (the reader needs it for this model_type)")

    def int(self, key: str, default: Any = ..., lo: int = 1, hi: int = MAX_DIM) -> int:
        v = self.raw(key, default)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelConfigError(self.name(key), f"expected an integer, got {json.dumps(v)[:40]}")
        if not lo <= v <= hi:
            raise ModelConfigError(self.name(key), f"must be between {lo} and {hi} (got {v})")
        return v

    def bool(self, key: str, default: Any = ...) -> bool:
        v = self.raw(key, default)
        if not isinstance(v, bool):
            raise ModelConfigError(self.name(key), f"expected true or false, got {json.dumps(v)[:40]}")
        return v

    def int_list(self, key: str, default: Any = ...) -> list[int]:
        v = self.raw(key, default)
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise ModelConfigError(self.name(key), "expected a list of integers")
        return v


def _layer_kinds(r: _Reader, mt: str, layers: int) -> list[str]:
    """Each layer's attention kind, from layer_types where the config lists them, else the model type's rule."""
    if "layer_types" in r.doc:
        kinds = r.doc["layer_types"]
        if not isinstance(kinds, list) or len(kinds) != layers or any(k not in LAYER_KINDS for k in kinds):
            raise ModelConfigError(r.name("layer_types"), f"expected {layers} entries (num_hidden_layers), each one "
                                                          f"of {', '.join(LAYER_KINDS)}")
        return list(kinds)
    if mt in HYBRID_TYPES:
        every = r.int("full_attention_interval", hi=MAX_LAYERS)
        return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    if mt == "gemma3_text":
        every = r.int("sliding_window_pattern", hi=MAX_LAYERS)
        return ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)]
    if mt == "llama4_text":
        if "no_rope_layers" in r.doc:
            rope = r.int_list("no_rope_layers")
            if len(rope) != layers:
                raise ModelConfigError(r.name("no_rope_layers"), f"expected {layers} entries (num_hidden_layers)")
        else:
            every = r.int("no_rope_layer_interval", hi=MAX_LAYERS)
            rope = [int((i + 1) % every != 0) for i in range(layers)]
        # vLLM: a layer with RoPE attends within its chunk, a NoPE layer globally.
        return ["chunked_attention" if x else "full_attention" for x in rope]
    if mt in ("mistral", "mixtral") and r.raw("sliding_window", None) is not None:
        return ["sliding_attention"] * layers
    if mt in ("qwen2", "qwen3", "qwen3_moe") and r.bool("use_sliding_window"):
        # transformers' Qwen2/3: layers from max_window_layers on use the window.
        first = r.int("max_window_layers", lo=0, hi=MAX_LAYERS)
        return ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    return ["full_attention"] * layers


def _moe_layers(r: _Reader, mt: str, layers: int) -> int:
    """How many layers route to experts (the others keep a dense MLP)."""
    if mt in DEEPSEEK_MOE_TYPES:
        first = r.int("first_k_dense_replace", lo=0, hi=layers)
        freq = r.int("moe_layer_freq", hi=MAX_LAYERS)
        return sum(1 for i in range(first, layers) if i % freq == 0)
    if mt == "llama4_text":
        step = r.int("interleave_moe_layer_step", hi=MAX_LAYERS)
        return len(range(step - 1, layers, step))
    if mt in QWEN_MOE_TYPES:
        step = r.int("decoder_sparse_step", hi=MAX_LAYERS)
        dense = set(r.int_list("mlp_only_layers"))
        return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return layers


def _language_model(doc: Any) -> tuple[dict, str, str]:
    """(the language model's config, its model type, the prefix its keys are named with in errors)."""
    if not isinstance(doc, dict):
        raise ModelConfigError("config.json", "expected a JSON object (a Hugging Face config.json)")
    mt = doc.get("model_type")
    prefix = ""
    if isinstance(mt, str) and mt in WRAPPERS:
        text = doc.get("text_config")
        if not isinstance(text, dict):
            raise ModelConfigError("text_config", f"missing (a {mt} config keeps its language model there)")
        doc, prefix = text, "text_config."
        mt = doc.get("model_type", WRAPPERS[mt])
    if isinstance(mt, str) and mt in SPARSE_ATTENTION_TYPES:
        raise ModelConfigError(prefix + "index_topk", f"{_DSA} ({mt})")
    if not isinstance(mt, str) or mt not in MODEL_TYPES:
        raise ModelConfigError(prefix + "model_type", f"unsupported architecture {json.dumps(mt)[:60]}; this "
                                                      f"reader knows {', '.join(sorted({*MODEL_TYPES, *WRAPPERS}))}")
    return doc, mt, prefix


def _refuse_unmodelled(r: _Reader, mt: str) -> None:
    """ModelConfigError naming the first key that changes the architecture in a way the simulator does not model."""
    for key, (harmless, why) in UNMODELLED_KEYS.items():
        v = r.doc.get(key)
        if harmless == "all 1":
            if v is None or (isinstance(v, list) and all(x == 1 and not isinstance(x, bool) for x in v)):
                continue
        elif any(v is h for h in harmless):
            continue
        raise ModelConfigError(r.name(key), f"{why} (got {json.dumps(v)[:40]})")
    if mt not in MLA_TYPES and r.doc.get("kv_lora_rank") not in (None, 0):
        raise ModelConfigError(r.name("kv_lora_rank"), f"multi-head latent attention is read for "
                                                       f"{', '.join(MLA_TYPES)} configs, not {mt}")


def _layer_fields(r: _Reader, mt: str, layers: int, hidden: int) -> dict[str, Any]:
    """The windowed and linear-attention layers' Model fields."""
    # Qwen3-Next's and Qwen3.5's attention gates its output: q_proj twice as wide.
    f: dict[str, Any] = {"attn_gate": mt == "qwen3_next" or (mt in HYBRID_TYPES and r.bool("attn_output_gate"))}
    kinds = _layer_kinds(r, mt, layers)
    windowed = [k for k in kinds if k in ("sliding_attention", "chunked_attention")]
    if windowed:
        if len(set(windowed)) > 1:
            raise ModelConfigError(r.name("layer_types"), "mixes sliding and chunked layers, which the simulator "
                                                          "does not model")
        chunked = windowed[0] == "chunked_attention"
        f.update(window_kind="chunked" if chunked else "sliding", window_layers=len(windowed),
                 window=r.int("attention_chunk_size" if chunked else "sliding_window", hi=1 << 30))
    linear = kinds.count("linear_attention")
    if linear == layers:
        raise ModelConfigError(r.name("layer_types"), "no attention layer: the simulator pages a KV cache and "
                                                      "needs at least one")
    if linear:
        if mt not in HYBRID_TYPES:
            raise ModelConfigError(r.name("layer_types"), f"linear_attention layers are read for "
                                                          f"{', '.join(HYBRID_TYPES)} (Gated DeltaNet) only, not {mt}")
        f.update(_gated_deltanet(r, hidden), linear_layers=linear)
    return f


def _gated_deltanet(r: _Reader, hidden: int) -> dict[str, float]:
    """One Gated DeltaNet layer's weights and per-sequence state (elements; its recurrent part's bytes each)."""
    kh, vh = r.int("linear_num_key_heads"), r.int("linear_num_value_heads")
    kd, vd = r.int("linear_key_head_dim"), r.int("linear_value_head_dim")
    conv = r.int("linear_conv_kernel_dim", hi=1024)
    key_dim, value_dim = kh * kd, vh * vd
    conv_dim = 2 * key_dim + value_dim
    # vLLM's layer: in_proj_qkvz, in_proj_ba, a depthwise conv over q, k and v, dt_bias and A_log per value head,
    # a gated RMSNorm of one value head, out_proj. Its state: the recurrent state (value heads x key dim x value
    # dim) and the convolution's last conv-1 inputs (vLLM's mamba state shapes for qwen3_next).
    return {"linear_params_per_layer": (hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * vh
                                        + conv_dim * conv + 2 * vh + vd + value_dim * hidden),
            "linear_state_elems": vh * kd * vd + conv_dim * (conv - 1), "linear_conv_elems": conv_dim * (conv - 1),
            "linear_ssm_bytes": _ssm_bytes(r)}


# The recurrent state's dtype a config may name (Qwen3.5's "mamba_ssm_dtype": "float32"), which vLLM keeps it in
# (Qwen3_5ForConditionalGenerationConfig.verify_and_update_config sets mamba_ssm_cache_dtype from it); without
# it, the model's 16-bit dtype.
SSM_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}


def _ssm_bytes(r: _Reader) -> float:
    name = r.doc.get("mamba_ssm_dtype", "bfloat16")
    if name not in SSM_DTYPE_BYTES:
        raise ModelConfigError(r.name("mamba_ssm_dtype"), f"must be one of {', '.join(SSM_DTYPE_BYTES)}, got "
                                                          f"{str(name)[:40]!r}")
    return SSM_DTYPE_BYTES[name]


def _moe_fields(r: _Reader, mt: str, layers: int, ffn: int) -> tuple[int, dict[str, Any]]:
    """(the dense MLP's width, the mixture of experts' Model fields: none for a dense model)."""
    experts = r.int("num_experts", 0, lo=0) or r.int("n_routed_experts", 0, lo=0) \
        or r.int("num_local_experts", 0, lo=0)
    if experts <= 1:
        return ffn, {}
    per_token_key = "num_experts_per_tok" if "num_experts_per_tok" in r.doc else "experts_per_token"
    f: dict[str, Any] = {"experts": experts, "experts_per_token": r.int(per_token_key, hi=experts),
                         "dense_layers": layers - _moe_layers(r, mt, layers)}
    if mt in DEEPSEEK_MOE_TYPES:
        f["expert_ffn"] = r.int("moe_intermediate_size")
        f["shared_ffn"] = r.int("n_shared_experts", lo=0, hi=1024) * f["expert_ffn"]
    elif mt == "minimax_m2":  # experts as wide as intermediate_size (Mixtral's layout), a shared expert if any
        f["shared_ffn"] = r.int("shared_intermediate_size", lo=0)
    elif mt in QWEN_MOE_TYPES:
        f["expert_ffn"] = r.int("moe_intermediate_size")
        f["shared_ffn"] = r.int("shared_expert_intermediate_size", 0, lo=0)
    elif mt == "llama4_text":
        # Each MoE layer adds one shared expert as wide as a routed one; dense layers use intermediate_size_mlp.
        f["expert_ffn"] = f["shared_ffn"] = ffn
        ffn = r.int("intermediate_size_mlp")
    return ffn, f


# quantization_config -> Model.checkpoint_format (one of architecture.CHECKPOINT_FORMATS). A quant_method that names
# its format alone (fbgemm_fp8: FP8 weights with per-channel scales):
SIMPLE_METHODS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4"}
# NVIDIA ModelOpt's quant_algo, by prefix (FP8, FP8_BLOCK_SCALES, NVFP4, NVFP4_AWQ, W4A16_AWQ, W4A8_AWQ, INT4_AWQ,
# INT8_SQ, W8A8_SQ_PER_CHANNEL, MXFP4, ...).
MODELOPT_ALGOS = (("FP8", "fp8"), ("NVFP4", "nvfp4"), ("MXFP4", "mxfp4"), ("W4A", "int4"), ("INT4", "int4"),
                  ("INT8", "int8"), ("W8A8", "int8"))
INT_BITS = {4: "int4", 8: "int8"}  # GPTQ's and AWQ's integer weights, and compressed-tensors' "int" weights


def _compressed_tensors_format(q: dict) -> str:
    """llm-compressor's format from its first config group's weights: float 8-bit is FP8 (W8A8-FP8), float 4-bit
    NVFP4 (or MXFP4 in its mxfp4-pack-quantized format), int 4-bit W4A16 / pack-quantized, int 8-bit W8A8-INT8."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict):
        return ""
    for name in sorted(groups, key=str):
        group = groups[name]
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            continue
        bits, kind = weights.get("num_bits"), weights.get("type")
        if kind == "float" and bits == 8:
            return "fp8"
        if kind == "float" and bits == 4:
            return "mxfp4" if "mxfp4" in str(q.get("format") or group.get("format")) else "nvfp4"
        if kind == "int" and isinstance(bits, int) and bits in INT_BITS:
            return INT_BITS[bits]
    return ""


def _checkpoint_format(doc: dict) -> str:
    """The published weights' format its quantization_config names ("": 16-bit, or a format outside
    CHECKPOINT_FORMATS). A badge and a default, never a refusal: an unknown or malformed one reads as ""."""
    q = doc.get("quantization_config")
    if not isinstance(q, dict) or not isinstance(q.get("quant_method"), str):
        return ""
    method = q["quant_method"].lower()
    if method == "modelopt":
        algo = q.get("quant_algo")
        algo = algo.upper() if isinstance(algo, str) else ""
        return next((fmt for prefix, fmt in MODELOPT_ALGOS if algo.startswith(prefix)), "")
    if method == "compressed-tensors":
        return _compressed_tensors_format(q)
    if method in ("gptq", "awq"):
        bits = q.get("bits", q.get("w_bit"))
        return INT_BITS.get(bits, "") if isinstance(bits, int) and not isinstance(bits, bool) else ""
    return SIMPLE_METHODS.get(method, "")


def _fp8_weight_block(doc: dict) -> int:
    """The edge of the blocks an FP8 checkpoint's weights share a scale over (quantization_config's
    weight_block_size, [128, 128] for DeepSeek's; compressed-tensors' block_structure), 0 without one. Like the
    format, a description: never refused."""
    q = doc.get("quantization_config")
    if not isinstance(q, dict):
        return 0
    block = q.get("weight_block_size")
    groups = q.get("config_groups")
    if block is None and isinstance(groups, dict) and _compressed_tensors_format(q) == "fp8":
        weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)]
        block = next((w.get("block_structure") for w in weights if isinstance(w, dict)), None)
    if isinstance(block, list) and block and all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                                 for b in block):
        return block[-1]
    return 0


def model_from_config(doc: Any, key: str = "custom", hf_name: str = "", published_params_b: float = 0.0) -> Model:
    """The Model a parsed config.json describes (ModelConfigError, naming the key, if it cannot be read)."""
    outer = doc  # a multimodal wrapper keeps quantization_config beside text_config
    doc, mt, prefix = _language_model(doc)
    r = _Reader(doc, MODEL_TYPES[mt], prefix)
    _refuse_unmodelled(r, mt)
    layers = r.int("num_hidden_layers", hi=MAX_LAYERS)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    kv_heads = r.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ModelConfigError(r.name("num_key_value_heads"), f"{kv_heads} does not divide num_attention_heads "
                                                              f"({heads})")
    f: dict[str, Any] = {}
    if mt in MLA_TYPES:
        # MLA: the cache keeps one latent of kv_lora_rank plus the shared RoPE key per token and layer.
        rope, nope = r.int("qk_rope_head_dim"), r.int("qk_nope_head_dim")
        f.update(kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=rope, v_head_dim=r.int("v_head_dim"),
                 q_lora_rank=r.int("q_lora_rank", 0, lo=0))
        head_dim = nope + rope
    else:
        head_dim = r.int("head_dim", hidden // heads if hidden % heads == 0 else ...)
    f.update(_layer_fields(r, mt, layers, hidden))
    # Qwen3.5's MoE config has no intermediate_size: every layer routes to experts (dense_layers 0, checked below).
    no_dense_mlp = mt == "qwen3_5_moe_text" and "intermediate_size" not in r.doc
    ffn, moe = _moe_fields(r, mt, layers, 0 if no_dense_mlp else r.int("intermediate_size"))
    if no_dense_mlp and moe.get("dense_layers", layers):
        raise ModelConfigError(r.name("intermediate_size"), "missing (the reader needs it for the dense MLP layers)")
    return Model(key=key, hf_name=hf_name or str(doc.get("_name_or_path") or ""), layers=layers, hidden=hidden,
                 heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn, vocab=r.int("vocab_size"),
                 tie_embeddings=r.bool("tie_word_embeddings"),
                 qkv_bias=bool(MODEL_TYPES[mt].get("qkv_bias")) or r.bool("attention_bias"),
                 max_context=r.int("max_position_embeddings", hi=1 << 30), published_params_b=published_params_b,
                 checkpoint_format=_checkpoint_format(doc) or _checkpoint_format(outer),
                 fp8_weight_block=_fp8_weight_block(doc) or _fp8_weight_block(outer), **f, **moe)


def model_from_text(text: str, key: str = "custom") -> Model:
    """model_from_config of a config.json's text (ModelConfigError if it is not JSON). A leading UTF-8 byte-order
    mark is no part of the JSON (Windows editors write one): it is dropped, so an upload and a run read alike."""
    try:
        doc = json.loads(text.removeprefix("\ufeff"))
    except (ValueError, RecursionError) as e:
        raise ModelConfigError("config.json", f"not valid JSON ({e})") from None
    return model_from_config(doc, key)

