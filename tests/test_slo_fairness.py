"""Deadline-aware scheduling, admission control, aging, fair sharing and the adaptive budget (seed 003)."""

import numpy as np
import pytest
from conftest import seed_scenario

from sim_core import Scenario, run
from sim_core.kernel import state as E
from sim_core.studies.sweep import knee_rate, rate_grid, sweep


@pytest.fixture(scope="module")
def seed004_sweep():
    """Seed 004 experiment 2: sched-sim sweep --schedulers fcfs,chunked,slo --hardware rtx3050 2..18 step 4, with the
    settings it was written with: the chunked-prefill schedulers (chunked, slo) at vLLM V0's 512-token budget, fcfs
    at max_model_len (one scenario per scheduler, as a token_budget would apply to fcfs too). At vLLM's 2,048 on the
    rtx3050, slo's attainment at 14 req/s is 0.22 against fcfs's 0.001, short of the 0.25 margin below."""
    return {s: sweep(seed_scenario(s), [s], rate_grid(2, 18, 4), workers=2)[s] for s in ("fcfs", "chunked", "slo")}


def attainment(points):
    return {p["rate"]: p["metrics"]["slo_attainment"] for p in points}


def test_well_below_the_knee_everyone_is_near_full_goodput(seed004_sweep):
    # The RTX 3050's knee for chat is near 6 req/s (attainment 0.7-0.9 there with the kernel-sum cost model; the
    # seed's atomic roofline put it above 6).
    for name, points in seed004_sweep.items():
        a = attainment(points)
        assert a[2.0] >= 0.9 and a[10.0] < 0.9, name


def test_beyond_ten_fcfs_collapses_while_slo_sheds_and_keeps_goodput(seed004_sweep):
    fcfs, slo = attainment(seed004_sweep["fcfs"]), attainment(seed004_sweep["slo"])
    for rate in (14.0, 18.0):
        assert fcfs[rate] < 0.4
        assert slo[rate] > fcfs[rate] + 0.25
    good = {s: {p["rate"]: p["metrics"]["goodput"] for p in pts} for s, pts in seed004_sweep.items()}
    assert good["slo"][14.0] > 2 * good["fcfs"][14.0]
    shed = {p["rate"]: p["metrics"]["shed"] for p in seed004_sweep["slo"]}
    assert shed[18.0] > shed[6.0] >= 0 and shed[18.0] > 0
    # Shed requests are reported as rejected, never dropped silently.
    for p in seed004_sweep["slo"]:
        m = p["metrics"]
        assert m["completed"] + m["rejected"] == m["num_requests"]
        assert m["rejected"] >= m["shed"]
    assert knee_rate(seed004_sweep["slo"]) >= knee_rate(seed004_sweep["fcfs"])


def test_shed_requests_are_accounted_and_never_also_completed():
    r = run(Scenario(scheduler="slo", hardware="rtx3050", max_model_len=8192, rate=16, duration=30))
    shed = r.reject_reason == E.REJECT_SHED
    assert shed.sum() == r.metrics["shed"] > 0
    assert (r.status[shed] == E.REJECTED).all()
    assert np.isnan(r.first_token_s[shed]).all() and (r.generated[shed] == 0).all()
    assert r.metrics["rejected_reasons"][E.REJECT_REASONS[E.REJECT_SHED]] == shed.sum()


def test_admission_modes_differ_as_documented():
    base = dict(scheduler="slo", hardware="rtx3050", max_model_len=8192, rate=16, duration=30)
    admit = run(Scenario(admission="admit", **base)).metrics
    reject = run(Scenario(admission="reject", **base)).metrics
    degrade = run(Scenario(admission="degrade", **base)).metrics
    assert admit["shed"] == 0 and admit["rejected"] == 0
    assert reject["shed"] > 0
    assert degrade["shed"] == 0 and degrade["degraded"] > 0 and degrade["completed"] == degrade["num_requests"]
    # Shedding the hopeless ones is what lets the rest meet their targets.
    assert reject["slo_attainment"] > admit["slo_attainment"]


def test_least_slack_orders_by_deadline():
    # Two classes with different TTFT targets: under load the tight class is served first.
    r = run(Scenario(scheduler="slo", workload="mixed", hardware="rtx3050", max_model_len=8192, rate=5, duration=40, admission="admit"))
    pc = r.metrics["per_class"]
    assert pc["code"]["slo"]["ttft_ms"] == 125 and pc["summarize"]["slo"]["ttft_ms"] == 15000
    fcfs = run(Scenario(scheduler="chunked", workload="mixed", hardware="rtx3050", max_model_len=8192, rate=5, duration=40)).metrics
    assert pc["code"]["ttft_ms"]["p50"] < fcfs["per_class"]["code"]["ttft_ms"]["p50"]


def test_transport_overhead_is_added_to_client_latency_and_taken_from_the_budget():
    base = dict(scheduler="chunked", hardware="rtx3050", max_model_len=8192, rate=4, duration=20)
    device = run(Scenario(**base)).metrics
    client = run(Scenario(transport_overhead_ms=50, **base)).metrics
    assert client["ttft_ms"]["mean"] == pytest.approx(device["ttft_ms"]["mean"] + 50)
    assert client["tpot_ms"]["mean"] == pytest.approx(device["tpot_ms"]["mean"])
    assert client["slo_attainment"] <= device["slo_attainment"]
    assert client["slo"]["transport_overhead_ms"] == 50


def test_token_goodput_counts_tokens_delivered_in_time():
    light = run(Scenario(scheduler="chunked", hardware="rtx3050", max_model_len=8192, rate=2, duration=20)).metrics
    heavy = run(Scenario(scheduler="fcfs", hardware="rtx3050", max_model_len=8192, rate=18, duration=60)).metrics
    assert 0 < light["token_goodput"] <= light["output_throughput"] * 1.0001
    # Overloaded FCFS delivers plenty of tokens, few of them on time: the failure that looks like success.
    assert heavy["token_goodput"] < 0.5 * heavy["output_throughput"]


def test_fair_share_bounds_the_light_tenant_while_fcfs_does_not():
    fcfs = run(Scenario(scheduler="fcfs", workload="multitenant", hardware="rtx3050", max_model_len=8192, duration=60)).metrics
    fair = run(Scenario(scheduler="fair", workload="multitenant", hardware="rtx3050", max_model_len=8192, duration=60)).metrics
    light_fcfs = fcfs["per_class"]["light"]["ttft_ms"]["p99"]
    light_fair = fair["per_class"]["light"]["ttft_ms"]["p99"]
    assert light_fair < 1000 < 10 * light_fair < light_fcfs
    # The light tenant's remaining misses under fair sharing are TPOT misses: the backlogged heavy tenant keeps
    # every step at the full 512-token budget, 60-100 ms on this GPU against a 100 ms TPOT target.
    assert fair["per_class"]["light"]["slo_attainment"] > 2 * fcfs["per_class"]["light"]["slo_attainment"]


def test_fair_service_gap_stays_within_a_few_step_budgets_while_both_are_backlogged():
    r = run(Scenario(scheduler="fair", workload="multitenant", hardware="rtx3050", max_model_len=8192, duration=30, rate=80))
    light = r.requests.request_class == r.requests.class_names.index("light")
    # Both tenants are backlogged from when the queue has built up (at 80 req/s against a capacity of ~16) until
    # the light tenant's last request is admitted.
    start = r.steps[:, E.S_START]
    backlogged_from = start[np.argmax(r.steps[:, E.S_WAITING] > 100)]
    backlogged_until = np.nanmax(r.first_scheduled_s[light])
    logged = (start > backlogged_from) & (start < backlogged_until)
    assert logged.sum() > 100
    gap = np.abs(r.tenant_service[logged, 0] - r.tenant_service[logged, 1])
    budget = r.resolved.token_budget
    # Weighted service: input tokens cost 1, output tokens 2. Decodes of requests already running keep adding
    # service, so the gap is a few steps' worth of work, not zero; it does not grow with time.
    assert gap.max() <= 8 * budget
    assert r.tenant_service[logged][-1].min() > 50 * budget  # ...while each tenant got far more than that


def test_aging_bounds_the_wait_of_long_prompts_under_spf():
    # 1.5x the RTX 3050's chat capacity (~6 req/s): a queue that grows for the whole minute.
    base = dict(scheduler="spf", hardware="rtx3050", max_model_len=8192, rate=9, duration=60)
    plain = run(Scenario(**base)).metrics["ttft_ms"]
    aged = run(Scenario(aging_rate=1000, **base)).metrics["ttft_ms"]
    assert aged["max"] < 0.5 * plain["max"]
    assert aged["mean"] > plain["mean"]  # the price: shortest-first's mean-TTFT advantage shrinks


def test_adaptive_budget_keeps_steps_under_the_itl_target():
    base = dict(scheduler="chunked", workload="rag", hardware="rtx3050", max_model_len=8192, token_budget=2048, duration=60)
    fixed = run(Scenario(**base))
    adaptive = run(Scenario(adaptive_budget=True, **base))
    target = 0.100  # rag's TPOT target
    assert fixed.steps[:, E.S_DURATION].max() > 1.5 * target
    assert adaptive.steps[:, E.S_DURATION].max() < target
    budgets = adaptive.steps[:, E.S_TOKEN_BUDGET]
    assert budgets.min() < budgets.max()  # it moved, and the move is recorded per step
    assert adaptive.metrics["itl_ms"]["p99"] < 100 < fixed.metrics["itl_ms"]["p99"]


def test_goodput_is_measured_over_the_arrival_window():
    # A lightly loaded a100: every request meets its SLOs, and goodput equals the measured arrival rate, while
    # vLLM's whole-run figure (drain included) falls below it.
    m = run(Scenario(hardware="a100", workload="chat", rate=1.0, duration=30, seed=2)).metrics
    assert m["slo_attainment"] == 1.0
    assert abs(m["goodput"] - m["arrival_rate"]) <= 1e-9 * m["arrival_rate"]
    assert m["goodput_over_run"] < m["goodput"]
    # In general goodput is attainment x the arrival rate.
    m = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", rate=6.0, duration=30, seed=1)).metrics
    assert m["slo_attainment"] < 0.9
    assert abs(m["goodput"] - m["slo_attainment"] * m["arrival_rate"]) <= 1e-9 * m["arrival_rate"]
