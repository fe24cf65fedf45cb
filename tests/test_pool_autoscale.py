"""Prefill and decode pools autoscaled separately (sim_core/pool_autoscale.py, kernel/autoscaled.py's replicas of
lock-step ranks, fleet.py's hand-over to serving decode engines only): each pool keeps its own replicas within
its bounds, no request is lost, no KV block leaks, and the faces' errors name the field."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sim_core import Scenario, ScenarioError, parse_scenario, pool_autoscale, run
from sim_core.kernel.autoscaled import (
    LIFE_ASKED_S,
    LIFE_DRAINING_S,
    LIFE_RELEASED_S,
    LIFE_SERVING_S,
    LIFE_SLOT,
)
from sim_core.links import KV_LINKS
from sim_core.policies.routers import ROUTER_NAMES

MOE = dict(hardware="h100", model="qwen3-30b-a3b", tp=1, max_model_len=8192, seed=3)


def alive_and_serving(lives: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per time: replicas alive (asked for, not yet released) and serving (from serving to draining or release)."""
    t = times[:, None]
    alive = ((lives[None, :, LIFE_ASKED_S] <= t) & (t < lives[None, :, LIFE_RELEASED_S])).sum(axis=1)
    stop = np.minimum(lives[:, LIFE_DRAINING_S], lives[:, LIFE_RELEASED_S])
    serving = ((lives[None, :, LIFE_SERVING_S] <= t) & (t < stop[None, :])).sum(axis=1)
    return alive, serving


def serving_slot_at(lives: np.ndarray, size: int, slot: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per (engine slot, time): whether the replica holding that slot (`size` engines from its life's slot)
    was serving then."""
    ok = np.zeros(len(slot), bool)
    for life in lives:
        first, stop = int(life[LIFE_SLOT]), min(life[LIFE_DRAINING_S], life[LIFE_RELEASED_S])
        ok |= (slot >= first) & (slot < first + size) & (at >= life[LIFE_SERVING_S]) & (at <= stop)
    return ok


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@example(rates=[9.0, 0.5, 9.0], starts=(1, 3), eps=(None, 4), delay=2.0, router="least_outstanding",
         preemption="recompute", kv_blocks=400)
@given(rates=st.lists(st.sampled_from([0.5, 3.0, 9.0, 16.0]), min_size=2, max_size=4),
       starts=st.sampled_from([(1, 1), (1, 3), (2, 1), (3, 2)]),
       eps=st.sampled_from([(None, None), (None, 2), (None, 4), (2, 2)]), delay=st.sampled_from([0.0, 2.0, 9.0]),
       router=st.sampled_from(ROUTER_NAMES), preemption=st.sampled_from(["recompute", "swap"]),
       kv_blocks=st.integers(300, 1500))
def test_pools_scale_apart_losing_no_request_and_leaking_no_block(rates, starts, eps, delay, router, preemption,
                                                                  kv_blocks):
    """Over random rate schedules: each pool's replicas stay within [min, max] at every instant (at least min
    serving), every request finishes or is rejected exactly once, arriving at a prefill replica that was serving
    and decoding on a decode replica that was serving when its prompt was handed over; every released replica
    gave back every block and every engine ends with all its blocks free; time runs forward."""
    schedule = ",".join(f"{6 * k}:{r:g}" for k, r in enumerate(rates))
    lo, hi = 1, 3
    s = Scenario(prefill_replicas=starts[0], decode_replicas=starts[1], prefill_ep=eps[0], decode_ep=eps[1],
                 attention_dp=eps != (None, None), workload="chat", rate_schedule=schedule, duration=6 * len(rates),
                 autoscaler="predictive", autoscale_replica_rate=3.0, autoscale_interval_s=2, provision_delay_s=delay,
                 min_replicas=lo, max_replicas=hi, router=router, preemption=preemption, kv_blocks=kv_blocks,
                 **MOE)
    res = run(s)
    assert (res.finished ^ res.rejected).all()
    pools, per_pool = res.resolved.pools, res.metrics["pools_over_time"]
    roles = [log.pool for log in res.engine_logs]
    for k, name in enumerate(("prefill", "decode")):
        lives, size = res.pool_lives[k], pools[k].lockstep
        assert per_pool[name]["autoscaler"]["kv_blocks_leaked_on_release"] == 0
        assert (lives[:, LIFE_ASKED_S] <= lives[:, LIFE_SERVING_S]).all()
        served = np.isfinite(lives[:, LIFE_SERVING_S])  # shed while provisioning: never served
        assert (lives[served, LIFE_SERVING_S] <= lives[served, LIFE_DRAINING_S]).all()
        assert (np.minimum(lives[:, LIFE_DRAINING_S], lives[:, LIFE_RELEASED_S]) <= lives[:, LIFE_RELEASED_S]).all()
        times = np.unique(np.concatenate([lives[:, :LIFE_SLOT].ravel()[np.isfinite(lives[:, :LIFE_SLOT].ravel())],
                                          res.requests.arrival_s]))
        alive, serving = alive_and_serving(lives, times)
        assert (alive <= hi).all() and (serving[times <= res.end_s] >= lo).all()
        assert roles.count(name) <= hi * size and roles.count(name) % size == 0
        if starts[k] < min(hi, int(np.ceil(max(rates) / 3.0))):  # the peak needs more than it starts with
            assert per_pool[name]["autoscaler"]["replicas_provisioned"] >= 1
    trace, done = res.handover, res.finished
    assert serving_slot_at(res.pool_lives[0], pools[0].lockstep, trace.to_prefill, trace.arrived).all()
    moved = trace.to_decode >= 0
    assert serving_slot_at(res.pool_lives[1], pools[1].lockstep, trace.to_decode[moved], trace.prefill_end[moved]).all()
    assert (trace.delivered[moved & done] < res.finish_s[moved & done]).all()
    assert (res.first_token_s[done] >= res.requests.arrival_s[done]).all()
    assert (res.finish_s[done] >= res.first_token_s[done]).all()
    blocks = sum(pool.num_blocks * roles.count(pool.role) for pool in pools)
    assert res.free_blocks_at_end == blocks and (res.ref_counts_at_end == 0).all()


def test_each_pool_follows_its_own_capacity(monkeypatch):
    """Prefill replicas that serve 12 requests/s and decode replicas that serve 3: at the schedule's 9 requests/s
    the planner holds one prefill replica and three decode replicas; at 2, one of each."""
    rates = {"prefill": 12.0, "decode": 3.0}
    monkeypatch.setattr(pool_autoscale, "pool_replica_rate", lambda scenario, pool, run: rates[pool])
    s = Scenario(prefill_replicas=1, decode_replicas=1, workload="chat", rate_schedule="0:2,40:9,100:2",
                 duration=160, autoscaler="predictive", autoscale_interval_s=5, provision_delay_s=5, max_replicas=4,
                 **MOE)
    res = run(s)
    assert (res.finished ^ res.rejected).all()
    per_pool = res.metrics["pools_over_time"]
    assert per_pool["prefill"]["autoscaler"]["capacity"] == [0.0, 12.0, 24.0, 36.0, 48.0]
    times = np.array([20.0, 80.0, 150.0])
    _, prefill = alive_and_serving(res.pool_lives[0], times)
    _, decode = alive_and_serving(res.pool_lives[1], times)
    assert prefill.tolist() == [1, 1, 1] and decode.tolist() == [1, 3, 1]
    assert per_pool["decode"]["autoscaler"]["replicas_provisioned"] >= 2
    assert per_pool["prefill"]["autoscaler"]["replicas_provisioned"] == 0
    m = res.metrics
    assert m["gpu_hours"] == pytest.approx(per_pool["prefill"]["gpu_hours"] + per_pool["decode"]["gpu_hours"])
    assert len(per_pool["decode"]["replicas_over_time"]["serving"]) == len(m["slo_attainment_by_window"]["start_s"])


def test_the_probe_puts_one_replica_of_the_pool_against_the_other_pool_at_its_most():
    s = Scenario(prefill_replicas=1, decode_replicas=3, workload="chat", rate_schedule="0:2,40:9",
                 duration=100, autoscaler="predictive", max_replicas=5, **MOE)
    prefill, decode = pool_autoscale.pool_probe(s, "prefill"), pool_autoscale.pool_probe(s, "decode")
    assert (prefill.prefill_replicas, prefill.decode_replicas) == (1, 5)
    assert (decode.prefill_replicas, decode.decode_replicas) == (5, 1)
    assert prefill.autoscaler is None and prefill.rate_schedule is None and prefill.rate == pytest.approx(9.0)
    assert decode.rate == pytest.approx(3.0)  # the peak over the pool's starting replicas: where the search starts


@pytest.mark.parametrize(("fields", "named"), [
    (dict(autoscaler="utilization"), "autoscaler"),
    (dict(autoscaler="predictive", min_replicas=0), "min_replicas"),
    (dict(autoscaler="predictive", max_replicas=2), "decode_replicas"),
    (dict(autoscaler="predictive", min_replicas=2), "prefill_replicas"),
    (dict(autoscaler="predictive", energy=True), "energy"),
])
def test_pool_scaling_settings_that_cannot_run_name_their_field(fields, named):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(dict(prefill_replicas=1, decode_replicas=3, **fields))
    assert caught.value.problems[0][0] == named


def test_pool_scaling_round_trips_through_the_query_string():
    s = Scenario(prefill_replicas=1, decode_replicas=3, autoscaler="predictive", max_replicas=6,
                 autoscale_replica_rate=2.5, rate_schedule="0:2,40:9", duration=100)
    assert Scenario.from_query(s.to_query()) == s


def test_the_kv_links_use_counts_a_prefill_replica_only_while_it_serves(monkeypatch):
    """The prefill pool grows from one replica to three for the peak: the link's busy share is its sending time
    over the prefill replicas' serving time, not over three replicas for the whole run."""
    rates = {"prefill": 3.0, "decode": 6.0}
    monkeypatch.setattr(pool_autoscale, "pool_replica_rate", lambda scenario, pool, run: rates[pool])
    s = Scenario(prefill_replicas=1, decode_replicas=1, workload="chat", rate_schedule="0:2,40:9,100:2",
                 duration=160, autoscaler="predictive", autoscale_interval_s=5, provision_delay_s=5, max_replicas=4,
                 kv_link="eth25", **MOE)
    res = run(s)
    lives, end = res.pool_lives[0], float(res.end_s)
    assert len(lives) > 1 and np.nanmin(np.minimum(lives[:, LIFE_RELEASED_S], end) - lives[:, LIFE_SERVING_S]) < end
    h = res.handover
    sent = h.to_decode >= 0
    latency = KV_LINKS[s.kv_link].latency_s
    busy = float((h.delivered[sent] - latency - h.transfer_start[sent]).sum())
    serving = float(np.maximum(np.minimum(lives[:, LIFE_RELEASED_S], end) - np.minimum(lives[:, LIFE_SERVING_S], end),
                               0.0).sum())
    assert res.metrics["kv_link_utilization"] == pytest.approx(busy / serving, rel=1e-9)
