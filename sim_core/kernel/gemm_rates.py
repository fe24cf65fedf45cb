"""The FLOP rates a step's GEMMs reach: the 16-bit rate at the GPU's measured efficiency, and what each weight format
(FP8 and FP4 tensor cores, weight-only dequantisation) makes of it; cost_model reads them into the cost vector."""

from __future__ import annotations

from ..catalog import QUANTIZATIONS, Setup

# FP8 (W8A8) GEMMs on FP8 tensor cores against FP16 ones on the same part (whose FP8 peak is twice the FP16
# peak): TensorRT-LLM's tuning guide measures a 2048-token prefill of Llama-3.3-70B (TP4, H100) 1.53x faster with
# FP8 weights (147.6 -> 96.2 ms, validation/tp_fp8.csv); with attention, norms and all-reduces unchanged that
# takes GEMMs ~1.8-2x faster. vLLM's FP8 documentation reports "up to a 1.6x improvement in throughput" end to
# end. We take the low end, 1.8x: FP8 GEMMs reach 90% of the fraction of peak FP16 GEMMs reach. (That TTFT row
# is therefore not an independent check of this constant; validation/h200_kernels.json is: a layer's GEMMs of
# Llama-3-8B and Llama-3-70B/TP4 timed on an H200 in FP8 and BF16 run 1.66-1.89x faster in FP8 at 1024-8192 rows.)
FP8_GEMM_GAIN = 1.8
# FP4 (W4A4: NVFP4 on Blackwell, MXFP4 on Blackwell and MI355X) GEMMs on FP4 tensor cores against BF16 ones on the
# same part (whose FP4 peak is four times the FP16 peak). Measured: vLLM PR #20646 timed its NVFP4 CUTLASS GEMM
# (benchmarks/kernels/bench_nvfp4_gemm.py, activation quantization included) against torch BF16 for Llama-3.1-8B's
# N=6144 K=4096 projection on a B200-class GPU (inferred: BF16 at 1,421 TFLOPS exceeds any Hopper): 1.68x at 1024
# rows, 1.93x at 2048, 2.16x at 4096, 2.13x at 8192 (3,025 of 9,000 TFLOPS: 34% of the FP4 peak, where BF16 reaches
# 63% of its own). We take 2.0: FP4 GEMMs reach half the fraction of peak FP16 GEMMs reach, ~1.1x FP8's rate on a
# B200. No MXFP4 GEMM measurement on MI355X was found, so MI355X takes the same constant (its FP4 peak is also 4x its
# FP16 peak). On Blackwell Ultra (B300/GB300: FP4 peak 6x FP16) the gain scales with the peak ratio, as FP8's does:
# an extrapolation, not a measurement.
FP4_GEMM_GAIN = 2.0
# Weight-only formats (int4/int8 GPTQ/AWQ via Marlin, FP8 on parts without FP8 tensor cores) dequantise weights
# to FP16 in registers: the Marlin paper (Frantar et al., 2024) shows large-batch throughput close to, but below,
# FP16 cuBLAS. Estimate (no measurement in validation/): 15% of the FP16 tensor rate lost to dequantisation.
WEIGHT_ONLY_DEQUANT_OVERHEAD = 0.15


def fp16_gemm_rate(setup: Setup, compute_efficiency: float | None = None) -> float:
    """FLOP/s large 16-bit GEMMs reach on the setup's GPU (at its catalog efficiency unless one is given)."""
    eff = setup.gpu.compute_efficiency if compute_efficiency is None else compute_efficiency
    return setup.gpu.fp16_tflops * 1e12 * eff


def linear_rate(setup: Setup, compute_efficiency: float | None = None) -> float:
    """FLOP/s the model's GEMMs reach in the setup's weight format."""
    g = setup.gpu
    fp16 = fp16_gemm_rate(setup, compute_efficiency)
    # A part whose FP8/FP4 GEMMs are measured (gpu.GPU.gemm_compute_efficiency_*) reaches that fraction of the
    # format's peak, moved by a calibrated compute_efficiency as the 16-bit rate is.
    calibrated = 1.0 if compute_efficiency is None else compute_efficiency / g.compute_efficiency
    measured = g.gemm_compute_efficiency(setup.quantization, setup.fp8_block_scaled)
    if setup.uses_fp4_tensor_cores:
        if measured is not None:
            return g.fp4_tflops * 1e12 * measured * calibrated
        return max(fp16, fp16 * FP4_GEMM_GAIN * g.fp4_tflops / (4.0 * g.fp16_tflops))
    if setup.uses_fp8_tensor_cores:
        return _fp8_rate(setup, fp16, calibrated, measured)
    if QUANTIZATIONS[setup.quantization] < 2.0:
        return fp16 / (1.0 + WEIGHT_ONLY_DEQUANT_OVERHEAD)
    return fp16


def _fp8_rate(setup: Setup, fp16: float, calibrated: float, measured: float | None) -> float:
    """FP8 tensor-core GEMMs: the part's measured fraction of its FP8 peak, else FP8_GEMM_GAIN over the 16-bit rate."""
    g = setup.gpu
    if measured is not None:
        return g.fp8_tflops * 1e12 * measured * calibrated
    return max(fp16, fp16 * FP8_GEMM_GAIN * g.fp8_tflops / (2.0 * g.fp16_tflops))


def w4a8_experts(setup: Setup, mxfp4_activations: str) -> bool:
    """Whether the routed experts run W4A8: an MXFP4 checkpoint's experts (gpt-oss's) on FP4 tensor cores, fed MXFP8
    activations by an engine that does so (engines.json mxfp4_moe_activations "fp8")."""
    return (mxfp4_activations == "fp8" and setup.uses_fp4_tensor_cores
            and setup.model.checkpoint_format == "mxfp4")


def w4a16_experts(setup: Setup) -> bool:
    """Whether the routed experts run W4A16: 4-bit weights (MXFP4, int4) on a part without FP4 tensor cores,
    dequantised to 16 bits in registers before each MMA."""
    return setup.quantization in ("int4", "fp4") and not setup.uses_fp4_tensor_cores


def expert_rate(setup: Setup, mxfp4_activations: str = "fp4", compute_efficiency: float | None = None) -> float:
    """FLOP/s the routed experts' grouped GEMMs reach: the model's GEMM rate (linear_rate), except W4A16 experts
    (w4a16_experts) on a part whose grouped W4A16 kernel is measured (gpu.HOPPER_W4A16_MOE_EFFICIENCY: issue-bound
    by the unpacking, far below the dense weight-only rate), and W4A8 experts (w4a8_experts), whose MMA with an FP8
    operand runs at the FP8 rate (CUTLASS's Blackwell table: kind::mxf8f6f4 '2x Hopper Fp8 Tensor Core',
    kind::mxf4 '4x'), at the part's measured per-block-scaled FP8 efficiency."""
    g = setup.gpu
    calibrated = 1.0 if compute_efficiency is None else compute_efficiency / g.compute_efficiency
    if w4a16_experts(setup) and g.moe_compute_efficiency_w4a16 is not None:
        return g.fp16_tflops * 1e12 * g.moe_compute_efficiency_w4a16 * calibrated
    if not w4a8_experts(setup, mxfp4_activations):
        return linear_rate(setup, compute_efficiency)
    return _fp8_rate(setup, fp16_gemm_rate(setup, compute_efficiency), calibrated,
                     g.gemm_compute_efficiency("fp8", False))

