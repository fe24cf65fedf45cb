"""Engine profiles (issue #22 item 6): the scenario field `engine` gives the engine's documented scheduler
defaults to the fields a scenario leaves unset and its decode attention kernel to the cost model; vllm is the
behaviour sched-sim always had; TensorRT-LLM's offline rows land within 15% of its published table."""

from __future__ import annotations

import pytest

from sim_core.catalog import ServingSettings, resolve_setup
from sim_core.deployment import resolve
from sim_core.engines import DEFAULT_ENGINE, ENGINES, SCENARIO_FIELDS, scenario_defaults
from sim_core.kernel.cost_constants import DECODE_ATTN_SLOWDOWN, PAGED_ATTENTION_SLOWDOWN
from sim_core.kernel.cost_model import cost_params, step_cost
from sim_core.scenario import Scenario, ScenarioError, parse_scenario
from sim_core.studies import trtllm_bench, validation


def test_vllm_is_the_default_engine_and_spells_out_nothing():
    plain, vllm = Scenario(), parse_scenario({"engine": "vllm"})
    assert plain == vllm and vllm.to_query() == ""
    assert {k: getattr(plain, k) for k in SCENARIO_FIELDS} == scenario_defaults(DEFAULT_ENGINE)
    setup = resolve_setup("h100", "llama-3-8b", "fp8", 1, ServingSettings(0.9, 16, 8192, 256))
    assert cost_params(setup)[DECODE_ATTN_SLOWDOWN] == PAGED_ATTENTION_SLOWDOWN


def test_an_engine_fills_only_the_fields_left_unset_and_its_query_round_trips():
    s = parse_scenario({"engine": "trtllm", "hardware": "h100"})
    r = resolve(s)
    assert (r.max_seqs, r.token_budget, s.preemption, s.async_scheduling) == (2048, 8192, "none", True)
    assert s.to_query() == "hardware=h100&engine=trtllm"  # the engine's own defaults are not spelled out
    # A field set to the plain default is kept in the query: leaving it out would bring back the engine's.
    mine = parse_scenario({"engine": "trtllm", "max_seqs": "256", "preemption": "recompute"})
    assert (resolve(mine).max_seqs, mine.preemption, resolve(mine).token_budget) == (256, "recompute", 8192)
    assert Scenario.from_query(mine.to_query()) == mine and "max_seqs=256" in mine.to_query()
    assert resolve(parse_scenario({"engine": "sglang"})).token_budget == ENGINES["sglang"].token_budget


def test_a_disaggregated_deployment_keeps_synchronous_scheduling_and_a_bad_name_is_named():
    s = parse_scenario({"engine": "trtllm", "prefill_replicas": "1", "decode_replicas": "1"})
    assert not s.async_scheduling and s.preemption == "none"
    assert Scenario.from_query(s.to_query()) == s
    with pytest.raises(ScenarioError) as e:
        parse_scenario({"engine": "tgi"})
    assert e.value.problems[0][0] == "engine" and "trtllm" in e.value.problems[0][1]


def test_trtllm_decode_attention_costs_its_bytes_at_streaming_bandwidth():
    """The same decode step: the attention part shrinks by vLLM's paged-kernel slowdown, nothing else moves."""
    setup = resolve_setup("h100", "llama-3-8b", "fp8", 1, ServingSettings(0.9, 16, 8192, 256))
    vllm, trt = cost_params(setup), cost_params(setup, engine="trtllm")
    assert trt[DECODE_ATTN_SLOWDOWN] == 1.0
    decode = (0, 0, 0, 0, 256, 256 * 2000, 256)
    assert step_cost(trt, *decode)[0] < step_cost(vllm, *decode)[0]
    prefill = (4096, 2, 2 * 2048 * 2049 // 2, 0, 0, 0, 2)
    assert step_cost(trt, *prefill)[0] == step_cost(vllm, *prefill)[0]


def test_trtllm_bench_sizes_its_engine_as_tuning_py_does():
    """finetune_setting by hand: 2177 requests of 128/128 -> batch 256*ceil(2177/256) = 2304, tokens
    2177 * 2 = 4354 -> 512*ceil(4354/512) = 4608; 278 of 1000/1000 -> 128*ceil(278/128) = 384, tokens 556 -> the
    2048 floor, raised to 1000 + 384 for an unchunked prompt; 40 of 5000/500 -> the 64 floor, 5000 + 64."""
    assert trtllm_bench.finetune(2177, 128, 128) == (2304, 4608)
    assert trtllm_bench.finetune(278, 1000, 1000) == (384, 2048)
    assert trtllm_bench.finetune(40, 5000, 500) == (64, 5064)
    assert trtllm_bench.finetune(10_000, 128, 128) == (4096, 8192)  # capped at 4096 sequences


def test_trtllm_offline_rows_land_within_15_percent_of_its_table():
    """Llama-3.1-8B FP8 on one H100, all requests at once: TensorRT-LLM's perf overview reports 28,312 output
    tok/s at 128/128 and 15,220 at 1000/1000 (validation/serving.csv); engine trtllm lands within 15% of both."""
    rows = [r for r in validation.read_rows(validation.VALIDATION_DIR / "serving.csv")
            if r["source_id"] == "trtllm_perf_overview_v1" and r["hardware"].startswith("H100")
            and "8B" in r["model"] and (r["input_len"], r["output_len"]) in (("128", "128"), ("1000", "1000"))]
    assert len(rows) == 2
    for r in rows:
        c = validation.serving_check("serving", r, simulate=True)
        assert c.engine == "trtllm" and abs(c.error) <= 0.15, (r["input_len"], c.predicted, c.reference)


def test_the_form_leaves_engine_fields_blank_and_says_what_the_engine_gives():
    """The dashboard's form: a blank preemption / async scheduling / max sequences takes the engine's default, so
    choosing an engine changes them, and its canonical URL does not spell them out."""
    from app.web.inputs import scenario_query_pairs
    from app.web.present import build_form

    form = build_form({"engine": "trtllm"}, {}, page_defaults={})
    fields = {f.name: f for _, group in form.groups for f in group} | {f.name: f for f in form.advanced}
    assert fields["preemption"].value == "" and fields["preemption"].options[0] == ("", "trtllm: none")
    assert fields["async_scheduling"].options[0] == ("", "trtllm: true")
    assert fields["max_seqs"].placeholder == "2048 (trtllm default)"
    assert fields["token_budget"].placeholder == "8192 (trtllm default)"
    s = parse_scenario({"engine": "trtllm", "hardware": "h100"})
    names = [k for k, _ in scenario_query_pairs(s)]
    assert "engine" in names and not set(SCENARIO_FIELDS) & set(names)


def test_step_time_takes_the_engine_as_the_run_does():
    from sim_core.step_time import parse_step_shape, step_time_doc

    shape = {"hardware": "h100", "model": "llama-3-8b", "quantization": "fp8", "decode_seqs": 256,
             "decode_context": 2000}
    vllm, trt = (step_time_doc(parse_step_shape({**shape, "engine": e})) for e in ("vllm", "trtllm"))
    assert trt["engine"] == "trtllm" and trt["components_ms"]["attention"] < vllm["components_ms"]["attention"]
    assert trt["components_ms"]["linear"] == vllm["components_ms"]["linear"]
    assert step_time_doc(parse_step_shape(shape)) == vllm


def test_a_field_set_to_none_takes_the_engines_default_and_round_trips():
    # Found by the round-trip property: None for a field the engine sets was written to the query as "None".
    s = Scenario(engine="sglang", token_budget=None, max_seqs=None, preemption=None)
    assert resolve(s).token_budget == ENGINES["sglang"].token_budget and s.preemption == "recompute"
    assert Scenario.from_query(s.to_query()) == s


def test_an_engine_entry_naming_an_unknown_decode_attention_kernel_is_refused_naming_it():
    from sim_core import data, engines

    doc = data.read(engines.ENGINES_FILE)
    doc["entries"][2]["decode_attention_kernel"] = "flashmla"
    with pytest.raises(data.CatalogDataError, match=r"entry 'trtllm': key 'decode_attention_kernel': 'flashmla'"):
        engines.profiles_from(doc)


def test_validation_rows_run_their_frameworks_engine_kernels():
    """A TensorRT-LLM row's decode step costs what the trtllm profile's kernels cost; a row whose framework names
    neither SGLang nor TensorRT-LLM takes vLLM's."""
    from sim_core.engines import engine_of

    assert engine_of("TensorRT-LLM 0.16.0 (C++ runtime engine)") == "trtllm"
    assert engine_of("NVIDIA NIM 1.8.0 (TensorRT-LLM backend)") == "trtllm"
    assert engine_of("LMDeploy TurboMind v0.1.0a1") == "vllm" and engine_of("SGLang v0.5.12") == "sglang"
    row = {"source_id": "s", "hardware": "H100-SXM-80GB", "model": "Llama-3-8B", "value": "5", "unit": "ms",
           "measured_what": "per-token latency (ITL, batch 1)", "decode_seqs": "1", "decode_context": "1024",
           "framework": "TensorRT-LLM 0.16.0"}
    trt = validation.step_check("step", row, "h100", "llama-3-8b", 1, "fp8")
    vllm = validation.step_check("step", row | {"framework": "vLLM 0.6"}, "h100", "llama-3-8b", 1, "fp8")
    assert trt.predicted < vllm.predicted


def test_an_engine_entry_naming_an_unknown_windowed_kv_rule_is_refused_naming_it():
    from sim_core import data, engines

    doc = data.read(engines.ENGINES_FILE)
    doc["entries"][0]["windowed_kv"] = "cyclic"
    with pytest.raises(data.CatalogDataError, match=r"entry 'vllm': key 'windowed_kv': 'cyclic'"):
        engines.profiles_from(doc)
    assert ENGINES["trtllm"].windowed_kv == "equal_pools" and ENGINES["vllm"].windowed_kv == "hybrid"


def test_an_engine_entry_naming_an_unknown_ep_exchange_is_refused_naming_it():
    from sim_core import data, engines

    doc = data.read(engines.ENGINES_FILE)
    doc["entries"][0]["ep_exchange"] = "broadcast"
    with pytest.raises(data.CatalogDataError, match=r"entry 'vllm': key 'ep_exchange': 'broadcast'"):
        engines.profiles_from(doc)
    assert ENGINES["trtllm"].ep_exchange == "allgather_off_mnnvl" and ENGINES["vllm"].ep_exchange == "alltoall"
    assert ENGINES["sglang"].ep_exchange == "alltoall"


def test_an_engine_entry_naming_unknown_mxfp4_moe_activations_is_refused_naming_it():
    from sim_core import data, engines

    doc = data.read(engines.ENGINES_FILE)
    doc["entries"][0]["mxfp4_moe_activations"] = "int8"
    with pytest.raises(data.CatalogDataError, match=r"entry 'vllm': key 'mxfp4_moe_activations': 'int8'"):
        engines.profiles_from(doc)
    assert ENGINES["trtllm"].mxfp4_moe_activations == "fp8" and ENGINES["vllm"].mxfp4_moe_activations == "fp4"
