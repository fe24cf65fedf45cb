"""The cheapest deployment that meets an SLO at a given arrival rate ("how many GPUs of which kind?").

A candidate is GPU x tensor-parallel degree x scheduler x token budget x topology; a topology is `colocated`
(engines that prefill and decode their own requests, behind a least_outstanding router) or a prefill:decode ratio
`P:D` (disaggregated pools, the prompt's KV crossing the scenario's kv_link). Smart rather than brute force:

1. Capacity, once per candidate's *unit*: one replica (colocated) or one P:D group of P prefill and D decode
   engines. Its highest rate within the SLO is searched per seed (capacity.py: bracket, then bisect); over N seeds
   the estimate is the 95% interval's low end (the lowest seed's capacity when the interval reaches below zero,
   which two widely spread seeds can do), so a noisy knee is not taken at its luckiest.
2. Units = ceil(rate / unit capacity): `units` replicas, or units*P prefill and units*D decode engines.
3. Pruning before any cluster run: a candidate is dropped when another's estimate is cheaper than the least this
   one could cost (by its luckiest seed's capacity, less a unit for trimming), and no slower (its unit's p99 TTFT
   at capacity). Candidates whose estimate needs more
   than one unit above --max-gpus are dropped too, with what they would need.
4. Verification, with cluster runs at the target rate over the same seeds (the attainment's 95% low end with
   several seeds): a deployment that falls short gets one more unit (at most MAX_EXTRA_UNITS); one that meets at
   the estimate is trimmed: one engine fewer (for P/D, one fewer in either pool, whichever still meets with the
   lower p99 TTFT) until that misses; colocated replicas are trimmed by galloping (1, 2, 4 fewer) then bisecting,
   so a loose estimate costs a few rounds. So every plan is minimal: one engine fewer was run and missed.

Rule for P/D: the P:D ratio fixes the unit, the unit's capacity fixes the scale, and trimming settles the split
(e.g. 1:2 -> 3 units = 3P + 6D, trimmed to 3P + 5D if five decode engines suffice). Plans are ranked by cost per
hour (on-demand prices, sim_core/data/prices.json); the Pareto front of cost against p99 TTFT is marked. With no plan,
`no_plan_text` says what came closest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..catalog import GPUS, SetupError
from ..prices import deployment_cost_per_hour
from ..runner import resolve, run
from ..scenario import MAX_REPLICAS, Scenario
from ..statistics import aggregate
from ..workload import PRESETS
from .capacity import DEFAULT_TARGET, DEFAULT_TOLERANCE, max_rate, summarize
from .executor import map_in_process

MAX_EXTRA_UNITS = 3  # verification adds at most this many units to the capacity estimate
PLAN_ROUTER = "least_outstanding"
COLOCATED = "colocated"
MAX_POOL_RATIO = 8  # P and D of a P:D topology are 1..8
# Scenario fields the search sets for each candidate (a plan's inputs give the candidates instead).
PLAN_FIXED_FIELDS = ("hardware", "scheduler", "replicas", "prefill_replicas", "decode_replicas")


def parse_topology(text: str) -> str:
    """`colocated` or `P:D` (1..8 each, e.g. 1:2); ValueError saying what is allowed otherwise."""
    text = text.strip().lower()
    if text == COLOCATED:
        return text
    m = re.fullmatch(r"(\d+):(\d+)", text)
    if not m or not all(1 <= int(v) <= MAX_POOL_RATIO for v in m.groups()):
        raise ValueError(f"{text!r} is no topology: give 'colocated' or a prefill:decode ratio P:D with P and D "
                         f"from 1 to {MAX_POOL_RATIO} (e.g. 1:2)")
    return f"{int(m[1])}:{int(m[2])}"


@dataclass(frozen=True)
class Candidate:
    hardware: str
    tp: int
    scheduler: str
    token_budget: int | None  # None: the scenario's (or the scheduler's default)
    topology: str = COLOCATED

    @property
    def ratio(self) -> tuple[int, int] | None:
        return None if self.topology == COLOCATED else tuple(int(v) for v in self.topology.split(":"))

    @property
    def unit_engines(self) -> int:
        return sum(self.ratio) if self.ratio else 1

    def label(self) -> str:
        budget = f" budget {self.token_budget}" if self.token_budget else ""
        topo = f" P:D {self.topology}" if self.ratio else ""
        return f"{self.hardware} tp{self.tp} {self.scheduler}{budget}{topo}"

    def deployment(self, base: Scenario, rate: float, size: tuple[int, int]) -> Scenario:
        """The scenario of this candidate at `rate` with `size` engines: (replicas, 0) or (prefill, decode)."""
        update = {"hardware": self.hardware, "tp": self.tp, "scheduler": self.scheduler, "rate": rate,
                  "replicas": 1, "prefill_replicas": 0, "decode_replicas": 0}
        if self.token_budget is not None:
            update["token_budget"] = self.token_budget
        if self.ratio:
            update.update(prefill_replicas=size[0], decode_replicas=size[1], router=PLAN_ROUTER)
        else:
            update.update(replicas=size[0], router=PLAN_ROUTER if size[0] > 1 else base.router)
        return base.model_copy(update=update)

    def units(self, n: int) -> tuple[int, int]:
        return (n * self.ratio[0], n * self.ratio[1]) if self.ratio else (n, 0)


@dataclass
class Plan:
    scenario: Scenario  # the deployment at the target rate (its query string is what the dashboard URL carries)
    gpus: int
    cost_per_hour: float | None
    cost_per_mtok: float | None
    replica_capacity: float  # req/s one unit (replica or P:D group) serves within the SLO (estimate over seeds)
    metrics: dict  # the verifying run's (seed means with several seeds)
    pareto: bool = False
    candidate: Candidate | None = None
    attainment_low: float | None = None  # with several seeds: the attainment's 95% interval low end
    meets: bool = True  # reached the target (the verification's trials that did not are no plans)

    @property
    def power_kw(self) -> float | None:
        """The deployment's modelled average power (kW) over the verifying run, where energy was on."""
        energy = self.metrics.get("energy")
        span = self.metrics.get("duration_s")
        return energy["energy_j"] / span / 1000.0 if energy and span else None


@dataclass
class Infeasible:
    hardware: str
    tp: int
    scheduler: str
    reason: str
    token_budget: int | None = None
    topology: str = COLOCATED
    kind: str = "fit"  # fit | slo | gpus | verify | pruned | power
    attainment: float | None = None  # the best SLO attainment seen (slo, verify)
    gpus_needed: int | None = None  # the estimate's GPU count (gpus)
    p99_ttft_ms: float | None = None  # of the nearest miss (slo)
    power_kw: float | None = None  # what a plan over the power budget draws (power)


@dataclass
class PlanResult:
    plans: list[Plan] = field(default_factory=list)
    infeasible: list[Infeasible] = field(default_factory=list)
    simulations: int = 0
    candidates: int = 0

    def reject(self, c: Candidate, reason: str, kind: str, **extra) -> None:
        self.infeasible.append(Infeasible(c.hardware, c.tp, c.scheduler, reason, c.token_budget, c.topology, kind,
                                          **extra))


# ---------------------------------------------------------------------------------------------------------
# Tasks an executor runs (module-level, so they pickle by reference to a worker process or a Ray worker)
# ---------------------------------------------------------------------------------------------------------
def capacity_task(task: tuple[Scenario, float, float]) -> dict:
    """One seed's capacity search for one unit, with the p99 TTFT at the rate found and the best run seen."""
    scenario, target, tolerance = task
    seen: dict[float, dict] = {}

    def attainment(s: Scenario, rate: float) -> float:
        m = run(s.model_copy(update={"rate": rate, "seeds": 1})).metrics
        seen[rate] = {"rate": rate, "slo_attainment": m["slo_attainment"], "ttft_p99": m["ttft_ms"]["p99"],
                      "tpot_p99": m["tpot_ms"]["p99"], "slo": m["slo"]}
        return m["slo_attainment"]

    # Capped at the plan's rate (the unit's scenario rate): a unit that serves all of it alone needs no more search.
    rate, runs = max_rate(scenario, target, tolerance, attainment, ceiling=scenario.rate)
    best = max(seen.values(), key=_closeness)
    return {"rate": rate, "runs": runs, "at_rate": seen.get(rate), "best": best}


def _closeness(run_seen: dict) -> tuple[float, float]:
    """How near a run that missed came: its attainment, then its p99 TTFT (lower is nearer)."""
    ttft = run_seen["ttft_p99"]
    return run_seen["slo_attainment"], -(ttft if ttft is not None else math.inf)


def metrics_task(scenario: Scenario) -> dict:
    return run(scenario).metrics


class _Progress:
    """Tasks done out of an estimate of all (the verification rounds are not known ahead), never past it."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int):
        self.callback, self.done, self.total = callback, 0, total

    def batch(self, expected_later: int) -> Callable[[int, int], None]:
        start = self.done

        def on_done(k: int, n: int) -> None:
            self.done = start + k
            self.total = max(self.total, self.done + expected_later + (n - k))
            if self.callback:
                self.callback(self.done, self.total)
        return on_done


# ---------------------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchSpace:
    """What a plan may choose from: every combination is a candidate."""
    gpus: Sequence[str]
    tps: Sequence[int] = (1,)
    schedulers: Sequence[str] = ("chunked",)
    token_budgets: Sequence[int | None] = (None,)  # None: the scenario's token budget
    topologies: Sequence[str] = (COLOCATED,)
    max_gpus: int = 64
    min_tokens_per_s_per_user: float | None = None  # every request streams at least this fast (see tokens_floor)
    power_budget_kw: float | None = None  # the most average power a plan may draw (see within_power_budget)

    def candidates(self) -> list[Candidate]:
        return [Candidate(g, tp, s, b, t) for g in self.gpus for tp in self.tps for s in self.schedulers
                for b in self.token_budgets for t in self.topologies]


def plan(base: Scenario, rate: float, space: SearchSpace, *, target: float = DEFAULT_TARGET, executor=None,
         on_progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Every candidate's cheapest engine count for `rate`, ranked by cost per hour. `executor`
    (sim_core.studies.executor) runs the independent simulations; without one they run here in turn."""
    base.require_constant_rate("the planner")
    base = tokens_floor(base, space.min_tokens_per_s_per_user)
    if space.power_budget_kw is not None:  # a budget needs each deployment's power: energy on (no other change)
        base = base.model_copy(update={"energy": True})
    out = PlanResult()
    pmap = executor.map if executor is not None else map_in_process
    candidates = space.candidates()
    max_gpus = space.max_gpus
    out.candidates = len(candidates)
    units = {}
    for c in candidates:
        unit = c.deployment(base, rate, c.units(1))
        try:
            resolve(unit)
        except SetupError as e:
            out.reject(c, str(e), "fit")
            continue
        if space.power_budget_kw is not None and GPUS[c.hardware].idle_power_w is None:
            out.reject(c, f"{c.hardware} has no measured idle power, so its draw under --power-budget-kw is not "
                          f"modelled (sim_core/data/gpus.json power_source)", "fit")
            continue
        if c.unit_engines * c.tp > max_gpus:
            out.reject(c, f"one unit is {c.unit_engines * c.tp} GPUs, over --max-gpus {max_gpus}", "gpus",
                       gpus_needed=c.unit_engines * c.tp)
            continue
        units[c] = unit
    seeds = base.seeds
    tasks = [(u.model_copy(update={"seed": u.seed + k, "seeds": 1}), target, DEFAULT_TOLERANCE)
             for u in units.values() for k in range(seeds)]
    progress = _Progress(on_progress, len(tasks) + 2 * len(units) * seeds)
    found = pmap(capacity_task, tasks, progress.batch(2 * len(units) * seeds))
    estimates = {}
    for i, c in enumerate(units):
        per_seed = found[i * seeds:(i + 1) * seeds]
        out.simulations += sum(f["runs"] for f in per_seed)
        est = _estimate(c, per_seed, rate, max_gpus, out)
        if est is not None:
            estimates[c] = est
    _prune(estimates, out)
    searches = [_Search(c, units[c], e["capacity"], c.units(e["units"]), e["units"]) for c, e in estimates.items()]
    _verify(searches, base, rate, target, max_gpus, pmap, progress, out)
    within_power_budget(out, space.power_budget_kw)
    out.plans.sort(key=lambda p: (p.cost_per_hour is None, p.cost_per_hour or 0.0, _ttft_p99(p)))
    _mark_pareto(out.plans)
    return out


def within_power_budget(out: PlanResult, budget_kw: float | None) -> None:
    """Move the plans that draw more than `budget_kw` (their modelled average power) to the infeasible ones."""
    if budget_kw is None:
        return
    over = [p for p in out.plans if p.power_kw is None or p.power_kw > budget_kw]
    for p in over:
        drawn = "an unmodelled power" if p.power_kw is None else f"{p.power_kw:.3g} kW"
        out.reject(p.candidate, f"{_size_text(p.candidate, _plan_size(p))} meets the SLOs but draws {drawn}, over "
                                f"--power-budget-kw {budget_kw:g}", "power", power_kw=p.power_kw)
    out.plans = [p for p in out.plans if p not in over]


def _plan_size(p: Plan) -> tuple[int, int]:
    s = p.scenario
    return (s.prefill_replicas, s.decode_replicas) if s.disaggregated else (s.replicas, 0)


def tokens_floor(base: Scenario, min_tokens_per_s_per_user: float | None) -> Scenario:
    """`base` with its TPOT target at most 1000 / min_tokens_per_s_per_user ms: a request then meets the SLO only
    if it streams at least that many tokens/s after its first (tokens/s per user as InferenceX counts it, 1000 /
    TPOT; sim_core/studies/frontier.py), so the cheapest plan is the cheapest at that interactivity. A tighter
    target stays. One target then holds for every request class: the tightest of the classes' and the floor."""
    if min_tokens_per_s_per_user is None:
        return base
    preset = PRESETS[base.workload]
    current = base.slo_tpot_ms or min([preset.slo_tpot_ms] + [c.slo_tpot_ms for c in preset.classes
                                                                if c.slo_tpot_ms is not None])
    return base.model_copy(update={"slo_tpot_ms": min(current, 1000.0 / min_tokens_per_s_per_user)})


def _estimate(c: Candidate, per_seed: list[dict], rate: float, max_gpus: int, out: PlanResult) -> dict | None:
    """The unit's capacity over seeds and the units it takes for `rate`, or None (rejected, with the reason)."""
    cap = summarize([f["rate"] for f in per_seed], 0)
    if cap.mean is None:
        best = max((f["best"] for f in per_seed), key=_closeness)
        slo = best["slo"]
        out.reject(c, f"one {'replica' if not c.ratio else 'P:D group'} misses the SLO at every rate tried "
                      f"(nearest: {best['slo_attainment']:.0%} attainment at {best['rate']:.3g} req/s, p99 TTFT "
                      f"{_ms(best['ttft_p99'])} against {_ms(slo['ttft_ms'])}, p99 TPOT {_ms(best['tpot_p99'])} "
                      f"against {_ms(slo['tpot_ms'])})", "slo",
                   attainment=best["slo_attainment"], p99_ttft_ms=best["ttft_p99"])
        return None
    low = cap.ci95[0] if cap.ci95 is not None and cap.ci95[0] > 0 else min(cap.per_seed)
    n = max(1, math.ceil(rate / low - 1e-9))
    fit = max_gpus // (c.unit_engines * c.tp)
    if n - 1 > fit or max(c.units(max(1, n - 1))) > MAX_REPLICAS:
        gpus = n * c.unit_engines * c.tp
        out.reject(c, f"needs about {gpus} GPUs ({n} x {low:.3g} req/s per unit), over --max-gpus {max_gpus}",
                   "gpus", gpus_needed=gpus)
        return None
    ttfts = [f["at_rate"]["ttft_p99"] for f in per_seed if f["at_rate"] and f["at_rate"]["ttft_p99"] is not None]
    unit_cost = deployment_cost_per_hour(c.hardware, c.unit_engines * c.tp)
    return {"capacity": low, "units": min(n, fit), "unit_cost": unit_cost,
            "units_optimistic": max(1, math.ceil(rate / max(cap.per_seed) - 1e-9)),  # by the luckiest seed
            "ttft_p99": sum(ttfts) / len(ttfts) if ttfts else math.inf}


def _prune(estimates: dict, out: PlanResult) -> None:
    """Drop a candidate when another's estimate costs no more than the least this one could cost (its luckiest
    seed's estimate less a unit, for what trimming can save), and is no slower, strictly better in one of them."""
    def cost(e, least=False):
        units = max(1, e["units_optimistic"] - 1) if least else e["units"]
        return None if e["unit_cost"] is None else e["unit_cost"] * units

    dropped = []
    for c, e in estimates.items():
        if cost(e) is None:
            continue
        for d, f in estimates.items():
            if d is c or cost(f) is None:
                continue
            if cost(f) <= cost(e, True) and f["ttft_p99"] <= e["ttft_p99"] and (
                    cost(f) < cost(e, True) or f["ttft_p99"] < e["ttft_p99"]):
                out.reject(c, f"pruned: {d.label()} is estimated at ${cost(f):.2f}/h and p99 TTFT "
                              f"{_ms(f['ttft_p99'])}, against ${cost(e):.2f}/h and {_ms(e['ttft_p99'])}", "pruned")
                dropped.append(c)
                break
    for c in dropped:
        del estimates[c]


@dataclass
class _Search:
    """One candidate's verification: its current size, going up (short of the SLO) or down (trimming)."""
    cand: Candidate
    unit: Scenario
    capacity: float
    size: tuple[int, int]
    estimate_units: int
    going_up: bool = True
    extra: int = 0
    best: Plan | None = None
    done: bool = False
    closest: float = 0.0  # best attainment seen while short
    miss: int = 0  # colocated: the most replicas known to miss
    step: int = 1  # colocated trimming: how many replicas fewer to try next (doubles while they meet)

    def next_sizes(self) -> list[tuple[int, int]]:
        if self.going_up:
            return [self.size]
        p, d = self.size
        if not self.cand.ratio:  # galloping down, then bisecting, until one replica fewer is known to miss
            return [(max(self.miss + 1, p - self.step), 0)] if p - self.miss > 1 else []
        return [s for s in ((p - 1, d), (p, d - 1)) if min(s) >= 1]


def _verify(searches: list[_Search], base: Scenario, rate: float, target: float, max_gpus: int, pmap,
            progress: _Progress, out: PlanResult) -> None:
    """Rounds of cluster runs, every live candidate's next sizes in one batch, until each is settled."""
    seeds = base.seeds
    live = list(searches)
    while live:
        trials = [(s, size) for s in live for size in s.next_sizes()]
        runs = [s.cand.deployment(base, rate, size).model_copy(update={"seed": base.seed + k, "seeds": 1})
                for s, size in trials for k in range(seeds)]
        metrics = pmap(metrics_task, runs, progress.batch(len(live) * seeds))
        out.simulations += len(runs)
        by_search: dict[int, list[Plan]] = {}
        for i, (s, size) in enumerate(trials):
            p = _trial_plan(s, s.cand.deployment(base, rate, size), metrics[i * seeds:(i + 1) * seeds], target)
            by_search.setdefault(id(s), []).append(p)
        for s in live:
            _advance(s, by_search.get(id(s), []), max_gpus, out)
        live = [s for s in live if not s.done]
    out.plans.extend(s.best for s in searches if s.best is not None)


def _trial_plan(s: _Search, scenario: Scenario, metrics: list[dict], target: float) -> Plan:
    """A trial (one size, every seed) as a Plan, with whether it meets the target."""
    if len(metrics) > 1:
        m, ci = aggregate(metrics)
        low = ci["slo_attainment"][0]
    else:
        m, low = metrics[0], None
    p = Plan(scenario, round(m["gpus"]), m["cost_per_hour"], m["cost_per_mtok"], s.capacity, m, candidate=s.cand,
             attainment_low=low)
    p.meets = (low if low is not None else m["slo_attainment"]) >= target
    return p


def _advance(s: _Search, trials: list[Plan], max_gpus: int, out: PlanResult) -> None:
    if s.going_up:
        p = trials[0]
        if p.meets:
            s.best = p
            s.going_up = False
            return
        s.closest = max(s.closest, p.metrics["slo_attainment"])
        s.miss = s.size[0]  # colocated: so a deployment grown past the estimate is already minimal
        s.extra += 1
        grown = (s.size[0] + (s.cand.ratio or (1, 0))[0], s.size[1] + (s.cand.ratio or (0, 0))[1])
        gpus = (grown[0] + grown[1]) * s.cand.tp
        if s.extra > MAX_EXTRA_UNITS or gpus > max_gpus or max(grown) > MAX_REPLICAS:
            why = (f"over --max-gpus {max_gpus}" if gpus > max_gpus else f"{MAX_EXTRA_UNITS} units past the estimate")
            out.reject(s.cand, f"with {_size_text(s.cand, s.size)}: {s.closest:.0%} SLO attainment; one unit more "
                               f"is {why}", "verify", attainment=s.closest,
                       gpus_needed=gpus if gpus > max_gpus else None)
            s.done = True
        s.size = grown
        return
    if not s.cand.ratio and trials:
        p = trials[0]
        if p.meets:
            s.best, s.size, s.step = p, (p.scenario.replicas, 0), s.step * 2
        else:
            s.miss = p.scenario.replicas
            s.step = max(1, (s.size[0] - s.miss) // 2)
        return
    meeting = [p for p in trials if p.meets]
    if not meeting:
        s.done = True
        return
    s.best = min(meeting, key=_ttft_p99)
    sc = s.best.scenario
    s.size = (sc.prefill_replicas, sc.decode_replicas)


def _size_text(c: Candidate, size: tuple[int, int]) -> str:
    return f"{size[0]}P + {size[1]}D" if c.ratio else f"{size[0]} replica{'s' * (size[0] > 1)}"


def _ms(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.0f} ms"


def _ttft_p99(p: Plan) -> float:
    return p.metrics["ttft_ms"]["p99"] or math.inf


def _mark_pareto(plans: list[Plan]) -> None:
    """A plan is on the front when no other is at most as dear and at most as slow (p99 TTFT), and better in one."""
    for p in plans:
        cost = p.cost_per_hour if p.cost_per_hour is not None else math.inf
        p.pareto = not any(
            (q.cost_per_hour if q.cost_per_hour is not None else math.inf) <= cost and _ttft_p99(q) <= _ttft_p99(p)
            and ((q.cost_per_hour or math.inf) < cost or _ttft_p99(q) < _ttft_p99(p)) for q in plans if q is not p)


def no_plan_text(result: PlanResult, model: str, max_gpus: int, target: float) -> str:
    """Why no candidate gave a plan, and what came closest."""
    by_kind: dict[str, list[Infeasible]] = {}
    for i in result.infeasible:
        by_kind.setdefault(i.kind, []).append(i)
    label = lambda i: Candidate(i.hardware, i.tp, i.scheduler, i.token_budget, i.topology).label()  # noqa: E731
    if by_kind.get("power"):
        near = min(by_kind["power"], key=lambda i: i.power_kw or math.inf)
        return f"no plan meets {target:.0%} SLO attainment within the power budget; closest: {label(near)}: {near.reason}"
    if by_kind.get("gpus") or by_kind.get("verify"):
        near = min(by_kind.get("gpus", []) + by_kind.get("verify", []), key=lambda i: i.gpus_needed or math.inf)
        return (f"no deployment within --max-gpus {max_gpus} meets {target:.0%} SLO attainment; closest: "
                f"{label(near)}: {near.reason} (raise --max-gpus to at least {near.gpus_needed})")
    if by_kind.get("slo"):
        near = max(by_kind["slo"], key=lambda i: _closeness({"slo_attainment": i.attainment or 0.0,
                                                             "ttft_p99": i.p99_ttft_ms}))
        return (f"no candidate meets {target:.0%} SLO attainment at any rate; closest: {label(near)}: "
                f"{near.reason.removeprefix('one replica ')} (relax --slo-ttft-ms/--slo-tpot-ms or --attainment, "
                f"or add faster GPUs)")
    if by_kind.get("fit"):
        roomiest = max(by_kind["fit"], key=lambda i: GPUS[i.hardware].mem_gib * i.tp)
        return (f"{model} fits none of the candidate GPUs and TP degrees; the roomiest, {roomiest.hardware} "
                f"tp{roomiest.tp}: {roomiest.reason}")
    return "no candidate gave a plan: " + "; ".join(f"{label(i)}: {i.reason}" for i in result.infeasible)
