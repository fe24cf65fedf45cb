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
  an E4M3 scale per 16: 0.5625 bytes a weight), TRTLLM MXFP8 (E4M3, a UE8M0 scale per 32: 1.03125 bytes) and
  TRTLLM BF16 columns at 1-16 tokens. The experts touched are counted by the benchmark itself: the "Active
  experts" column of its predecessor flashinfer-ai/flashinfer#4985 (same benchmark, workload and seed 42), so the
  bytes below are that count times an expert's bytes, not an estimate.
- Hopper: sgl-project/sglang#11730 (merged, 2025-10) on H200 (4.8 TB/s): SGLang's Triton fused MoE, FP8 W8A8,
  Qwen3-235B-A22B at TP8 (hidden 4096, expert intermediate 1536 / 8 = 192 per rank, 128 experts, top-8), the
  "Without tuned kernel" block of tuning_fused_moe_triton.py, 1-32 tokens. The tuner draws its routing at
  random, so the touched experts are the uniform-routing estimate E(1-(1-k/E)^T). Its bandwidth is an untuned
  configuration's and is not used (tuned configurations stream DeepSeek's experts near the roofline on H200:
  vllm-project/vllm#32832, two Triton MoE kernels ~109 us at 16 tokens for ~554 MB); its fixed time is.
"""

from __future__ import annotations

from aiter_kernel_efficiency import fixed_and_bandwidth

DEEPSEEK_EXPERT_WEIGHTS = 3 * 7168 * 2048
# tokens -> (active local experts (flashinfer#4985), TRTLLM NVFP4, MXFP8, BF16 ms (flashinfer#5301))
B300_DEEPSEEK_EP8 = {1: (2, 0.025920, 0.038176, 0.051185), 2: (4, 0.036177, 0.055824, 0.079265),
                     4: (7, 0.050096, 0.079152, 0.117761), 8: (10, 0.065120, 0.099168, 0.156817),
                     16: (13, 0.075024, 0.120449, 0.192450)}
# The expert formats of gpus.json's moe_* fields each column times: _fp4, _fp8, and the unsuffixed 16-bit pair.
B300_COLUMNS = (("fp4", "NVFP4", 1, 0.5625), ("fp8", "MXFP8", 2, 1.03125), ("bf16", "BF16", 3, 2.0))
B300_PEAK_BW = 8.0e12
# sglang#11730: tokens -> Triton FP8 W8A8 kernel time (us), Qwen3-235B TP8 on H200, untuned configuration
H200_QWEN3_235B_TP8 = {1: 31.70, 2: 36.56, 4: 49.67, 8: 66.87, 16: 92.36, 24: 117.38, 32: 124.99}
QWEN3_235B_RANK_EXPERT_WEIGHTS = 3 * 4096 * 192
H200_PEAK_BW = 4.8e12


def blackwell_fits() -> dict[str, tuple[float, float]]:
    """{expert format: (fixed us, fraction of peak bandwidth)} of the B300 DeepSeek rank."""
    out = {}
    for fmt, _, column, bytes_per_weight in B300_COLUMNS:
        points = [(row[0] * DEEPSEEK_EXPERT_WEIGHTS * bytes_per_weight, row[column] * 1000.0)
                  for row in B300_DEEPSEEK_EP8.values()]
        fixed, bandwidth = fixed_and_bandwidth(points)
        out[fmt] = (fixed, bandwidth / B300_PEAK_BW)
    return out


def hopper_fit() -> tuple[float, float]:
    """(fixed us, fraction of peak bandwidth) of the H200 Triton FP8 kernel."""
    experts, top_k = 128, 8
    points = [(experts * (1.0 - (1.0 - top_k / experts) ** tokens) * QWEN3_235B_RANK_EXPERT_WEIGHTS, us)
              for tokens, us in H200_QWEN3_235B_TP8.items()]
    fixed, bandwidth = fixed_and_bandwidth(points)
    return fixed, bandwidth / H200_PEAK_BW


def main() -> None:
    print("Fused MoE: time = fixed + touched experts' bytes / bandwidth (least squares)")
    names = {fmt: name for fmt, name, _, _ in B300_COLUMNS}
    for fmt, (fixed, efficiency) in blackwell_fits().items():
        print(f"  B300 TRTLLM {names[fmt]:5s} (flashinfer#5301): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} of peak")
    fixed, efficiency = hopper_fit()
    print(f"  H200 Triton FP8, untuned (sglang#11730): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} of peak")


if __name__ == "__main__":
    main()
