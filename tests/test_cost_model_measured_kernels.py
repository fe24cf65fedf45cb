"""GPUs whose kernel library is measured to stream weights below the part's streaming efficiency (AMD's, from aiter's
tuned tables; NVIDIA's fused MoE, from published benchmarks): dense GEMMs and the lm head at their format's
bandwidth, routed experts at the fused MoE's, a fused MoE layer's fixed time and a decode attention kernel's
single-sequence floor. Where a GPU measures none of these, every step is what it was."""

import dataclasses

import numpy as np
import pytest

from sim_core import data
from sim_core.catalog import GPUS, MODELS, ServingSettings, gpus_from, resolve_setup
from sim_core.gpu import GPU_FRACTIONS, GPU_TIMES, STREAMING_FRACTIONS
from sim_core.kernel.cost_constants import (
    DECODE_ATTN_FLOOR_S,
    DENSE_GEMM_BW,
    DENSE_WEIGHT_BYTES,
    EXPERT_BW,
    EXPERT_WEIGHT_BYTES,
    EXPERTS,
    EXPERTS_PER_TOKEN,
    GEMM_LAUNCH_FLOOR_S,
    LM_HEAD_BW,
    LM_HEAD_BYTES,
    MOE_FIXED_S,
    PEAK_BW,
    STREAM_BW,
    Constants,
    default_constants,
)
from sim_core.kernel.cost_model import cost_params, step_breakdown

LINEAR, ATTENTION = 0, 1


def setup(hw, model, quant, tp, **gpu_changes):
    s = resolve_setup(hw, model, quant, tp, ServingSettings(0.9, 16, 8192, 256))
    return dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, **gpu_changes)) if gpu_changes else s


def decode_linear(p, seqs, ctx=1024):
    return step_breakdown(p, 0, 0, 0, 0, seqs, seqs * ctx, seqs)[LINEAR]


MOE_FIELDS = ("moe_bw_efficiency", "moe_bw_efficiency_fp8", "moe_bw_efficiency_fp4", "moe_layer_fixed_us_fp8",
              "moe_layer_fixed_us_fp4")
UNMEASURED = [k for k, g in GPUS.items() if all(getattr(g, f) is None for f in MOE_FIELDS)
              and g.moe_layer_fixed_us == 0.0 and g.decode_attention_floor_us == 0.0 and g.gemm_bw_efficiency_fp8 is None]


@pytest.mark.parametrize("hw", UNMEASURED)
def test_a_gpu_without_measured_kernels_streams_every_weight_at_its_streaming_bandwidth(hw):
    p = cost_params(setup(hw, "llama-3.2-1b", "bf16", 1))
    assert p[DENSE_GEMM_BW] == p[LM_HEAD_BW] == p[EXPERT_BW] == p[STREAM_BW]
    assert p[DECODE_ATTN_FLOOR_S] == 0.0


@pytest.mark.parametrize(("hw", "model", "quant"), [("h20", "deepseek-r1", "fp8"), ("h20", "mixtral-8x7b", "bf16"),
                                                   ("a100", "mixtral-8x7b", "bf16"), ("l40s", "qwen3-30b-a3b", "bf16")])
def test_moe_and_block_scaled_fp8_on_an_unmeasured_gpu_take_the_streaming_bandwidth_and_no_fixed_time(hw, model, quant):
    assert hw in UNMEASURED
    s = setup(hw, model, quant, 8)
    p = cost_params(s)
    assert p[DENSE_GEMM_BW] == p[LM_HEAD_BW] == p[EXPERT_BW] == p[STREAM_BW]
    assert p[MOE_FIXED_S] == p[DECODE_ATTN_FLOOR_S] == 0.0 and s.model.moe_layers > 0


def test_the_gemm_bandwidth_follows_the_weight_format():
    g = GPUS["mi355x"]
    assert g.gemm_bw_efficiency("bf16") == g.gemm_bw_efficiency("fp16") == g.gemm_bw_efficiency_bf16
    assert g.gemm_bw_efficiency("fp8") == g.gemm_bw_efficiency_fp8
    assert g.gemm_bw_efficiency("fp4") == g.gemm_bw_efficiency_fp4
    # Weight-only formats have no measured table: the streaming efficiency.
    assert g.gemm_bw_efficiency("int4") == g.gemm_bw_efficiency("int8") == g.bw_efficiency
    for quant in ("bf16", "fp8", "fp4"):
        p = cost_params(setup("mi355x", "llama-3-70b", quant, 2))
        assert p[DENSE_GEMM_BW] == pytest.approx(p[PEAK_BW] * g.gemm_bw_efficiency(quant))
        assert p[LM_HEAD_BW] == pytest.approx(p[PEAK_BW] * g.gemm_bw_efficiency_bf16)
    # DeepSeek's checkpoint scales its FP8 weights per 128 x 128 block: its GEMMs run the block-scaled kernels,
    # measured apart (slower than per-tensor FP8's on this part), and so do its FP8 GEMMs' compute-bound rates.
    assert MODELS["deepseek-r1"].fp8_weight_block == 128 and MODELS["llama-3-70b"].fp8_weight_block == 0
    r1 = setup("mi355x", "deepseek-r1", "fp8", 8)
    assert r1.fp8_block_scaled and not setup("mi355x", "llama-3-70b", "fp8", 2).fp8_block_scaled
    assert not setup("mi355x", "deepseek-r1", "bf16", 8).fp8_block_scaled
    assert cost_params(r1)[DENSE_GEMM_BW] == pytest.approx(cost_params(r1)[PEAK_BW] * g.gemm_bw_efficiency_fp8_block)
    assert g.gemm_bw_efficiency_fp8_block < g.gemm_bw_efficiency_fp8
    assert g.gemm_compute_efficiency("fp8", block_scaled=True) == g.gemm_compute_efficiency_fp8_block
    assert g.gemm_compute_efficiency("bf16") is None  # the 16-bit rate is compute_efficiency's


def test_dense_weights_at_the_gemm_bandwidth_slow_a_small_decode_step_by_their_extra_read_time():
    measured = cost_params(setup("mi355x", "llama-3-70b", "fp8", 2))
    unmeasured = cost_params(setup("mi355x", "llama-3-70b", "fp8", 2, gemm_bw_efficiency_fp8=None))
    extra = measured[DENSE_WEIGHT_BYTES] * (1 / measured[DENSE_GEMM_BW] - 1 / measured[STREAM_BW])
    # One decoding sequence: the GEMMs are memory-bound, so the step's GEMMs take the weights' extra read time more.
    assert decode_linear(measured, 1) - decode_linear(unmeasured, 1) == pytest.approx(extra, rel=1e-3)
    assert extra > 0.2 * decode_linear(unmeasured, 1)  # 0.85 -> 0.66 of the peak: not a rounding matter


def test_a_calibrated_bandwidth_moves_the_measured_gemm_bandwidths_with_it():
    s = setup("mi355x", "deepseek-r1", "fp8", 8)  # every one of its bandwidths measured, the lm head's too
    catalog = default_constants(s)
    halved = Constants(catalog.compute_efficiency, catalog.bandwidth_efficiency / 2, catalog.attention_efficiency,
                       catalog.step_overhead_ms, catalog.overhead_per_seq_us)
    p, q = cost_params(s), cost_params(s, halved)
    assert len({p[STREAM_BW], p[DENSE_GEMM_BW], p[LM_HEAD_BW], p[EXPERT_BW]}) == 4
    for slot in (STREAM_BW, DENSE_GEMM_BW, LM_HEAD_BW, EXPERT_BW):
        assert q[slot] == pytest.approx(p[slot] / 2)


@pytest.mark.parametrize("hw", ["mi325x", "mi355x", "h200", "b200"])
def test_a_fused_moe_layer_takes_its_measured_fixed_time_on_top_of_its_experts_reads(hw):
    g = GPUS[hw]
    measured = cost_params(setup(hw, "deepseek-r1", "fp8", 8))
    without = cost_params(setup(hw, "deepseek-r1", "fp8", 8, moe_layer_fixed_us=0.0, moe_layer_fixed_us_fp8=None))
    # The step's fixed time: each of its 58 MoE layers' beyond its two grouped GEMMs' launch floors.
    assert MODELS["deepseek-r1"].moe_layers == 58 and g.moe_fixed_us("fp8") > 8.0
    assert measured[MOE_FIXED_S] == pytest.approx(58 * (g.moe_fixed_us("fp8") * 1e-6 - 2 * GEMM_LAUNCH_FLOOR_S))
    assert without[MOE_FIXED_S] == 0.0
    # It adds to the experts' reads at every batch (the line through the measured times), not only where they are
    # short: at one token (8 of 256 experts) and at 256 (nearly all of them) alike.
    for tokens in (1, 256):
        assert decode_linear(measured, tokens) - decode_linear(without, tokens) == pytest.approx(measured[MOE_FIXED_S])


def test_the_moe_figures_follow_the_expert_format():
    """W8A8 and W4A4 experts take their own kernel's figures where measured, every other format the part's default."""
    g = GPUS["b200"]
    assert (g.moe_fixed_us("fp8"), g.expert_bw_efficiency("fp8")) == (g.moe_layer_fixed_us_fp8, g.moe_bw_efficiency_fp8)
    assert (g.moe_fixed_us("fp4"), g.expert_bw_efficiency("fp4")) == (g.moe_layer_fixed_us_fp4, g.moe_bw_efficiency_fp4)
    for quant in ("bf16", "fp16", "int4", "int8"):
        assert (g.moe_fixed_us(quant), g.expert_bw_efficiency(quant)) == (g.moe_layer_fixed_us, g.bw_efficiency)
    h = GPUS["h200"]  # one measurement, taken for every format
    assert {h.moe_fixed_us(q) for q in ("bf16", "fp8", "fp4", "int4")} == {h.moe_layer_fixed_us}
    fp8 = cost_params(setup("b200", "qwen3-30b-a3b", "fp8", 1))
    bf16 = cost_params(setup("b200", "qwen3-30b-a3b", "bf16", 1))
    layers = MODELS["qwen3-30b-a3b"].moe_layers
    assert fp8[MOE_FIXED_S] == pytest.approx(layers * (g.moe_layer_fixed_us_fp8 * 1e-6 - 2 * GEMM_LAUNCH_FLOOR_S))
    assert bf16[MOE_FIXED_S] == pytest.approx(layers * (g.moe_layer_fixed_us * 1e-6 - 2 * GEMM_LAUNCH_FLOOR_S))
    assert fp8[EXPERT_BW] == pytest.approx(fp8[PEAK_BW] * g.moe_bw_efficiency_fp8) and bf16[EXPERT_BW] == bf16[STREAM_BW]


def test_a_dense_model_pays_no_moe_fixed_time():
    assert cost_params(setup("b200", "llama-3-70b", "fp8", 8))[MOE_FIXED_S] == 0.0


def test_nvidia_moe_figures_are_the_published_fits(monkeypatch):
    """gpus.json carries what scripts/nvidia_moe_kernel_fit.py derives from the transcribed public timings."""
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "scripts"))
    import nvidia_moe_kernel_fit as fit

    fits = fit.blackwell_fits()
    for hw in ("b200", "b300", "gb200", "gb300"):
        g = GPUS[hw]
        for quant in ("fp8", "fp4"):
            fixed, efficiency, miss = fits[quant]
            assert (g.moe_fixed_us(quant), g.expert_bw_efficiency(quant)) == (round(fixed, 1), round(efficiency, 2))
            assert miss < 0.05  # the line holds every measured point within 5%
        # 16-bit experts: the BF16 kernel's fixed time; its bandwidth (0.86) is at the part's streaming efficiency.
        assert g.moe_layer_fixed_us == round(fits["bf16"][0], 1) and g.moe_bw_efficiency is None
        assert round(fits["bf16"][1], 2) >= g.bw_efficiency
    hopper_fixed, _, _ = fit.hopper_fit()
    for hw in ("h100", "h200"):
        assert GPUS[hw].moe_layer_fixed_us == round(hopper_fixed, 1) and GPUS[hw].moe_bw_efficiency is None


def test_routed_experts_stream_at_the_fused_moe_bandwidth():
    s = setup("mi355x", "qwen3-30b-a3b", "bf16", 1, moe_layer_fixed_us=0.0)
    at_stream = cost_params(setup("mi355x", "qwen3-30b-a3b", "bf16", 1, moe_layer_fixed_us=0.0,
                                  moe_bw_efficiency=None))
    p = cost_params(s)
    tokens = 512  # every expert touched
    touched = 1 - (1 - p[EXPERTS_PER_TOKEN] / p[EXPERTS]) ** tokens
    extra = p[EXPERT_WEIGHT_BYTES] * touched * (1 / p[EXPERT_BW] - 1 / p[STREAM_BW])
    assert extra > 0
    slower = decode_linear(p, tokens) - decode_linear(at_stream, tokens)
    assert 0.5 * extra < slower <= extra * (1 + 1e-9)  # the roofline's blend with compute absorbs part of it


@pytest.mark.parametrize(("field", "value"),
                         [(f, v) for f in GPU_FRACTIONS for v in (0.0, 1.2, float("nan"))]
                         + [(f, v) for f in GPU_TIMES for v in (-1.0, float("nan"), float("inf"))]
                         + [(f, 0.9) for f in STREAMING_FRACTIONS])  # above the mi355x's bw_efficiency, 0.85
def test_a_gpu_entry_with_a_constant_out_of_its_range_is_refused_naming_it(field, value):
    doc = data.read("gpus.json")
    entry = next(e for e in doc["entries"] if e["key"] == "mi355x")
    entry[field] = value
    with pytest.raises(data.CatalogDataError, match=rf"entry 'mi355x': key '{field}': "):
        gpus_from(doc, MODELS)


def test_a_layers_decode_attention_takes_at_least_its_measured_single_sequence_time():
    s = setup("mi355x", "llama-3-70b", "fp8", 2)
    floored, unfloored = cost_params(s), cost_params(setup("mi355x", "llama-3-70b", "fp8", 2,
                                                           decode_attention_floor_us=0.0))
    layers = MODELS["llama-3-70b"].layers

    def attention(p, seqs, ctx):
        return step_breakdown(p, 0, 0, 0, 0, seqs, seqs * ctx, seqs)[ATTENTION]

    # One sequence of 1,024 tokens reads ~1 MB of KV per layer: the 23 us kernel floor binds.
    assert attention(floored, 1, 1024) == pytest.approx(layers * GPUS["mi355x"].decode_attention_floor_us * 1e-6)
    assert attention(floored, 1, 1024) > 2 * attention(unfloored, 1, 1024)
    # 64 sequences of 8,192 tokens read far more than 23 us worth of KV: the floor no longer binds.
    assert attention(floored, 64, 8192) == attention(unfloored, 64, 8192)
    # A hybrid model pays it on its attention layers only: Qwen3-Next's 12 of 48 (the others are linear attention).
    q = MODELS["qwen3-next-80b-a3b"]
    assert (q.attn_layers, q.layers) == (12, 48)
    hybrid = cost_params(setup("mi355x", "qwen3-next-80b-a3b", "bf16", 4))
    assert attention(hybrid, 1, 1024) == pytest.approx(12 * GPUS["mi355x"].decode_attention_floor_us * 1e-6)
    # Prefill attention has no such floor.
    assert step_breakdown(floored, 512, 1, 512 * 513 // 2, 0, 0, 0, 1)[ATTENTION] == \
        step_breakdown(unfloored, 512, 1, 512 * 513 // 2, 0, 0, 0, 1)[ATTENTION]


def test_a_speculative_proposers_pass_streams_its_weights_as_the_target_step_does():
    from sim_core.kernel.spec_decode import N_SPEC_PARAMS, SP_PASS_BW, SP_PASS_BYTES, SP_PASS_EXPERT_BYTES
    from sim_core.spec_decode import _fill_pass

    def pass_of(s):
        p, c = np.zeros(N_SPEC_PARAMS), cost_params(s)
        _fill_pass(p, c, 1.0 / 61)  # one MTP layer of DeepSeek-R1's 61
        return p, c

    measured, c = pass_of(setup("mi355x", "deepseek-r1", "fp8", 8))
    unmeasured, _ = pass_of(setup("mi355x", "deepseek-r1", "fp8", 8, gemm_bw_efficiency_fp8_block=None,
                                  gemm_bw_efficiency_bf16=None, moe_bw_efficiency=None, moe_bw_efficiency_fp8=None))
    assert measured[SP_PASS_BW] == unmeasured[SP_PASS_BW] == c[STREAM_BW]
    # Its reads take what they take at the GEMMs', the lm head's and the fused MoE's own bandwidths.
    assert measured[SP_PASS_BYTES] / c[STREAM_BW] == pytest.approx(
        c[DENSE_WEIGHT_BYTES] / 61 / c[DENSE_GEMM_BW] + c[LM_HEAD_BYTES] / c[LM_HEAD_BW])
    assert measured[SP_PASS_EXPERT_BYTES] / c[STREAM_BW] == pytest.approx(c[EXPERT_WEIGHT_BYTES] / 61 / c[EXPERT_BW])
    assert measured[SP_PASS_BYTES] > unmeasured[SP_PASS_BYTES]
    assert measured[SP_PASS_EXPERT_BYTES] > unmeasured[SP_PASS_EXPERT_BYTES]


def test_a_speculative_proposers_pass_pays_its_layers_share_of_the_measured_kernel_times():
    from sim_core.kernel.spec_decode import (
        N_SPEC_PARAMS,
        SP_METHOD,
        SP_PASS_ATTN_FLOOR_S,
        SP_PASS_BW,
        SP_PASS_FIXED_S,
        SP_PASS_KV_BYTES,
        SP_PASSES_PER_DRAFT,
        proposer_seconds,
    )
    from sim_core.spec_decode import _fill_pass

    def pass_of(**changes):
        p, c = np.zeros(N_SPEC_PARAMS), cost_params(setup("mi355x", "deepseek-r1", "fp8", 8, **changes))
        _fill_pass(p, c, 1.0 / 61)  # one MTP layer of DeepSeek-R1's 61
        p[SP_METHOD], p[SP_PASSES_PER_DRAFT] = 2.0, 1.0  # a neural proposer (not n-gram)
        return p

    g = GPUS["mi355x"]
    measured, bare = pass_of(), pass_of(moe_layer_fixed_us=0.0, moe_layer_fixed_us_fp8=None,
                                        decode_attention_floor_us=0.0)
    moe_fixed = 58 / 61 * (g.moe_fixed_us("fp8") - 8.0) * 1e-6
    assert measured[SP_PASS_FIXED_S] - bare[SP_PASS_FIXED_S] == pytest.approx(moe_fixed)
    assert measured[SP_PASS_ATTN_FLOOR_S] == pytest.approx(g.decode_attention_floor_us * 1e-6)
    assert bare[SP_PASS_ATTN_FLOOR_S] == 0.0
    # One draft for one sequence of 1,024 tokens: the MoE layers' fixed time adds, and the attention floor binds,
    # less the KV read time it covers.
    one, none = proposer_seconds(measured, 0, 0.0, 1, 1024, 1), proposer_seconds(bare, 0, 0.0, 1, 1024, 1)
    kv_s = 1024 * measured[SP_PASS_KV_BYTES] / measured[SP_PASS_BW]
    assert 0 < kv_s < measured[SP_PASS_ATTN_FLOOR_S]
    assert one - none == pytest.approx(moe_fixed + measured[SP_PASS_ATTN_FLOOR_S] - kv_s)


def test_fp8_and_fp4_gemms_reach_their_measured_fraction_of_the_formats_peak():
    from sim_core.kernel.cost_constants import linear_rate

    g = GPUS["mi355x"]
    assert linear_rate(setup("mi355x", "llama-3-70b", "fp8", 2)) == pytest.approx(
        g.fp8_tflops * 1e12 * g.gemm_compute_efficiency_fp8)
    assert linear_rate(setup("mi355x", "llama-3-70b", "fp4", 2)) == pytest.approx(
        g.fp4_tflops * 1e12 * g.gemm_compute_efficiency_fp4)
    # Unmeasured, the 16-bit efficiency scaled by the format's measured gain (the NVIDIA parts' rule).
    unmeasured = setup("mi355x", "llama-3-70b", "fp8", 2, gemm_compute_efficiency_fp8=None)
    assert linear_rate(unmeasured) == pytest.approx(g.fp16_tflops * 1e12 * g.compute_efficiency * 1.8)
    # A calibrated compute efficiency moves the measured rate by the same factor as the 16-bit one.
    s = setup("mi325x", "deepseek-r1", "fp8", 8)
    assert linear_rate(s, GPUS["mi325x"].compute_efficiency / 2) == pytest.approx(linear_rate(s) / 2)
    # A prefill's GEMMs lean on compute: at 0.31 of the FP8 peak (for 0.54 unmeasured) a 4,096-token chunk's take
    # a quarter longer (the weights' read time blends in, and, since the routed experts are timed as a kernel group of
    # their own, their k-fold activations' read time: issue #35; a third longer before).
    p, q = cost_params(s), cost_params(setup("mi325x", "deepseek-r1", "fp8", 8,
                                             gemm_compute_efficiency_fp8_block=None))
    chunk = step_breakdown(p, 4096, 1, 4096 * 4097 // 2, 0, 0, 0, 1)[LINEAR]
    assert chunk > 1.25 * step_breakdown(q, 4096, 1, 4096 * 4097 // 2, 0, 0, 0, 1)[LINEAR]


def test_a_validation_gemm_reads_its_weights_at_the_gemm_bandwidth_and_its_activations_at_the_streaming_one():
    from sim_core.kernel.cost_constants import LINEAR_RATE
    from sim_core.kernel.cost_model import roofline_s
    from sim_core.studies.validation import gemm_s

    p = cost_params(setup("mi355x", "llama-3-70b", "bf16", 2))
    m, n, k = 64, 8192, 8192
    weights, activations, flops = 2.0 * n * k, 2.0 * m * k + 2.0 * m * n, 2.0 * m * n * k
    # The weights' bytes count as what would take as long at the streaming bandwidth (linear_s's rule).
    expected = GEMM_LAUNCH_FLOOR_S + roofline_s(weights * p[STREAM_BW] / p[DENSE_GEMM_BW] + activations, flops,
                                                p[STREAM_BW], p[LINEAR_RATE])
    assert gemm_s(p, m, n, k) == pytest.approx(expected, rel=1e-9)
    # Everything at the GEMM bandwidth (the activations too) would be measurably slower.
    all_slow = GEMM_LAUNCH_FLOOR_S + roofline_s(weights + activations, flops, p[DENSE_GEMM_BW], p[LINEAR_RATE])
    assert gemm_s(p, m, n, k) < all_slow * (1 - 1e-4)


def test_the_engine_names_the_decode_attention_kernel_whose_floor_it_pays():
    """On a Hopper part vLLM and SGLang run FlashAttention 3 (11.0 us a layer for one short sequence), TensorRT-LLM
    its XQA kernel (7.6 us); a part with one measured floor (the MI355X's AITER kernel) charges it to every engine."""
    def attention(p, seqs, ctx):
        return step_breakdown(p, 0, 0, 0, 0, seqs, seqs * ctx, seqs)[ATTENTION]

    h100, layers = setup("h100", "llama-3-8b", "fp8", 1), MODELS["llama-3-8b"].attn_layers
    vllm, sglang, trt = (cost_params(h100, engine=e) for e in ("vllm", "sglang", "trtllm"))
    g = GPUS["h100"]
    assert (g.decode_attention_floor("paged"), g.decode_attention_floor("xqa")) == (11.0, 7.6)
    assert attention(vllm, 1, 1024) == pytest.approx(layers * 11.0e-6) == attention(sglang, 1, 1024)
    assert attention(trt, 1, 1024) == pytest.approx(layers * 7.6e-6)
    mi355x = setup("mi355x", "llama-3-8b", "fp8", 1)
    mi355x_floor = layers * GPUS["mi355x"].decode_attention_floor_us * 1e-6
    assert attention(cost_params(mi355x, engine="trtllm"), 1, 1024) == pytest.approx(
        attention(cost_params(mi355x), 1, 1024)) == pytest.approx(mi355x_floor)
    # A GPU that measures neither keeps the launch floor for every engine.
    a100 = setup("a100", "llama-3-8b", "fp16", 1)
    assert GPUS["a100"].decode_attention_floor("xqa") == 0.0
    assert attention(cost_params(a100, engine="trtllm"), 1, 1024) < layers * 7.6e-6


def test_w4a16_experts_on_hopper_run_at_their_measured_rate_and_nothing_else_moves():
    """gpt-oss's MXFP4 experts on an H100/H200 (weight-only: no FP4 tensor cores) run at the measured W4A16 MoE
    rate (gpu.HOPPER_W4A16_MOE_EFFICIENCY of the 16-bit peak), far below the dense weight-only rate; a large decode
    step takes longer for it. Dense weight-only GEMMs, Blackwell's FP4 experts and parts without the figure keep
    their rates."""
    from sim_core.gpu import HOPPER_W4A16_MOE_EFFICIENCY
    from sim_core.kernel.cost_constants import EXPERT_RATE, LINEAR_RATE

    for hw in ("h100", "h200"):
        s = setup(hw, "gpt-oss-120b", "int4", 1)
        p = cost_params(s)
        assert p[EXPERT_RATE] == pytest.approx(GPUS[hw].fp16_tflops * 1e12 * HOPPER_W4A16_MOE_EFFICIENCY)
        assert p[EXPERT_RATE] < 0.5 * p[LINEAR_RATE]  # the dense weight-only rate: 16-bit / 1.15
        unmeasured = cost_params(setup(hw, "gpt-oss-120b", "int4", 1, moe_compute_efficiency_w4a16=None))
        assert unmeasured[EXPERT_RATE] == unmeasured[LINEAR_RATE] == p[LINEAR_RATE]
        assert decode_linear(p, 1024) > 1.3 * decode_linear(unmeasured, 1024)
        # a calibrated compute efficiency moves it as it moves every other rate
        half = cost_params(s, dataclasses.replace(default_constants(s), compute_efficiency=GPUS[hw].compute_efficiency / 2))
        assert half[EXPERT_RATE] == pytest.approx(p[EXPERT_RATE] / 2)
    dense = setup("h100", "llama-3-70b", "int4", 2)
    assert np.array_equal(cost_params(dense), cost_params(setup("h100", "llama-3-70b", "int4", 2,
                                                                moe_compute_efficiency_w4a16=None)))
    blackwell = cost_params(setup("b200", "gpt-oss-120b", "fp4", 1))
    assert blackwell[EXPERT_RATE] >= blackwell[LINEAR_RATE]
    assert GPUS["b200"].moe_compute_efficiency_w4a16 is None
