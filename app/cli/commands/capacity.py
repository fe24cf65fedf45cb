"""`sched-sim capacity`: the highest arrival rate a deployment serves within its SLOs, per seed and over seeds."""

from __future__ import annotations

import argparse

from sim_core import Scenario, resolve
from sim_core.fields import bounds_text, field_info, range_text
from sim_core.scenario import MIN_RATE
from sim_core.studies.capacity import CapacitySearch, capacity

from ..flags import (
    _number,
    add_executor_flags,
    add_scenario_flags,
    build_scenario,
    executor,
)
from ..report import g, pct, print_json, print_lines, scenario_doc, setup_lines
from ..simulate import check_setup, trace_rate

NAME = "capacity"


def _search_value(name: str, text: str) -> float:
    """--target / --tolerance: a number within sim_core.studies.capacity.CapacitySearch's bounds for `name`."""
    value = _number(text)
    f = field_info(name, CapacitySearch)
    if (value <= f.lo if f.lo_exclusive else value < f.lo) or value > f.hi:
        raise argparse.ArgumentTypeError(f"must be {range_text(name, CapacitySearch)}: {f.description} (got {text})")
    return value


def slo_target(text: str) -> float:
    return _search_value("target", text)


def tolerance(text: str) -> float:
    return _search_value("tolerance", text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    for name, parse in (("target", slo_target), ("tolerance", tolerance)):
        f = field_info(name, CapacitySearch)
        p.add_argument(f"--{name}", type=parse, default=f.default, metavar="FRACTION",
                       help=f"{f.description}, {bounds_text(name, CapacitySearch)} (default: {f.default:g})"
                       .replace("%", "%%"))
    add_executor_flags(p)
    add_scenario_flags(p)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def handle(args: argparse.Namespace) -> int:
    base = trace_rate(build_scenario(args), "a capacity search")
    check_setup(base)
    with executor(args) as ex:
        cap = capacity(base, args.target, args.tolerance, executor=ex)
    seeds = [base.seed + k for k in range(base.seeds)]
    if args.json:
        print_json({"scenario": scenario_doc(base, ("rate", "seeds")), "target_attainment": args.target,
                    "max_rate": {"mean": cap.mean, "ci95": list(cap.ci95) if cap.ci95 else None,
                                 "per_seed": cap.per_seed, "seeds": seeds}, "simulations": cap.runs})
    else:
        print_lines(capacity_lines(base, cap, seeds, args.target, args.tolerance))
    return 0


def capacity_lines(base: Scenario, cap, seeds: list[int], target: float, tolerance: float) -> list[str]:
    """The set-up, then the capacity (mean, interval, per seed) or the seeds that meet the target at no rate."""
    r = resolve(base)
    lines = setup_lines(base, {base.scheduler: r}, None, "searched")
    lines.append("")
    if cap.mean is None:
        lines.append(f"No rate down to {MIN_RATE:g} req/s meets {pct(target)}% SLO attainment "
                     f"(TTFT <= {g(r.slo_ttft_ms)} ms, TPOT <= {g(r.slo_tpot_ms)} ms) with seed(s) "
                     f"{', '.join(str(s) for s, v in zip(seeds, cap.per_seed, strict=True) if v is None)}.")
    else:
        interval = f" (95% CI {g(cap.ci95[0])} - {g(cap.ci95[1])})" if cap.ci95 else ""
        lines.append(f"Capacity: {g(cap.mean)} req/s{interval} at >= {pct(target)}% SLO "
                     f"attainment (TTFT <= {g(r.slo_ttft_ms)} ms, TPOT <= {g(r.slo_tpot_ms)} ms)")
        lines.append("  per seed: " + ", ".join(f"seed {s}: {g(v)}" for s, v in zip(seeds, cap.per_seed, strict=True)))
    lines.append(f"  {cap.runs} simulations, rates bracketed then bisected to within {tolerance * 100:g}%")
    return lines
