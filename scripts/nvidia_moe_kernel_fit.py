"""Derive the NVIDIA GPUs' fused-MoE fixed times and expert bandwidths (moe_layer_fixed_us, moe_bw_efficiency in
sim_core/data/gpus.json) from published kernel timings at 1-32 tokens, in the form the cost model times a fused MoE
layer: a fixed time plus the experts its tokens touch, streamed at one bandwidth. The same least-squares line as
scripts/aiter_kernel_efficiency.py draws through AMD's tables.

    python scripts/nvidia_moe_kernel_fit.py

The timings are transcribed below from the public pages named with them; nothing here is run at simulation time.

- Blackwell: flashinfer-ai/flashinfer#4985 (merged; benchmarks/bench_moe_deepseek.py, 2026) on one B300 SXM6
  (SM103, 148 SMs, 8 TB/s HBM3e; the hardware table of its follow-up #5301, same benchmark and author). DeepSeek
  shape (hidden 7168, expert intermediate 2048, 256 experts, top-8, 8 groups / top-4), an expert-parallel rank's
  32 local experts, CUDA graphs, cold L2; routing, the experts, finalize and the activation quantisation timed.
  The table's "Active experts" column counts the local experts the seeded routing touched: the bytes below are
  that count times an expert's bytes, not an estimate. TRTLLM NVFP4 (E2M1 weights with one E4M3 scale per 16:
  0.5625 bytes a weight) and TRTLLM BF16 columns, 1-16 tokens.
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
# flashinfer#4985: tokens -> (active local experts, TRTLLM NVFP4 ms, TRTLLM BF16 ms)
B300_DEEPSEEK_EP8 = {1: (2, 0.026, 0.051), 2: (4, 0.036, 0.078), 4: (7, 0.051, 0.117), 8: (10, 0.064, 0.156),
                     16: (13, 0.076, 0.189)}
B300_PEAK_BW = 8.0e12
# sglang#11730: tokens -> Triton FP8 W8A8 kernel time (us), Qwen3-235B TP8 on H200, untuned configuration
H200_QWEN3_235B_TP8 = {1: 31.70, 2: 36.56, 4: 49.67, 8: 66.87, 16: 92.36, 24: 117.38, 32: 124.99}
QWEN3_235B_RANK_EXPERT_WEIGHTS = 3 * 4096 * 192
H200_PEAK_BW = 4.8e12


def blackwell_fits() -> dict[str, tuple[float, float]]:
    """{format: (fixed us, fraction of peak bandwidth)} of the B300 DeepSeek rank."""
    out = {}
    for name, column, bytes_per_weight in (("NVFP4", 1, 0.5625), ("BF16", 2, 2.0)):
        points = [(row[0] * DEEPSEEK_EXPERT_WEIGHTS * bytes_per_weight, row[column] * 1000.0)
                  for row in B300_DEEPSEEK_EP8.values()]
        fixed, bandwidth = fixed_and_bandwidth(points)
        out[name] = (fixed, bandwidth / B300_PEAK_BW)
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
    for name, (fixed, efficiency) in blackwell_fits().items():
        print(f"  B300 TRTLLM {name:5s} (flashinfer#4985): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} of peak")
    fixed, efficiency = hopper_fit()
    print(f"  H200 Triton FP8, untuned (sglang#11730): fixed {fixed:.1f} us, bandwidth {efficiency:.3f} of peak")


if __name__ == "__main__":
    main()
