"""GPUs and models: public specs (from ../shared/reference/*.json and the models' public configs) plus the
calibration constants the cost model needs, each with the measurement it stands on.

Units: memory in GiB (GPU memory sizes are binary: an "80 GB" A100 has 80 GiB), bandwidth in GB/s (10^9 B/s),
tensor throughput in dense (non-sparse) TFLOPS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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


GPUS: dict[str, GPU] = {
    g.key: g
    for g in [
        GPU(
            "rtx3050", "NVIDIA RTX 3050 8GB", 8, 224, 36.4, None, 16, 16, False, "llama-3.2-1b",
            # GeForce Ampere tensor cores: 20 SM x 512 FP16 FMA/clk x 2 x 1.777 GHz = 36.4 TFLOPS with FP16
            # accumulation, half (18.2) with FP32 accumulation (derived in gpus.json). Inference stacks aimed at
            # GeForce cards (llama.cpp's cuBLAS path, TensorRT-LLM) run FP16-accumulate GEMMs, so we use that
            # rate; small consumer dies sustain ~60% of it on serving-sized GEMMs (GDDR6-starved tiles).
            compute_efficiency=0.6,
            runtime_reserve_gib=0.75,
            note="FP16-accumulate tensor rate; PCIe 4.0 x8; no NVLink",
        ),
        GPU("rtx4090", "NVIDIA RTX 4090", 24, 1008, 330.3, 330.3, 25, 25, False, "llama-3-8b",
            # Same convention as the RTX 3050: FP16-accumulate rate (330.3 dense; 165.2 with FP32 accumulate).
            compute_efficiency=0.6,
            note="FP16-accumulate tensor rate; PCIe 4.0 x16, P2P disabled by the driver"),
        GPU("l4", "NVIDIA L4", 24, 300, 121, 242.5, 32, 32, False, "llama-3-8b",
            note="datasheet rates are with sparsity; dense = half"),
        GPU("a10g", "NVIDIA A10G (AWS g5)", 24, 600, 70, None, 32, 32, False, "llama-3-8b",
            note="no public datasheet; 70 TFLOPS dense per gpus.json"),
        GPU("l40s", "NVIDIA L40S", 48, 864, 362.05, 733, 32, 32, False, "llama-3-8b"),
        GPU("a100-40gb", "NVIDIA A100 40GB SXM", 40, 1555, 312, None, 32, 300, True, "llama-3-8b",
            compute_efficiency=MEASURED_GEMM_EFFICIENCY, allreduce_busbw_efficiency=A100_ALLREDUCE_BUSBW_EFFICIENCY,
            nvlink_allreduce_latency_us=A100_NVLINK_ALLREDUCE_LATENCY_US),
        GPU("a100", "NVIDIA A100 80GB SXM", 80, 2039, 312, None, 32, 300, True, "llama-3-8b",
            compute_efficiency=MEASURED_GEMM_EFFICIENCY, allreduce_busbw_efficiency=A100_ALLREDUCE_BUSBW_EFFICIENCY,
            nvlink_allreduce_latency_us=A100_NVLINK_ALLREDUCE_LATENCY_US),
        GPU("h100", "NVIDIA H100 SXM", 80, 3350, 989.4, 1978.9, 64, 450, True, "llama-3-8b",
            compute_efficiency=MEASURED_GEMM_EFFICIENCY, allreduce_busbw_efficiency=H100_ALLREDUCE_BUSBW_EFFICIENCY,
            nvlink_allreduce_latency_us=H100_NVLINK_ALLREDUCE_LATENCY_US),
        GPU("h100-pcie", "NVIDIA H100 PCIe", 80, 2000, 756, 1513, 64, 64, False, "llama-3-8b",
            compute_efficiency=0.7),
        GPU("h200", "NVIDIA H200 SXM", 141, 4800, 989.4, 1978.9, 64, 450, True, "llama-3-8b",
            # The H100's die and clocks with faster memory: its measured GEMM efficiency.
            compute_efficiency=MEASURED_GEMM_EFFICIENCY, allreduce_busbw_efficiency=H100_ALLREDUCE_BUSBW_EFFICIENCY,
            nvlink_allreduce_latency_us=H100_NVLINK_ALLREDUCE_LATENCY_US),
        GPU("b200", "NVIDIA B200 (HGX, 1000 W)", 180, 8000, 2250, 4500, 64, 900, True, "llama-3-70b",
            # Early public B200 GEMM measurements land around 60-65% of the dense peak.
            compute_efficiency=0.62),
        GPU("mi300x", "AMD Instinct MI300X", 192, 5300, 1307.4, 2614.9, 64, 448, True, "llama-3-70b",
            # Independent MI300X GEMM benchmarks (SemiAnalysis, Dec 2024) measured roughly half of the BF16
            # dense peak; 7 Infinity Fabric links x 64 GB/s per direction feed the all-reduce.
            compute_efficiency=0.5),
    ]
}


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


MODELS: dict[str, Model] = {
    m.key: m
    for m in [
        Model("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, True, False,
              131072, published_params_b=1.24),
        Model("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", 24, 896, 14, 2, 64, 4864, 151936, True, True,
              32768, published_params_b=0.49),
        Model("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B", 28, 1536, 12, 2, 128, 8960, 151936, True, True,
              32768, published_params_b=1.54),
        Model("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct", 32, 3072, 32, 32, 96, 8192, 32064, False, False,
              4096, published_params_b=3.82),
        Model("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 11008, 32000, False, False,
              4096, published_params_b=6.74),
        Model("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 128, 13824, 32000, False, False,
              4096, published_params_b=13.02),
        Model("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, False, False,
              8192, published_params_b=8.03),
        Model("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, False, False,
              32768, published_params_b=7.24),
        Model("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, False, True,
              131072, published_params_b=7.61),
        Model("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 128, 28672, 32000, False, False,
              4096, published_params_b=68.98),
        Model("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, False, False,
              8192, published_params_b=70.6),
        Model("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 64, 8, 128, 29568, 152064, False, True,
              131072, published_params_b=72.7),
        Model("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, False, False,
              32768, experts=8, experts_per_token=2, published_params_b=46.7),
        Model("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256, False,
              False, 131072, published_params_b=405.9),
    ]
}

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


def resolve_setup(
    hardware: str,
    model: str | None,
    quantization: str,
    tp: int,
    gpu_memory_utilization: float,
    block_size: int,
    token_budget: int,
    max_num_seqs: int,
    kv_cache_dtype: str = "auto",
) -> Setup:
    gpu = GPUS[hardware]
    m = MODELS[model or gpu.default_model]
    if m.heads % tp != 0:
        divisors = ", ".join(str(d) for d in range(1, 9) if m.heads % d == 0)
        raise SetupError(f"tp={tp} does not divide {m.key}'s {m.heads} attention heads; pick one of {divisors}",
                         "tp")
    setup = Setup(gpu, m, quantization, tp, gpu_memory_utilization, block_size, token_budget, max_num_seqs,
                  kv_cache_dtype)
    usable = setup.usable_bytes
    if setup.weight_bytes_per_gpu + setup.reserve_bytes >= usable:
        total_weights = setup.weight_bytes_per_gpu * tp
        lighter = [q for q in ("int4", "int8", "fp8") if QUANTIZATIONS[q] < QUANTIZATIONS[quantization]]
        smaller = "/".join(lighter) + ", " if lighter else ""
        raise SetupError(
            f"{m.key} needs {fmt_gb(total_weights)} of weights in {quantization}"
            + (f" ({fmt_gb(setup.weight_bytes_per_gpu)} per GPU at tp={tp})" if tp > 1 else "")
            + f" plus {fmt_gb(setup.reserve_bytes)} runtime reserve; {gpu.key} has {gpu.mem_gib:g} GB"
            + f" ({fmt_gb(usable)} at gpu_memory_utilization={gpu_memory_utilization:g})"
            + f" — pick {smaller}a higher tp, or another GPU",
            "model",
        )
    if setup.num_kv_blocks < 1:
        raise SetupError(f"{m.key} on {gpu.key} leaves no memory for the KV cache", "model")
    return setup


def blocks_for(tokens: int, block_size: int) -> int:
    return math.ceil(tokens / block_size)
