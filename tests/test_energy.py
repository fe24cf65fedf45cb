"""sim_core.energy (issue #40): the per-step power model's physics at its extremes, energy as the integral of
power over the step log on random small runs (one engine, replicas, prefill/decode pools), the field's opt-in
(energy off: the same output), its refusals, and the CLI's energy lines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from sim_core import Scenario, run
from sim_core.catalog import GPUS
from sim_core.energy import ACTIVE_SHARE, MEMORY_SHARE, PowerModel, power_model
from sim_core.kernel.autoscaled import LIFE_ASKED_S, LIFE_SERVING_S
from sim_core.scenario import ScenarioError, parse_scenario
from sim_core.views import columns_of_steps, engine_logs, step_columns

H200 = PowerModel(idle_w=122.0, board_w=700.0, compute_flops_per_s=700e12, stream_bytes_per_s=4.0e12)
SMALL = dict(hardware="l4", model="llama-3.2-1b", max_model_len=4096, energy=True)


def test_a_step_of_no_time_draws_idle_power_and_one_of_no_work_the_active_share():
    assert H200.step_power_w(np.array([0.0]), np.array([1e9]), np.array([1e12]))[0] == pytest.approx(122.0)
    idle_kernels = H200.step_power_w(np.array([0.01]), np.array([0.0]), np.array([0.0]))[0]
    assert idle_kernels == pytest.approx(122.0 + ACTIVE_SHARE * (700.0 - 122.0))


def test_a_compute_saturated_step_draws_the_board_limit_and_never_more():
    seconds = np.array([0.02, 0.02, 0.02])
    flops = seconds * H200.compute_flops_per_s * np.array([1.0, 3.0, 1.0])
    moved = np.array([0.0, 0.0, 0.02 * H200.stream_bytes_per_s])  # compute and memory both flat out: still capped
    assert H200.step_power_w(seconds, moved, flops) == pytest.approx([700.0, 700.0, 700.0])


def test_a_running_step_draws_the_active_share_plus_its_compute_and_memory_shares():
    seconds = np.array([0.02])
    half_compute = H200.step_power_w(seconds, np.array([0.0]), np.array([0.01 * H200.compute_flops_per_s]))[0]
    assert half_compute == pytest.approx(122.0 + (ACTIVE_SHARE + 0.5) * (700.0 - 122.0))
    a_fifth_memory = H200.step_power_w(seconds, seconds * 0.2 * H200.stream_bytes_per_s, np.array([0.0]))[0]
    assert a_fifth_memory == pytest.approx(122.0 + (ACTIVE_SHARE + 0.2 * MEMORY_SHARE) * (700.0 - 122.0))


def test_a_memory_saturated_step_reaches_the_board_limit():
    """The derived shares (studies/power_shares.py) say streaming HBM flat out draws what compute flat out does."""
    seconds = np.array([0.01])
    got = H200.step_power_w(seconds, seconds * H200.stream_bytes_per_s, np.array([0.0]))[0]
    assert got == pytest.approx(700.0)
    assert 0.0 < ACTIVE_SHARE < 0.5 and ACTIVE_SHARE + MEMORY_SHARE >= 1.0


def test_every_gpu_with_an_idle_power_has_a_board_limit_above_it():
    powered = [g for g in GPUS.values() if g.idle_power_w is not None]
    assert len(powered) >= 15
    for g in powered:
        assert 0 < g.idle_power_w < g.board_power_w, g.key


def _integral(steps: dict, stride: int, model: PowerModel, gpus: int, held_s: float) -> float:
    """∫ power dt, written out: each logged step's power x seconds (x stride), idle power over the rest."""
    total, busy = 0.0, 0.0
    for d, b, f in zip(steps["duration_s"], steps["bytes"], steps["flops"], strict=True):
        p = model.step_power_w(np.array([d]), np.array([b]), np.array([f]))[0]
        total += p * d * stride
        busy += d * stride
    return (total + model.idle_w * max(held_s - busy, 0.0)) * gpus


TOPOLOGIES = ({}, {"replicas": 2}, {"prefill_replicas": 1, "decode_replicas": 1})


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    shape=st.sampled_from(TOPOLOGIES),
    requests=st.integers(1, 40),
    rate=st.floats(0.5, 40.0),
    seed=st.integers(0, 1000),
    workload=st.sampled_from(["chat", "code", "random"]),
)
def test_energy_is_the_integral_of_power_and_power_stays_under_the_limit(
    shape, requests, rate, seed, workload
):
    r = run(Scenario(num_requests=requests, rate=rate, seed=seed, workload=workload, **SMALL, **shape))
    e = r.metrics["energy"]
    model = power_model(r.resolved.deployment[0].setup)
    assert model.idle_w <= e["peak_power_w_per_gpu"] <= GPUS["l4"].board_power_w
    assert model.idle_w <= e["avg_power_w_per_gpu"] <= GPUS["l4"].board_power_w
    span = r.metrics["duration_s"]
    if r.engine_logs:
        expected = sum(_integral(v.steps, v.step_stride, model, 1, span) for v in engine_logs(r))
        assert len(e["engines"]) == len(r.engine_logs)
        assert sum(x["energy_j"] for x in e["engines"]) == pytest.approx(expected, rel=1e-9)
    else:
        expected = _integral(step_columns(r), r.step_stride, model, 1, span)
    assert e["gpu_energy_j"] == pytest.approx(expected, rel=1e-9)
    assert e["energy_j"] == e["gpu_energy_j"]  # no host power, PUE 1
    assert e["joules_per_output_token"] == pytest.approx(e["energy_j"] / r.generated.sum())
    if "prefill_replicas" in shape:
        assert sum(e["pool_energy_j"].values()) == pytest.approx(e["gpu_energy_j"])


def test_a_busier_run_draws_more_power_per_gpu_than_an_idle_one():
    light = run(Scenario(num_requests=20, rate=0.5, seed=3, **SMALL)).metrics["energy"]
    heavy = run(Scenario(num_requests=20, rate=50.0, seed=3, **SMALL)).metrics["energy"]
    assert heavy["avg_power_w_per_gpu"] > light["avg_power_w_per_gpu"]
    assert light["idle_energy_j"] > 0


def test_host_power_and_pue_are_separate_terms():
    base = run(Scenario(num_requests=20, seed=2, **SMALL)).metrics
    more = run(Scenario(num_requests=20, seed=2, node_power_w=50.0, pue=1.5, **SMALL)).metrics
    e = more["energy"]
    assert e["gpu_energy_j"] == base["energy"]["gpu_energy_j"]
    assert e["node_energy_j"] == pytest.approx(50.0 * base["duration_s"] * base["gpus"])
    assert e["energy_j"] == pytest.approx((e["gpu_energy_j"] + e["node_energy_j"]) * 1.5)


def test_autoscaled_replicas_draw_idle_power_while_provisioning():
    r = run(
        Scenario(
            num_requests=60,
            rate=8,
            seed=1,
            autoscaler="predictive",
            autoscale_replica_rate=2,
            provision_delay_s=30,
            **SMALL,
        )
    )
    e = r.metrics["energy"]
    held = r.metrics["gpu_hours"] * 3600.0
    assert e["avg_power_w_per_gpu"] == pytest.approx(e["gpu_energy_j"] / held)
    lives = r.replica_lives
    asked, serving = lives[:, LIFE_ASKED_S], np.minimum(lives[:, LIFE_SERVING_S], r.end_s)
    provisioning_s = float(np.maximum(serving - asked, 0.0)[np.isfinite(asked)].sum())
    assert provisioning_s > 0  # the delay shows: some replica was asked for after the start
    assert e["idle_energy_j"] >= GPUS["l4"].idle_power_w * provisioning_s * (1 - 1e-12)


def test_energy_off_changes_nothing():
    fields = dict(num_requests=30, seed=4, hardware="l4", model="llama-3.2-1b", max_model_len=4096)
    off, on = run(Scenario(**fields)), run(Scenario(**fields, energy=True))
    assert "energy" not in off.metrics
    assert {k: v for k, v in on.metrics.items() if k != "energy"} == off.metrics
    assert np.array_equal(off.steps, on.steps)
    assert Scenario(**fields).to_query() == Scenario(**fields, energy=False).to_query()


@pytest.mark.parametrize(
    "data, field",
    [
        ({"node_power_w": 100}, "node_power_w"),
        ({"pue": 1.2}, "pue"),
        ({"energy": True, "pue": 0.5}, "pue"),
        ({"energy": True, "node_power_w": -1}, "node_power_w"),
        ({"energy": True, "hardware": "rtx3050"}, "energy"),
    ],
)
def test_bad_energy_input_names_its_field(data, field):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data)
    assert any(f == field for f, _ in e.value.problems), e.value.problems


def test_cli_run_prints_the_energy_lines(capsys):
    code = main(
        [
            "run",
            "--hardware",
            "l4",
            "--model",
            "llama-3.2-1b",
            "--max-model-len",
            "4096",
            "--num-requests",
            "10",
            "--energy",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    for label in ("Energy per output token (J/tok)", "Average power per GPU (W)", "Peak power per GPU (W)"):
        assert label in out, out


def test_columns_of_the_step_log_are_what_energy_reads():
    r = run(Scenario(num_requests=5, seed=1, **SMALL))
    cols = columns_of_steps(r.steps)
    assert cols["duration_s"].sum() > 0 and cols["bytes"].sum() > 0 and cols["flops"].sum() > 0
