"""A capacity plan as both faces show it: `sched-sim plan --json` and /api/plan answer with `plan_doc`, and the
CLI's table and the dashboard's Plan tab name each deployment with `deployment_text`. Here, outside `app.cli` and
the web modules, so that neither face imports the other.
"""

from __future__ import annotations

from sim_core import Scenario
from sim_core.studies.autoscale_compare import comparison_doc as doc


def plan_doc(rate: float, target: float, result) -> dict:
    """`sched-sim plan --json`: plans cheapest first, each with the scenario query string that runs it."""
    docs = [{"scenario": p.scenario.to_query(), "gpus": p.gpus, "cost_per_hour": p.cost_per_hour,
             "cost_per_mtok": p.cost_per_mtok, "replica_capacity": p.replica_capacity, "pareto": p.pareto,
             "topology": p.candidate.topology if p.candidate else "colocated",
             "attainment_low": p.attainment_low, "power_kw": p.power_kw, "metrics": p.metrics}
            for p in result.plans]
    return {"rate": rate, "target_attainment": target, "plans": docs,
            "infeasible": [vars(i) for i in result.infeasible], "simulations": result.simulations,
            "candidates": result.candidates}


def deployment_text(s: Scenario) -> str:
    """'3 x h100 tp1 chunked', or '2P + 4D x h100 tp1 chunked' for disaggregated pools; the budget if set."""
    engines = f"{s.prefill_replicas}P + {s.decode_replicas}D" if s.disaggregated else str(s.replicas)
    budget = f" budget {s.token_budget}" if s.token_budget is not None else ""
    return f"{engines} x {s.hardware} tp{s.tp} {s.scheduler}{budget}"


def comparison_doc(c) -> dict:
    """`sched-sim plan --json`'s `autoscaling` key (sim_core.studies.autoscale_compare)."""
    return {**doc(c), "deployment": deployment_text(c.plan.scenario) if c.plan else None}


def comparison_lines(c) -> list[str]:
    """The static plan for the peak against each autoscaler over the schedule: one row each."""
    if c.plan is None:
        return ["", f"Over {c.schedule}: {c.note}"]
    out = ["", f"Over {c.schedule} (peak {c.peak_rate:g} req/s, {c.rows[0].scenario.duration:g} s, seed "
               f"{c.rows[0].scenario.seed}): {deployment_text(c.plan.scenario)} held static vs autoscaled"]
    head = ["deployment", "max replicas", "GPU-hours", "cost $", "SLO att. %", "worst min %", "GPU-h saving %"]
    rows = [[r.deployment, str(r.replicas), _num(r.gpu_hours), _num(r.cost), _pct(r.slo_attainment),
             _pct(r.worst_window), "-" if r.saving is None else f"{r.saving * 100:+.1f}"] for r in c.rows]
    if any(r.gpu_kwh is not None for r in c.rows):  # energy on: the GPUs' kWh over those GPU-hours
        head += ["GPU kWh", "kWh saving %"]
        for row, r in zip(rows, c.rows, strict=True):
            row += [_num(r.gpu_kwh), "-" if r.kwh_saving is None else f"{r.kwh_saving * 100:+.1f}"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    for row in [head, *rows]:
        out.append("  " + "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                    for i, (v, w) in enumerate(zip(row, widths, strict=True))))
    if c.note:
        out.append(f"  {c.note}")
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}"
