"""A model's architecture: the fields of its config the cost model and the KV accounting read, and the parameter
counts and KV sizes they imply. sim_core/data/models.json gives each catalogue model's fields, or names the Hugging
Face config.json sim_core/hf_config.py reads them from; sim_core/catalog.py loads them."""

from __future__ import annotations

from dataclasses import dataclass

# Model.checkpoint_format's values: the weight formats a published checkpoint's quantization_config can name.
CHECKPOINT_FORMATS = ("", "fp8", "int8", "int4", "mxfp4", "nvfp4")


@dataclass(frozen=True)
class Badge:
    """One architectural feature in a word or two: `kind` (a stable name: moe, mla, sliding, chunked, hybrid, fp8,
    mxfp4, ...), `label` (what a chip shows) and `title` (the sentence behind it)."""

    kind: str
    label: str
    title: str


@dataclass(frozen=True)
class Model:
    key: str
    hf_name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tie_embeddings: bool
    qkv_bias: bool
    max_context: int
    experts: int = 1  # MoE: experts per layer (1 = dense)
    experts_per_token: int = 1
    published_params_b: float = 0.0
    # --- what a Hugging Face config adds (sim_core/hf_config.py); the defaults leave today's entries unchanged ---
    expert_ffn: int = 0  # a routed expert's intermediate size (0: ffn)
    shared_ffn: int = 0  # the shared experts' intermediate size together, per MoE layer (0: none)
    dense_layers: int = 0  # MoE models: layers that keep a dense MLP of width ffn (DeepSeek's first 3)
    q_lora_rank: int = 0  # MLA: the query's low-rank projection (0: a full-rank query)
    kv_lora_rank: int = 0  # MLA (when > 0): the latent each token caches per layer, with qk_rope_head_dim
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0  # MLA: value head size (0: head_dim)
    attn_gate: bool = False  # the attention output is gated by a second query-sized projection (Qwen3-Next)
    window_kind: str = ""  # "sliding" (a window of the last `window` tokens) or "chunked" (local chunks)
    window: int = 0
    window_layers: int = 0  # layers that attend within the window; the rest attend to all context
    linear_layers: int = 0  # linear-attention layers (Gated DeltaNet): no KV, a fixed state per sequence
    linear_params_per_layer: int = 0
    linear_state_elems: int = 0  # one linear layer's state per sequence, elements, across all TP ranks
    linear_conv_elems: int = 0  # of which the convolution's last inputs (kept in the model's 16-bit dtype)
    linear_ssm_bytes: float = 2.0  # bytes per element of the rest, the recurrent state (config mamba_ssm_dtype)
    # The published checkpoint's weight format, from its quantization_config (hf_config._checkpoint_format): one of
    # CHECKPOINT_FORMATS -- "" 16-bit (or a format not listed), "fp8" (quant_method fp8 / fbgemm_fp8, compressed-
    # tensors W8A8-FP8, ModelOpt FP8), "int8" (GPTQ/AWQ 8-bit, compressed-tensors W8A8-INT8), "int4" (GPTQ/AWQ
    # 4-bit, compressed-tensors W4A16 / pack-quantized), "mxfp4" (gpt-oss's experts), "nvfp4" (ModelOpt or
    # compressed-tensors NVFP4). Shown as a badge; the scenario's quantization decides the run.
    checkpoint_format: str = ""
    # Its FP8 weights' scale blocks: weight_block_size's edge (DeepSeek's 128: one scale per 128 x 128 block, which
    # block-scaled GEMM kernels apply per K slice); 0: per-tensor or per-channel scales, or not an FP8 checkpoint.
    fp8_weight_block: int = 0

    # --- parameter counts (computed from the config, checked against published totals in the tests) ---
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attn_layers(self) -> int:
        """Layers with softmax attention (full or windowed): all but the linear-attention ones."""
        return self.layers - self.linear_layers

    @property
    def full_attn_layers(self) -> int:
        """Layers whose KV cache grows with the context: attention layers without a window."""
        return self.attn_layers - self.window_layers

    @property
    def attn_params_per_layer(self) -> int:
        if self.is_mla:
            # MLA (DeepSeek-V2/V3): q through a rank-q_lora_rank bottleneck (with its norm), k/v from one latent of
            # kv_lora_rank (plus the shared RoPE key), expanded per head for the no-RoPE key and the value.
            qk = self.head_dim  # qk_nope_head_dim + qk_rope_head_dim
            v = self.v_head_dim or self.head_dim
            q = (self.hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk
                 if self.q_lora_rank else self.hidden * self.heads * qk)
            kv = self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv += self.kv_lora_rank * self.heads * (qk - self.qk_rope_head_dim + v)
            return q + kv + self.heads * v * self.hidden
        q = self.hidden * self.heads * self.head_dim * (2 if self.attn_gate else 1)
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        return q + kv + o + bias

    @property
    def expert_params_per_layer(self) -> int:
        """One gated MLP (gate, up, down projections): a routed expert's in a MoE model."""
        return 3 * self.hidden * (self.expert_ffn or self.ffn)

    @property
    def dense_mlp_params_per_layer(self) -> int:
        return 3 * self.hidden * self.ffn

    @property
    def shared_params_per_layer(self) -> int:
        return 3 * self.hidden * self.shared_ffn

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden * self.experts if self.experts > 1 else 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts > 1 else 0

    @property
    def norm_params(self) -> int:
        return self.layers * 2 * self.hidden + self.hidden

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        lm_head = 0 if self.tie_embeddings else self.lm_head_params
        return self.dense_matmul_params + self.expert_matmul_params + self.embedding_params + lm_head \
            + self.norm_params

    @property
    def _mixer_params(self) -> int:
        """Attention and linear-attention weights of all layers."""
        return self.attn_layers * self.attn_params_per_layer + self.linear_layers * self.linear_params_per_layer

    @property
    def dense_matmul_params(self) -> int:
        """Matmul weights every token multiplies by (attention, router, shared experts, dense MLPs); no lm head."""
        if self.experts == 1:
            return self._mixer_params + self.layers * self.dense_mlp_params_per_layer
        return (self._mixer_params + (self.layers - self.moe_layers) * self.dense_mlp_params_per_layer
                + self.moe_layers * (self.router_params_per_layer + self.shared_params_per_layer))

    @property
    def expert_matmul_params(self) -> int:
        """All routed expert MLP weights across layers (0 for dense models)."""
        return self.moe_layers * self.experts * self.expert_params_per_layer if self.experts > 1 else 0

    @property
    def active_matmul_params(self) -> int:
        """Matmul weights one token multiplies by, excluding the lm head."""
        routed = self.moe_layers * self.experts_per_token * self.expert_params_per_layer if self.experts > 1 else 0
        return self.dense_matmul_params + routed

    @property
    def active_params(self) -> int:
        return self.active_matmul_params + self.lm_head_params + self.norm_params

    @property
    def mlp_width_per_token(self) -> float:
        """The MLP width one token goes through per layer, averaged over layers: its routed experts' and the
        shared experts' together in a MoE layer (an int when every layer has the same)."""
        if self.experts == 1:
            return self.ffn
        if self.moe_layers == self.layers and not self.shared_ffn and not self.expert_ffn:
            return self.ffn * self.experts_per_token
        total = ((self.layers - self.moe_layers) * self.ffn
                 + self.moe_layers * (self.experts_per_token * (self.expert_ffn or self.ffn) + self.shared_ffn))
        return total // self.layers if total % self.layers == 0 else total / self.layers

    @property
    def attention_summary(self) -> str:
        """The attention layers in a few words: "GQA 32/8", "MLA 576", "GQA 64/8, 18 of 36 sliding 128"."""
        kind = (f"MLA {self.kv_lora_rank + self.qk_rope_head_dim}" if self.is_mla
                else f"GQA {self.heads}/{self.kv_heads}" if self.kv_heads < self.heads else f"MHA {self.heads}")
        if self.window_layers:
            kind += f", {self.window_layers} of {self.layers} {self.window_kind} {self.window}"
        if self.linear_layers:
            kind += f", {self.linear_layers} of {self.layers} linear"
        return kind

    @property
    def badges(self) -> tuple[Badge, ...]:
        """What sets this architecture apart from a dense full-attention transformer, one badge per feature: what
        the dashboard's model picker and `sched-sim list` show (one definition for both)."""
        out = []
        if self.experts > 1:
            shared = f", shared experts {self.shared_ffn} wide" if self.shared_ffn else ""
            dense = f", the first {self.dense_layers} layers dense" if self.dense_layers else ""
            out.append(Badge("moe", f"MoE {self.experts_per_token} of {self.experts}",
                             f"mixture of experts: {self.experts} routed experts, {self.experts_per_token} per "
                             f"token{shared}{dense}"))
        if self.is_mla:
            out.append(Badge("mla", "MLA", f"multi-head latent attention: a {self.kv_lora_rank + self.qk_rope_head_dim}"
                                           f"-wide latent cached per token and layer"))
        if self.window_layers:
            kind = "sliding window" if self.window_kind == "sliding" else "chunked local"
            out.append(Badge(self.window_kind, f"{kind} {self.window}",
                             f"{self.window_layers} of {self.layers} layers attend within {kind} attention of "
                             f"{self.window} tokens; the rest attend to all context"))
        if self.linear_layers:
            out.append(Badge("hybrid", "hybrid linear",
                             f"{self.linear_layers} of {self.layers} layers are linear attention (a fixed state per "
                             f"sequence, no KV cache); the rest full attention"))
        if self.checkpoint_format:
            out.append(Badge(self.checkpoint_format, f"{self.checkpoint_format.upper()} weights",
                             f"the published checkpoint stores its weights (or its experts') in "
                             f"{self.checkpoint_format.upper()}; a run's weight format is its quantization"))
        return tuple(out)

    def kv_growth_bytes_per_token(self, bytes_per_elem: float = 2.0) -> float:
        """What each further token of context adds to the cache on one GPU (16-bit, tp=1)."""
        return self.full_attn_layers * self.kv_bytes_per_token_per_layer(self.kv_heads, bytes_per_elem)

    def window_hold_tokens(self, block_size: int) -> int:
        """The tokens of blocks one windowed layer holds per sequence at most: a sliding window of W holds
        cdiv(W - 1, block) + 1 blocks (vLLM's SlidingWindowManager frees the blocks that slide out), a chunked
        layer those of one chunk plus the block the next chunk starts in. 0 without windows."""
        return (-(-(self.window - 1) // block_size) + 1) * block_size if self.window_layers else 0

    def kv_fixed_bytes_per_sequence(self, block_size: int = 16, bytes_per_elem: float = 2.0) -> float:
        """Each sequence's fixed cache on one GPU (16-bit, tp=1): its windows' blocks and linear layers' state."""
        window_tokens = self.window_hold_tokens(block_size)
        window = self.window_layers * self.kv_bytes_per_token_per_layer(self.kv_heads, bytes_per_elem)
        return window * window_tokens + self.linear_layers * self.linear_state_bytes_per_gpu(1)

    def linear_state_bytes_per_gpu(self, tp: int) -> float:
        """One linear-attention layer's state per sequence on one of `tp` GPUs (its heads split over them): the
        convolution's inputs in 16 bits, the recurrent state in linear_ssm_bytes (vLLM's mamba page size)."""
        return (self.linear_conv_elems * 2.0 + (self.linear_state_elems - self.linear_conv_elems)
                * self.linear_ssm_bytes) / tp

    def kv_bytes_per_token_per_layer(self, kv_heads_per_gpu: int, bytes_per_elem: float) -> float:
        """One attention layer's cache per token on one GPU: k and v of its KV heads, or MLA's latent (one copy
        on every rank, as vLLM keeps it)."""
        if self.is_mla:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * bytes_per_elem
        return 2.0 * kv_heads_per_gpu * self.head_dim * bytes_per_elem
