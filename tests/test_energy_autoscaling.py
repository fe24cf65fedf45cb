"""kWh in the autoscaling comparison (issue #40 item 4; sim_core/studies/autoscale_compare.py, `sched-sim plan
--rate-schedule ... --energy`): each row's GPU energy over the time it bills as GPU-hours, idle and provisioning
time included, beside the GPU-hours; absent with energy off."""

from __future__ import annotations

import pytest

from app.plan_report import comparison_lines
from sim_core import Scenario, run
from sim_core.catalog import GPUS
from sim_core.energy import J_PER_KWH
from sim_core.studies.autoscale_compare import compare, comparison_doc
from sim_core.studies.planner import Plan

BASE = Scenario(model="llama-3.2-1b", hardware="l4", max_model_len=8192, workload="chat",
                rate_schedule="0:1,120:12,240:1", duration=480)
REPLICA_RATE = 4.5  # requests/s one L4 replica is planned for (the predictive autoscaler is told it)


def _compare(energy: bool):
    base = BASE.model_copy(update={"energy": energy})
    static = base.model_copy(update={"rate_schedule": None, "rate": 12.0, "replicas": 3})
    return compare(base, [Plan(static, 3, None, None, REPLICA_RATE, {})], ("predictive",))


@pytest.fixture(scope="module")
def with_energy():
    return _compare(True)


def test_each_rows_kwh_is_its_gpus_energy_over_its_gpu_hours(with_energy):
    static, scaled = with_energy.rows
    res = run(static.scenario)
    e = res.metrics["energy"]
    idle = GPUS["l4"].idle_power_w
    # Static GPUs are billed from t = 0; metrics.energy counts from the first arrival: the GPUs idled before it.
    before = res.end_s - res.metrics["duration_s"]
    assert static.gpu_kwh * J_PER_KWH == pytest.approx(e["gpu_energy_j"] + idle * 3 * before, rel=1e-12)
    # An autoscaled replica draws idle power from being asked for to its release (metrics.energy's held time).
    assert scaled.gpu_kwh * J_PER_KWH == pytest.approx(run(scaled.scenario).metrics["energy"]["gpu_energy_j"])
    for row in with_energy.rows:  # every GPU-hour draws at least idle power, at most the board limit
        assert idle * row.gpu_hours / 1e3 <= row.gpu_kwh <= GPUS["l4"].board_power_w * row.gpu_hours / 1e3


def test_an_autoscaler_saves_less_energy_than_gpu_hours(with_energy):
    """The replicas it releases are the idle ones, which draw the least power."""
    static, scaled = with_energy.rows
    assert scaled.kwh_saving == pytest.approx(1 - scaled.gpu_kwh / static.gpu_kwh)
    assert 0 < scaled.kwh_saving < scaled.saving


def test_the_document_and_table_carry_kwh_only_with_energy_on(with_energy):
    rows = comparison_doc(with_energy)["rows"]
    assert [r["gpu_kwh"] for r in rows] == [r.gpu_kwh for r in with_energy.rows]
    assert rows[0]["gpu_kwh_saving"] is None and rows[1]["gpu_kwh_saving"] == with_energy.rows[1].kwh_saving
    lines = comparison_lines(with_energy)
    assert "GPU kWh" in lines[2] and lines[-1].split()[-2] == f"{with_energy.rows[1].gpu_kwh:.3g}"
    off = _compare(False)
    assert all("gpu_kwh" not in r for r in comparison_doc(off)["rows"])
    assert "kWh" not in "\n".join(comparison_lines(off))
