"""A fused MoE layer in the cost model (issue #35): the routed experts as grouped GEMMs of their own, after the dense
GEMMs; each touched expert's rows padded to its tile; every (token, expert) pair's activations; the permutation and
finalize copies; and the "kernel, MoE" validation group that checks one layer's time against published kernel
timings (validation/moe_kernels.csv)."""

import csv
import math

import pytest

from sim_core.catalog import MODELS, ServingSettings, resolve_setup
from sim_core.expert_parallel import expert_parallel
from sim_core.kernel.cost_constants import (
    DENSE_GEMM_BW,
    DENSE_WEIGHT_BYTES,
    ELEMENTWISE_BW,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    EXPERT_FLOPS_PER_PAIR,
    EXPERT_PAIRS_PER_TOKEN,
    GEMM_LAUNCH_FLOOR_S,
    GEMMS,
    LINEAR_ACT_BYTES_PER_TOKEN,
    LINEAR_FLOPS_PER_TOKEN,
    LINEAR_RATE,
    LOCAL_EXPERTS,
    MOE_FIXED_S,
    MOE_LAYER_ELEMENTWISE_BYTES,
    MOE_LAYERS,
    STREAM_BW,
)
from sim_core.kernel.cost_model import cost_params, expert_gemms_s, linear_s, roofline_s
from sim_core.kernel.layer_kernels import (
    ACTIVATION_BYTES,
    MAX_TILE_ROWS,
    MIN_TILE_ROWS,
    MOE_EXTRA_ELEMENTWISE_PER_LAYER,
    expert_activation_bytes_per_pair,
    expert_pairs_per_token,
    linear_activation_bytes_per_token,
    moe_routing_bytes_per_token,
    tile_rows,
)
from sim_core.kernel.moe_layer import moe_layer_s
from sim_core.studies import moe_kernels
from sim_core.studies.validation import VALIDATION_DIR, checks

SETTINGS = ServingSettings(0.9, 16, 8192, 256)


def setup(hw="h100", model="qwen3-30b-a3b", quant="bf16", tp=1, ep=1):
    return resolve_setup(hw, model, quant, tp, SETTINGS, "auto", expert_parallel(ep))


# --- tile padding -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [0.3, 1.0, 5.0, 16.0, 17.0, 100.0, 128.0, 129.0, 250.0, 256.0, 1000.0])
def test_tile_padding_never_removes_rows_and_stays_under_one_tile(rows):
    padded = tile_rows(rows)
    assert padded >= rows
    assert padded - rows < max(MIN_TILE_ROWS, min(rows, MAX_TILE_ROWS))  # less than one tile of padding


@pytest.mark.parametrize("rows", [16.0, 32.0, 64.0, 128.0, 256.0, 384.0, 1024.0])
def test_tile_padding_vanishes_when_the_rows_fill_whole_tiles(rows):
    assert tile_rows(rows) == rows


def test_tile_padding_takes_the_next_tile_up():
    assert tile_rows(100.0) == 128.0 and tile_rows(129.0) == 256.0 and tile_rows(3.0) == MIN_TILE_ROWS
    assert tile_rows(0.0) == 0.0


# --- bytes --------------------------------------------------------------------------------------------------------
def test_permutation_and_finalize_bytes_scale_with_k_times_hidden():
    for key in ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b"):
        m = MODELS[key]
        # permute: read 1, write k; finalize: read k, write 1 (16-bit hidden states)
        assert moe_routing_bytes_per_token(setup("b200", key, "fp8")) == pytest.approx(
            2 * (1 + m.experts_per_token) * m.hidden * ACTIVATION_BYTES)
    assert moe_routing_bytes_per_token(setup(model="llama-3-8b")) == 0.0


def test_each_expert_reads_its_own_copy_of_the_token():
    s = setup(model="qwen3-30b-a3b", tp=2)
    m = s.model
    assert expert_activation_bytes_per_pair(s) == (2 * m.hidden + 3 * m.expert_ffn / 2) * ACTIVATION_BYTES
    # The k-fold input and output: more than a dense MLP of width k x intermediate would move.
    k = m.experts_per_token
    as_dense_mlp = (2 * m.hidden + 3 * k * m.expert_ffn / 2) * ACTIVATION_BYTES
    assert k * expert_activation_bytes_per_pair(s) - as_dense_mlp == pytest.approx(2 * (k - 1) * m.hidden * 2)


def test_under_expert_parallelism_a_gpu_computes_its_share_of_the_pairs_on_whole_experts():
    s = setup("h200", "deepseek-r1", "fp8", tp=8, ep=8)
    assert expert_pairs_per_token(s) == MODELS["deepseek-r1"].experts_per_token / 8
    p = cost_params(s)
    assert p[LOCAL_EXPERTS] == 32
    # the pairs' FLOPs are the routed part of the step's FLOPs, as kernel/ep_params.py counts them
    m = s.model
    routed = 2.0 * (m.active_matmul_params - m.dense_matmul_params) / 8
    assert p[MOE_LAYERS] * p[EXPERT_PAIRS_PER_TOKEN] * p[EXPERT_FLOPS_PER_PAIR] == pytest.approx(routed)


# --- the step's GEMMs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens", [1, 64, 1024, 8192])
def test_a_dense_model_keeps_one_gemm_roofline_to_the_last_bit(tokens):
    p = cost_params(setup(model="llama-3-8b"))
    assert p[MOE_LAYERS] == 0.0
    moved = p[DENSE_WEIGHT_BYTES] + tokens * p[LINEAR_ACT_BYTES_PER_TOKEN]
    slow = p[DENSE_WEIGHT_BYTES] * (p[STREAM_BW] / p[DENSE_GEMM_BW] - 1.0)
    want = p[GEMMS] * GEMM_LAUNCH_FLOOR_S + roofline_s(moved + slow, tokens * p[LINEAR_FLOPS_PER_TOKEN],
                                                        p[STREAM_BW], p[LINEAR_RATE])
    assert linear_s(p, tokens)[0] == want


def test_the_expert_flops_are_those_of_the_padded_rows():
    p = cost_params(setup(model="qwen3-30b-a3b"))
    # 2,048 tokens x top-8 over 128 experts: 128 rows each, whole tiles; 1,600 tokens: 100 rows, padded to 128.
    for tokens, rows in ((2048, 128.0), (1600, 100.0)):
        flops = expert_gemms_s(p, tokens)[2]
        assert flops == pytest.approx(p[MOE_LAYERS] * p[LOCAL_EXPERTS] * tile_rows(rows) * p[EXPERT_FLOPS_PER_PAIR])
    unpadded = 1600 * p[MOE_LAYERS] * p[EXPERT_PAIRS_PER_TOKEN] * p[EXPERT_FLOPS_PER_PAIR]
    assert expert_gemms_s(p, 1600)[2] == pytest.approx(unpadded * 128 / 100)


def test_the_expert_gemms_are_timed_apart_from_the_dense_ones():
    """Kernels that run one after the other take at least as long as one roofline over all their bytes and FLOPs."""
    p = cost_params(setup("b200", "qwen3-30b-a3b", "fp4"))
    for tokens in (16, 512, 4096):
        seconds, moved, flops = linear_s(p, tokens)
        expert_s, expert_moved, expert_flops = expert_gemms_s(p, tokens)
        assert expert_s < seconds and expert_moved < moved and expert_flops < flops
        dense_floors = (p[GEMMS] - 2 * p[MOE_LAYERS]) * GEMM_LAUNCH_FLOOR_S
        assert seconds - expert_s >= dense_floors
    # The step's GEMM FLOPs are its dense ones plus the padded expert ones: no less than the unpadded active FLOPs.
    assert linear_s(p, 1000)[2] >= 1000 * p[LINEAR_FLOPS_PER_TOKEN] * (1 - 1e-12)


def test_the_k_fold_expert_activations_are_in_the_step():
    s = setup(model="qwen3-30b-a3b")
    m = s.model
    per_token = linear_activation_bytes_per_token(s)
    expert_part = m.moe_layers * m.experts_per_token * expert_activation_bytes_per_pair(s)
    assert per_token > expert_part > 0
    assert cost_params(s)[LINEAR_ACT_BYTES_PER_TOKEN] == per_token


# --- one MoE layer ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens", [1, 128, 4096])
def test_one_moe_layer_is_its_share_of_the_steps_expert_gemms_and_its_routing_kernels(tokens):
    p = cost_params(setup("h100", "qwen3-30b-a3b", "fp8"))
    want = (expert_gemms_s(p, tokens)[0] / p[MOE_LAYERS]
            + (MOE_EXTRA_ELEMENTWISE_PER_LAYER + 1) * ELEMENTWISE_LAUNCH_FLOOR_S
            + tokens * p[MOE_LAYER_ELEMENTWISE_BYTES] / p[ELEMENTWISE_BW])
    assert moe_layer_s(p, float(tokens)) == pytest.approx(want)


def test_a_moe_layer_without_tokens_pays_its_launches_only():
    p = cost_params(setup("h100", "qwen3-30b-a3b", "fp8"))
    seconds, moved, flops = expert_gemms_s(p, 0.0)
    assert moved == 0.0 and flops == 0.0 and seconds == pytest.approx(2 * p[MOE_LAYERS] * GEMM_LAUNCH_FLOOR_S
                                                                       + p[MOE_FIXED_S])


def test_one_moe_layer_grows_with_the_tokens():
    p = cost_params(setup("b200", "deepseek-r1", "fp4", tp=8, ep=8))
    times = [moe_layer_s(p, float(t)) for t in (1, 16, 256, 4096, 16384)]
    assert times == sorted(times) and not any(math.isnan(t) for t in times)


# --- the validation group -----------------------------------------------------------------------------------------
def test_every_kernel_row_parses_and_is_predicted():
    rows = moe_kernels.moe_kernel_checks()
    with open(VALIDATION_DIR / moe_kernels.FILE, newline="", encoding="utf-8") as f:
        assert len(rows) == sum(1 for _ in csv.DictReader(f)) > 40
    assert all(c.group == moe_kernels.GROUP and c.predicted is not None and c.predicted > 0 for c in rows)
    assert {c.source for c in rows} >= {"vllm_pr24700_h100", "flashinfer_pr5301_b300"}


def test_the_group_is_in_the_validation_set_and_reported_by_batch_size():
    rows = [c for c in checks(simulate=False) if c.group == moe_kernels.GROUP]
    assert len(rows) == len(moe_kernels.moe_kernel_checks())
    bands = moe_kernels.errors_by_tokens(rows)
    assert sum(b["rows"] for b in bands.values()) == len(rows)
    assert all(b["min_error"] <= b["median_error"] <= b["max_error"] for b in bands.values())


def test_a_row_whose_shape_is_not_the_catalogues_model_is_refused(tmp_path):
    with open(VALIDATION_DIR / moe_kernels.FILE, newline="", encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    row = dict(lines[0], expert_ffn_per_gpu="384")
    with open(tmp_path / moe_kernels.FILE, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    with pytest.raises(ValueError, match=r"moe_kernels.csv line 2: expert_ffn_per_gpu 384"):
        moe_kernels.moe_kernel_checks(tmp_path)


def test_validate_reports_the_groups_errors_by_batch_size():
    from app.cli.commands.validate import _moe_kernel_lines, validate_doc

    rows = moe_kernels.moe_kernel_checks()
    doc = validate_doc(rows, {}, [])
    assert doc["moe_kernel_by_tokens"] == moe_kernels.errors_by_tokens(rows)
    assert set(doc["moe_kernel_by_tokens"]) == {"1-64", "65-511", "512-2047", "2048+"}
    lines = _moe_kernel_lines(doc)
    assert "One fused MoE layer against kernel timings" in lines[1] and len(lines) == 2 + 2 + 4  # title, head, bands
