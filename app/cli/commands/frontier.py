"""`sched-sim frontier`: throughput per GPU against tokens/s per user over a grid of closed-loop concurrencies, for
one model on one or more GPUs, each in every viable parallel configuration (tp, ep, attention data-parallel,
speculative decoding when the scenario sets it), and each GPU's envelope over them (InferenceX's axes and search;
sim_core/studies/frontier.py defines them and cites theirs)."""

from __future__ import annotations

import argparse

from sim_core import ScenarioError
from sim_core.catalog import GPUS
from sim_core.studies.frontier import (
    BASES,
    DEFAULT_BASIS,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MIN_CONCURRENCY,
    REQUESTS_PER_USER,
    TP_CHOICES,
    ConfigSearch,
    cheapest_at,
    concurrency_grid,
    frontier,
)

from ..flags import (
    UsageError,
    _number,
    add_executor_flags,
    add_scenario_flags,
    build_scenario,
    executor,
    positive_float,
    scenario_error_text,
)
from ..report import Progress, columns, fmt, print_json, print_lines, scenario_doc

NAME = "frontier"

# The frontier sets these per point (the GPU, the closed loop's users and its request count); open-loop arrivals
# have no place in a closed loop. --json's "scenario" leaves them out.
FRONTIER_FIXED = ("hardware", "concurrency", "num_requests", "rate", "rate_schedule", "burstiness", "seeds")
# ... and each configuration sets these (--tp and --ep narrow the search instead); --json's "scenario" keeps them
# as they were before the search (each point carries its own).
PER_CONFIG = ("tp", "ep", "attention_dp")
GRID_FLAGS = {"min_concurrency": "--min-concurrency", "max_concurrency": "--max-concurrency",
              "requests_per_user": "--requests-per-user", "basis": "--basis"}


def gpu_list(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"give a comma-separated list of GPUs: {', '.join(GPUS)}")
    for name in names:
        if name not in GPUS:
            raise argparse.ArgumentTypeError(f"unknown GPU {name!r}; choose from {', '.join(GPUS)}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise argparse.ArgumentTypeError(f"{', '.join(dup)} given more than once")
    return names


def users(text: str) -> int:
    return int(_number(text, int))  # its range is checked by frontier.concurrency_grid, which names the flag


def degrees(text: str) -> list[int]:
    """--tp / --ep: one value or a comma-separated list (their bounds are checked by frontier.parallel_configs,
    which names the flag)."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise argparse.ArgumentTypeError("give one value or a comma-separated list, e.g. 2 or 1,2,4,8")
    return [int(_number(w, int)) for w in words]


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("frontier", "the GPUs compared and the concurrency grid (users: 1, 2, 4, ... max)")
    g.add_argument("--hardware", "--gpus", dest="gpus", type=gpu_list, required=True, metavar="H[,H2...]",
                   help="the GPUs to compare, comma-separated (each in every configuration that fits it)")
    choices = ",".join(map(str, TP_CHOICES))
    g.add_argument("--tp", type=degrees, default=None, metavar="N[,N2...]",
                   help=f"the tensor-parallel degrees to try (default: each of {choices} where the model fits)")
    g.add_argument("--ep", type=degrees, default=None, metavar="N[,N2...]",
                   help="the expert-parallel degrees to try, mixture-of-experts models only: ep = tp spreads the "
                        "experts over the tp GPUs, a multiple of tp above it runs attention data-parallel in "
                        f"ep / tp ranks (default: 1, tp and {choices} where they fit)")
    g.add_argument("--min-concurrency", type=users, default=DEFAULT_MIN_CONCURRENCY, metavar="N",
                   help=f"fewest closed-loop users (default: {DEFAULT_MIN_CONCURRENCY})")
    g.add_argument("--max-concurrency", type=users, default=DEFAULT_MAX_CONCURRENCY, metavar="N",
                   help=f"most closed-loop users; the grid doubles up to it (default: {DEFAULT_MAX_CONCURRENCY})")
    g.add_argument("--requests-per-user", type=users, default=REQUESTS_PER_USER, metavar="N",
                   help=f"requests each user sends (default: {REQUESTS_PER_USER}, InferenceX's num_prompts = "
                        f"10 x concurrency)")
    g.add_argument("--basis", choices=BASES, default=DEFAULT_BASIS,
                   help="throughput per GPU and $/Mtok count total (prompt + output, InferenceX's headline) or "
                        f"output tokens (default: {DEFAULT_BASIS})")
    g.add_argument("--min-tokens-per-s-per-user", type=positive_float, default=None, metavar="X",
                   help="also name the cheapest point ($/Mtok) that gives the median user at least X tokens/s")
    add_executor_flags(p)
    add_scenario_flags(p, exclude=FRONTIER_FIXED + PER_CONFIG)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def handle(args: argparse.Namespace) -> int:
    try:
        grid = concurrency_grid(args.min_concurrency, args.max_concurrency)
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, GRID_FLAGS)) from None
    fixed = {} if args.scenario__workload or args.scenario__trace else {"workload": "random"}
    base = build_scenario(args, **fixed)
    if base.model is None and base.model_file is None:
        raise UsageError("--model: a frontier compares GPUs serving one model; name it (sched-sim list shows "
                         "them), or give its config with --model-config FILE")
    progress = Progress(len(args.gpus) * len(grid))
    try:
        with executor(args) as ex:
            result = frontier(base, args.gpus, grid, basis=args.basis, requests_per_user=args.requests_per_user,
                              executor=ex, on_point=progress.update, search=ConfigSearch(args.tp, args.ep))
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, GRID_FLAGS)) from None
    if not result.points:
        raise UsageError("--hardware: the model fits none of the GPUs: "
                         + "; ".join(f"{hw}: {why}" for hw, why in result.infeasible.items()))
    floor = args.min_tokens_per_s_per_user
    cheapest = cheapest_at(result.points, floor) if floor is not None else None
    if args.json:
        doc = {"scenario": scenario_doc(base, FRONTIER_FIXED), "basis": args.basis, "concurrencies": grid,
               "requests_per_user": args.requests_per_user, "points": result.points,
               "infeasible": result.infeasible, "configs": result.configs, "ruled_out": result.ruled_out,
               "curves": result.curves(), "envelope": result.envelope()}
        if floor is not None:
            doc["min_tokens_per_s_per_user"] = floor
            doc["cheapest"] = cheapest
        print_json(doc)
    else:
        print_lines(frontier_lines(base, args.basis, result, floor, cheapest))
    return 0


def frontier_lines(base, basis: str, result, floor: float | None, cheapest: dict | None) -> list[str]:
    """A table per GPU, a row per configuration and concurrency (* = on that GPU's envelope), then the
    configurations and GPUs ruled out."""
    head = ["", "config", "users", "tok/s/user", f"{basis} tok/s/GPU", "out tok/s/GPU", f"$/M {basis} tok",
            "TTFT p50 ms", "TPOT p50 ms", ""]
    traffic = (f"trace {base.trace}" if base.trace else
               f"{base.workload} ISL {base.isl or 'default'} / OSL {base.osl or 'default'}")
    out = [f"Frontier of {base.model or base.model_file} on {traffic}, every configuration that fits each GPU "
           f"(* = the GPU's envelope; tok/s/user = 1000 / median TPOT)"]
    for hw in dict.fromkeys(p["hardware"] for p in result.points):
        mine = [p for p in result.points if p["hardware"] == hw]
        rows = [["*" if p["pareto"] else "", p["config"], str(p["concurrency"]), fmt(p["tokens_per_s_per_user"], 1),
                 fmt(p["throughput_per_gpu"], 0), fmt(p["output_throughput_per_gpu"], 0),
                 fmt(p["cost_per_mtok"], 3), fmt(p["ttft_ms_p50"], 0), fmt(p["tpot_ms_p50"], 1), ""] for p in mine]
        out += ["", f" {hw} ".center(60, "=")]
        out += columns(head, rows, right=set(range(2, len(head) - 1)))
        out += _rejected_note(mine)
        out += [f"  ruled out: {r['config']}: {r['reason']}" for r in result.ruled_out if r["hardware"] == hw]
    for hw, why in result.infeasible.items():
        out.append(f"  not {hw}: {why}")
    if floor is not None:
        out.append("")
        out.append(f"Cheapest at >= {floor:g} tok/s/user: " + (
            f"{cheapest['hardware']} {cheapest['config']} with {cheapest['concurrency']} users, "
            f"${cheapest['cost_per_mtok']:.3f}/M {basis} tokens ({cheapest['tokens_per_s_per_user']:.1f} tok/s/user)"
            if cheapest else "no priced point reaches it (lower the floor, or add faster GPUs)"))
    return out


def _rejected_note(points: list[dict]) -> list[str]:
    """Longer than max_model_len (or than the KV pool): those points undercount."""
    refused = [p for p in points if p["rejected"]]
    if not refused:
        return []
    first = refused[0]
    where = ", ".join(f"{p['config']} {p['concurrency']}" for p in refused)
    return [f"  note: requests rejected at {where} users "
            f"({first['rejected']} of {first['rejected'] + first['completed']} at {first['config']} "
            f"{first['concurrency']}); see --max-model-len and the model's context"]
