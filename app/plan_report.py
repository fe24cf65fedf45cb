"""A capacity plan as both faces show it: `sched-sim plan --json` and /api/plan answer with `plan_doc`, and the
CLI's table and the dashboard's Plan tab name each deployment with `deployment_text`. Here, outside `app.cli` and
the web modules, so that neither face imports the other.
"""

from __future__ import annotations

from sim_core import Scenario


def plan_doc(rate: float, target: float, result) -> dict:
    """`sched-sim plan --json`: plans cheapest first, each with the scenario query string that runs it."""
    docs = [{"scenario": p.scenario.to_query(), "gpus": p.gpus, "cost_per_hour": p.cost_per_hour,
             "cost_per_mtok": p.cost_per_mtok, "replica_capacity": p.replica_capacity, "pareto": p.pareto,
             "topology": p.candidate.topology if p.candidate else "colocated",
             "attainment_low": p.attainment_low, "metrics": p.metrics} for p in result.plans]
    return {"rate": rate, "target_attainment": target, "plans": docs,
            "infeasible": [vars(i) for i in result.infeasible], "simulations": result.simulations,
            "candidates": result.candidates}


def deployment_text(s: Scenario) -> str:
    """'3 x h100 tp1 chunked', or '2P + 4D x h100 tp1 chunked' for disaggregated pools; the budget if set."""
    engines = f"{s.prefill_replicas}P + {s.decode_replicas}D" if s.disaggregated else str(s.replicas)
    budget = f" budget {s.token_budget}" if s.token_budget is not None else ""
    return f"{engines} x {s.hardware} tp{s.tp} {s.scheduler}{budget}"
