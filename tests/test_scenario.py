"""The Scenario model: canonical query strings round-trip; bad input names the field and what is allowed."""

from __future__ import annotations

import math
from urllib.parse import parse_qsl

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES, Scenario, ScenarioError, parse_scenario
from sim_core.catalog import KV_CACHE_DTYPES, QUANTIZATIONS, weight_format
from sim_core.engines import ENGINE_NAMES
from sim_core.hardware_profile import Profile
from sim_core.kernel.cost_constants import CONSTANT_BOUNDS, Constants
from sim_core.links import KV_LINKS
from sim_core.policies.autoscalers import AUTOSCALER_NAMES, METRIC_NAMES
from sim_core.policies.routers import ROUTER_NAMES
from sim_core.replay_fields import REPLAY_MODES
from sim_core.scenario import AUTOSCALE_FIELDS, MAX_DP_ENGINES
from sim_core.tensor_parallel import SCALE_OUT_LINK_NAMES
from sim_core.trace_formats import TRACE_FORMAT_NAMES

FIELDS = Scenario.model_fields


def _floats(lo, hi, *, exclude_min=False):
    return st.floats(min_value=lo, max_value=hi, exclude_min=exclude_min, allow_nan=False, allow_infinity=False)


def _maybe(strategy):
    return st.one_of(st.none(), strategy)


# One strategy per field, over its whole valid range (bounds included). A field this file does not know yet is
# left at its default; test_every_field_has_a_strategy says so.
STRATEGIES = {
    "scheduler": st.sampled_from(SCHEDULER_NAMES),
    "hardware": st.sampled_from(sorted(GPUS)),
    "model": _maybe(st.sampled_from(sorted(MODELS))),
    "quantization": st.sampled_from(sorted(QUANTIZATIONS)),
    "kv_cache_dtype": st.sampled_from(sorted(KV_CACHE_DTYPES)),
    "tp": st.integers(1, 8),
    "ep": st.integers(1, 72),
    "attention_dp": st.booleans(),
    "moe_imbalance": _maybe(_floats(1.0, 16.0)),
    "workload": st.sampled_from(sorted(PRESETS)),
    "replicas": st.integers(1, 64),
    "router": st.sampled_from(ROUTER_NAMES),
    "router_staleness_ms": _floats(0.0, 600_000.0),
    "router_cache_weight": _floats(0.0, 1000.0),
    "autoscaler": _maybe(st.sampled_from(AUTOSCALER_NAMES)),
    "min_replicas": _maybe(st.integers(1, 64)),
    "max_replicas": _maybe(st.integers(1, 64)),
    "autoscale_interval_s": _maybe(_floats(0.001, 86_400.0)),
    "autoscale_metric": _maybe(st.sampled_from(METRIC_NAMES)),
    "autoscale_target": _maybe(_floats(0.0, 100_000.0, exclude_min=True)),
    "autoscale_cooldown_s": _maybe(_floats(0.0, 86_400.0)),
    "autoscale_replica_rate": _maybe(_floats(0.0, 10_000.0, exclude_min=True)),
    "provision_delay_s": _maybe(_floats(0.0, 86_400.0)),
    "prefill_replicas": st.integers(0, 64),
    "decode_replicas": st.integers(0, 64),
    "kv_link": st.sampled_from(sorted(KV_LINKS)),
    "scale_out_link": _maybe(st.sampled_from(SCALE_OUT_LINK_NAMES)),
    "prefill_hardware": _maybe(st.sampled_from(sorted(GPUS))),
    "decode_hardware": _maybe(st.sampled_from(sorted(GPUS))),
    "prefill_tp": _maybe(st.integers(1, 8)),
    "decode_tp": _maybe(st.integers(1, 8)),
    "prefill_ep": _maybe(st.integers(1, 72)),  # kept only where they make a deployment: _expert_parallel_fields
    "decode_ep": _maybe(st.integers(1, 72)),
    "watermark": _floats(0.0, 0.5),
    "async_scheduling": st.booleans(),
    "rate_schedule": st.one_of(st.none(), st.sampled_from(["0:5", "0:2,30:9", "ramp:from=1,to=9,over=20"])),
    "concurrency": _maybe(st.integers(1, 512)),
    "think_time_s": _maybe(st.floats(0, 60)),
    "concurrency_mode": st.sampled_from(["users", "semaphore"]),
    "isl": _maybe(st.integers(1, 1 << 20)),
    "osl": _maybe(st.integers(1, 1 << 20)),
    "length_range": _maybe(st.floats(0, 0.99)),
    "length_range_mode": st.sampled_from(["vllm", "inferencex"]),
    "model_uncertainty": st.booleans(),
    # An empty path is rejected: see test_an_empty_trace_path_is_rejected.
    "trace": _maybe(st.text(min_size=1, max_size=40)),
    "trace_format": _maybe(st.sampled_from(TRACE_FORMAT_NAMES)),
    "trace_block_tokens": _maybe(st.integers(1, 1 << 16)),
    "replay": _maybe(st.sampled_from(REPLAY_MODES)),
    "hybrid_blocks": st.booleans(),
    "model_file": _maybe(st.text(min_size=1, max_size=40)),
    "rate": _maybe(_floats(1e-6, 10_000.0)),
    "burstiness": _maybe(_floats(0.05, 20.0)),
    "duration": _floats(0.0, 7 * 24 * 3600.0, exclude_min=True),
    "num_requests": _maybe(st.integers(1, 10_000_000)),
    "seed": st.integers(0, 2**32 - 1),
    "seeds": st.integers(1, 50),
    "token_budget": _maybe(st.integers(16, 1 << 20)),
    "max_seqs": st.integers(1, 4096),
    "block_size": st.sampled_from([8, 16, 32, 64, 128]),
    "gpu_memory_utilization": _floats(0.1, 0.99),
    "kv_blocks": _maybe(st.integers(1, 50_000_000)),
    "max_model_len": _maybe(st.integers(64, 1 << 21)),
    "prefix_cache": st.booleans(),
    "system_prompt_tokens": _maybe(st.integers(0, 32768)),
    "preemption": st.sampled_from(["recompute", "swap", "none"]),
    "swap_space_gb": _floats(0.0, 4096.0),
    "kv_offload_cpu_gb": _floats(0.0, 4096.0),
    "kv_offload_disk_gb": _floats(0.0, 16_384.0),
    "kv_offload_policy": st.sampled_from(["evict", "store"]),
    "kv_offload_overlap": st.booleans(),
    "kv_offload_host_gbs": _maybe(_floats(0.0, 10_000.0, exclude_min=True)),
    "kv_offload_disk_read_gbs": _maybe(_floats(0.0, 10_000.0, exclude_min=True)),
    "kv_offload_disk_write_gbs": _maybe(_floats(0.0, 10_000.0, exclude_min=True)),
    "slo_ttft_ms": _maybe(_floats(0.0, 3_600_000.0, exclude_min=True)),
    "slo_tpot_ms": _maybe(_floats(0.0, 3_600_000.0, exclude_min=True)),
    "admission": _maybe(st.sampled_from(["admit", "reject", "degrade"])),
    "degrade_factor": _floats(1.0, 100.0),
    "aging_rate": _floats(0.0, 1e9),
    "transport_overhead_ms": _floats(0.0, 60_000.0),
    "adaptive_budget": st.booleans(),
    "controller_headroom": _floats(0.1, 1.0),
    "mlfq_quantum": st.integers(1, 1_000_000),
    "mlfq_levels": st.integers(1, 32),
    "spec_method": _maybe(st.sampled_from(["ngram", "draft", "eagle", "mtp"])),
    "spec_tokens": _maybe(st.integers(0, 16)),
    "spec_acceptance": _maybe(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True)),
    "spec_draft_model": _maybe(st.sampled_from(sorted(MODELS))),
    "spec_disable_above": st.integers(0, 4096),
    "spec_k_policy": st.sampled_from(["fixed", "goodput"]),
    "lora_adapters": st.integers(0, 100_000),
    "lora_rank": st.integers(1, 512),
    "lora_targets": st.lists(st.sampled_from(["q", "k", "v", "o", "gate", "up", "down"]), min_size=1,
                             unique=True).map(",".join),
    "lora_zipf": _floats(0.0, 10.0),
    "max_loras": st.integers(1, 100_000),
    "max_cpu_loras": _maybe(st.integers(1, 100_000)),
    "lora_order": st.sampled_from(["fcfs", "grouped"]),
    "lora_aging_s": _floats(0.0, 1e6),
    "lora_disk_load_s": _floats(0.0, 3600.0),
    "energy": st.booleans(),
    "node_power_w": _floats(0.0, 2000.0),
    "pue": _floats(1.0, 3.0),
    "power_cap_w": _floats(1.0, 2000.0),
    "energy_price_per_kwh": _floats(0.0, 10.0),
    "grid_gco2_per_kwh": _floats(0.0, 2000.0),
    "engine": st.sampled_from(ENGINE_NAMES),
    # The constants only: a profile must name the scenario's own deployment, which scenarios() fills in.
    "hardware_profile": _maybe(st.builds(Constants, **{k: _floats(max(lo, 1e-6), hi)
                                                       for k, (lo, hi) in CONSTANT_BOUNDS.items()})),
}


ROUND_TRIP_EXCLUDED: set[str] = set()


@st.composite
def scenarios(draw) -> Scenario:
    names = sorted((set(STRATEGIES) & set(FIELDS)) - ROUND_TRIP_EXCLUDED)
    chosen = draw(st.lists(st.sampled_from(names), unique=True))
    fields = {name: draw(STRATEGIES[name]) for name in chosen}
    # The pools come together (both 0 or both at least 1), and set the engine count instead of replicas.
    pools = fields.get("prefill_replicas", 0), fields.get("decode_replicas", 0)
    if min(pools) == 0 < max(pools):
        fields["prefill_replicas"] = fields["decode_replicas"] = max(pools)
    if max(pools) > 0:
        fields.pop("replicas", None)
        fields.pop("async_scheduling", None)  # not modelled for pools (refused with a message naming it)
    else:  # per-pool settings only with pools
        for name in ("prefill_hardware", "decode_hardware", "prefill_tp", "decode_tp", "prefill_ep", "decode_ep"):
            fields.pop(name, None)
    _expert_parallel_fields(fields, max(pools) > 0)
    if fields.get("spec_method") is None:  # speculative decoding's settings need a proposer
        for name in ("spec_tokens", "spec_acceptance", "spec_draft_model", "spec_disable_above", "spec_k_policy"):
            fields.pop(name, None)
    elif fields["spec_method"] != "draft":
        fields.pop("spec_draft_model", None)
    if fields.get("autoscaler") is None or max(pools) > 0:  # an autoscaler's settings need one, on replicas
        for name in ("autoscaler", *AUTOSCALE_FIELDS):
            fields.pop(name, None)
    else:  # replicas at the start within [min_replicas, max_replicas]; autoscaled replicas without EP
        for name in ("ep", "attention_dp", "moe_imbalance"):
            fields.pop(name, None)
        lo, hi = sorted((fields.get("min_replicas") or 1, fields.get("max_replicas") or 64))
        fields.update(min_replicas=lo if "min_replicas" in fields else None,
                      max_replicas=hi if "max_replicas" in fields else None)
        fields["replicas"] = min(max(fields.get("replicas", 1), lo), hi)
        if fields.get("autoscale_metric") not in (None, "running") and fields.get("autoscale_target") is None:
            fields.pop("autoscale_metric")  # only running has a default target
    if fields.get("rate_schedule") is not None:  # a schedule replaces rate and a trace's timing
        fields.pop("rate", None)
        fields.pop("trace", None)
    if fields.get("replay") is not None and (fields.get("trace") is None or
                                             (fields["replay"] == "closed") != (fields.get("concurrency") is not None)):
        fields.pop("replay")  # a replay mode needs a trace; closed is the closed loop and only it
    if fields.get("concurrency") is None:  # a closed loop's own settings need one
        fields.pop("think_time_s", None)
        fields.pop("concurrency_mode", None)
    else:  # a closed loop sets no rate
        for name in ("rate", "rate_schedule", "burstiness"):
            fields.pop(name, None)
    if fields.get("workload", FIELDS["workload"].default) != "random" or fields.get("trace") is not None:
        for name in ("isl", "osl", "length_range", "length_range_mode"):  # the random workload's lengths only
            fields.pop(name, None)
    if fields.get("max_cpu_loras") is not None:  # the host cache holds at least the GPU's adapters
        fields["max_loras"] = min(fields.get("max_loras", 1), fields["max_cpu_loras"])
    if (fields.get("preemption") == "swap" or fields.get("replicas", 1) > 1 or max(pools) > 0 or "ep" in fields
            or fields.get("scheduler") == "static"):
        fields.pop("lora_adapters", None)  # adapters run on one engine, without swap (refused, naming the field)
    unpowered = {k for k, g in GPUS.items() if g.idle_power_w is None}  # energy is refused there, naming energy
    if {fields.get("hardware", FIELDS["hardware"].default), fields.get("prefill_hardware"),
            fields.get("decode_hardware")} & unpowered:
        fields.pop("energy", None)
    if not fields.get("energy"):  # host power, PUE, price and carbon count only with energy
        for name in ("node_power_w", "pue", "energy_price_per_kwh", "grid_gco2_per_kwh"):
            fields.pop(name, None)
    if fields.get("power_cap_w") is not None:  # a cap lies above each GPU's idle power, at most its board limit
        used = [GPUS[k] for k in (fields.get("hardware", FIELDS["hardware"].default), fields.get("prefill_hardware"),
                                  fields.get("decode_hardware")) if k is not None]
        lo = max((g.idle_power_w or math.inf) for g in used)
        hi = min(g.board_power_w for g in used)
        if hi > lo:
            fields["power_cap_w"] = hi - fields["power_cap_w"] % (hi - lo) * 0.999
        else:
            fields.pop("power_cap_w")
    if fields.get("model_file") is not None:  # the model's architecture itself: no model, no fitted profile
        fields.pop("model", None)
        fields.pop("hardware_profile", None)
    if fields.get("hardware_profile") is not None:
        for name in ("prefill_hardware", "decode_hardware", "prefill_tp", "decode_tp"):  # a profile fits one
            fields.pop(name, None)

        hardware = fields.get("hardware", FIELDS["hardware"].default)
        model = fields.get("model") or GPUS[hardware].default_model
        quantization = weight_format(fields.get("quantization", FIELDS["quantization"].default), MODELS[model],
                                     GPUS[hardware]).quantization  # a profile names the format run, never auto
        fields["hardware_profile"] = Profile(hardware, model, quantization, fields.get("tp", FIELDS["tp"].default),
                                             fields["hardware_profile"]).compact()
    return Scenario(**fields)


def _expert_parallel_fields(fields: dict, pools: bool) -> None:
    """ep > 1 only without pools; ep = tp with attention TP, a multiple of tp above it with attention DP, within
    the engine bound; attention_dp and moe_imbalance only with ep > 1."""
    tp, ep = fields.get("tp", 1), fields.get("ep", 1)
    if fields.get("attention_dp"):
        ep = tp * max(2, ep // tp)
        if ep > 72:
            ep = tp * (72 // tp)
    else:
        ep = tp if ep > 1 else 1
    if pools or ep == 1 or (fields.get("attention_dp") and ep == tp):
        for name in ("ep", "attention_dp", "moe_imbalance", "prefill_ep", "decode_ep"):  # pools' ep: test_fleet.py
            fields.pop(name, None)
        return
    fields["ep"] = ep
    if fields.get("attention_dp"):
        fields["replicas"] = min(fields.get("replicas", 1), MAX_DP_ENGINES // (ep // tp))


def test_every_field_has_a_strategy():
    assert set(FIELDS) <= set(STRATEGIES), f"add strategies for {sorted(set(FIELDS) - set(STRATEGIES))}"


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(scenarios())
def test_query_string_round_trip_is_identity(s):
    q = s.to_query()
    back = Scenario.from_query(q)
    assert back == s
    assert back.to_query() == q  # canonical
    assert Scenario.from_query(dict(parse_qsl(q))) == s  # the dict form (a parsed form or JSON body)


def test_default_scenario_has_an_empty_query_and_only_changed_fields_appear():
    assert Scenario().to_query() == ""
    assert Scenario(tp=2, hardware="a100").to_query() == "tp=2"  # a100 is the default hardware
    assert Scenario.from_query("") == Scenario()


def test_empty_query_values_mean_defaults():
    s = Scenario.from_query("rate=&tp=&hardware=&model=&seed=3")
    assert s == Scenario(seed=3)
    assert Scenario.from_query({"rate": "", "tp": "4"}) == Scenario(tp=4)


def test_duplicated_query_keys_are_rejected():
    with pytest.raises(ScenarioError) as err:
        Scenario.from_query("tp=1&rate=2&tp=2")
    assert [f for f, _ in err.value.problems] == ["tp"]
    assert "more than once" in err.value.problems[0][1]


def test_unknown_fields_are_rejected_by_name():
    with pytest.raises(ScenarioError) as err:
        Scenario.from_query("tp=2&colour=red")
    assert err.value.problems == [("colour", "is not a scenario field")]
    with pytest.raises(ScenarioError):
        parse_scenario({"sheduler": "fcfs"})


@pytest.mark.parametrize("query, field, words", [
    ("tp=12", "tp", ["between 1 and 8", "12"]),
    ("tp=0", "tp", ["between 1 and 8"]),
    ("max_seqs=5000", "max_seqs", ["between 1 and 4096"]),
    ("seed=-1", "seed", ["between 0 and 4294967295"]),
    ("seed=4294967296", "seed", ["between 0 and 4294967295"]),
    ("rate=0", "rate", ["between 1e-06 and 10000"]),
    ("rate=10001", "rate", ["between 1e-06 and 10000"]),
    ("duration=0", "duration", ["greater than 0"]),
    ("burstiness=0.01", "burstiness", ["between 0.05 and 20"]),
    ("gpu_memory_utilization=1", "gpu_memory_utilization", ["between 0.1 and 0.99"]),
    ("token_budget=8", "token_budget", ["between 16 and"]),
    ("kv_blocks=0", "kv_blocks", ["between 1 and"]),
    ("max_model_len=32", "max_model_len", ["between 64 and"]),
    ("swap_space_gb=-1", "swap_space_gb", ["between 0 and 4096"]),
    ("num_requests=0", "num_requests", ["between 1 and"]),
    ("hardware=tpu", "hardware", ["must be one of", "'rtx3050'", "'tpu'"]),
    ("block_size=7", "block_size", ["must be one of", "16", "7"]),
    ("scheduler=lifo", "scheduler", ["must be one of", "'fcfs'"]),
    ("preemption=kill", "preemption", ["must be one of", "'swap'"]),
    ("tp=two", "tp", ["integer", "'two'"]),
    ("rate=fast", "rate", ["number", "'fast'"]),
])
def test_out_of_range_values_name_the_field_and_the_allowed_range(query, field, words):
    with pytest.raises(ScenarioError) as err:
        Scenario.from_query(query)
    assert [f for f, _ in err.value.problems] == [field]
    message = err.value.problems[0][1]
    for w in words:
        assert w in message, message
    assert field in str(err.value)


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(ScenarioError) as err:
        Scenario.from_query("tp=9&max_seqs=0&hardware=x&bogus=1")
    assert sorted(f for f, _ in err.value.problems) == ["bogus", "hardware", "max_seqs", "tp"]


def test_scenario_is_frozen_and_forbids_extra_fields():
    s = Scenario()
    with pytest.raises(ValidationError, match="frozen"):
        s.tp = 2  # type: ignore[misc]
    with pytest.raises(ValidationError, match="colour"):
        Scenario(colour="red")  # type: ignore[call-arg]


def test_an_empty_trace_path_is_rejected():
    """Regression: trace='' was a valid Scenario whose query 'trace=' read back as None (no round trip)."""
    with pytest.raises(ScenarioError, match="trace"):
        parse_scenario({"trace": ""})
    assert Scenario.from_query("trace=") == Scenario()  # a blank form field means the default


@pytest.mark.parametrize("size", [8, 32, 64, 128])
def test_block_size_can_be_given_in_a_query(size):
    """Regression: block_size was a Literal of ints and pydantic did not coerce the query's '32' to 32, so no URL
    could set a block size."""
    s = Scenario(block_size=size)
    assert Scenario.from_query(s.to_query()) == s
