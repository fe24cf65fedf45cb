"""Expert parallelism (issue #22 item 3, sim_core/expert_parallel.py): the all-to-all against DeepEP's published
tables, the memory and step cost of attention data-parallel + EP against pure TP, and the scenario's rules."""

from __future__ import annotations

import numpy as np
import pytest

from sim_core import Scenario, ScenarioError, parse_scenario, run
from sim_core.catalog import GIB, MODELS, QUANTIZATIONS, ServingSettings, SetupError, resolve_setup
from sim_core.deployment import resolve
from sim_core.engines import ENGINES
from sim_core.expert_parallel import (
    NO_EP,
    ExpertParallel,
    all_to_all_seconds,
    combine_bytes_per_copy,
    dispatch_bytes_per_copy,
    gathered_bytes_per_copy,
    links_of,
)
from sim_core.kernel.cost_constants import (
    EP_COMBINE_NVLINK_BYTES,
    EP_DISPATCH_NVLINK_BYTES,
    EXPERT_RATE,
    LINEAR_RATE,
    linear_rate,
)
from sim_core.kernel.cost_model import cost_params, step_breakdown, step_cost
from sim_core.kernel.ep_params import expert_input_format, gathers
from sim_core.step_time import parse_step_shape, step_time_doc
from sim_core.studies import gathered, validation
from sim_core.studies.alltoall_checks import FITTED_NOTE, alltoall_checks

SERVING = ServingSettings(0.9, 16, 8192, 256)
R1 = "deepseek-r1"


def setup(hardware="h200", tp=8, plan=NO_EP, quantization="fp8"):
    return resolve_setup(hardware, R1, quantization, tp, SERVING, expert_parallel=plan)


# ----- (a) the all-to-all against DeepEP's tables -----
def test_every_alltoall_row_is_predicted_within_25_percent():
    checks = alltoall_checks()
    assert len(checks) == len(validation.read_rows(validation.VALIDATION_DIR / "alltoall.csv")) > 40
    assert {c.group for c in checks} == {"deepep_v1_legacy", "deepep_v2_readme"}
    worst = max(checks, key=lambda c: abs(c.error))
    assert abs(worst.error) <= 0.25, (worst.what, worst.reference, worst.predicted)
    # Only the EP8 low-latency rows the latency was fitted on (two latencies, their bandwidth twins) say so; the
    # other 38 are checks.
    assert sum(FITTED_NOTE in c.note for c in checks) == 4


def test_the_validate_summary_has_a_group_per_deepep_source_with_errors():
    summary = validation.summary(gathered.gathered_checks())  # what `sched-sim validate` lists after the others
    for group in ("deepep_v1_legacy", "deepep_v2_readme"):
        assert summary[group]["rows"] > 0 and summary[group]["skipped"] == 0
        assert summary[group]["worst_abs_error"] <= 0.25


def test_alltoall_time_grows_with_tokens_and_with_ep_until_all_traffic_leaves_the_node():
    links = links_of(setup().gpu)
    per = dispatch_bytes_per_copy(7168)
    by_tokens = [all_to_all_seconds(t, per, 8, 16, links) for t in (1, 128, 1024, 8192)]
    by_ep = [all_to_all_seconds(128, per, 8, ep, links) for ep in (8, 16, 32, 64)]
    assert by_tokens == sorted(by_tokens) and by_tokens[-1] > 50 * by_tokens[0]
    assert by_ep == sorted(by_ep)
    # Inside one NVLink domain nothing crosses the (slower) network.
    assert all_to_all_seconds(1024, per, 8, 8, links) < all_to_all_seconds(1024, per, 8, 16, links) / 3
    # An NVL72 rack keeps EP72 inside its NVLink domain.
    nvl72 = links_of(resolve_setup("gb200", R1, "fp8", 8, SERVING).gpu)
    assert all_to_all_seconds(128, per, 8, 64, nvl72) < all_to_all_seconds(128, per, 8, 64, links) / 3


def test_the_steps_all_to_all_is_the_python_model_per_moe_layer():
    s = setup(tp=1, plan=ExpertParallel(16, attention_dp=True))
    p = cost_params(s)
    links, m = links_of(s.gpu), s.model
    comm = float(step_breakdown(p, 0, 0, 0, 0, 64, 64 * 2000, 64)[4])
    want = m.moe_layers * (all_to_all_seconds(64, dispatch_bytes_per_copy(m.hidden), 8, 16, links)
                           + all_to_all_seconds(64, combine_bytes_per_copy(m.hidden), 8, 16, links))
    assert comm == pytest.approx(want, rel=1e-12)


def test_imbalance_slows_the_step():
    one, two = (cost_params(setup(tp=1, plan=ExpertParallel(8, True, f))) for f in (1.0, 2.0))
    batch = (0, 0, 0, 0, 256, 256 * 2000, 256)
    assert step_cost(two, *batch)[0] > step_cost(one, *batch)[0] * 1.05


# ----- memory: expert weights per GPU decide KV capacity -----
def test_expert_weights_spread_over_ep_and_dense_weights_stay_whole_per_dp_rank():
    m = setup().model
    tp8, dp8 = setup(), setup(tp=1, plan=ExpertParallel(8, attention_dp=True))
    experts = m.expert_matmul_params * QUANTIZATIONS["fp8"]
    # TP8 splits everything 8 ways; DP8 keeps the non-expert weights whole and 256/8 = 32 experts a layer.
    assert dp8.weight_bytes_per_gpu == pytest.approx(tp8.weight_bytes_per_gpu * 8 - experts + experts / 8)
    assert dp8.weight_bytes_per_gpu > tp8.weight_bytes_per_gpu
    # MLA's latent is whole on every GPU either way: DP8's 8 ranks hold far more context than TP8's one engine.
    assert dp8.kv_bytes_per_token_per_gpu == tp8.kv_bytes_per_token_per_gpu
    assert 8 * dp8.num_kv_blocks > 4 * tp8.num_kv_blocks


# ----- (b) attention DP + EP beats pure TP on DeepSeek-R1 decode at high concurrency, 8 x H200 -----
def test_attention_dp_with_ep_beats_pure_tp_on_deepseek_r1_at_high_concurrency():
    common = dict(hardware="h200", model=R1, quantization="fp8", workload="random", isl=1024, osl=512,
                  concurrency=512, num_requests=1024, max_seqs=512, token_budget=8192)
    tp = run(Scenario(tp=8, **common)).metrics
    dp = run(Scenario(tp=1, ep=8, attention_dp=True, **common)).metrics
    assert tp["gpus"] == dp["gpus"] == 8
    assert dp["completed"] == tp["completed"] == 1024
    assert dp["output_throughput"] > 1.5 * tp["output_throughput"], (dp["output_throughput"],
                                                                    tp["output_throughput"])


def test_at_one_request_attention_dp_is_no_faster_than_tp():
    """At low load the all-to-all and the whole attention weights per GPU cost DP what TP splits 8 ways."""
    tp, dp = (cost_params(s) for s in (setup(), setup(tp=1, plan=ExpertParallel(8, attention_dp=True))))
    batch = (0, 0, 0, 0, 1, 2000, 1)
    assert step_cost(dp, *batch)[0] > step_cost(tp, *batch)[0]


# ----- (c) a model that cannot fit says which TP/EP it needs -----
def test_a_moe_model_too_big_for_tp8_names_the_ep_degree_that_fits_and_that_one_runs():
    with pytest.raises(SetupError, match=r"ep=16 and attention_dp") as e:
        setup(hardware="h100")
    assert e.value.field == "model"
    fits = setup(hardware="h100", tp=1, plan=ExpertParallel(16, attention_dp=True))
    assert fits.num_kv_blocks > 0 and fits.weight_bytes_per_gpu < 80 * GIB


# ----- the scenario's rules -----
def test_ep_1_is_the_default_and_adds_nothing_to_the_query():
    assert Scenario(ep=1).to_query() == ""
    assert Scenario().ep == 1 and resolve(Scenario()).setup.expert_parallel.ep == 1


@pytest.mark.parametrize("fields, field, words", [
    ({"attention_dp": "true"}, "attention_dp", "set ep > 1"),
    ({"moe_imbalance": "1.5"}, "moe_imbalance", "set ep > 1"),
    ({"ep": "8", "tp": "4"}, "ep", "set ep = tp"),
    ({"ep": "12", "tp": "8", "attention_dp": "true"}, "ep", "multiple of tp=8"),
    ({"ep": "8", "tp": "8", "prefill_replicas": "1", "decode_replicas": "1"}, "ep", "prefill_ep, decode_ep"),
    ({"ep": "72", "attention_dp": "true", "replicas": "5"}, "replicas", "at most"),
])
def test_bad_expert_parallel_settings_are_refused_naming_the_field(fields, field, words):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(fields)
    assert [f for f, _ in e.value.problems] == [field] and words in e.value.problems[0][1]


def test_ep_on_a_dense_model_is_refused_naming_ep():
    with pytest.raises(SetupError, match="is dense") as e:
        resolve(Scenario(hardware="h100", model="llama-3-8b", tp=2, ep=2))
    assert e.value.field == "ep"


def test_attention_dp_runs_one_engine_per_rank():
    r = resolve(Scenario(hardware="h200", model=R1, quantization="fp8", ep=8, tp=2, attention_dp=True))
    assert r.deployment[0].engines == 4 and r.setup.tp == 2 and r.setup.expert_parallel.dp(2) == 4


def test_step_time_shows_the_all_to_all_and_refuses_a_bad_shape():
    batch = {"hardware": "h200", "model": R1, "quantization": "fp8", "decode_seqs": "128", "decode_context": "2000"}
    tp8 = step_time_doc(parse_step_shape({**batch, "tp": "8"}))
    dp8 = step_time_doc(parse_step_shape({**batch, "tp": "1", "ep": "8", "attention_dp": "true"}))
    assert "ep" not in tp8 and dp8["ep"] == 8 and dp8["attention_dp"] is True
    assert dp8["components_ms"]["communication"] > 2 * tp8["components_ms"]["communication"]
    with pytest.raises(ScenarioError) as e:
        parse_step_shape({**batch, "tp": "4", "ep": "8"})
    assert [f for f, _ in e.value.problems] == ["ep"]


def _rank_steps(result):
    """Each attention-DP rank's logged steps as (start, end, prefill tokens) rows."""
    from sim_core.views import columns_of_steps

    out = []
    for log in result.engine_logs:
        c = columns_of_steps(log.steps)
        out.append(np.stack([c["start_s"], c["start_s"] + c["duration_s"], c["prefill_tokens"]], axis=1))
    return out


def test_attention_dp_ranks_step_in_lock_step():
    """Attention-DP ranks of one deployment run each step together (each MoE layer's all-to-all is a collective
    across them: cluster.step_together): with unequal work (one rank's prompts 8x the other's), every step that
    two ranks both run starts and ends at the same time on both, so a rank that only decodes while the other
    prefills lasts the prefill's step (the max), and no step of one rank straddles a step boundary of the other."""
    rows = "".join(f"{0.05 * k},{2048 if k % 2 == 0 else 256},{16 + 8 * (k % 3)}\n" for k in range(40))
    s = Scenario(hardware="h100", model="qwen3-30b-a3b", tp=1, ep=2, attention_dp=True, router="round_robin",
                 seed=3)
    assert resolve(s).deployment[0].lockstep == 2
    res = run(s, trace_text="arrival_s,prompt_tokens,output_tokens\n" + rows)
    assert res.step_stride == 1 and res.metrics["completed"] == 40
    a, b = _rank_steps(res)
    shared = 0
    prefill_against_decode = 0
    for start, end, prefill in a:
        same = b[b[:, 0] == start]
        if len(same):
            shared += 1
            assert same[0, 1] == end  # the step ends together on both ranks: at the longer one's end
            prefill_against_decode += (prefill > 0) != (same[0, 2] > 0)
        # the other rank's steps are either this very step or wholly before or after it
        assert not np.any((b[:, 0] < end) & (b[:, 1] > start) & (b[:, 0] != start))
    assert shared > 20 and prefill_against_decode > 0


# ----- how the engine hands tokens to the experts: all-to-all, or TensorRT-LLM's all-gather -----
def ep_bytes(hardware, model, quantization, ep, engine):
    """(dispatch, combine) NVLink bytes per token of one GPU's batch, and whether they are gathered."""
    s = resolve_setup(hardware, model, quantization, 1, SERVING, expert_parallel=ExpertParallel(ep, True))
    p = cost_params(s, engine=engine)
    return p[EP_DISPATCH_NVLINK_BYTES], p[EP_COMBINE_NVLINK_BYTES], gathers(s, ENGINES[engine].ep_exchange)


def test_trtllm_all_gathers_tokens_on_a_dgx_node_where_vllm_dispatches_them():
    """TensorRT-LLM's fused MoE has no all-to-all on an 8-GPU node (CutlassFusedMoE.select_alltoall_method_type,
    engines.json): every token of a rank goes to all ep - 1 other GPUs, quantized as the experts take it, with
    its routing; the outputs come back by a reduce-scatter, ep - 1 16-bit copies. Llama-4 Maverick routes each
    token to one expert, so an all-to-all sends 1 x 7/8 copies and the gather 7: 7x the bytes at FP8."""
    m = MODELS["llama-4-maverick"]
    dispatch, combine, gathered_ = ep_bytes("h200", "llama-4-maverick", "fp8", 8, "trtllm")
    assert gathered_ and m.experts_per_token == 1
    values, per_scale = expert_input_format(resolve_setup("h200", "llama-4-maverick", "fp8", 1, SERVING,
                                                          expert_parallel=ExpertParallel(8, True)))
    assert values == 1.0
    assert dispatch == pytest.approx(7 * gathered_bytes_per_copy(m.hidden, 1, values, per_scale), rel=1e-12)
    assert dispatch >= 7 * (m.hidden + 8)  # FP8 values and an int32 id + fp32 weight per expert, at least
    assert combine == pytest.approx(7 * m.hidden * 2.0, rel=1e-12)
    v_dispatch, v_combine, v_gathered = ep_bytes("h200", "llama-4-maverick", "fp8", 8, "vllm")
    assert not v_gathered
    assert v_dispatch == pytest.approx(dispatch_bytes_per_copy(m.hidden) * 7 / 8, rel=1e-12)
    assert v_combine == pytest.approx(combine / 8, rel=1e-12)


def test_trtllm_uses_its_all_to_all_only_in_an_nvl72_domain_with_more_ranks_than_top_k():
    # GB200 NVL72, EP4 > top-1: the multi-node NVLink all-to-all, as vLLM's.
    assert ep_bytes("gb200", "llama-4-maverick", "fp4", 4, "trtllm")[:2] == pytest.approx(
        ep_bytes("gb200", "llama-4-maverick", "fp4", 4, "vllm")[:2])
    # DeepSeek-R1 routes to 8 experts: at EP4 (<= top-k) even an NVL72 rack gathers, in NVFP4 (half a byte a
    # value and one 1-byte scale per 16) on FP4 tensor cores.
    dispatch, _, gathered_ = ep_bytes("gb200", R1, "fp4", 4, "trtllm")
    assert gathered_
    hidden = MODELS[R1].hidden
    assert dispatch == pytest.approx(3 * (hidden * 0.5 + hidden / 16 + 8 * 8), rel=1e-12)


def test_a_gathered_exchange_lengthens_a_top_1_models_step_and_ignores_routing_imbalance():
    shape = (1024, 1, 1024 * 1025 // 2, 0, 256, 256 * 2000, 257)
    def comm(engine, imbalance=1.0):
        s = resolve_setup("h200", "llama-4-maverick", "fp8", 1, SERVING,
                          expert_parallel=ExpertParallel(8, True, imbalance))
        return float(step_breakdown(cost_params(s, engine=engine), *shape)[4])
    assert comm("trtllm") > 3 * comm("vllm")  # 7x the bytes, the same fixed cost per collective
    assert comm("trtllm", 2.0) == comm("trtllm")  # every token goes to every GPU, wherever it is routed
    assert comm("vllm", 2.0) > comm("vllm")


def test_trtllm_runs_mxfp4_experts_w4a8_at_the_fp8_rate_on_blackwell():
    """TensorRT-LLM feeds an MXFP4 checkpoint's experts MXFP8 activations on Blackwell (W4A8_MXFP4_MXFP8, engines.json
    mxfp4_moe_activations): an MMA with an FP8 operand runs at the FP8 rate, not the FP4 one. Only those experts:
    NVFP4 checkpoints stay W4A4, Hopper runs MXFP4 weight-only either way, and vLLM's profile keeps the FP4 rate."""
    def rates(hardware, model, quantization, engine):
        p = cost_params(resolve_setup(hardware, model, quantization, 1, SERVING), engine=engine)
        return p[LINEAR_RATE], p[EXPERT_RATE]
    b200 = resolve_setup("b200", "gpt-oss-20b", "fp4", 1, SERVING)
    fp8 = resolve_setup("b200", "llama-3-8b", "fp8", 1, SERVING)  # per-tensor FP8 W8A8
    linear, experts = rates("b200", "gpt-oss-20b", "fp4", "trtllm")
    assert linear == linear_rate(b200) and experts == pytest.approx(linear_rate(fp8), rel=1e-12) != linear
    assert rates("b200", "gpt-oss-20b", "fp4", "vllm") == (linear, linear)
    assert len(set(rates("b200", "qwen3-30b-a3b", "fp4", "trtllm"))) == 1  # an NVFP4 checkpoint: W4A4
    # Hopper: weight-only (W4A16) under every engine, at the measured W4A16 MoE rate (test_cost_model_measured_kernels)
    assert rates("h100", "gpt-oss-20b", "int4", "trtllm") == rates("h100", "gpt-oss-20b", "int4", "vllm")
    assert expert_input_format(b200, "fp8") == (1.0, 32) and expert_input_format(b200) == (0.5, 16)
    # A compute-bound prefill step's expert GEMMs take the FP8 rate's time.
    step = (8192, 1, 8192 * 8193 // 2, 0, 0, 0, 1)
    slow, fast = (float(step_breakdown(cost_params(b200, engine=e), *step)[0]) for e in ("trtllm", "vllm"))
    assert slow > fast
