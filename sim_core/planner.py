"""The cheapest deployment that meets an SLO at a given arrival rate ("how many GPUs of which kind?").

Smart rather than brute force: for each candidate (GPU x tensor-parallel degree x scheduler) the capacity of one
replica is searched once (capacity.py, over seeds, taking the interval's low end), the replica count follows as
ceil(rate / capacity), and one cluster run at the target rate (least_outstanding router) verifies it, adding a
replica while it falls short. Candidates whose model does not fit the GPU, or that would need more GPUs than
allowed, are reported with the reason. Plans are ranked by cost per hour (on-demand prices, prices.py); the Pareto
front of cost against p99 TTFT is marked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .capacity import DEFAULT_TARGET, capacity
from .catalog import SetupError
from .runner import resolve, run
from .scenario import Scenario
from .statistics import aggregate

MAX_EXTRA_REPLICAS = 3  # verification adds at most this many replicas to the capacity estimate
PLAN_ROUTER = "least_outstanding"


@dataclass
class Plan:
    scenario: Scenario  # the deployment at the target rate (its query string is what the dashboard URL carries)
    gpus: int
    cost_per_hour: float | None
    cost_per_mtok: float | None
    replica_capacity: float  # req/s one replica serves within the SLO (the interval's low end over seeds)
    metrics: dict  # the verifying run's (seed means with several seeds)
    pareto: bool = False


@dataclass
class Infeasible:
    hardware: str
    tp: int
    scheduler: str
    reason: str


@dataclass
class PlanResult:
    plans: list[Plan] = field(default_factory=list)
    infeasible: list[Infeasible] = field(default_factory=list)
    simulations: int = 0


def plan(base: Scenario, rate: float, gpus: Sequence[str], tps: Sequence[int], schedulers: Sequence[str], *,
         max_gpus: int, target: float = DEFAULT_TARGET,
         on_candidate: Callable[[int, int], None] | None = None) -> PlanResult:
    """Every (GPU, TP, scheduler) candidate's cheapest replica count for `rate`, ranked by cost per hour."""
    out = PlanResult()
    candidates = [(g, tp, s) for g in gpus for tp in tps for s in schedulers]
    for done, (g, tp, sched) in enumerate(candidates, start=1):
        one = base.model_copy(update={"hardware": g, "tp": tp, "scheduler": sched, "replicas": 1, "rate": rate})
        try:
            resolve(one)
        except SetupError as e:
            out.infeasible.append(Infeasible(g, tp, sched, str(e)))
            continue
        found = capacity(one, target)
        out.simulations += found.runs
        if found.mean is None:
            out.infeasible.append(Infeasible(g, tp, sched, "one replica misses the SLO even at the lowest rate"))
            continue
        per_replica = min(found.per_seed) if found.ci95 is None else max(found.ci95[0], 1e-9)
        replicas = max(1, math.ceil(rate / per_replica))
        verified = _verify(one, replicas, target, max_gpus, out)
        if verified is None:
            continue
        verified.replica_capacity = per_replica
        out.plans.append(verified)
        if on_candidate:
            on_candidate(done, len(candidates))
    out.plans.sort(key=lambda p: (p.cost_per_hour is None, p.cost_per_hour or 0.0, _ttft_p99(p)))
    _mark_pareto(out.plans)
    return out


def _verify(one: Scenario, replicas: int, target: float, max_gpus: int, out: PlanResult) -> Plan | None:
    """The deployment with `replicas` (or up to MAX_EXTRA_REPLICAS more) that meets the target, or None."""
    for n in range(replicas, replicas + MAX_EXTRA_REPLICAS + 1):
        if n * one.tp > max_gpus:
            out.infeasible.append(Infeasible(one.hardware, one.tp, one.scheduler,
                                             f"needs {n} replicas = {n * one.tp} GPUs, over --max-gpus {max_gpus}"))
            return None
        s = one.model_copy(update={"replicas": n, "router": PLAN_ROUTER if n > 1 else one.router})
        results = [run(s.model_copy(update={"seed": s.seed + k, "seeds": 1})) for k in range(s.seeds)]
        out.simulations += len(results)
        metrics = aggregate([r.metrics for r in results])[0] if len(results) > 1 else results[0].metrics
        if metrics["slo_attainment"] >= target:
            return Plan(s, metrics["gpus"], metrics["cost_per_hour"], metrics["cost_per_mtok"], 0.0, metrics)
    out.infeasible.append(Infeasible(one.hardware, one.tp, one.scheduler,
                                     f"{replicas + MAX_EXTRA_REPLICAS} replicas still miss the SLO at this rate"))
    return None


def _ttft_p99(p: Plan) -> float:
    return p.metrics["ttft_ms"]["p99"] or math.inf


def _mark_pareto(plans: list[Plan]) -> None:
    """A plan is on the front when no other is at most as dear and at most as slow (p99 TTFT), and better in one."""
    for p in plans:
        cost = p.cost_per_hour if p.cost_per_hour is not None else math.inf
        p.pareto = not any(
            (q.cost_per_hour if q.cost_per_hour is not None else math.inf) <= cost and _ttft_p99(q) <= _ttft_p99(p)
            and ((q.cost_per_hour or math.inf) < cost or _ttft_p99(q) < _ttft_p99(p)) for q in plans if q is not p)
