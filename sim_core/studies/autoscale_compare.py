"""The best static plan for a rate schedule's peak against each autoscaler, over the schedule (issue 24, item 4).

`sched-sim plan` with a `rate_schedule` plans at the schedule's peak as a constant rate (`at_peak`), then runs the
cheapest colocated plan's deployment over the whole schedule twice over: held static all along, and under each
autoscaler scaling the same replicas between min_replicas (the scenario's, else 1) and max_replicas (the
scenario's, else the static plan's count, so an autoscaler never holds more than the static deployment). Each row
is one run() of one seed (the scenario's), so its figures are the ones `sched-sim run` prints for that scenario.
The work is bounded: one run per row, and the predictive autoscaler is given the plan's per-replica capacity
(autoscale_replica_rate, unless the scenario sets one) instead of searching for it again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..cluster_over_time import attainment_by_window
from ..energy import J_PER_KWH, billed_gpu_energy_j
from ..policies.autoscalers import AUTOSCALERS
from ..rate_schedule import parse as parse_schedule
from ..runner import run
from ..scenario import AUTOSCALE_FIELDS, Scenario, ScenarioError
from .planner import PLAN_ROUTER, Plan

DEFAULT_AUTOSCALERS = ("utilization", "predictive")
PEAK_PLAN_S = 600.0  # the peak is planned as a steady rate over at most this long (a day at the peak would be slow)


@dataclass
class Row:
    deployment: str  # "static" or the autoscaler's name
    scenario: Scenario
    replicas: int  # the most replicas held at once
    gpu_hours: float
    cost: float | None
    slo_attainment: float
    worst_window: float | None  # the lowest SLO attainment of a window (a minute) in which requests arrived
    saving: float | None = None  # 1 - GPU-hours / the static deployment's (positive: fewer GPU-hours)
    gpu_kwh: float | None = None  # energy on: its GPUs' energy over the GPU-hours (energy.billed_gpu_energy_j)
    kwh_saving: float | None = None  # 1 - GPU kWh / the static deployment's


@dataclass
class Comparison:
    schedule: str
    peak_rate: float
    plan: Plan | None  # the static plan compared (None: no colocated plan)
    rows: list[Row] = field(default_factory=list)
    note: str | None = None  # why there are no autoscaler rows, or why one is missing


def at_peak(base: Scenario) -> tuple[Scenario, float]:
    """The scenario the planner searches: the schedule's peak as a constant rate, no autoscaler, over at most
    PEAK_PLAN_S; and that peak rate."""
    peak = parse_schedule(base.rate_schedule).peak_rate(base.duration)
    update = {"rate_schedule": None, "rate": peak, "autoscaler": None, "duration": min(base.duration, PEAK_PLAN_S),
              **{name: None for name in AUTOSCALE_FIELDS}}
    return base.model_copy(update=update), peak


def parse_autoscalers(text: str | None, base: Scenario) -> tuple[str, ...]:
    """`--autoscalers`: comma-separated names, or `none`; default: the scenario's own autoscaler, else
    DEFAULT_AUTOSCALERS. ScenarioError naming the field for an unknown name."""
    if text is None:
        return (base.autoscaler,) if base.autoscaler else DEFAULT_AUTOSCALERS
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in AUTOSCALERS]
    if unknown or not names:
        raise ScenarioError([("autoscalers", f"{', '.join(unknown) or 'nothing'}: not an autoscaler; give some of "
                                             f"{', '.join(AUTOSCALERS)} (comma-separated) or none")])
    return names


def compare(base: Scenario, plans: list[Plan], autoscalers: tuple[str, ...],
            on_row: Callable[[int, int], None] | None = None) -> Comparison:
    """The cheapest colocated plan of `plans` (planned at `base`'s peak) over `base`'s schedule: static, then each
    autoscaler, with GPU-hours, cost, SLO attainment, worst window and the saving against static. `on_row(done,
    total)`: called as each of the 1 + len(autoscalers) rows is done (the web's job shows it as progress)."""
    peak = parse_schedule(base.rate_schedule).peak_rate(base.duration)
    chosen = next((p for p in plans if not p.scenario.disaggregated), None)
    out = Comparison(base.rate_schedule, peak, chosen)
    if chosen is None:
        out.note = "no colocated plan to compare (an autoscaler scales one pool of replicas)"
        return out
    static = static_scenario(base, chosen)
    out.rows.append(static_row(static))
    done = _counter(on_row, 1 + len(autoscalers))
    for name in autoscalers:
        try:
            scenario = autoscaled_scenario(base, chosen, name)
        except ValueError as e:  # e.g. expert parallelism: the autoscaler refuses the deployment
            out.note = f"{name}: {e}"
            done()
            continue
        out.rows.append(autoscaled_row(name, scenario))
        done()
    for r in out.rows[1:]:
        r.saving = 1.0 - r.gpu_hours / out.rows[0].gpu_hours if out.rows[0].gpu_hours > 0 else None
        if r.gpu_kwh is not None and out.rows[0].gpu_kwh:
            r.kwh_saving = 1.0 - r.gpu_kwh / out.rows[0].gpu_kwh
    return out


def _counter(on_row: Callable[[int, int], None] | None, total: int) -> Callable[[], None]:
    """Counts the rows done (the static one already) and tells `on_row` each time."""
    done = [1]
    if on_row:
        on_row(1, total)

    def step() -> None:
        done[0] += 1
        if on_row:
            on_row(done[0], total)
    return step


def static_scenario(base: Scenario, p: Plan) -> Scenario:
    """The plan's deployment over `base`'s schedule and duration, one seed, no autoscaler."""
    return p.scenario.model_copy(update={"rate": None, "rate_schedule": base.rate_schedule,
                                         "duration": base.duration, "seeds": 1})


def autoscaled_scenario(base: Scenario, p: Plan, name: str) -> Scenario:
    """The plan's deployment under autoscaler `name`: the scenario's autoscaler settings where it gives them, else
    min 1, max the plan's replicas, starting with the replicas the schedule's first rate needs (by the plan's
    per-replica capacity), and the predictive policy told that capacity. Validated (ValueError if refused)."""
    static = static_scenario(base, p)
    settings = {k: getattr(base, k) for k in AUTOSCALE_FIELDS if getattr(base, k) is not None}
    settings.setdefault("max_replicas", static.replicas)
    if name == "predictive":
        settings.setdefault("autoscale_replica_rate", p.replica_capacity)
    lo, hi = settings.get("min_replicas", 1), settings["max_replicas"]
    first = float(parse_schedule(base.rate_schedule).rate_at(np.zeros(1))[0])
    start = min(hi, max(lo, 1, math.ceil(first / p.replica_capacity - 1e-9)))
    data = {**static.model_dump(exclude_unset=True), **settings, "autoscaler": name, "replicas": start,
            "router": PLAN_ROUTER if hi > 1 else static.router}
    return Scenario.model_validate(data)


def static_row(s: Scenario) -> Row:
    """A static deployment billed for the whole run: every GPU from start to end."""
    res = run(s)
    m, hours = res.metrics, res.end_s / 3600.0
    rated = [a for a in attainment_by_window(res, res.end_s)["attainment"] if a is not None]
    cost = m["cost_per_hour"] * hours if m["cost_per_hour"] is not None else None
    return Row("static", s, s.replicas, m["gpus"] * hours, cost, m["slo_attainment"], min(rated) if rated else None,
               gpu_kwh=_gpu_kwh(res))


def autoscaled_row(name: str, s: Scenario) -> Row:
    res = run(s)
    m = res.metrics
    return Row(name, s, round(m["gpus"] / s.tp), m["gpu_hours"], m["cost"], m["slo_attainment"],
               m["slo_attainment_worst_window"], gpu_kwh=_gpu_kwh(res))


def _gpu_kwh(res) -> float | None:
    """With energy on, the GPUs' energy over the time the row bills as GPU-hours (idle and provisioning included)."""
    return billed_gpu_energy_j(res) / J_PER_KWH if res.scenario.energy else None


def comparison_doc(c: Comparison) -> dict:
    """`sched-sim plan --json`'s `autoscaling` key."""
    rows = [{"deployment": r.deployment, "scenario": r.scenario.to_query(), "replicas": r.replicas,
             "gpu_hours": r.gpu_hours, "cost": r.cost, "slo_attainment": r.slo_attainment,
             "slo_attainment_worst_window": r.worst_window, "gpu_hours_saving": r.saving,
             **({"gpu_kwh": r.gpu_kwh, "gpu_kwh_saving": r.kwh_saving} if r.gpu_kwh is not None else {})}
            for r in c.rows]
    return {"rate_schedule": c.schedule, "peak_rate": c.peak_rate, "rows": rows,
            **({"note": c.note} if c.note else {})}
