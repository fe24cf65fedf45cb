import numpy as np
import pytest

from sim_core.catalog import GPUS, MODELS, SetupError, resolve_setup
from sim_core.cost_model import (
    EFFECTIVE_BW,
    EFFECTIVE_FLOPS,
    STEP_OVERHEAD_S,
    TP,
    cost_params,
    prefill_pairs,
    step_cost,
    swap_seconds,
)


def setup(hw="a100", model="llama-3-8b", quant="fp16", tp=1, budget=512):
    return resolve_setup(hw, model, quant, tp, 0.9, 16, budget, 256)


def decode(p, batch, ctx):
    return step_cost(p, 0, 0, 0, batch, batch * ctx, batch)


def prefill(p, n):
    return step_cost(p, n, prefill_pairs(n, 0), 0, 0, 0, 1)


def test_decode_batch_one_is_bandwidth_bound_and_prefill_compute_bound():
    p = cost_params(setup())
    seconds, moved, flops = decode(p, 1, 512)
    assert moved / p[EFFECTIVE_BW] > 10 * flops / p[EFFECTIVE_FLOPS]
    # Batch-1 decode streams all weights: time ~ weight bytes / bandwidth.
    assert seconds == pytest.approx(moved / p[EFFECTIVE_BW] + p[STEP_OVERHEAD_S])
    seconds, moved, flops = prefill(p, 4096)
    assert flops / p[EFFECTIVE_FLOPS] > 5 * moved / p[EFFECTIVE_BW]


def test_decode_time_grows_slowly_with_batch_then_linearly_in_compute():
    p = cost_params(setup())
    t1, t8, t64 = (decode(p, b, 512)[0] for b in (1, 8, 64))
    assert t8 < 1.3 * t1  # weights dominate: batching is nearly free
    assert t64 > t8
    # Prefill time is roughly linear in tokens once compute-bound.
    a, b = prefill(p, 2048)[0], prefill(p, 4096)[0]
    assert 1.9 < b / a < 2.6  # linear layers x2, attention x4


def test_a100_8b_magnitudes_match_public_measurements():
    # Llama-3-8B fp16 on one A100-80GB: batch-1 decode ~10-13 ms/token (16 GB over ~1.7-2 TB/s);
    # 1k-token prefill ~ 60-80 ms at ~200 TFLOPS effective.
    p = cost_params(setup())
    assert 0.008 < decode(p, 1, 512)[0] < 0.014
    assert 0.04 < prefill(p, 1024)[0] < 0.09


def test_tensor_parallel_splits_work_and_adds_collectives():
    one = cost_params(setup("h100", "llama-3-70b", "fp8", 1))
    two = cost_params(setup("h100", "llama-3-70b", "fp8", 2))
    t1, t2 = decode(one, 8, 1024)[0], decode(two, 8, 1024)[0]
    assert t2 < t1 < 2.2 * t2  # faster, but not perfectly
    # All-reduce time (the step with and without collectives) is larger over PCIe than over NVLink.
    def collective_s(p):
        no_tp = p.copy()
        no_tp[TP] = 1
        return prefill(p, 4096)[0] - prefill(no_tp, 4096)[0]

    nv = collective_s(cost_params(setup("h100", "llama-3-8b", "fp16", 2)))
    pcie = collective_s(cost_params(setup("h100-pcie", "llama-3-8b", "fp16", 2)))
    assert 0 < nv < pcie


def test_moe_reads_only_the_experts_it_touches():
    p = cost_params(setup("h100", "mixtral-8x7b", "fp8", 1))
    _, moved_1, _ = decode(p, 1, 256)
    _, moved_64, _ = decode(p, 64, 256)
    m = MODELS["mixtral-8x7b"]
    all_weights = (m.dense_matmul_params + m.expert_matmul_params) * 1.0
    assert moved_1 < 0.45 * all_weights  # 2 of 8 experts per layer
    assert moved_64 > 0.95 * all_weights  # a big batch touches every expert


def test_quantization_cuts_weight_bytes():
    p16 = cost_params(setup(quant="fp16"))
    p4 = cost_params(setup(quant="int4"))
    assert decode(p4, 1, 512)[1] < 0.4 * decode(p16, 1, 512)[1]


def test_swap_time_uses_host_link():
    s = setup()
    p = cost_params(s)
    assert swap_seconds(p, 1000) == pytest.approx(1000 * s.kv_bytes_per_token_per_gpu / (32e9 * 0.8))


def test_parameter_counts_match_published_totals():
    for m in MODELS.values():
        assert m.total_params / 1e9 == pytest.approx(m.published_params_b, rel=0.01), m.key


def test_every_gpu_default_model_fits():
    for g in GPUS.values():
        s = resolve_setup(g.key, None, "fp16", 1, 0.9, 16, 512, 256)
        assert s.num_kv_blocks * 16 >= 8192, g.key  # room for at least one long sequence


def test_kv_capacity_accounts_for_runtime_reserve():
    s = setup()
    naive = (s.usable_bytes - s.weight_bytes_per_gpu) // s.kv_bytes_per_block
    assert s.num_kv_blocks < naive
    assert s.reserve_bytes > 1e9


def test_impossible_setups_are_refused_with_a_clear_message():
    with pytest.raises(SetupError, match=r"llama-3-70b needs 131\.\d GB of weights in fp16.*rtx3050 has 8 GB"):
        setup("rtx3050", "llama-3-70b")
    with pytest.raises(SetupError, match="tp=3 does not divide llama-3-8b's 32 attention heads"):
        setup(tp=3)
    # int4 with TP makes 70B fit on 80 GB cards.
    assert setup("a100", "llama-3-70b", "int4", 2).num_kv_blocks > 0


def test_step_cost_is_zero_for_an_empty_batch():
    assert step_cost(cost_params(setup()), 0, 0, 0, 0, 0, 0) == (0.0, 0.0, 0.0)
    assert np.isfinite(prefill(cost_params(setup("rtx3050", None)), 8000)[0])
