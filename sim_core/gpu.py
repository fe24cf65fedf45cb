"""A GPU's record: its public specs and the measured constants the cost model reads for it, with the calibration
defaults those constants take where a part has no measurement of its own (each beside the measurement it stands
on). The entries are data, sim_core/data/gpus.json, which sim_core/catalog.py reads into this record.

Units: memory in GiB, bandwidth in GB/s (10^9 B/s), tensor throughput in dense (non-sparse) TFLOPS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
# Blackwell (B200 and its GB200/B300/GB300 siblings): early public B200 GEMM measurements land around 60-65% of the
# dense BF16 peak; vLLM PR #20646's GEMM benchmark (benchmarks/kernels/bench_nvfp4_gemm.py, Llama-3.1-8B's
# N=6144 K=4096 projection on a B200-class part) times torch BF16 at 1,285-1,421 TFLOPS over 512-16384 rows, 57-63% of
# the B200's 2,250, which agrees.
BLACKWELL_GEMM_EFFICIENCY = 0.62
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
# Fraction of the 16-bit dense tensor peak that routed experts with 4-bit weights dequantised in registers (W4A16:
# MXFP4 or int4 experts on a part without FP4 tensor cores, gpt-oss on Hopper) reach at large batch. Measured on an
# H100 (sgl-project/sglang#38884, an nsys profile of a live server): the Marlin W4A16 MoE kernel spends 4.863 ms on
# 1.237 TFLOP per layer per GPU in 16,384-token prefill chunks, 254 TFLOPS (0.257 of 989), bound by instruction
# issue (64 of its 220 SASS instructions per loop are tensor-core MMAs, the rest unpack and scale the weights), not
# by bandwidth (176 GB/s). TensorRT-LLM and vLLM run gpt-oss's experts on Hopper through OpenAI's triton_kernels
# matmul (NVIDIA/TensorRT-LLM#14612: Hopper's MoE backend resolves to TRITON), which upcasts MXFP4 in registers
# the same way; no large-batch timing of it was found, so the Marlin figure stands for it. The dense GEMMs'
# WEIGHT_ONLY_DEQUANT_OVERHEAD (an estimate) is left for dense weight-only models: large dense tiles amortise the
# unpacking that many small expert groups do not.
HOPPER_W4A16_MOE_EFFICIENCY = 0.257
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
    # Dense FP4 tensor throughput (block-scaled: NVFP4/MXFP4 on Blackwell, MXFP4 on CDNA 4); None (the default)
    # where the part has no FP4 tensor cores.
    fp4_tflops: float | None = None
    bw_efficiency: float = DEFAULT_BW_EFFICIENCY
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    step_overhead_ms: float = DEFAULT_STEP_OVERHEAD_MS
    runtime_reserve_gib: float = DEFAULT_RUNTIME_RESERVE_GIB
    allreduce_busbw_efficiency: float = DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY
    nvlink_allreduce_latency_us: float = NVLINK_ALLREDUCE_LATENCY_US  # NCCL among more than 2 GPUs
    # Fraction of peak DRAM bandwidth the GEMMs stream their weights at, by weight format, where the part's kernel
    # library is measured to stay below bw_efficiency at decode sizes (AMD's: aiter's tuned GEMM tables, see
    # docs/MODEL.md); None (the default): bw_efficiency. bf16 also stands for fp16; weight-only formats take
    # bw_efficiency.
    # FP8 counts per-tensor (or per-channel) scaled weights; fp8_block, weights with a scale per block (a model whose
    # checkpoint has them, Model.fp8_weight_block: DeepSeek's), whose kernels are measured apart.
    gemm_bw_efficiency_bf16: float | None = None
    gemm_bw_efficiency_fp8: float | None = None
    gemm_bw_efficiency_fp8_block: float | None = None
    gemm_bw_efficiency_fp4: float | None = None
    # Fraction of the format's dense tensor peak compute-bound GEMMs reach in FP8 and FP4 (W8A8, W4A4), where the
    # part's kernel library is measured (AMD's: the same aiter tables); None: compute_efficiency scaled by
    # FP8_GEMM_GAIN / FP4_GEMM_GAIN (sim_core/kernel/cost_model.py).
    gemm_compute_efficiency_fp8: float | None = None
    gemm_compute_efficiency_fp8_block: float | None = None
    gemm_compute_efficiency_fp4: float | None = None
    # A fused MoE layer takes moe_layer_fixed_us plus the weights of the experts its tokens touch read at
    # moe_bw_efficiency of peak: the line through measured kernel times at 1-128 tokens (AMD's: the same tables,
    # scripts/aiter_kernel_efficiency.py; NVIDIA's: published benchmarks, scripts/nvidia_moe_kernel_fit.py). The
    # fixed time (routing, sorting, the grouped GEMMs' launches and tails, finalize) is far above two launch
    # floors. The unsuffixed pair holds for every expert format without its own (_fp8: W8A8 experts, _fp4: W4A4);
    # None / 0 (the defaults): bw_efficiency, and no time beyond the launch floors.
    moe_bw_efficiency: float | None = None
    moe_bw_efficiency_fp8: float | None = None
    moe_bw_efficiency_fp4: float | None = None
    moe_layer_fixed_us: float = 0.0
    # Fraction of the 16-bit dense peak W4A16 routed experts (4-bit weights dequantised in registers) reach once
    # compute-bound, where measured (HOPPER_W4A16_MOE_EFFICIENCY); None: the dense weight-only rate.
    moe_compute_efficiency_w4a16: float | None = None
    moe_layer_fixed_us_fp8: float | None = None
    moe_layer_fixed_us_fp4: float | None = None
    # Least time one layer's decode attention kernel takes (one sequence, short context), where measured far above
    # its KV read time; 0 (the default): the launch floor only. The unsuffixed one is the kernel vLLM and SGLang
    # run (FlashAttention 3 / FlashInfer on Hopper, AITER on CDNA); _xqa, TensorRT-LLM's XQA generation kernel
    # where measured apart (None: the unsuffixed one). An engine profile names which (engines.json).
    decode_attention_floor_us: float = 0.0
    decode_attention_floor_us_xqa: float | None = None
    # Power (issue #40, sim_core/energy.py): the board power limit (TDP) and the draw with a model loaded and no
    # kernel running, in W, each cited in gpus.json's power_source (validation/energy_constants.md has every
    # capture); None where no measurement exists, and energy is refused on that part.
    board_power_w: float | None = None
    idle_power_w: float | None = None
    note: str = ""

    def gemm_bw_efficiency(self, quantization: str, block_scaled: bool = False) -> float:
        """Fraction of peak DRAM bandwidth GEMMs with weights in this format stream them at (`block_scaled`: FP8
        weights with a scale per block)."""
        fp8 = self.gemm_bw_efficiency_fp8_block if block_scaled else self.gemm_bw_efficiency_fp8
        return _first(_for_format(quantization, fp8, self.gemm_bw_efficiency_fp4, self.gemm_bw_efficiency_bf16),
                      self.bw_efficiency)

    def gemm_compute_efficiency(self, quantization: str, block_scaled: bool = False) -> float | None:
        """Fraction of the format's dense tensor peak compute-bound FP8/FP4 GEMMs reach where measured, else None."""
        fp8 = self.gemm_compute_efficiency_fp8_block if block_scaled else self.gemm_compute_efficiency_fp8
        return _for_format(quantization, fp8, self.gemm_compute_efficiency_fp4)

    def expert_bw_efficiency(self, quantization: str) -> float:
        """Fraction of peak DRAM bandwidth the fused MoE kernels stream routed experts in this format at."""
        return _first(_for_format(quantization, self.moe_bw_efficiency_fp8, self.moe_bw_efficiency_fp4),
                      self.moe_bw_efficiency, self.bw_efficiency)

    def moe_fixed_us(self, quantization: str) -> float:
        """A fused MoE layer's fixed time (us) with experts in this format."""
        return _first(_for_format(quantization, self.moe_layer_fixed_us_fp8, self.moe_layer_fixed_us_fp4),
                      self.moe_layer_fixed_us)

    def decode_attention_floor(self, kernel: str) -> float:
        """Least time (us) one layer's decode attention takes with the engine's kernel ("paged" or "xqa")."""
        return _first(self.decode_attention_floor_us_xqa if kernel == "xqa" else None, self.decode_attention_floor_us)

    def allreduce_latency_us(self, tp: int) -> float:
        if not self.tp_link_is_nvlink:
            return PCIE_ALLREDUCE_LATENCY_US
        return NVLINK_ALLREDUCE_LATENCY_US_2_GPUS if tp <= 2 else self.nvlink_allreduce_latency_us

    def out_of_range(self) -> str:
        """'key 'NAME': VALUE is outside its range (the range)' for the first constant out of its physical range
        (an efficiency outside (0, 1], a negative time), or '' when every one is within it."""
        for name in GPU_FRACTIONS:
            value = getattr(self, name)
            if value is not None and not 0.0 < value <= 1.0:  # NaN fails the comparison too
                return f"key {name!r}: {value} is outside (0, 1] (a fraction of the part's peak)"
        for name in GPU_TIMES:
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < math.inf:
                return f"key {name!r}: {value} is not a finite time >= 0"
        if self.idle_power_w is not None and not 0.0 < self.idle_power_w < (self.board_power_w or 0.0):
            return f"key 'idle_power_w': {self.idle_power_w} is not a power in (0, board_power_w)"
        for name in STREAMING_FRACTIONS:  # measured below the streaming efficiency: a kernel never streams faster
            value = getattr(self, name)
            if value is not None and value > self.bw_efficiency:
                return (f"key {name!r}: {value} is above bw_efficiency ({self.bw_efficiency}; a kernel's bandwidth "
                        f"is at most it)")
        return ""


def _for_format(quantization: str, fp8, fp4, sixteen_bit=None):
    """Of a family of per-format kernel figures, the one for this weight format (bf16 and fp16 share the 16-bit
    one); None where the format has none (weight-only int8/int4) or the figure is not measured."""
    return {"fp8": fp8, "fp4": fp4, "bf16": sixteen_bit, "fp16": sixteen_bit}.get(quantization)


def _first(*values):
    """The first value that is not None: a measured figure, else the fallbacks in order."""
    return next(v for v in values if v is not None)


# The calibration constants a gpus.json entry may name in place of a number: the per-GPU values above, each defined
# once with its measurement (the A100 and A100-40GB, H100 and H200 share theirs).
GPU_CONSTANTS: dict[str, float] = {
    "DEFAULT_BW_EFFICIENCY": DEFAULT_BW_EFFICIENCY,
    "DEFAULT_COMPUTE_EFFICIENCY": DEFAULT_COMPUTE_EFFICIENCY,
    "MEASURED_GEMM_EFFICIENCY": MEASURED_GEMM_EFFICIENCY,
    "BLACKWELL_GEMM_EFFICIENCY": BLACKWELL_GEMM_EFFICIENCY,
    "DEFAULT_STEP_OVERHEAD_MS": DEFAULT_STEP_OVERHEAD_MS,
    "DEFAULT_RUNTIME_RESERVE_GIB": DEFAULT_RUNTIME_RESERVE_GIB,
    "NVLINK_ALLREDUCE_LATENCY_US": NVLINK_ALLREDUCE_LATENCY_US,
    "A100_NVLINK_ALLREDUCE_LATENCY_US": A100_NVLINK_ALLREDUCE_LATENCY_US,
    "H100_NVLINK_ALLREDUCE_LATENCY_US": H100_NVLINK_ALLREDUCE_LATENCY_US,
    "DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY": DEFAULT_ALLREDUCE_BUSBW_EFFICIENCY,
    "A100_ALLREDUCE_BUSBW_EFFICIENCY": A100_ALLREDUCE_BUSBW_EFFICIENCY,
    "H100_ALLREDUCE_BUSBW_EFFICIENCY": H100_ALLREDUCE_BUSBW_EFFICIENCY,
    "HOPPER_W4A16_MOE_EFFICIENCY": HOPPER_W4A16_MOE_EFFICIENCY,
}

# Fields that are fractions of a peak, and fields that are times (never negative).
GPU_FRACTIONS = ("bw_efficiency", "compute_efficiency", "allreduce_busbw_efficiency", "gemm_bw_efficiency_bf16",
                 "gemm_bw_efficiency_fp8", "gemm_bw_efficiency_fp8_block", "gemm_bw_efficiency_fp4",
                 "gemm_compute_efficiency_fp8", "gemm_compute_efficiency_fp8_block", "gemm_compute_efficiency_fp4",
                 "moe_bw_efficiency", "moe_bw_efficiency_fp8", "moe_bw_efficiency_fp4", "moe_compute_efficiency_w4a16")
# The bandwidth fractions measured for particular kernels: at most bw_efficiency (the cost model counts their extra
# time as bytes beyond the streaming bandwidth's).
STREAMING_FRACTIONS = ("gemm_bw_efficiency_bf16", "gemm_bw_efficiency_fp8", "gemm_bw_efficiency_fp8_block",
                       "gemm_bw_efficiency_fp4", "moe_bw_efficiency", "moe_bw_efficiency_fp8", "moe_bw_efficiency_fp4")
GPU_TIMES = ("step_overhead_ms", "nvlink_allreduce_latency_us", "moe_layer_fixed_us", "moe_layer_fixed_us_fp8",
             "moe_layer_fixed_us_fp4", "decode_attention_floor_us", "decode_attention_floor_us_xqa")
