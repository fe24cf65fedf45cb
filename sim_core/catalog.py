"""GPUs and models: public specs (from ../shared/reference/*.json and the models' public configs) plus the
calibration constants the cost model needs, each with the measurement it stands on.

The entries are data: sim_core/data/gpus.json and models.json, one object per GPU or model, each keeping the
text that justifies its numbers ("source", "note"); this module reads them into GPU and Model (GPUS, MODELS) and
refuses an entry with a missing or unknown key, naming file, entry and key (sim_core/data/__init__.py). To add a
GPU or a model, add an entry there (and a GPU's price row to prices.json).

The GPU record and the calibration constants shared across GPUs live in sim_core/gpu.py. A GPU entry leaves a field
out to take its default, or names a constant in place of a number ("compute_efficiency":
"MEASURED_GEMM_EFFICIENCY"; GPU_CONSTANTS lists the names), so each number is defined once, there, beside the
measurement it stands on, and the data file says which measurement an entry uses.

Units: memory in GiB (GPU memory sizes are binary: an "80 GB" A100 has 80 GiB), bandwidth in GB/s (10^9 B/s),
tensor throughput in dense (non-sparse) TFLOPS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import data
from .architecture import Model
from .data import CatalogDataError
from .expert_parallel import NO_EP, ExpertParallel, domain_gpus, ep_that_fits, weight_bytes_per_gpu
from .gpu import GPU, GPU_CONSTANTS
from .hf_config import ModelConfigError, model_from_config
from .tensor_parallel import MAX_TP, tp_problem

GIB = 1024**3

MODELS_FILE = "models.json"
GPUS_FILE = "gpus.json"


# A models.json entry may define its architecture by a bundled Hugging Face config (sim_core/data/hf_configs/),
# read by sim_core/hf_config.py: then it holds only these keys, "source" saying where the config comes from.
HF_ENTRY_KEYS = ("key", "hf_config", "hf_name", "published_params_b", "source", "note")


def _hf_entry(entry: dict, label: str) -> Model:
    for k in entry:
        if k not in HF_ENTRY_KEYS:
            raise CatalogDataError(f"{label}: unknown key {k!r}; an entry with 'hf_config' has keys "
                                   f"{', '.join(HF_ENTRY_KEYS)}")
    for k in ("hf_name", "published_params_b", "source"):
        if k not in entry:
            raise CatalogDataError(f"{label}: missing key {k!r}")
    path = entry["hf_config"]
    try:
        doc = data.read(path)
    except FileNotFoundError:
        raise CatalogDataError(f"{label}: key 'hf_config': no file {data.where(path)}") from None
    try:
        return model_from_config(doc, entry["key"], entry["hf_name"], float(entry["published_params_b"]))
    except ModelConfigError as e:
        raise CatalogDataError(f"{label}: {data.where(path)}: {e}") from None


def models_from(doc) -> dict[str, Model]:
    """The models of a models.json document, by key, in the file's order; an entry naming an "hf_config" file
    is read from it (sim_core/hf_config.py), the others from their fields."""
    plain = dict(doc, entries=[e for e in doc.get("entries", []) if not (isinstance(e, dict) and "hf_config" in e)]) \
        if isinstance(doc, dict) else doc
    loaded = data.load(plain, MODELS_FILE, Model)
    out: dict[str, Model] = {}
    for name, label, entry in data.entries(doc, MODELS_FILE):
        out[name] = _hf_entry(entry, label) if "hf_config" in entry else loaded[name]
    return out


def gpus_from(doc, models: dict[str, Model]) -> dict[str, GPU]:
    """The GPUs of a gpus.json document, by key, in the file's order; each one's default_model must be a model, its
    efficiencies fractions in (0, 1] and its times not negative."""
    gpus = data.load(doc, GPUS_FILE, GPU, GPU_CONSTANTS)
    for key, gpu in gpus.items():
        out_of_range = gpu.out_of_range()
        if out_of_range:
            raise CatalogDataError(f"{data.where(GPUS_FILE)}: entry {key!r}: {out_of_range}")
        if gpu.default_model not in models:
            raise CatalogDataError(f"{data.where(GPUS_FILE)}: entry {key!r}: key 'default_model': "
                                   f"{gpu.default_model!r} is not in {MODELS_FILE} ({', '.join(models)})")
    return gpus


MODELS: dict[str, Model] = models_from(data.read(MODELS_FILE))
GPUS: dict[str, GPU] = gpus_from(data.read(GPUS_FILE), MODELS)

# Weight formats: bytes per parameter, and whether the matmuls run on FP8 tensor cores (W8A8) or dequantise to
# FP16 (weight-only: int8/int4 as in GPTQ/AWQ/Marlin kernels; fp8 on a GPU without FP8 tensor cores).
# int4 includes group-128 scales and zeros (~4.25-4.5 effective bits).
# fp8 also stands for DeepSeek-V3/R1's block-scaled FP8 checkpoints: one fp32 scale per 128x128 weight block adds
# 4 / 16384 bytes per parameter (0.02%, left out), and the GEMMs run on FP8 tensor cores (DeepGEMM, CUTLASS
# blockwise-scaled kernels apply the scales per 128-wide K slice), so they take fp8's rate.
# fp4 is block-scaled 4-bit floating point on FP4 tensor cores (W4A4, activations quantized on the fly): NVFP4
# (E2M1 values, one FP8 E4M3 scale per 16 values: 4.5 bits) on Blackwell, MXFP4 (one E8M0 scale per 32: 4.25 bits;
# gpt-oss's checkpoints) on Blackwell and CDNA 4 (MI355X). One key for both at NVFP4's 4.5 bits, the larger, so that
# whether a model fits never rests on the smaller scale overhead (MXFP4 weights are 6% smaller). It runs only on a
# GPU with FP4 tensor cores (GPU.fp4_tflops); elsewhere resolve_setup refuses it, naming the GPUs that have them:
# the weight-only way Hopper runs MXFP4 checkpoints (dequantising in a Marlin-style kernel) is what int4 models.
FP4_BYTES_PER_PARAM = 4.5 / 8
QUANTIZATIONS: dict[str, float] = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5625,
                                   "fp4": FP4_BYTES_PER_PARAM}
# The scenario's quantization "auto" (its default): the published checkpoint's own format, run the way vLLM, SGLang
# and TensorRT-LLM run it on the GPU (weight_format). They agree on the choice below; only their kernels differ.
AUTO_QUANTIZATION = "auto"
QUANTIZATION_CHOICES = (AUTO_QUANTIZATION, *QUANTIZATIONS)


@dataclass(frozen=True)
class WeightFormat:
    """The weight format a deployment runs (a QUANTIZATIONS key) and, in words, how its GEMMs execute it."""

    quantization: str
    path: str


def weight_format(quantization: str, m: Model, gpu: GPU) -> WeightFormat:
    """`quantization` as the deployment runs it: a named format as it is; "auto" the checkpoint's format
    (Model.checkpoint_format, from its config's quantization_config), on the tensor cores that take it where the
    GPU has them, weight-only (dequantised to 16 bits inside the GEMM) where it does not: vLLM runs FP8 checkpoints
    through its FP8 Marlin kernel on GPUs without FP8 tensor cores (Ampere), and MXFP4/NVFP4 ones through its
    4-bit Marlin kernels on Hopper and CDNA 3 (gpt-oss's MXFP4 experts on an H100), which int4's bytes and
    dequantising GEMMs stand for."""
    if quantization != AUTO_QUANTIZATION:
        return WeightFormat(quantization, _path(quantization, gpu))
    fmt = m.checkpoint_format
    if fmt in ("mxfp4", "nvfp4"):
        q = "fp4" if gpu.fp4_tflops is not None else "int4"
    else:
        q = fmt if fmt in QUANTIZATIONS else "fp16"
    what = f"the checkpoint's {fmt.upper() or '16-bit'} weights"
    return WeightFormat(q, f"{what}, {_path(q, gpu)} (quantization=auto)")


def _path(q: str, gpu: GPU) -> str:
    if q == "fp4":
        return "on FP4 tensor cores"
    if q == "fp8" and gpu.fp8_tflops is not None:
        return "on FP8 tensor cores"
    if q in ("fp16", "bf16"):
        return "16-bit GEMMs"
    return f"weight-only ({q} dequantised to 16 bits in the GEMM) on {gpu.key}"
# KV-cache formats, bytes per element: "auto" keeps the model's 16-bit activations (vLLM's --kv-cache-dtype auto);
# "fp8" stores K and V in 8 bits (vLLM's --kv-cache-dtype fp8, TensorRT-LLM's FP8 KV cache), halving the cache's
# footprint and the bytes attention reads; attention still computes in 16 bits.
KV_CACHE_DTYPES: dict[str, float] = {"auto": 2.0, "fp8": 1.0}


@dataclass(frozen=True)
class Setup:
    """A resolved hardware x model x quantization x TP deployment, with its memory budget."""

    gpu: GPU
    model: Model
    quantization: str
    tp: int
    gpu_memory_utilization: float
    block_size: int
    token_budget: int
    max_num_seqs: int
    kv_cache_dtype: str = "auto"
    expert_parallel: ExpertParallel = NO_EP  # ep > 1: routed experts spread whole over ep GPUs (expert_parallel.py)
    windowed_kv: str = "hybrid"  # how the engine's KV pool holds windowed layers (engines.json windowed_kv)
    # The link between NVLink domains (a kv_links.json key; None: the GPU's own NIC, tensor_parallel.py).
    scale_out_link: str | None = None
    weight_bytes_per_gpu: float = field(init=False)
    activation_bytes_per_gpu: float = field(init=False)
    # What the engine's KV pool charges per token of context on one GPU (its blocks are this x block_size), and
    # what it reserves up front for max_num_seqs sequences' fixed state (see kv_pool_plan).
    kv_bytes_per_token_per_gpu: float = field(init=False)
    kv_reserved_bytes_per_gpu: float = field(init=False)
    # vLLM's hybrid KV cache manager's figures, per GPU: what each further token of context adds (full-attention
    # and MLA layers), what a windowed layer holds per token of its window, and each sequence's fixed bytes
    # (its windows' blocks and its linear layers' state).
    kv_growth_bytes_per_token_per_gpu: float = field(init=False)
    kv_window_bytes_per_token_per_gpu: float = field(init=False)
    kv_fixed_bytes_per_seq_per_gpu: float = field(init=False)
    kv_windows_per_token: bool = field(init=False)  # the engine charges windowed layers for every token

    def __post_init__(self) -> None:
        m, tp = self.model, self.tp
        bpp = QUANTIZATIONS[self.quantization]
        # Matmuls are stored in the chosen format; the embedding table, an untied lm head and the norms stay
        # 16-bit, as GPTQ/AWQ/FP8 checkpoints keep them.
        untied_head = 0 if m.tie_embeddings else m.lm_head_params
        matmul_bytes = (m.dense_matmul_params + m.expert_matmul_params) * bpp
        matmul_bytes += (m.embedding_params + untied_head) * 2.0
        object.__setattr__(self, "weight_bytes_per_gpu", (matmul_bytes + m.norm_params * 2.0) / tp)
        if self.expert_parallel.enabled:
            object.__setattr__(self, "weight_bytes_per_gpu", weight_bytes_per_gpu(
                m, self.expert_parallel, tp, matmul_bytes + m.norm_params * 2.0, bpp))
        # Peak activations of one forward pass over the token budget (what vLLM's profiling run measures):
        # hidden states and the MLP intermediate for every batched token, plus fp32 logits for sampled rows.
        act = self.token_budget * (4 * m.hidden + 2 * m.ffn // tp) * 2.0
        act += self.max_num_seqs * m.vocab * 4.0
        object.__setattr__(self, "activation_bytes_per_gpu", act)
        kv_heads_per_gpu = max(1, m.kv_heads // tp)  # vLLM replicates KV heads when TP exceeds them
        elem = KV_CACHE_DTYPES[self.kv_cache_dtype]
        if m.is_mla:
            growth = m.full_attn_layers * m.kv_bytes_per_token_per_layer(kv_heads_per_gpu, elem)
        else:
            growth = 2.0 * m.full_attn_layers * kv_heads_per_gpu * m.head_dim * elem
        window = m.window_layers * m.kv_bytes_per_token_per_layer(kv_heads_per_gpu, elem)
        window_tokens = m.window_hold_tokens(self.block_size)
        # Linear-attention state: 16-bit, or the config's mamba_ssm_dtype (vLLM's mamba_ssm_cache_dtype); its heads
        # split over TP.
        state = m.linear_layers * m.linear_state_bytes_per_gpu(tp)
        fixed = window * window_tokens + state
        object.__setattr__(self, "kv_growth_bytes_per_token_per_gpu", growth)
        object.__setattr__(self, "kv_window_bytes_per_token_per_gpu", window)
        object.__setattr__(self, "kv_fixed_bytes_per_seq_per_gpu", fixed)
        per_token, reserved, windows_per_token = self.kv_pool_plan(growth, window, window * window_tokens, state)
        object.__setattr__(self, "kv_bytes_per_token_per_gpu", per_token)
        object.__setattr__(self, "kv_reserved_bytes_per_gpu", reserved)
        object.__setattr__(self, "kv_windows_per_token", windows_per_token)

    def kv_pool_plan(self, growth: float, window: float, window_fixed: float, state: float) -> tuple[float, float,
                                                                                                        bool]:
        """(bytes per token, bytes reserved, windows charged per token) of the engine's KV pool.

        The engine's pool pages every sequence's context in blocks of one size; vLLM's hybrid manager also frees
        the blocks that slide out of a window and keeps a linear layer's state in one block per sequence. The
        simulator does neither (kernel/kv_pool.py pages context only), so it charges those layers conservatively,
        never less than vLLM holds: each linear layer's state is reserved for max_num_seqs sequences out of the
        pool, and windowed layers are either charged for every token of context like full attention (what vLLM
        does with --disable-hybrid-kv-cache-manager) or reserved at their full window for max_num_seqs sequences,
        whichever leaves more blocks. Models without windows or linear layers: (growth, 0, False) exactly."""
        if not window:
            return growth, state * self.max_num_seqs, False
        if self.windowed_kv == "equal_pools" and growth > 0:
            return self.equal_pools_plan(growth, window, state)
        free = self.usable_bytes - self.weight_bytes_per_gpu - self.reserve_bytes - state * self.max_num_seqs
        reserve_windows = free - window_fixed * self.max_num_seqs
        if growth > 0 and reserve_windows / growth > free / (growth + window):
            return growth, (state + window_fixed) * self.max_num_seqs, False
        return growth + window, state * self.max_num_seqs, True

    def equal_pools_plan(self, growth: float, window: float, state: float) -> tuple[float, float, bool]:
        """kv_pool_plan for an engine that groups layers by attention window and gives each group an equal share
        of the KV memory (TensorRT-LLM: BaseKVCacheManager::calculateMaxNumBlocks, engines.json windowed_kv
        equal_pools). Its chunked-attention layers are no window to the cache (the chunk is an attention-kernel
        argument), so they hold every token like full attention; sliding-window layers get a pool as large as the
        full-attention layers' own, whose share then bounds the context: each token costs the full-attention layers'
        bytes once per group. The window pool, needing only a window's blocks per sequence, is never the bound."""
        if self.model.window_kind == "chunked":
            return growth + window, state * self.max_num_seqs, True
        return 2.0 * growth, state * self.max_num_seqs, False

    @property
    def usable_bytes(self) -> float:
        return self.gpu.mem_gib * GIB * self.gpu_memory_utilization

    @property
    def reserve_bytes(self) -> float:
        return self.gpu.runtime_reserve_gib * GIB + self.activation_bytes_per_gpu

    @property
    def kv_bytes_per_block(self) -> float:
        return self.kv_bytes_per_token_per_gpu * self.block_size

    @property
    def kv_free_bytes(self) -> float:
        """What memory leaves for the KV cache on one GPU, before any reservation."""
        return self.usable_bytes - self.weight_bytes_per_gpu - self.reserve_bytes

    @property
    def num_kv_blocks(self) -> int:
        free = self.usable_bytes - self.weight_bytes_per_gpu - self.reserve_bytes
        if self.kv_reserved_bytes_per_gpu:
            free -= self.kv_reserved_bytes_per_gpu
        return max(0, int(free // self.kv_bytes_per_block))

    @property
    def hybrid_kv_capacity_tokens(self) -> int:
        """The free KV memory over what each further token of context adds (full-attention or MLA layers), in
        whole blocks: the context tokens vLLM's hybrid KV cache manager could hold at once were no memory spent on
        windows or linear state (those come out of the same pool, per sequence). For a model without either it
        is vLLM's "GPU KV cache size"; for a hybrid model vLLM's log line divides its pool among its KV cache
        groups and prints less."""
        per_block = self.kv_growth_bytes_per_token_per_gpu * self.block_size
        return max(0, int(self.kv_free_bytes // per_block)) * self.block_size if per_block else 0

    @property
    def longest_sequence_tokens(self) -> int:
        """The longest sequence whose KV the free memory holds, in whole blocks, as vLLM checks it at start-up
        (check_enough_kv_cache_memory: each layer's most memory for one sequence of max_model_len tokens, which
        for windowed and linear layers is their fixed share): the context tokens over the memory left after one
        sequence's fixed bytes."""
        per_block = self.kv_growth_bytes_per_token_per_gpu * self.block_size
        if not per_block:
            return 0
        return max(0, int((self.kv_free_bytes - self.kv_fixed_bytes_per_seq_per_gpu) // per_block)) * self.block_size

    def kv_report(self) -> dict[str, float | int]:
        """The KV figures a run reports, across all GPUs of one engine: what each further token of context adds
        (GQA heads split over the TP ranks; MLA's latent replicated on every rank, as vLLM keeps it), each
        sequence's fixed bytes (its windows' blocks and its linear layers' state), the context tokens the free
        memory holds at kv_bytes_per_token (hybrid_kv_capacity_tokens), and what the engine's pool charges per
        token and reserves (the simplification kv_pool_plan describes)."""
        tp = self.tp
        return {"kv_bytes_per_token": self.kv_growth_bytes_per_token_per_gpu * tp,
                "kv_bytes_per_sequence_fixed": self.kv_fixed_bytes_per_seq_per_gpu * tp,
                "kv_capacity_tokens": self.hybrid_kv_capacity_tokens,
                "kv_pool_bytes_per_token": self.kv_bytes_per_token_per_gpu * tp,
                "kv_pool_reserved_bytes": self.kv_reserved_bytes_per_gpu * tp}

    def kv_simplification(self) -> str | None:
        """What the engine's KV pool does differently from vLLM's hybrid manager for this model (None: nothing)."""
        m = self.model
        if not (m.window_layers or m.linear_layers):
            return None
        if self.windowed_kv == "equal_pools" and m.full_attn_layers and not m.linear_layers:
            how = ("keep every token, like full attention" if m.window_kind == "chunked" else
                   "in a pool as large as the full-attention layers' own")
            return (f"{m.key}: as the engine holds them, its {m.window_layers} {m.window_kind}-window layers "
                    f"(window {m.window}) {how}: each token of context costs "
                    f"{fmt_gb(self.kv_bytes_per_token_per_gpu * 1e6)} per million on each GPU (docs/MODEL.md)")
        parts = []
        if m.window_layers:
            how = ("charged for every token of context, like full attention (vLLM with "
                   "--disable-hybrid-kv-cache-manager)" if self.kv_windows_per_token else
                   f"reserved at a whole window for each of max_seqs={self.max_num_seqs} sequences")
            parts.append(f"its {m.window_layers} {m.window_kind}-window layers (window {m.window}) are {how}")
        if m.linear_layers:
            parts.append(f"its {m.linear_layers} linear-attention layers' state is reserved for each of "
                         f"max_seqs={self.max_num_seqs} sequences")
        return (f"{m.key}: the simulated KV pool is conservative: " + "; ".join(parts)
                + f" ({fmt_gb(self.kv_reserved_bytes_per_gpu)} reserved per GPU); vLLM's hybrid KV cache manager "
                  f"pays only for the windows' last blocks and each running sequence's state, out of a pool of "
                  f"{self.hybrid_kv_capacity_tokens:,} tokens of context (docs/MODEL.md)")

    @property
    def uses_fp8_tensor_cores(self) -> bool:
        return self.quantization == "fp8" and self.gpu.fp8_tflops is not None

    @property
    def uses_fp4_tensor_cores(self) -> bool:
        return self.quantization == "fp4" and self.gpu.fp4_tflops is not None

    @property
    def fp8_block_scaled(self) -> bool:
        """FP8 weights with a scale per block: the model's checkpoint has them (DeepSeek's), so its FP8 GEMMs run
        block-scaled kernels."""
        return self.quantization == "fp8" and self.model.fp8_weight_block > 0

    @property
    def peak_tflops(self) -> float:
        if self.uses_fp4_tensor_cores:
            return self.gpu.fp4_tflops
        return self.gpu.fp8_tflops if self.uses_fp8_tensor_cores else self.gpu.fp16_tflops


class SetupError(ValueError):
    """A deployment that cannot run; the message says why and what to change, `field` the scenario field that
    is the most direct fix."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def fmt_gb(nbytes: float) -> str:
    return f"{nbytes / GIB:.1f} GB"


@dataclass(frozen=True)
class ServingSettings:
    """The serving engine's memory and batching settings a deployment's memory budget depends on (vLLM's engine
    arguments of these names; token_budget is its max_num_batched_tokens)."""

    gpu_memory_utilization: float  # fraction of the GPU's memory the engine may use
    block_size: int  # tokens per KV-cache block
    token_budget: int  # most tokens one step computes: sizes the activations reserved
    max_num_seqs: int  # most sequences one step runs: sizes the logits reserved
    windowed_kv: str = "hybrid"  # how the engine's KV pool holds windowed layers (engines.json windowed_kv)


def resolve_setup(hardware: str, model: str | Model | None, quantization: str, tp: int, serving: ServingSettings,
                  kv_cache_dtype: str = "auto", expert_parallel: ExpertParallel = NO_EP,
                  scale_out_link: str | None = None) -> Setup:
    """The deployment of `model` (a catalogue key, a Model read from a config file, or None: the GPU's default) on
    `tp` GPUs of kind `hardware`, with its memory budget; SetupError, naming the field to change, if it cannot
    run."""
    gpu = GPUS[hardware]
    m = model if isinstance(model, Model) else MODELS[model or gpu.default_model]
    quantization = weight_format(quantization, m, gpu).quantization
    if quantization == "fp4" and gpu.fp4_tflops is None:
        fp4_gpus = ", ".join(k for k, g in GPUS.items() if g.fp4_tflops is not None)
        raise SetupError(f"quantization=fp4 needs FP4 tensor cores, which {gpu.key} ({gpu.name}) does not have; "
                         f"GPUs with them: {fp4_gpus}. On this GPU pick fp8 or int4 (weight-only 4-bit), or auto "
                         f"(an MXFP4/NVFP4 checkpoint then runs weight-only, as vLLM runs it here)", "quantization")
    if expert_parallel.enabled and m.experts <= 1:
        raise SetupError(f"{m.key} is dense: ep={expert_parallel.ep} spreads a mixture-of-experts model's experts "
                         f"(leave ep at 1 and use tp or replicas)", "ep")
    if m.heads % tp != 0:
        divisors = ", ".join(str(d) for d in range(1, MAX_TP + 1) if m.heads % d == 0 and not tp_problem(d))
        raise SetupError(f"tp={tp} does not divide {m.key}'s {m.heads} attention heads; pick one of {divisors}",
                         "tp")
    setup = Setup(gpu, m, quantization, tp, serving.gpu_memory_utilization, serving.block_size, serving.token_budget,
                  serving.max_num_seqs, kv_cache_dtype, expert_parallel, serving.windowed_kv, scale_out_link)
    usable = setup.usable_bytes
    if setup.weight_bytes_per_gpu + setup.reserve_bytes >= usable:
        total_weights = setup.weight_bytes_per_gpu * tp
        lighter = [q for q in ("int4", "int8", "fp8") if QUANTIZATIONS[q] < QUANTIZATIONS[quantization]]
        smaller = "/".join(lighter) + ", " if lighter else ""
        raise SetupError(
            f"{m.key} needs {fmt_gb(total_weights)} of weights in {quantization}"
            + (f" ({fmt_gb(setup.weight_bytes_per_gpu)} per GPU at tp={tp})" if tp > 1 else "")
            + f" plus {fmt_gb(setup.reserve_bytes)} runtime reserve; {gpu.key} has {gpu.mem_gib:g} GB"
            + f" ({fmt_gb(usable)} at gpu_memory_utilization={serving.gpu_memory_utilization:g})"
            + f" — {_what_fits(m, gpu, quantization, tp, serving, kv_cache_dtype)}; or pick {smaller}another GPU",
            "model",
        )
    if setup.num_kv_blocks < 1:
        fixed = (f"; its windows and linear-attention state take {fmt_gb(setup.kv_reserved_bytes_per_gpu)} per GPU "
                 f"reserved for max_seqs={serving.max_num_seqs} sequences (lower max_seqs)"
                 if setup.kv_reserved_bytes_per_gpu else "")
        raise SetupError(f"{m.key} on {gpu.key} leaves no memory for the KV cache ("
                         f"{_what_fits(m, gpu, quantization, tp, serving, kv_cache_dtype)}){fixed}", "model")
    return setup


def _what_fits(m: Model, gpu: GPU, quantization: str, tp: int, serving: ServingSettings,
               kv_cache_dtype: str) -> str:
    """Which tensor-parallel degree would run the model on this GPU (across nodes, with the expert-parallel degree
    that would too), or how many GPUs' memory it needs."""
    ep = ep_that_fits(m, lambda plan: Setup(gpu, m, quantization, 1, serving.gpu_memory_utilization,
                                            serving.block_size, serving.token_budget, serving.max_num_seqs,
                                            kv_cache_dtype, plan, serving.windowed_kv))
    for t in range(tp + 1, MAX_TP + 1):
        if m.heads % t or tp_problem(t):
            continue
        s = Setup(gpu, m, quantization, t, serving.gpu_memory_utilization, serving.block_size, serving.token_budget,
                  serving.max_num_seqs, kv_cache_dtype, windowed_kv=serving.windowed_kv)
        if s.weight_bytes_per_gpu + s.reserve_bytes < s.usable_bytes and s.num_kv_blocks >= 1:
            domain = domain_gpus(gpu)
            if t <= domain:
                return f"it fits at tp={t} ({t} GPUs)"
            return f"it fits at tp={t} ({t} GPUs: {math.ceil(t / domain)} nodes of {domain})" + (f"; {ep}" if ep else "")
    one = Setup(gpu, m, quantization, 1, serving.gpu_memory_utilization, serving.block_size, serving.token_budget,
                serving.max_num_seqs, kv_cache_dtype, windowed_kv=serving.windowed_kv)
    room = one.usable_bytes - one.reserve_bytes
    need = math.ceil(one.weight_bytes_per_gpu / room) if room > 0 else 0
    gpus = f"at least {need} GPUs' memory for its weights alone, " if need else ""
    return f"it needs {gpus}more than tp={MAX_TP} of {gpu.key} gives one engine" + (f"; {ep}" if ep else "")


def blocks_for(tokens: int, block_size: int) -> int:
    return math.ceil(tokens / block_size)
