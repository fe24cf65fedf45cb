"""Derive the AMD GPUs' GEMM bandwidth efficiencies and fused-MoE floors (sim_core/data/gpus.json) from AMD's own
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
Fused MoE: per shape, the bandwidth it streams the experts its tokens touch at (16-128 tokens), and its time at
one token (two where the table starts there); the medians per architecture.
Nothing here is run at simulation time: the numbers are copied into gpus.json with this script's output cited.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

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


BYTES_PER_WEIGHT = {"fp8": 1.0, "fp8 block": 1.0, "fp4": 0.5, "bf16": 2.0}


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
    """{(table, part, model_dim, inter_dim, experts, top_k, weight dtype, quant type): [(tokens, us), ...]}: every
    fused-MoE row of the parts above with a time, in each table's order (the grouped table left out: another
    kernel, top-k -1 in its rows)."""
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
                    shapes[(path.name, part, *dims, row.get("q_dtype_w", ""), row.get("q_type"))].append((tokens, us))
    return shapes


def moe_single_token_us(shapes: dict[tuple, list[tuple[int, float]]]) -> dict[tuple, list[float]]:
    """Per part: each tuned shape's time at its fewest tokens, where that is one or two."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for shape, rows in shapes.items():
        tokens, us = min(rows, key=lambda r: r[0])
        if tokens <= 2:
            out[shape[1]].append(us)
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


def moe_stream_efficiency(shapes: dict[tuple, list[tuple[int, float]]]) -> dict[tuple, list[float]]:
    """Per tuned shape with all of a layer's experts (>= 64: not an expert-parallel rank's share), the median over
    16-128 tokens of the expected bytes of the experts those tokens touch (E(1-(1-k/E)^T), uniform routing) over
    the time, as a fraction of the part's peak bandwidth: the bandwidth the fused MoE streams experts at."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for (_, part, dim, inter, experts, top_k, w, _), rows in shapes.items():
        bpp = 0.5 if "float4" in w or "int4" in w else 1.0 if "float8" in w or "int8" in w else 2.0
        effs = [experts * (1.0 - (1.0 - top_k / experts) ** tokens) * 3 * dim * inter * bpp / (us * 1e-6)
                / PARTS[part][1] for tokens, us in rows if 16 <= tokens <= 128]
        if experts >= 64 and effs:
            # Above 1.0 the uniform-routing count of touched experts is wrong for the shape (a fused shared expert
            # always read, a router the tuner does not draw uniformly): main leaves it out, and counts it.
            out[part].append(statistics.median(effs))
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
    print("Fused MoE at 16-128 tokens: touched experts' bytes / time, as a fraction of peak bandwidth")
    shapes = moe_rows(configs)
    for part, effs in sorted(moe_stream_efficiency(shapes).items()):
        kept = [e for e in effs if e <= 1.0]
        print(f"  {PARTS[part][0]:14s} {len(kept):3d} shapes, median {statistics.median(kept):.3f} "
              f"(range {min(kept):.3f}-{max(kept):.3f}; {len(effs) - len(kept)} above 1.0 left out)")
    print("Fused MoE layer at one token, per tuned shape")
    for part, times in sorted(moe_single_token_us(shapes).items()):
        print(f"  {PARTS[part][0]:14s} {len(times):3d} shapes, median {statistics.median(times):.1f} us "
              f"(range {min(times):.1f}-{max(times):.1f})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
