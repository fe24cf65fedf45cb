"""Derive the NVIDIA GPUs' fused-MoE fixed times and expert bandwidths (moe_layer_fixed_us, moe_bw_efficiency in
sim_core/data/gpus.json) from published kernel timings at 1-32 tokens, in the form the cost model times a fused MoE
layer: a fixed time plus the experts its tokens touch, streamed at one bandwidth. The same least-squares line as
scripts/aiter_kernel_efficiency.py draws through AMD's tables.

    python scripts/nvidia_moe_kernel_fit.py

The timings are transcribed below from the public pages named with them; nothing here is run at simulation time.

- Blackwell: flashinfer-ai/flashinfer#5301 (benchmarks/bench_moe_deepseek.py, 2026-09) on one B300 SXM6 (SM103,
  148 SMs, 8 TB/s HBM3e, per its hardware table): DeepSeek's shape (hidden 7168, expert intermediate 2048, 256
  experts, top-8, 8 groups / top-4), an expert-parallel rank's 32 local experts, CUDA graphs, cold L2; routing,
  the experts, finalize and the activation quantisation timed; the summary table's TRTLLM NVFP4 (E2M1 weights,
  an E4M3 scale per 16), TRTLLM MXFP8 (E4M3, a UE8M0 scale per 32) and TRTLLM BF16 columns at 1-16 tokens. The experts touched are counted by the benchmark itself: the "Active
  experts" column of its predecessor flashinfer-ai/flashinfer#4985 (same benchmark, workload and seed 42), so the
  bytes below are that count times an expert's bytes, not an estimate.
- Hopper: sgl-project/sglang#11730 (merged, 2025-10) on H200 (4.8 TB/s): SGLang's Triton fused MoE, FP8 W8A8,
  Qwen3-235B-A22B at TP8 (hidden 4096, expert intermediate 1536 / 8 = 192 per rank, 128 experts, top-8), the
  "Without tuned kernel" block of tuning_fused_moe_triton.py (CUDA-graph replays of the fused_moe call on a top-k
  output selected beforehand), 1-32 tokens. The tuner draws its routing at
  random, so the touched experts are the uniform-routing estimate E(1-(1-k/E)^T). Its bandwidth is an untuned
  configuration's and is not used (tuned configurations stream DeepSeek's experts near the roofline on H200:
  vllm-project/vllm#32832, two Triton MoE kernels ~109 us at 16 tokens for ~554 MB); its fixed time is.

The cost model charges a MoE layer's routing kernels (top-k, the token sort, the sum over each token's experts:
MOE_EXTRA_ELEMENTWISE_PER_LAYER) and its SiLU-and-mul as elementwise kernels of their own, each at its launch
floor (sim_core/kernel/layer_kernels.py). The fixed time written to gpus.json is the grouped GEMMs' alone, as
AMD's tables time them (two GEMM stages, us1 + us2): the line's, less the launch floors of the elementwise kernels
the benchmark times inside it. FlashInfer's times all four (routing from the logits to finalize, the activation
fused into the first GEMM); SGLang's tuner times fused_moe on a top-k computed outside it (sort, activation, sum:
three). The two GEMMs' own launch floors are taken off where the cost vector is filled, for every source alike.
Bytes per weight are the cost model's (sim_core.catalog.QUANTIZATIONS: NVFP4 0.5625, FP8 1.0, BF16 2.0), so
its bytes at the bandwidth found here take the measured time.
"""

from __future__ import annotations

from aiter_kernel_efficiency import fixed_and_bandwidth, touched_experts

from sim_core.catalog import QUANTIZATIONS
from sim_core.kernel.cost_constants import ELEMENTWISE_LAUNCH_FLOOR_S
from sim_core.kernel.layer_kernels import MOE_EXTRA_ELEMENTWISE_PER_LAYER

# Elementwise kernels each benchmark times inside its block that the cost model charges apart (see above).
FLASHINFER_APART = MOE_EXTRA_ELEMENTWISE_PER_LAYER + 1  # top-k, sort, sum, SiLU-and-mul
SGLANG_TUNER_APART = MOE_EXTRA_ELEMENTWISE_PER_LAYER  # sort, SiLU-and-mul, sum (top-k outside)
DEEPSEEK_EXPERT_WEIGHTS = 3 * 7168 * 2048
# tokens -> (active local experts (flashinfer#4985), TRTLLM NVFP4, MXFP8, BF16 ms (flashinfer#5301))
B300_DEEPSEEK_EP8 = {1: (2, 0.025920, 0.038176, 0.051185), 2: (4, 0.036177, 0.055824, 0.079265),
                     4: (7, 0.050096, 0.079152, 0.117761), 8: (10, 0.065120, 0.099168, 0.156817),
                     16: (13, 0.075024, 0.120449, 0.192450)}
# The expert formats of gpus.json's moe_* fields each column times: _fp4, _fp8, and the unsuffixed 16-bit pair.
B300_COLUMNS = (("fp4", "NVFP4", 1), ("fp8", "MXFP8", 2), ("bf16", "BF16", 3))
B300_PEAK_BW = 8.0e12
# sglang#11730: tokens -> Triton FP8 W8A8 kernel time (us), Qwen3-235B TP8 on H200, untuned configuration
H200_QWEN3_235B_TP8 = {1: 31.70, 2: 36.56, 4: 49.67, 8: 66.87, 16: 92.36, 24: 117.38, 32: 124.99}
QWEN3_235B_RANK_EXPERT_WEIGHTS = 3 * 4096 * 192
H200_PEAK_BW = 4.8e12


def fit(points: list[tuple[float, float]], peak_bw: float, apart: int) -> tuple[float, float, float]:
    """(the line's fixed us less `apart` elementwise launch floors, fraction of peak bandwidth, worst miss)."""
    fixed, bandwidth, miss = fixed_and_bandwidth(points)
    return fixed - apart * ELEMENTWISE_LAUNCH_FLOOR_S * 1e6, bandwidth / peak_bw, miss


def blackwell_fits() -> dict[str, tuple[float, float, float]]:
    """{expert format: fit} of the B300 DeepSeek rank."""
    return {fmt: fit([(row[0] * DEEPSEEK_EXPERT_WEIGHTS * QUANTIZATIONS[fmt], row[column] * 1000.0)
                      for row in B300_DEEPSEEK_EP8.values()], B300_PEAK_BW, FLASHINFER_APART)
            for fmt, _, column in B300_COLUMNS}


def hopper_fit() -> tuple[float, float, float]:
    """The H200 Triton FP8 kernel's fit."""
    return fit([(touched_experts(128, 8, tokens) * QWEN3_235B_RANK_EXPERT_WEIGHTS * QUANTIZATIONS["fp8"], us)
                for tokens, us in H200_QWEN3_235B_TP8.items()], H200_PEAK_BW, SGLANG_TUNER_APART)


def main() -> None:
    print("Fused MoE: time = fixed + touched experts' bytes / bandwidth (least squares); fixed shown less the "
          "elementwise kernels' launch floors the cost model charges apart")
    names = {fmt: name for fmt, name, _ in B300_COLUMNS}
    for fmt, (fixed, efficiency, miss) in blackwell_fits().items():
        print(f"  B300 TRTLLM {names[fmt]:5s} (flashinfer#5301): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} "
              f"of peak, worst miss {miss:.1%}")
    fixed, efficiency, miss = hopper_fit()
    print(f"  H200 Triton FP8, untuned (sglang#11730): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} of peak, "
          f"worst miss {miss:.1%}")


if __name__ == "__main__":
    main()
