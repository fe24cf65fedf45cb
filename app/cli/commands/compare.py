"""`sched-sim compare`: several schedulers on the same scenario and requests, their metrics side by side."""

from __future__ import annotations

import argparse
import sys

from .. import results
from ..flags import add_scenario_flags, add_schedulers_flag, chosen_schedulers
from ..report import check_writable
from ..simulate import first_seed, run_schedulers

NAME = "compare"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_schedulers_flag(p)
    add_scenario_flags(p, exclude=("scheduler",))
    p.add_argument("--trace-out", metavar="FILE",
                   help="write one Perfetto trace per scheduler (FILE with the scheduler's name before the extension)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def handle(args: argparse.Namespace) -> int:
    args.schedulers = chosen_schedulers(args)
    paths = {s: results.trace_path_for(args.trace_out, s) for s in args.schedulers} if args.trace_out else {}
    for p in paths.values():
        check_writable(p)
    base, runs = run_schedulers(args, args.schedulers, record_events=bool(paths))
    results.print_results(args, base, runs, drop=("scheduler",))
    for s, p in paths.items():
        results.write_trace(first_seed(runs[s]), p, sys.stderr if args.json else sys.stdout)
    return 0
