"""LoRA adapters (issue #23; sim_core/lora.py, sim_core/kernel/lora.py): off changes nothing, vLLM's max_loras
limit holds in every step, the kernel cost stays within Punica's measured overhead, more adapters than slots
costs throughput and the grouped order recovers part of it, and the engine's invariants hold with adapters on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import FRAME_TIMES, check_invariants, explicit_requests

from sim_core import Scenario, ScenarioError, lora, parse_scenario
from sim_core.kernel import state as E
from sim_core.runner import RunOptions, resolve, run, simulate_requests


def _in_window_throughput(res) -> float:
    """Requests finished while requests still arrive, per second: a sustained-overload throughput that the tail
    of a finite run (the starved adapters' last requests) does not blur."""
    window = float(res.requests.arrival_s.max())
    return float(np.sum(res.finish_s[res.status == E.FINISHED] <= window)) / window


# ---- off: nothing changes -----------------------------------------------------------------------------------
def test_adapters_off_is_byte_identical_whatever_the_other_lora_fields():
    base = dict(workload="chat", rate=6, num_requests=80, seed=3, hardware="l4", model="qwen2.5-1.5b")
    plain = run(Scenario(**base), record_events=True)
    fields = run(Scenario(**base, lora_rank=64, max_loras=3, max_cpu_loras=9, lora_order="grouped"),
                 record_events=True)
    for name in ("finish_s", "first_token_s", "generated", "preemptions", "steps", "events"):
        assert np.array_equal(getattr(plain, name), getattr(fields, name), equal_nan=True), name
    assert "lora" not in plain.metrics and "lora" not in fields.metrics


def test_off_draws_no_adapter_and_on_draws_zipf_per_conversation():
    parents = np.array([-1, -1, 0, 2, -1, 1, -1], np.int64)
    assert (lora.adapters(Scenario(), parents) == -1).all()
    got = lora.adapters(Scenario(lora_adapters=5), parents)
    assert got[2] == got[3] == got[0] and got[5] == got[1]  # a conversation keeps its adapter
    many = lora.adapters(Scenario(lora_adapters=8, seed=1), np.full(40_000, -1, np.int64))
    share = np.bincount(many, minlength=8) / len(many)
    zipf = 1 / np.arange(1, 9) / np.sum(1 / np.arange(1, 9))
    assert np.allclose(share, zipf, atol=0.01)  # Zipf exponent 1: the top adapter takes 1/H_8 = 37%


# ---- vLLM's limit ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_loras", [1, 2, 5])
def test_a_step_never_batches_more_adapters_than_max_loras(max_loras):
    s = Scenario(workload="chat", rate=20, num_requests=150, seed=2, hardware="l4", model="qwen2.5-1.5b",
                 lora_adapters=12, max_loras=max_loras, max_cpu_loras=6)
    m = run(s, debug_checks=True).metrics["lora"]
    assert m["max_groups_per_step"] == max_loras  # binding under this load, never exceeded
    assert m["loads_disk"] >= 12  # each adapter comes from disk at least once (this seed draws all 12)


def test_more_adapters_than_slots_costs_throughput_and_grouped_order_recovers_part():
    """Chat at 8 req/s, 64 adapters (Zipf 1) on the default A100, 800 requests, finished per second within the
    arrival window: 7.57 with no adapters, 5.45 with every adapter allowed in a batch (max_loras 64; 64 first loads
    from disk at 0.5 s each weigh on a 100 s window), 3.55 with max_loras 4 in vLLM's order, 3.87 with the grouped
    order (+9%)."""
    base = dict(workload="chat", rate=8, num_requests=800, seed=1, lora_adapters=64, max_cpu_loras=8)
    fcfs = _in_window_throughput(run(Scenario(**base, max_loras=4)))
    grouped = _in_window_throughput(run(Scenario(**base, max_loras=4, lora_order="grouped")))
    all_in = _in_window_throughput(run(Scenario(**{**base, "max_cpu_loras": 64}, max_loras=64)))
    assert fcfs < 0.75 * all_in
    assert grouped > 1.05 * fcfs
    assert grouped < all_in


def test_throughput_vs_adapters_follows_s_loras_measured_curve_within_20_percent():
    """S-LoRA's Table 3 and its "Number of Adapters" figure (validation/lora_serving.csv, SOURCES.md slora_table3,
    slora_fig_num_adapters), each run simulated as its benchmark ran (studies/lora_checks.py): every point's
    throughput over its series' fewest adapters stays within 20% of the measured ratio (issue #23). Measured then,
    all 35 points were within 19%; the model is flatter than S-LoRA wherever the GPU is tight (A100-40GB S4 at 200
    adapters: 0.843 measured, 0.999 predicted, +18.5%), as adapter weights take no KV room here."""
    from sim_core.studies import lora_checks

    shape = lora_checks.shape(lora_checks.lora_checks())
    assert {s["group"] for s in shape} == {"slora_table3", "slora_fig_num_adapters"} and len(shape) == 35
    worst = max(shape, key=lambda s: abs(s["error"]))
    assert abs(worst["error"]) <= 0.20, worst
    # The model's own curve never rises with more adapters (each adds its own weights' reads and loads).
    for key in {(s["group"], s["series"]) for s in shape}:
        ratios = [s["predicted"] for s in sorted(shape, key=lambda s: s["adapters"]) if (s["group"], s["series"]) == key]
        assert all(b <= a + 1e-9 for a, b in zip(ratios, ratios[1:], strict=False)), key


# ---- cost ------------------------------------------------------------------------------------------------------
def test_lora_kernels_add_no_more_than_punica_measured_per_token():
    """Punica (arXiv 2310.18547): its SGMV kernel adds 2 ms per token serving many LoRA models (Llama-2-7B,
    A100). Decode steps of 32 sequences over 8 adapters of rank 16 here add ~1.2 ms: within it."""
    s = Scenario(workload="random", isl=64, osl=256, concurrency=32, num_requests=64, hardware="a100",
                 model="llama-2-7b", lora_adapters=8, max_loras=8, lora_rank=16)
    m = run(s).metrics["lora"]
    assert 0.25 * lora.PUNICA_ADDED_S_PER_TOKEN < m["kernel_s_per_step"] <= lora.PUNICA_ADDED_S_PER_TOKEN
    wide = run(s.model_copy(update={"lora_rank": 256, "lora_targets": "q,k,v,o,gate,up,down"})).metrics["lora"]
    assert wide["kernel_s_per_step"] > m["kernel_s_per_step"]


def test_flops_per_token_are_two_r_times_din_plus_dout_per_targeted_layer():
    s = Scenario(model="llama-2-7b", lora_adapters=2, lora_rank=8, lora_targets="q,v")
    r = resolve(s)
    p = lora.params(s, r.setup, np.ones(64))
    m = r.setup.model
    assert p[lora.LP_FLOPS_PER_TOKEN] == 2 * 8 * (2 * m.hidden + 2 * m.hidden) * m.layers  # q and v: 4096 -> 4096


# ---- bad input --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query, field", [
    ("lora_adapters=4&lora_targets=q,x", "lora_targets"),
    ("lora_adapters=4&max_loras=3&max_cpu_loras=2", "max_cpu_loras"),
    ("lora_adapters=4&replicas=2", "lora_adapters"),
    ("lora_adapters=4&preemption=swap", "lora_adapters"),
    ("lora_adapters=4&scheduler=static", "lora_adapters"),
    ("lora_order=lru", "lora_order"),
])
def test_bad_lora_input_names_its_field(query, field):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(query)
    assert field in str(err.value)


# ---- invariants (test_properties.py's checks) -------------------------------------------------------------------
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_invariants_hold_with_adapters_on(data):
    kw = dict(scheduler=data.draw(st.sampled_from(["fcfs", "chunked", "spf", "slo"])),
              preemption=data.draw(st.sampled_from(["recompute", "none"])), hardware="rtx3050", max_model_len=8192,
              block_size=16, kv_blocks=data.draw(st.integers(3, 120)), max_seqs=data.draw(st.sampled_from([2, 8, 256])),
              prefix_cache=data.draw(st.booleans()), admission="admit",
              lora_adapters=data.draw(st.integers(1, 6)), max_loras=data.draw(st.integers(1, 3)),
              lora_order=data.draw(st.sampled_from(["fcfs", "grouped"])), lora_aging_s=data.draw(st.sampled_from([0.0, 1.0, 1e5])),
              seed=data.draw(st.integers(0, 1000)))
    s = Scenario(**kw)
    res = simulate_requests(s, resolve(s), data.draw(explicit_requests()),
                            RunOptions(kv_frame_times=FRAME_TIMES, record_events=True, debug_checks=True))
    check_invariants(res)
    assert res.metrics["lora"]["max_groups_per_step"] <= s.max_loras
