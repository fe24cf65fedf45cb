"""`sched-sim plan`: the cheapest deployments (GPU, TP, scheduler, replicas) that meet the SLOs at a rate, one row
each, cheapest first. Its JSON document and deployment names are the dashboard's Plan tab's too
(app/plan_report.py)."""

from __future__ import annotations

import argparse

from sim_core import Scenario, ScenarioError, resolve
from sim_core.studies.autoscale_compare import at_peak, compare, parse_autoscalers
from sim_core.studies.plan_space import LIST_INPUTS, PlanInputs, parse_plan_inputs
from sim_core.studies.planner import no_plan_text, plan

from ...plan_report import comparison_doc, comparison_lines, deployment_text, plan_doc
from ..flags import UsageError, add_executor_flags, add_scenario_flags, build_scenario, executor, flag_name
from ..report import Progress, columns, fmt, g, pct, print_json, print_lines
from ..simulate import trace_rate

NAME = "plan"

PLAN_FIXED = ("hardware", "tp", "scheduler", "replicas", "prefill_replicas", "decode_replicas")  # the search sets them


PLAN_INPUT_FLAGS = {"gpus": "gpus", "tp": "tp", "schedulers": "schedulers", "token_budgets": "token_budgets",
                    "topologies": "topologies", "max_gpus": "max_gpus", "attainment": "attainment",
                    "min_tokens_per_s_per_user": "min_tokens_per_s_per_user", "power_budget_kw": "power_budget_kw"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_plan_flags(p)
    add_executor_flags(p)
    add_scenario_flags(p, exclude=PLAN_FIXED)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument("--autoscalers", default=None, metavar="A,B",
                   help="with --rate-schedule: the plan is for the schedule's peak, and its cheapest deployment is "
                        "then run over the schedule held static and under each of these autoscalers (default: "
                        "--autoscaler if given, else utilization,predictive; none: skip)")


def _add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The search space's flags, one per sim_core.studies.plan_space.PlanInputs field (its help and bounds come from there)."""
    group = p.add_argument_group("search space", "what a plan may choose from; lists are comma-separated")
    for name, info in PlanInputs.model_fields.items():
        default = info.default
        shown = (",".join(str(v) for v in default) if isinstance(default, tuple)
                 else "none" if default is None else f"{default:g}")
        flags = [flag_name(name)] + (["--scheduler"] if name == "schedulers" else [])
        group.add_argument(*flags, dest=f"plan__{name}", default=None,
                           metavar="A,B" if name in LIST_INPUTS else name.upper(),
                           help=f"{info.description} (default: {shown or 'none'})".replace("%", "%%"))


def _plan_inputs(args: argparse.Namespace):
    """The plan flags through sim_core.studies.plan_space (the dashboard's Plan form and /api/plan parse the same way)."""
    try:
        return parse_plan_inputs({name: getattr(args, f"plan__{name}") for name in PLAN_INPUT_FLAGS})
    except ScenarioError as e:
        raise UsageError("; ".join(f"{flag_name(f)}: {m}" for f, m in e.problems)) from None


def handle(args: argparse.Namespace) -> int:
    inputs = _plan_inputs(args)
    base = build_scenario(args)
    scheduled, autoscalers = None, ()
    if base.rate_schedule is not None:  # plan for the peak, then compare with the autoscalers (autoscale_compare)
        scheduled, autoscalers, base = _at_peak(base, args.autoscalers)
    elif args.autoscalers is not None:
        raise UsageError("--autoscalers: compares the plan with autoscalers over a rate schedule; give "
                         "--rate-schedule too")
    if base.model is None and base.model_file is None:
        raise UsageError("--model: a plan compares GPUs serving one model; name it (sched-sim list shows them), "
                         "or give its config with --model-config FILE")
    model_name = base.model or base.model_file
    base = trace_rate(base, "a plan")
    rate = base.rate or resolve(base).rate
    progress = Progress(inputs.candidates() * base.seeds * 3)
    with executor(args) as ex:
        result = plan(base, rate, inputs.space(), target=inputs.attainment, executor=ex,
                      on_progress=progress.update)
    no_plan = None if result.plans else no_plan_text(result, model_name, inputs.max_gpus, inputs.attainment)
    floor = inputs.min_tokens_per_s_per_user
    comparison = _compare(scheduled, result.plans, autoscalers) if scheduled is not None and result.plans else None
    if args.json:
        print_json({**plan_doc(rate, inputs.attainment, result), **({"no_plan": no_plan} if no_plan else {}),
                    **({"min_tokens_per_s_per_user": floor} if floor is not None else {}),
                    **({"autoscaling": comparison_doc(comparison)} if comparison else {})})
    else:
        lines = plan_lines(base, rate, inputs.attainment, result)
        if floor is not None:  # the planner met it as a TPOT target (planner.tokens_floor)
            lines.insert(1, f"  at >= {g(floor)} tokens/s per user: TPOT target <= {g(1000 / floor)} ms")
        if scheduled is not None:
            lines.insert(1, f"  for the peak of --rate-schedule {scheduled.rate_schedule} (over {g(base.duration)} s "
                            f"at that constant rate)")
        print_lines(lines + (comparison_lines(comparison) if comparison else []))
    if no_plan:
        raise UsageError(f"no plan: {no_plan}")
    return 0


def _at_peak(base: Scenario, autoscalers: str | None):
    """(the scenario with its schedule, the autoscalers to compare, the scenario planned: the schedule's peak)."""
    if base.trace is not None or base.concurrency is not None:
        return base, (), base  # refused by the planner, naming the field
    try:
        names = parse_autoscalers(autoscalers, base)
    except ScenarioError as e:
        raise UsageError("; ".join(f"{flag_name(f)}: {m}" for f, m in e.problems)) from None
    return base, names, at_peak(base)[0]


def _compare(scheduled: Scenario, plans: list, autoscalers: tuple[str, ...]):
    return compare(scheduled, plans, autoscalers)


# ---------------------------------------------------------------------------------------------------------
# The plan's text: one row per deployment, cheapest first, then the candidates ruled out
# ---------------------------------------------------------------------------------------------------------
def plan_lines(base: Scenario, rate: float, target: float, result) -> list[str]:
    head = ["", "deployment", "GPUs", "$/h", "$/M out tok", "P99 TTFT ms", "P99 TPOT ms", "SLO att. %",
            "per replica req/s"]
    rows = []
    for p in result.plans:
        s, m = p.scenario, p.metrics
        rows.append(["*" if p.pareto else "", deployment_text(s), str(p.gpus),
                     fmt(p.cost_per_hour), fmt(p.cost_per_mtok), fmt(m["ttft_ms"]["p99"]), fmt(m["tpot_ms"]["p99"]),
                     pct(m["slo_attainment"]), fmt(p.replica_capacity)])
    traffic = f"trace {base.trace} (its gaps scaled)" if base.trace else base.workload
    out = [f"Plans for {base.model or base.model_file} on {traffic} at {g(rate)} req/s, >= {pct(target)}% SLO "
           f"attainment "
           f"({len(result.plans)} found, {result.simulations} simulations; * = Pareto front of cost and P99 TTFT)"]
    out += columns(head + [""], [r + [""] for r in rows], right=set(range(2, len(head)))) if rows else [
        "  no deployment meets the SLO within the limits"]
    for i in result.infeasible:
        budget = f" budget {i.token_budget}" if i.token_budget else ""
        topo = f" P:D {i.topology}" if i.topology != "colocated" else ""
        out.append(f"  not {i.hardware} tp{i.tp} {i.scheduler}{budget}{topo}: {i.reason}")
    return out
