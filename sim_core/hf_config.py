"""A model from its Hugging Face `config.json`: the architecture the cost model and the KV accounting need.

`model_from_config(doc)` reads the keys transformers and vLLM read for each supported `model_type` (the
architecture's text part, under "text_config" for the multimodal configs of Llama 4 and Gemma 3):

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
expected: an unknown model_type, a missing key, a value of the wrong type or out of range. It never raises anything
else, whatever JSON it is given (tests/test_hf_config.py fuzzes it).
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
    "mistral": {"tie_word_embeddings": False, "sliding_window": None},
    "mixtral": {"tie_word_embeddings": False, "sliding_window": None},
    "qwen2": {"tie_word_embeddings": False, "use_sliding_window": False, "qkv_bias": True},
    "qwen3": {**_QWEN_LIKE, "use_sliding_window": False},
    "qwen3_moe": {**_QWEN_LIKE, "use_sliding_window": False, "decoder_sparse_step": 1, "mlp_only_layers": []},
    "qwen3_next": {**_QWEN_LIKE, "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
                   "linear_conv_kernel_dim": 4},
    "deepseek_v2": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                    "n_shared_experts": 0, "moe_layer_freq": 1},
    "deepseek_v3": {"tie_word_embeddings": False, "attention_bias": False, "first_k_dense_replace": 0,
                    "n_shared_experts": 0, "moe_layer_freq": 1},
    "gpt_oss": {"tie_word_embeddings": False, "attention_bias": True},
    # Llama 4's text config: one layer in 4 global without RoPE (no_rope_layer_interval), the rest chunked local.
    "llama4_text": {"tie_word_embeddings": False, "attention_bias": False, "interleave_moe_layer_step": 1,
                    "no_rope_layer_interval": 4, "attention_chunk_size": 8192},
    # Gemma3TextConfig's defaults (the published 27B config leaves vocab_size, max_position_embeddings and the
    # 5 local : 1 global pattern to them).
    "gemma3_text": {"tie_word_embeddings": True, "attention_bias": False, "vocab_size": 262208,
                    "max_position_embeddings": 131072, "sliding_window_pattern": 6, "sliding_window": 4096},
}
# Multimodal wrappers whose language model sits under "text_config".
WRAPPERS = {"llama4": "llama4_text", "gemma3": "gemma3_text"}
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
    if mt == "qwen3_next":
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
    if mt in ("deepseek_v2", "deepseek_v3"):
        first = r.int("first_k_dense_replace", lo=0, hi=layers)
        freq = r.int("moe_layer_freq", hi=MAX_LAYERS)
        return sum(1 for i in range(first, layers) if i % freq == 0)
    if mt == "llama4_text":
        step = r.int("interleave_moe_layer_step", hi=MAX_LAYERS)
        return len(range(step - 1, layers, step))
    if mt in ("qwen3_moe", "qwen3_next"):
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
    if not isinstance(mt, str) or mt not in MODEL_TYPES:
        raise ModelConfigError(prefix + "model_type", f"unsupported architecture {json.dumps(mt)[:60]}; this "
                                                      f"reader knows {', '.join(sorted({*MODEL_TYPES, *WRAPPERS}))}")
    return doc, mt, prefix


def _layer_fields(r: _Reader, mt: str, layers: int, hidden: int) -> dict[str, Any]:
    """The windowed and linear-attention layers' Model fields."""
    f: dict[str, Any] = {"attn_gate": mt == "qwen3_next"}  # its attention gates the output: q_proj twice as wide
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
        if mt != "qwen3_next":
            raise ModelConfigError(r.name("layer_types"), f"linear_attention layers are read for qwen3_next "
                                                          f"(Gated DeltaNet) only, not {mt}")
        f.update(_gated_deltanet(r, hidden), linear_layers=linear)
    return f


def _gated_deltanet(r: _Reader, hidden: int) -> dict[str, int]:
    """One Gated DeltaNet layer's weights and per-sequence state (elements)."""
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
            "linear_state_elems": vh * kd * vd + conv_dim * (conv - 1)}


def _moe_fields(r: _Reader, mt: str, layers: int, ffn: int) -> tuple[int, dict[str, Any]]:
    """(the dense MLP's width, the mixture of experts' Model fields: none for a dense model)."""
    experts = r.int("num_experts", 0, lo=0) or r.int("n_routed_experts", 0, lo=0) \
        or r.int("num_local_experts", 0, lo=0)
    if experts <= 1:
        return ffn, {}
    per_token_key = "num_experts_per_tok" if "num_experts_per_tok" in r.doc else "experts_per_token"
    f: dict[str, Any] = {"experts": experts, "experts_per_token": r.int(per_token_key, hi=experts),
                         "dense_layers": layers - _moe_layers(r, mt, layers)}
    if mt in ("deepseek_v2", "deepseek_v3"):
        f["expert_ffn"] = r.int("moe_intermediate_size")
        f["shared_ffn"] = r.int("n_shared_experts", lo=0, hi=1024) * f["expert_ffn"]
    elif mt in ("qwen3_moe", "qwen3_next"):
        f["expert_ffn"] = r.int("moe_intermediate_size")
        f["shared_ffn"] = r.int("shared_expert_intermediate_size", 0, lo=0)
    elif mt == "llama4_text":
        # Each MoE layer adds one shared expert as wide as a routed one; dense layers use intermediate_size_mlp.
        f["expert_ffn"] = f["shared_ffn"] = ffn
        ffn = r.int("intermediate_size_mlp")
    return ffn, f


# quantization_config's quant_method (and NVIDIA ModelOpt's quant_algo) -> Model.checkpoint_format, for the formats
# the simulator has a weight format for (catalog.QUANTIZATIONS: fp8, and fp4 for both 4-bit floats).
CHECKPOINT_FORMATS = {"fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4"}


def _checkpoint_format(doc: dict) -> str:
    """The published weights' format its quantization_config names ("": 16-bit, or one the simulator has no
    format for). A badge, not a setting: it never refuses a config."""
    q = doc.get("quantization_config")
    if not isinstance(q, dict):
        return ""
    method = q.get("quant_algo") if q.get("quant_method") == "modelopt" else q.get("quant_method")
    return CHECKPOINT_FORMATS.get(method.lower(), "") if isinstance(method, str) else ""


def _fp8_weight_block(doc: dict) -> int:
    """The edge of the blocks an FP8 checkpoint's weights share a scale over (quantization_config's
    weight_block_size, [128, 128] for DeepSeek's), 0 without one. Like the format, a description: never refused."""
    q = doc.get("quantization_config")
    block = q.get("weight_block_size") if isinstance(q, dict) else None
    if isinstance(block, list) and block and all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                                 for b in block):
        return block[-1]
    return 0


def model_from_config(doc: Any, key: str = "custom", hf_name: str = "", published_params_b: float = 0.0) -> Model:
    """The Model a parsed config.json describes (ModelConfigError, naming the key, if it cannot be read)."""
    outer = doc  # a multimodal wrapper keeps quantization_config beside text_config
    doc, mt, prefix = _language_model(doc)
    r = _Reader(doc, MODEL_TYPES[mt], prefix)
    layers = r.int("num_hidden_layers", hi=MAX_LAYERS)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    kv_heads = r.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ModelConfigError(r.name("num_key_value_heads"), f"{kv_heads} does not divide num_attention_heads "
                                                              f"({heads})")
    f: dict[str, Any] = {}
    if mt in ("deepseek_v2", "deepseek_v3"):
        # MLA: the cache keeps one latent of kv_lora_rank plus the shared RoPE key per token and layer.
        rope, nope = r.int("qk_rope_head_dim"), r.int("qk_nope_head_dim")
        f.update(kv_lora_rank=r.int("kv_lora_rank"), qk_rope_head_dim=rope, v_head_dim=r.int("v_head_dim"),
                 q_lora_rank=r.int("q_lora_rank", 0, lo=0))
        head_dim = nope + rope
    else:
        head_dim = r.int("head_dim", hidden // heads if hidden % heads == 0 else ...)
    f.update(_layer_fields(r, mt, layers, hidden))
    ffn, moe = _moe_fields(r, mt, layers, r.int("intermediate_size"))
    return Model(key=key, hf_name=hf_name or str(doc.get("_name_or_path") or ""), layers=layers, hidden=hidden,
                 heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn, vocab=r.int("vocab_size"),
                 tie_embeddings=r.bool("tie_word_embeddings"),
                 qkv_bias=bool(MODEL_TYPES[mt].get("qkv_bias")) or r.bool("attention_bias"),
                 max_context=r.int("max_position_embeddings", hi=1 << 30), published_params_b=published_params_b,
                 checkpoint_format=_checkpoint_format(doc) or _checkpoint_format(outer),
                 fp8_weight_block=_fp8_weight_block(doc) or _fp8_weight_block(outer), **f, **moe)


def model_from_text(text: str, key: str = "custom") -> Model:
    """model_from_config of a config.json's text (ModelConfigError if it is not JSON)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ModelConfigError("config.json", f"not valid JSON ({e})") from None
    return model_from_config(doc, key)

