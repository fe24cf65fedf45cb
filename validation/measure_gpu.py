"""Measure the kernels the cost model charges, on the GPU this runs on: 16-bit and FP8 GEMMs at serving shapes,
prefill (causal) and decode attention, and a streaming copy. Writes one JSON file; `validation/gpu_kernels.py`
turns it into rows of kernels.csv. Needs PyTorch with CUDA (nothing else); ~1-2 minutes on one GPU.

    python validation/measure_gpu.py OUT.json

How it times: each kernel is captured `CALLS` times in a CUDA graph (no CPU launch gaps, as in a serving
engine's CUDA-graphed step) over operands rotated through buffers well over the L2 cache (in a model's forward
pass each layer's weights are new to the cache); a replay is timed with CUDA events; the figure is the median
over `REPEATS` replays, per call. GEMMs are torch.matmul (cuBLAS) in bfloat16 and torch._scaled_mm (cuBLASLt)
in float8_e4m3fn with per-tensor scales and bfloat16 output, the W8A8 form FP8 serving engines run.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys

import torch

CALLS = 20
REPEATS = 7
L2_MULTIPLE = 4  # operand bytes per replay >= 4x the L2 cache

# (model, TP): per-GPU GEMM shapes (N, K) of one layer: QKV, O, gate+up, down.
MODELS = {
    "llama-3-8b": dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, tp=1),
    "llama-3-70b/tp4": dict(hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, tp=4),
}
GEMM_M = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
PREFILL_T = (512, 1024, 2048, 4096, 8192)
DECODE = ((1, 1024), (1, 4096), (8, 1024), (8, 4096), (32, 1024), (32, 4096), (128, 1024), (128, 4096))


def gemm_shapes(m: dict) -> dict[str, tuple[int, int]]:
    tp, d = m["tp"], m["head_dim"]
    return {
        "qkv_proj": ((m["heads"] + 2 * m["kv_heads"]) * d // tp, m["hidden"]),
        "o_proj": (m["hidden"], m["heads"] * d // tp),
        "gate_up_proj": (2 * m["ffn"] // tp, m["hidden"]),
        "down_proj": (m["hidden"], m["ffn"] // tp),
    }


def l2_bytes() -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20))


def copies(bytes_each: int) -> int:
    return max(2, min(64, -(-L2_MULTIPLE * l2_bytes() // max(bytes_each, 1))))


def time_graph(body) -> float:
    """Median seconds per call of body(i) for i in range(CALLS), captured in one CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):  # warm-up outside the graph (cuBLAS picks its algorithms here)
            body(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(CALLS):
            body(i)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / CALLS)
    del graph
    return statistics.median(times)


def gemm_bf16(m_rows: int, n: int, k: int) -> float:
    c = copies(n * k * 2)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    xs = [torch.randn(m_rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    outs = [torch.empty(m_rows, n, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    return time_graph(lambda i: torch.matmul(xs[i % c], ws[i % c].t(), out=outs[i % c]))


def gemm_fp8(m_rows: int, n: int, k: int) -> float:
    c = copies(n * k)
    f8 = torch.float8_e4m3fn
    ws = [torch.randn(n, k, device="cuda").to(f8) for _ in range(c)]  # (N, K) row-major = (K, N) column-major
    xs = [torch.randn(m_rows, k, device="cuda").to(f8) for _ in range(c)]
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return time_graph(lambda i: torch._scaled_mm(xs[i % c], ws[i % c].t(), scale_a=one, scale_b=one,
                                                 out_dtype=torch.bfloat16))


def attention(q_shape, kv_shape, causal: bool) -> float:
    per = 2 * kv_shape[0] * kv_shape[1] * kv_shape[2] * kv_shape[3] * 2
    c = copies(per)
    qs = [torch.randn(*q_shape, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    ks = [torch.randn(*kv_shape, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    vs = [torch.randn(*kv_shape, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return time_graph(lambda i: sdpa(qs[i % c], ks[i % c], vs[i % c], is_causal=causal, enable_gqa=True))


def stream_copy(n_bytes: int) -> float:
    a = torch.empty(n_bytes // 2, device="cuda", dtype=torch.bfloat16).normal_()
    b = torch.empty_like(a)
    return time_graph(lambda i: b.copy_(a))


def attempt(rows: list, kind: str, fn, *args, **meta) -> None:
    try:
        seconds = fn(*args)
        rows.append(dict(kind=kind, ms=seconds * 1e3, **meta))
        print(kind, meta, f"{seconds * 1e3:.4f} ms", flush=True)
    except Exception as e:  # a shape the library refuses: recorded, not fatal
        rows.append(dict(kind=kind, ms=None, error=f"{type(e).__name__}: {e}"[:300], **meta))
        print(kind, meta, "ERROR", e, flush=True)
    torch.cuda.empty_cache()


def main() -> None:
    out = sys.argv[1]
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    rows: list = []
    for n_bytes in (256 * 2**20, 1024 * 2**20):
        attempt(rows, "copy", stream_copy, n_bytes, bytes=n_bytes)
    for model, m in MODELS.items():
        for name, (n, k) in gemm_shapes(m).items():
            for m_rows in GEMM_M:
                attempt(rows, "gemm_bf16", gemm_bf16, m_rows, n, k, model=model, op=name, M=m_rows, N=n, K=k)
                attempt(rows, "gemm_fp8", gemm_fp8, m_rows, n, k, model=model, op=name, M=m_rows, N=n, K=k)
        heads, kv_heads, d = m["heads"] // m["tp"], max(1, m["kv_heads"] // m["tp"]), m["head_dim"]
        for t in PREFILL_T:
            attempt(rows, "prefill_attention", attention, (1, heads, t, d), (1, kv_heads, t, d), True,
                    model=model, heads=heads, kv_heads=kv_heads, head_dim=d, tokens=t)
        for seqs, ctx in DECODE:
            # One query token per sequence; the query heads sharing a KV head attend to it as that many rows
            # (the same arithmetic as grouped-query decode, in a form every SDPA backend runs fused).
            attempt(rows, "decode_attention", attention, (seqs, kv_heads, heads // kv_heads, d),
                    (seqs, kv_heads, ctx, d), False,
                    model=model, heads=heads, kv_heads=kv_heads, head_dim=d, seqs=seqs, context=ctx)
    meta = dict(gpu=props.name, sm_count=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1),
                l2_bytes=l2_bytes(), torch=torch.__version__, cuda=torch.version.cuda,
                cublas=getattr(torch.backends.cuda, "preferred_blas_library", lambda: "?")().__str__(),
                python=platform.python_version(), calls_per_graph=CALLS, repeats=REPEATS)
    with open(out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
