"""`sched-sim run`: one scheduler on one scenario; its metrics, with --trace-out a Perfetto trace of the run, and with
--metrics-out the Prometheus metrics its engine would have exported."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sim_core.prometheus_export import SeriesTooLong, exposition_text, openmetrics_series
from sim_core.prometheus_names import FLAVOURS, flavour_of_engine

from .. import results
from ..flags import UsageError, add_scenario_flags, build_scenario, positive_float, unix_seconds
from ..report import check_writable
from ..simulate import first_seed, run_schedulers

NAME = "run"
METRICS_FLAGS = ("metrics_format", "metrics_interval", "metrics_start")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_flags(p)
    p.add_argument("--trace-out", metavar="FILE", help="write a Perfetto / Chrome trace of the run to FILE")
    p.add_argument(
        "--metrics-out",
        metavar="FILE",
        help="write the run's Prometheus metrics to FILE, as its engine's /metrics would show them at the "
        "end of the run (text format: names, labels and buckets of vLLM's or SGLang's exporter; with --seeds, "
        "the first seed's run)",
    )
    p.add_argument(
        "--metrics-format",
        choices=FLAVOURS,
        help="whose metric names --metrics-out writes; default: the scenario's engine's (vllm for vllm and "
        "trtllm, sglang for sglang)",
    )
    p.add_argument(
        "--metrics-interval",
        type=positive_float,
        metavar="S",
        help="with --metrics-out: a sample every S simulated seconds instead of one scrape, timestamped, in "
        "OpenMetrics text (`promtool tsdb create-blocks-from openmetrics FILE DIR` loads it into "
        "Prometheus, hence Grafana)",
    )
    p.add_argument(
        "--metrics-start",
        type=unix_seconds,
        metavar="UNIX_S",
        help="with --metrics-interval: the Unix time simulated time 0 maps to; default: now",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def handle(args: argparse.Namespace) -> int:
    if args.trace_out:
        check_writable(args.trace_out)
    given = [f for f in METRICS_FLAGS if getattr(args, f) is not None]
    if given and not args.metrics_out:
        raise UsageError(f"--{given[0].replace('_', '-')}: goes with --metrics-out FILE")
    if args.metrics_start is not None and args.metrics_interval is None:
        raise UsageError("--metrics-start: timestamps a series; it goes with --metrics-interval")
    if args.metrics_out:
        check_writable(args.metrics_out, "--metrics-out")
    scheduler = build_scenario(args).scheduler
    base, runs = run_schedulers(args, [scheduler], record_events=bool(args.trace_out))
    results.print_results(args, base, runs, drop=())
    out = sys.stderr if args.json else sys.stdout
    if args.trace_out:
        results.write_trace(first_seed(runs[scheduler]), args.trace_out, out)
    if args.metrics_out:
        write_metrics(first_seed(runs[scheduler]), args, out)
    return 0


def write_metrics(result, args: argparse.Namespace, out) -> None:
    """--metrics-out: one scrape, or with --metrics-interval a timestamped series (the first seed's run)."""
    flavour = args.metrics_format or flavour_of_engine(result.scenario.engine)
    if args.metrics_interval is None:
        text, what = exposition_text(result, flavour), "one scrape at the end of the run"
    else:
        start = args.metrics_start if args.metrics_start is not None else float(int(time.time()))
        try:
            text = openmetrics_series(result, flavour, args.metrics_interval, start)
        except SeriesTooLong as e:
            raise UsageError(f"--metrics-interval: {e}") from None
        what = f"a sample every {args.metrics_interval:g} s of simulated time, OpenMetrics"
    try:
        Path(args.metrics_out).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--metrics-out: cannot write {args.metrics_out!r}: {e.strerror or e}") from None
    print(f"wrote {args.metrics_out} ({flavour} metrics, {what})", file=out)
