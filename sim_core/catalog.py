"""GPUs and models: public specs (from ../shared/reference/*.json and the models' public configs) plus the
calibration constants the cost model needs, each with the measurement it stands on.

The entries are data: sim_core/data/gpus.json and models.json, one object per GPU or model, each keeping the
text that justifies its numbers ("source", "note"); this module reads them into GPU and Model (GPUS, MODELS) and
refuses an entry with a missing or unknown key, naming file, entry and key (sim_core/data/__init__.py). To add a
GPU or a model, add an entry there (and a GPU's price row to prices.json).

The calibration constants below are model parameters shared across GPUs and stay here. A GPU entry leaves a field
out to take its default, or names a constant in place of a number ("compute_efficiency":
"MEASURED_GEMM_EFFICIENCY"; GPU_CONSTANTS lists the names), so each number is defined once, here, beside the
measurement it stands on, and the data file says which measurement an entry uses.

Units: memory in GiB (GPU memory sizes are binary: an "80 GB" A100 has 80 GiB), bandwidth in GB/s (10^9 B/s),
tensor throughput in dense (non-sparse) TFLOPS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import data
from .data import CatalogDataError

GIB = 1024**3

# ---------------------------------------------------------------------------------------------------------
# Calibration defaults. Each is a named value a GPU entry may override; comments say where the number comes from.
# ---------------------------------------------------------------------------------------------------------

# Fraction of peak DRAM bandwidth a streaming read reaches. Published STREAM/nvbandwidth-style copies reach
# ~85-92% on HBM parts (e.g. ~1.8 of 2.04 TB/s on A100-80GB, ~3.0 of 3.35 TB/s on H100 SXM) and ~85% on GDDR6.
DEFAULT_BW_EFFICIENCY = 0.85
# Fraction of dense tensor peak that the model's FP16 GEMMs reach once compute-bound. Measured: Vidur's GEMM
# profiles (microsoft/vidur data/profiling/compute, torch/cuBLAS, FP16) of the QKV/O/gate-up/down projections at
# 512-8192 rows reach 65-77% of 312 TFLOPS on A100 (Meta-Llama-3-8B, Llama-2-7b/70b) and 58-88% of 989 on H100
# (Llama-2-7b/70b); 0.72 (MEASURED_GEMM_EFFICIENCY) fits both with the cost model's smooth roofline (median
# error 5% over 2,868 profiled GEMMs). Parts without such a profile keep 0.75 or their own noted value.
DEFAULT_COMPUTE_EFFICIENCY = 0.75
MEASURED_GEMM_EFFICIENCY = 0.72
# Fixed CPU cost of one engine step (scheduling, input preparation, kernel launches with CUDA graphs). vLLM's
# v1 announcement reports the scheduler + input-prep overhead brought down to a few ms per step; 2 ms is a
# mid value for a 1-8B model.
DEFAULT_STEP_OVERHEAD_MS = 2.0
# Memory the serving runtime keeps outside weights and KV cache besides activations: CUDA context
# (~300-500 MiB), cuBLAS workspaces, CUDA graphs (vLLM logs ~0.2-1 GiB for graph capture), NCCL buffers.
DEFAULT_RUNTIME_RESERVE_GIB = 1.0
# All-reduce latency per call: Vidur's NCCL profiles (2 KB fp16 all-reduce, kernel time inside a CUDA graph)
# measure 7-10 us between 2 GPUs and 37-62 us among 4 or 8 on DGX H100 / DGX A100 (NVSwitch). Over PCIe we have
# no measurement; 25 us is an estimate (no NVLink, traffic through the host bridge).
# The floor among 4 or 8 GPUs differs by NVLink generation: Vidur's messages of 2 KB-1 MB take 34-41 us on DGX H100
# (NVLink 4, mean 38) and 61-64 us on DGX A100 (NVLink 3, mean 62); parts without a profile take 50.
NVLINK_ALLREDUCE_LATENCY_US_2_GPUS = 8.5
NVLINK_ALLREDUCE_LATENCY_US = 50.0
A100_NVLINK_ALLREDUCE_LATENCY_US = 62.0
H100_NVLINK_ALLREDUCE_LATENCY_US = 38.0
PCIE_ALLREDUCE_LATENCY_US = 25.0
# Fraction of the per-direction GPU link bandwidth a ring all-reduce reaches as bus bandwidth,
# 2(n-1)/n x bytes / time. Vidur's NCCL profiles at 64 MB: 160-190 GB/s of 300 on DGX A100 (TP2-8; 0.53-0.64),
# 280-410 GB/s of 450 on DGX H100 (0.63-0.92, 0.80-0.92 at TP4-8). Parts without a profile take 0.65.
DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY = 0.65
A100_ALLREDUCE_BUSBW_EFFICIENCY = 0.62
H100_ALLREDUCE_BUSBW_EFFICIENCY = 0.8
# Achievable fraction of the host link (PCIe) for KV swap copies with pinned memory: ~80% of the theoretical
# rate (e.g. ~25 of 32 GB/s on PCIe 4.0 x16 in bandwidthTest).
HOST_LINK_EFFICIENCY = 0.8


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    mem_gib: float
    mem_bw_gbs: float
    fp16_tflops: float  # dense FP16/BF16 tensor throughput
    fp8_tflops: float | None  # dense FP8 tensor throughput; None where the part has no FP8 tensor cores
    host_link_gbs: float  # host<->GPU, per direction (PCIe); used for KV swap
    tp_link_gbs: float  # GPU<->GPU per direction, for tensor-parallel all-reduce
    tp_link_is_nvlink: bool
    default_model: str
    bw_efficiency: float = DEFAULT_BW_EFFICIENCY
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    step_overhead_ms: float = DEFAULT_STEP_OVERHEAD_MS
    runtime_reserve_gib: float = DEFAULT_RUNTIME_RESERVE_GIB
    allreduce_busbw_efficiency: float = DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY
    nvlink_allreduce_latency_us: float = NVLINK_ALLREDUCE_LATENCY_US  # NCCL among more than 2 GPUs
    note: str = ""

    def allreduce_latency_us(self, tp: int) -> float:
        if not self.tp_link_is_nvlink:
            return PCIE_ALLREDUCE_LATENCY_US
        return NVLINK_ALLREDUCE_LATENCY_US_2_GPUS if tp <= 2 else self.nvlink_allreduce_latency_us


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

    # --- parameter counts (computed from the config, checked against published totals in the tests) ---
    @property
    def attn_params_per_layer(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        return q + kv + o + bias

    @property
    def expert_params_per_layer(self) -> int:
        """One gated MLP (gate, up, down projections)."""
        return 3 * self.hidden * self.ffn

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden * self.experts if self.experts > 1 else 0

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
        per_layer = self.attn_params_per_layer + self.experts * self.expert_params_per_layer
        per_layer += self.router_params_per_layer
        lm_head = 0 if self.tie_embeddings else self.lm_head_params
        return self.layers * per_layer + self.embedding_params + lm_head + self.norm_params

    @property
    def dense_matmul_params(self) -> int:
        """Matmul weights every token multiplies by (attention, router, and the MLP when not MoE); no lm head."""
        per_layer = self.attn_params_per_layer + self.router_params_per_layer
        if self.experts == 1:
            per_layer += self.expert_params_per_layer
        return self.layers * per_layer

    @property
    def expert_matmul_params(self) -> int:
        """All expert MLP weights across layers (0 for dense models)."""
        return self.layers * self.experts * self.expert_params_per_layer if self.experts > 1 else 0

    @property
    def active_matmul_params(self) -> int:
        """Matmul weights one token multiplies by, excluding the lm head."""
        routed = self.layers * self.experts_per_token * self.expert_params_per_layer if self.experts > 1 else 0
        return self.dense_matmul_params + routed

    @property
    def active_params(self) -> int:
        return self.active_matmul_params + self.lm_head_params + self.norm_params

    def kv_bytes_per_token(self, bytes_per_elem: float = 2.0) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_elem


# The calibration constants a gpus.json entry may name in place of a number: the per-GPU values above, each defined
# once with its measurement (the A100 and A100-40GB, H100 and H200 share theirs).
GPU_CONSTANTS: dict[str, float] = {
    "DEFAULT_BW_EFFICIENCY": DEFAULT_BW_EFFICIENCY,
    "DEFAULT_COMPUTE_EFFICIENCY": DEFAULT_COMPUTE_EFFICIENCY,
    "MEASURED_GEMM_EFFICIENCY": MEASURED_GEMM_EFFICIENCY,
    "DEFAULT_STEP_OVERHEAD_MS": DEFAULT_STEP_OVERHEAD_MS,
    "DEFAULT_RUNTIME_RESERVE_GIB": DEFAULT_RUNTIME_RESERVE_GIB,
    "NVLINK_ALLREDUCE_LATENCY_US": NVLINK_ALLREDUCE_LATENCY_US,
    "A100_NVLINK_ALLREDUCE_LATENCY_US": A100_NVLINK_ALLREDUCE_LATENCY_US,
    "H100_NVLINK_ALLREDUCE_LATENCY_US": H100_NVLINK_ALLREDUCE_LATENCY_US,
    "DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY": DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY,
    "A100_ALLREDUCE_BUSBW_EFFICIENCY": A100_ALLREDUCE_BUSBW_EFFICIENCY,
    "H100_ALLREDUCE_BUSBW_EFFICIENCY": H100_ALLREDUCE_BUSBW_EFFICIENCY,
}
MODELS_FILE = "models.json"
GPUS_FILE = "gpus.json"


def models_from(doc) -> dict[str, Model]:
    """The models of a models.json document, by key, in the file's order."""
    return data.load(doc, MODELS_FILE, Model)


def gpus_from(doc, models: dict[str, Model]) -> dict[str, GPU]:
    """The GPUs of a gpus.json document, by key, in the file's order; each one's default_model must be a model."""
    gpus = data.load(doc, GPUS_FILE, GPU, GPU_CONSTANTS)
    for key, gpu in gpus.items():
        if gpu.default_model not in models:
            raise CatalogDataError(f"{data.where(GPUS_FILE)}: entry {key!r}: key 'default_model': "
                                   f"{gpu.default_model!r} is not in {MODELS_FILE} ({', '.join(models)})")
    return gpus


MODELS: dict[str, Model] = models_from(data.read(MODELS_FILE))
GPUS: dict[str, GPU] = gpus_from(data.read(GPUS_FILE), MODELS)

# Weight formats: bytes per parameter, and whether the matmuls run on FP8 tensor cores (W8A8) or dequantise to
# FP16 (weight-only: int8/int4 as in GPTQ/AWQ/Marlin kernels; fp8 on a GPU without FP8 tensor cores).
# int4 includes group-128 scales and zeros (~4.25-4.5 effective bits).
QUANTIZATIONS: dict[str, float] = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5625}
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
    weight_bytes_per_gpu: float = field(init=False)
    activation_bytes_per_gpu: float = field(init=False)
    kv_bytes_per_token_per_gpu: float = field(init=False)

    def __post_init__(self) -> None:
        m, tp = self.model, self.tp
        bpp = QUANTIZATIONS[self.quantization]
        # Matmuls are stored in the chosen format; the embedding table, an untied lm head and the norms stay
        # 16-bit, as GPTQ/AWQ/FP8 checkpoints keep them.
        untied_head = 0 if m.tie_embeddings else m.lm_head_params
        matmul_bytes = (m.dense_matmul_params + m.expert_matmul_params) * bpp
        matmul_bytes += (m.embedding_params + untied_head) * 2.0
        object.__setattr__(self, "weight_bytes_per_gpu", (matmul_bytes + m.norm_params * 2.0) / tp)
        # Peak activations of one forward pass over the token budget (what vLLM's profiling run measures):
        # hidden states and the MLP intermediate for every batched token, plus fp32 logits for sampled rows.
        act = self.token_budget * (4 * m.hidden + 2 * m.ffn // tp) * 2.0
        act += self.max_num_seqs * m.vocab * 4.0
        object.__setattr__(self, "activation_bytes_per_gpu", act)
        kv_heads_per_gpu = max(1, m.kv_heads // tp)  # vLLM replicates KV heads when TP exceeds them
        object.__setattr__(
            self, "kv_bytes_per_token_per_gpu",
            2.0 * m.layers * kv_heads_per_gpu * m.head_dim * KV_CACHE_DTYPES[self.kv_cache_dtype]
        )

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
    def num_kv_blocks(self) -> int:
        free = self.usable_bytes - self.weight_bytes_per_gpu - self.reserve_bytes
        return max(0, int(free // self.kv_bytes_per_block))

    @property
    def uses_fp8_tensor_cores(self) -> bool:
        return self.quantization == "fp8" and self.gpu.fp8_tflops is not None

    @property
    def peak_tflops(self) -> float:
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


def resolve_setup(hardware: str, model: str | None, quantization: str, tp: int, serving: ServingSettings,
                  kv_cache_dtype: str = "auto") -> Setup:
    """The deployment of `model` (None: the GPU's default) on `tp` GPUs of kind `hardware`, with its memory budget;
    SetupError, naming the field to change, if it cannot run."""
    gpu = GPUS[hardware]
    m = MODELS[model or gpu.default_model]
    if m.heads % tp != 0:
        divisors = ", ".join(str(d) for d in range(1, 9) if m.heads % d == 0)
        raise SetupError(f"tp={tp} does not divide {m.key}'s {m.heads} attention heads; pick one of {divisors}",
                         "tp")
    setup = Setup(gpu, m, quantization, tp, serving.gpu_memory_utilization, serving.block_size, serving.token_budget,
                  serving.max_num_seqs, kv_cache_dtype)
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
            + f" — pick {smaller}a higher tp, or another GPU",
            "model",
        )
    if setup.num_kv_blocks < 1:
        raise SetupError(f"{m.key} on {gpu.key} leaves no memory for the KV cache", "model")
    return setup


def blocks_for(tokens: int, block_size: int) -> int:
    return math.ceil(tokens / block_size)
