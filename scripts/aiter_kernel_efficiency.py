"""Derive the AMD GPUs' GEMM bandwidth efficiencies and fused-MoE fixed times (sim_core/data/gpus.json) from AMD's own
kernel timings: the tuned-configuration tables of ROCm/aiter (aiter/configs/**/*tuned*.csv), in which AMD records,
for each GEMM shape (M, N, K) or fused-MoE shape (tokens, model_dim, inter_dim, experts, top-k) it tuned on a given
architecture and CU count, the time in microseconds of the fastest kernel it found.

    python scripts/aiter_kernel_efficiency.py PATH_TO_AITER_CHECKOUT

The figures in gpus.json come from ROCm/aiter at commit e4048607a535ace3a2b51ded31b1c8c2d45c0879 (2026-08-22).

GEMMs at decode sizes: the rows of at most 64 tokens whose weights are large enough for their read to dominate
(>= 10 MB); each row's efficiency is its weight bytes over (its time less the cost model's launch floor, 4 us),
as a fraction of the part's peak bandwidth: the form in which sim_core/kernel/cost_model.py times a GEMM. GEMMs
when compute-bound: the rows of at least 4,096 tokens with N and K of at least 2,048, FLOPs over time as a
fraction of the format's dense peak. A shape tuned in several tables counts once (its fastest time); the a8w8
tables' INT8 rows are left out.
Medians per architecture and weight format, from the table's name: a8w8 files are FP8 (block-scaled where the name
says blockscale), a4w4 or fp4 ones MXFP4, the rest 16-bit.
Fused MoE: per shape, the line through its times at 1-128 tokens against the bytes of the experts those tokens
touch, a fixed time plus those bytes at one bandwidth (the form of moe_layer_fixed_us and moe_bw_efficiency); the
medians per architecture.
Nothing here is run at simulation time: the numbers are copied into gpus.json with this script's output cited.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from sim_core.catalog import QUANTIZATIONS

# Architectures by (gfx, CU count): the parts whose tables these are, and the peak bandwidth they are read against.
# gfx942 at 304 CUs is MI300X and MI325X (one table serves both; aiter PR #3951 tuned its DeepSeek rows on
# MI325X); gfx950 at 256 CUs is MI355X (and MI350X, at the same 8 TB/s).
PARTS = {("gfx942", 304): ("MI300X/MI325X", 6.0e12), ("gfx950", 256): ("MI355X", 8.0e12)}
GEMM_LAUNCH_FLOOR_US = 4.0
DECODE_ROWS = 64
MIN_WEIGHT_BYTES = 10e6


def weight_format(name: str) -> str:
    """A table's weight format from its name: fp8 with one scale per 128x128 block (DeepSeek's), fp8 with per-tensor
    or per-row scales, fp4, or 16-bit (a8w8 files are 8-bit even where the model's experts are MXFP4)."""
    if "a8w8" in name:
        return "fp8 block" if "blockscale" in name else "fp8"
    return "fp4" if "a4w4" in name or "fp4" in name else "bf16"


# Bytes per weight as the cost model counts them (sim_core.catalog.QUANTIZATIONS, scales included), so that its
# bytes at the bandwidth read here take the measured time.
BYTES_PER_WEIGHT = {"fp8": QUANTIZATIONS["fp8"], "fp8 block": QUANTIZATIONS["fp8"], "fp4": QUANTIZATIONS["fp4"],
                    "bf16": QUANTIZATIONS["bf16"]}


def gemm_rows(configs: Path) -> dict[tuple, float]:
    """{(part, format, M, N, K): us}: every tuned GEMM row of the parts above, FP8 or FP4 or 16-bit (INT8 rows of the
    a8w8 tables left out: they are not FP8), a shape tuned in several tables counted once, at its fastest time."""
    rows: dict[tuple, float] = {}
    for path in sorted(configs.rglob("*tuned*gemm*.csv")):
        if "untuned" in path.name or "batched" in path.name:
            continue
        fmt = weight_format(path.name)
        with path.open() as f:
            for row in csv.DictReader(f):
                try:
                    part = (row["gfx"], int(row["cu_num"]))
                    m, n, k, us = int(row["M"]), int(row["N"]), int(row["K"]), float(row["us"])
                except (KeyError, ValueError):
                    continue
                if part not in PARTS or us <= 0 or "int8" in row.get("q_dtype_w", ""):
                    continue
                key = (part, fmt, m, n, k)
                rows[key] = min(us, rows.get(key, us))
    return rows


def gemm_efficiencies(rows: dict[tuple, float]) -> dict[tuple, list[float]]:
    """Per (part, format): each row of at most 64 tokens whose weights reach 10 MB, its weight bytes over its time
    less the launch floor, as a fraction of the part's peak bandwidth."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for (part, fmt, m, n, k), us in rows.items():
        weights = n * k * BYTES_PER_WEIGHT[fmt]
        if m <= DECODE_ROWS and weights >= MIN_WEIGHT_BYTES and us > GEMM_LAUNCH_FLOOR_US:
            out[(part, fmt)].append(weights / ((us - GEMM_LAUNCH_FLOOR_US) * 1e-6) / PARTS[part][1])
    return out


def moe_rows(configs: Path) -> dict[tuple, list[tuple[int, float]]]:
    """{(table, part, model_dim, inter_dim, experts, top_k, weight dtype, activation dtype): [(tokens, us), ...]}:
    every fused-MoE row of the parts above with a time (`us`: its two GEMM stages, us1 + us2; the sorting kernel
    is not in it), in each table's order (the grouped table left out: another kernel, top-k -1 in its rows)."""
    shapes: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
    for path in sorted(configs.rglob("*tuned*moe*.csv")):
        if "untuned" in path.name or "grouped" in path.name:
            continue
        with path.open() as f:
            for row in csv.DictReader(f):
                try:
                    cu, tokens, us = int(row["cu_num"]), int(row["token"]), float(row["us"])
                    dims = tuple(int(row[k]) for k in ("model_dim", "inter_dim", "expert", "topk"))
                except (KeyError, ValueError):
                    continue
                part = next((p for p in PARTS if p[1] == cu), None)
                if part is not None and us > 0:
                    key = (path.name, part, *dims, row.get("q_dtype_w", ""), row.get("q_dtype_a", ""))
                    shapes[key].append((tokens, us))
    return shapes


def fixed_and_bandwidth(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least-squares line through (bytes, us) points: (fixed us, bytes per second, the line's worst relative miss
    over the points) of the form the cost model times a fused MoE layer in, a fixed time plus the experts its
    tokens touch streamed at one bandwidth."""
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    slope = (sum((b - mean_b) * (t - mean_t) for b, t in points)
             / sum((b - mean_b) ** 2 for b, _ in points))  # us per byte
    fixed, bandwidth = mean_t - slope * mean_b, 1.0 / (slope * 1e-6)
    return fixed, bandwidth, max(abs(fixed + b / bandwidth * 1e6 - t) / t for b, t in points)


MOE_MAX_TOKENS = 128
MOE_MIN_ROWS = 4


def moe_expert_format(weights: str, activations: str) -> str:
    """The gpus.json expert format of a fused-MoE table's dtypes: fp8 (W8A8) and fp4 (W4A4), the moe_*_fp8 / _fp4
    fields; bf16 (16-bit weights), the unsuffixed ones; "mixed" (W4A16, W4A8, INT4 weights): no field."""
    if "float4" in weights and "float4" in activations:
        return "fp4"
    if "float8" in weights and "float8" in activations:
        return "fp8"
    return "bf16" if "bfloat16" in weights or "float16" in weights else "mixed"


def touched_experts(experts: int, top_k: int, tokens: int) -> float:
    """Expected experts `tokens` tokens touch under uniform routing. An odd count is a fused shared expert beside
    an even number of routed ones (DeepSeek's 256 + 1, top-8 + 1): read at every step, the rest routed."""
    shared = experts % 2
    routed, k = experts - shared, top_k - shared
    return shared + routed * (1.0 - (1.0 - k / routed) ** tokens)


def moe_fits(shapes: dict[tuple, list[tuple[int, float]]]) -> dict[tuple, list[tuple[float, float, float]]]:
    """Per (part, expert format): for each tuned shape with all of a layer's experts (>= 64: not an expert-parallel
    rank's share) and at least four rows of 1-128 tokens, the fixed time (us), the bandwidth (fraction of the
    part's peak) of the line through its times against the bytes of the experts its tokens touch, and the line's
    worst relative miss over those rows."""
    out: dict[tuple, list[tuple[float, float, float]]] = defaultdict(list)
    for (_, part, dim, inter, experts, top_k, w, a), rows in shapes.items():
        fmt = moe_expert_format(w, a)
        bpp = QUANTIZATIONS["int4" if "int4" in w else "fp4" if "float4" in w else "fp8" if "float8" in w else "bf16"]
        points = [(touched_experts(experts, top_k, tokens) * 3 * dim * inter * bpp, us)
                  for tokens, us in rows if tokens <= MOE_MAX_TOKENS]
        if experts >= 64 and len({b for b, _ in points}) >= MOE_MIN_ROWS:
            fixed, bandwidth, miss = fixed_and_bandwidth(points)
            out[(part, fmt)].append((fixed, bandwidth / PARTS[part][1], miss))
    return out


# Dense tensor peaks (TFLOPS) of each format on each part (gpus.json).
PEAK_TFLOPS = {("gfx942", 304): {"bf16": 1307.4, "fp8": 2614.9, "fp8 block": 2614.9},
               ("gfx950", 256): {"bf16": 2516.6, "fp8": 5033.2, "fp8 block": 5033.2, "fp4": 10066.3}}
# Compute-bound: at least 4,096 rows, and N and K of at least 2,048 (a narrow GEMM stays short of the peak for want
# of tiles, not of arithmetic).
COMPUTE_BOUND_ROWS = 4096
COMPUTE_BOUND_DIM = 2048


def gemm_compute_efficiencies(rows: dict[tuple, float]) -> dict[tuple, list[float]]:
    """Per (part, format): each compute-bound row's FLOPs over its time, as a fraction of the format's dense peak."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for (part, fmt, m, n, k), us in rows.items():
        peak = PEAK_TFLOPS[part].get(fmt)
        if peak and m >= COMPUTE_BOUND_ROWS and min(n, k) >= COMPUTE_BOUND_DIM:
            out[(part, fmt)].append(2.0 * m * n * k / (us * 1e-6) / (peak * 1e12))
    return out


def main(checkout: str) -> None:
    configs = Path(checkout) / "aiter" / "configs"
    if not configs.is_dir():
        sys.exit(f"{configs}: not a directory (give the root of a ROCm/aiter checkout)")
    print("GEMMs at decode sizes: weight bytes / (time - 4 us), as a fraction of peak bandwidth")
    rows = gemm_rows(configs)
    for (part, fmt), effs in sorted(gemm_efficiencies(rows).items()):
        q1, _, q3 = statistics.quantiles(effs, n=4)
        absolute = statistics.median(effs) * PARTS[part][1] / 1e12
        print(f"  {PARTS[part][0]:14s} {fmt:9s}: {len(effs):4d} rows, median {statistics.median(effs):.3f} "
              f"(IQR {q1:.3f}-{q3:.3f}; {absolute:.2f} TB/s)")
    print("GEMMs of >= 4096 rows, N and K >= 2048: FLOPs / time, as a fraction of the format's dense peak")
    for (part, fmt), effs in sorted(gemm_compute_efficiencies(rows).items()):
        q1, _, q3 = statistics.quantiles(effs, n=4)
        print(f"  {PARTS[part][0]:14s} {fmt:9s}: {len(effs):5d} rows, median {statistics.median(effs):.3f} "
              f"(IQR {q1:.3f}-{q3:.3f})")
    print("Fused MoE at 1-128 tokens, per tuned shape: time = fixed + touched experts' bytes / bandwidth")
    for (part, fmt), fits in sorted(moe_fits(moe_rows(configs)).items()):
        # Above 1.0 of the peak, or below zero fixed time, the uniform-routing count of touched experts is wrong
        # for the shape (a router the tuner does not draw uniformly): left out.
        kept = [(f, e, m) for f, e, m in fits if f >= 0.0 and 0.0 < e <= 1.0]
        if not kept:
            print(f"  {PARTS[part][0]:14s} {fmt:5s}: none of {len(fits)} shapes kept")
            continue
        eff = statistics.median(e for _, e, _ in kept)
        print(f"  {PARTS[part][0]:14s} {fmt:5s}: {len(kept):3d} shapes ({len(fits) - len(kept)} left out): fixed "
              f"median {statistics.median(f for f, _, _ in kept):.1f} us, bandwidth median {eff:.3f} of peak "
              f"({eff * PARTS[part][1] / 1e12:.2f} TB/s); worst miss per shape, median "
              f"{statistics.median(m for _, _, m in kept):.1%}")

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
