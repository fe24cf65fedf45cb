"""`sched-sim run`: one scheduler on one scenario; its metrics, and with --trace-out a Perfetto trace of the run."""

from __future__ import annotations

import argparse
import sys

from .. import results
from ..flags import add_scenario_flags, build_scenario
from ..report import check_writable
from ..simulate import first_seed, run_schedulers

NAME = "run"
HELP = "simulate one scheduler on one scenario and print its metrics"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_flags(p)
    p.add_argument("--trace-out", metavar="FILE", help="write a Perfetto / Chrome trace of the run to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def handle(args: argparse.Namespace) -> int:
    if args.trace_out:
        check_writable(args.trace_out)
    scheduler = build_scenario(args).scheduler
    base, runs = run_schedulers(args, [scheduler], record_events=bool(args.trace_out))
    results.print_results(args, base, runs, drop=())
    if args.trace_out:
        results.write_trace(first_seed(runs[scheduler]), args.trace_out, sys.stderr if args.json else sys.stdout)
    return 0
