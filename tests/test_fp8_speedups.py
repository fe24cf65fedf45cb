"""FP8 speed-ups against the TensorRT-LLM tuning guide's measurements (issue 9: "FP8 speed-ups land in the measured
ranges of your validation set"): Llama-3.3-70B on 4 H100s, each FP8 variant over the tuned BF16 engine.

The guide measures several FP8 engines (FP8 weights alone; with an FP8 KV cache; tuned with reduce fusion and
low-latency GEMMs), so each kind of gain has a measured range across them: throughput with FP8 weights alone 1.37x,
with FP8 weights and KV 2.14-2.44x, TTFT 1.53-1.68x, ITL 1.18-1.36x. The model has one FP8 engine. What holds, and is
held here: each predicted gain lies within 10% (the issue's step-row median target, as for the TP ratios in
test_tp_scaling.py) of its measured range; inside the range itself only the throughput gains are (FP8 weights alone)
or nearly are (2.02-2.06x against 2.14x). TTFT is 1.39x, 9% under the range: the model's FP8 GEMMs gain 1.8x while
norms, activation and 32 MiB NCCL all-reduces stay as they are; ITL is 1.48x, 9% over it: the model reads half the
weight bytes at the same bandwidth, while the guide's FP8 engines reach less of it at batch 1 (its low-latency GEMM
plugin alone moved ITL 11.7 -> 10.8 ms). Offline throughput rows are simulated (1000 requests each): ~25 s.
"""

from __future__ import annotations

import pytest

from sim_core.studies import validation

TOLERANCE = 0.10
SERIES = "Llama-3.3-70B-Instruct on H100-SXM-80GB (4x NVLink): {}"
KINDS = {  # series kind -> {predicted variant: the variants whose measured gains bound it}
    "throughput": {"fp8 weights, bf16 KV": ("fp8 weights, bf16 KV",), "fp8 weights+KV": ("fp8 weights+KV",)},
    "TTFT, 2048-token prompt": {v: ("fp8 weights, bf16 KV", "fp8 weights+KV")
                                for v in ("fp8 weights, bf16 KV", "fp8 weights+KV")},
    "inter-token latency": {v: ("fp8 weights, bf16 KV", "fp8 weights+KV")
                            for v in ("fp8 weights, bf16 KV", "fp8 weights+KV")},
}


@pytest.fixture(scope="module")
def gains():
    out: dict[tuple[str, str], list[dict]] = {}
    for s in validation.speedups(validation.comparison_checks()):
        out.setdefault((s["series"], s["variant"]), []).append(s)
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_fp8_gains_lie_within_10_percent_of_the_measured_range(gains, kind):
    for variant, bounds in KINDS[kind].items():
        measured = [s["measured"] for b in bounds for s in gains[(SERIES.format(kind), b)]]
        for s in gains[(SERIES.format(kind), variant)]:
            assert s["baseline"] == "bf16"
            lo, hi = min(measured), max(measured)
            assert lo * (1 - TOLERANCE) <= s["predicted"] <= hi * (1 + TOLERANCE), (kind, variant, s, lo, hi)
            assert s["predicted"] > 1.0  # FP8 is faster, whatever the margin


# Two more FP8 sources (validation/SOURCES.md `argonne_llm_inference_bench`, `trtllm_quant_blog`): whole static batches
# (one prefill of every prompt, then the decode steps), so they weigh decode more than TTFT. Argonne's vLLM (~0.5.3)
# runs of Llama-3-8B on one H100, FP16 vs FP8 weights + FP8 KV, at batch 1 and 64 and 128/128 and 2048/2048 tokens;
# TensorRT-LLM's quantization blog, Llama-2-7B on one H100 at 1024/128, batch 1 and 8, published as ratios. Each
# predicted gain within 10% of the measured one; the misses are strict xfails carrying their numbers.
ARGONNE = "Meta-Llama-3-8B on H100 80GB HBM3 (SXM; ALCF JLSE node): end-to-end latency, {n} in / {n} out, batch {b}"
BLOG = "Llama-2-7B on H100 80GB: end-to-end latency, 1024 in / 128 out, batch {b}"
# At batch 64 the measured gain shrinks (2048/2048: 1.12x) where the model's grows (1.63x): the model halves the
# bytes of every KV read with an FP8 cache, and vLLM 0.5's FP8 cache did not speed its decode attention up (the
# same table: FP16 weights with an FP8 cache, 2048/2048 batch 64, 65.5 s against 51.0 s with the FP16 cache).
MISSES = {
    ARGONNE.format(n=128, b=64): "vLLM H100 Llama-3-8B 128/128 batch 64: measured 1.25x, predicted 1.40x (+12%)",
    ARGONNE.format(n=2048, b=64): "vLLM H100 Llama-3-8B 2048/2048 batch 64: measured 1.12x, predicted 1.63x (+46%)",
}
SECOND_SOURCES = {ARGONNE.format(n=n, b=b): "fp8 weights+KV" for b in (1, 64) for n in (128, 2048)} | {
    BLOG.format(b=b): "fp8 (vs fp16)" for b in (1, 8)}


@pytest.fixture(scope="module")
def quick_gains():
    return {(s["series"], s["variant"]): s for s in validation.speedups(validation.checks(simulate=False))}


def _second_source_cases():
    for series, variant in SECOND_SOURCES.items():
        marks = [pytest.mark.xfail(strict=True, reason=MISSES[series])] if series in MISSES else []
        yield pytest.param(series, variant, marks=marks, id=series.split(": ")[-1].replace(" ", ""))


@pytest.mark.parametrize("series,variant", list(_second_source_cases()))
def test_second_source_fp8_gain_is_within_10_percent_of_the_measured_one(quick_gains, series, variant):
    s = quick_gains[(series, variant)]
    assert s["baseline"] == "fp16" and s["measured"] > 1.0 and s["predicted"] > 1.0
    assert abs(s["predicted"] / s["measured"] - 1.0) <= TOLERANCE, s
