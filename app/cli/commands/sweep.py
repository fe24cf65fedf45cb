"""`sched-sim sweep`: schedulers over a grid of arrival rates, a table per scheduler with a row per rate, and each
one's saturation knee (the highest rate that keeps the SLO attainment target)."""

from __future__ import annotations

import argparse
import os

from sim_core import ScenarioError, resolve
from sim_core.metric_catalog import BY_KEY, value_at
from sim_core.studies.sweep import knee_interval, knee_rate, rate_grid, sweep

from ..flags import (
    DEFAULT_SLO_TARGET,
    UsageError,
    add_executor_flags,
    add_scenario_flags,
    add_schedulers_flag,
    build_scenario,
    chosen_schedulers,
    executor,
    fraction,
    positive_float,
    scenario_error_text,
)
from ..report import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    Progress,
    error,
    g,
    label,
    mean_cell,
    print_json,
    print_lines,
    scenario_doc,
    setup_lines,
)
from ..simulate import check_setup, trace_rate

NAME = "sweep"

# The rate grid's inputs (as sim_core.studies.sweep.rate_grid names them) and the flags that give them.
RATE_GRID_FLAGS = {"rate_min": "--min-rate", "rate_max": "--max-rate", "rate_step": "--step"}
SWEEP_COLUMNS = ("goodput", "slo_attainment", "ttft_ms.p99", "tpot_ms.p99", "itl_ms.p99", "completed", "rejected",
                 "preemptions")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_schedulers_flag(p)
    grid = p.add_argument_group("rate grid", "rates min, min+step, ... up to max (requests/s)")
    grid.add_argument("--min-rate", type=positive_float, required=True, metavar="RATE", help="lowest arrival rate")
    grid.add_argument("--max-rate", type=positive_float, required=True, metavar="RATE", help="highest arrival rate")
    grid.add_argument("--step", type=positive_float, default=None, metavar="RATE",
                      help="rate increment (default: (max - min) / 8, nine rates)")
    p.add_argument("--slo-target", type=fraction, default=DEFAULT_SLO_TARGET, metavar="FRACTION",
                   help=f"SLO attainment the knee must keep, 0-1 (default: {DEFAULT_SLO_TARGET})")
    add_executor_flags(p)
    add_scenario_flags(p, exclude=("scheduler", "rate"))
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def _rate_grid(args: argparse.Namespace) -> list[float]:
    try:
        return rate_grid(args.min_rate, args.max_rate, args.step)
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, RATE_GRID_FLAGS)) from None


def handle(args: argparse.Namespace) -> int:
    # Imported here: only a sweep needs the process pool (and multiprocessing behind it).
    from concurrent.futures.process import BrokenProcessPool

    args.schedulers = chosen_schedulers(args)
    rates = _rate_grid(args)
    base = trace_rate(build_scenario(args), "a sweep")
    for s in args.schedulers:
        for rate in (rates[0], rates[-1]):
            check_setup(base.model_copy(update={"scheduler": s, "rate": rate}))
    try:
        points = _simulate(args, base, rates)
    except BrokenProcessPool:
        return error("a sweep worker process died (out of memory?); try fewer --workers or a smaller scenario",
                     EXIT_INTERNAL)
    knees = {s: knee_rate(pts, args.slo_target) for s, pts in points.items()}
    bands = {s: knee_interval(pts, args.slo_target) for s, pts in points.items()}
    if args.json:
        print_json({
            "scenario": scenario_doc(base, ("scheduler", "rate")),
            "rates": rates,
            "slo_target": args.slo_target,
            "schedulers": {s: {"points": pts, "knee_rate": knees[s]}
                           | ({"knee_interval": list(bands[s])} if bands[s] else {}) for s, pts in points.items()},
        })
        return 0
    resolved = {s: resolve(base.model_copy(update={"scheduler": s, "rate": rates[0]})) for s in args.schedulers}
    rate_text = f"{g(rates[0])} to {g(rates[-1])} req/s ({len(rates)} rates)"
    lines = setup_lines(base, resolved, None, rate_text)
    lines += sweep_lines(points, knees, rates, args.slo_target, bands)
    print_lines(lines)
    return 0


def _simulate(args: argparse.Namespace, base, rates: list[float]) -> dict[str, list[dict]]:
    """Every (scheduler, rate) point on the executor, a progress bar on a terminal. An interrupt in a forked worker
    ends it quietly; the parent reports the interrupt."""
    import signal
    import threading

    progress = Progress(len(args.schedulers) * len(rates) * base.seeds)
    main_pid = os.getpid()

    def on_sigint(signum, frame):
        if os.getpid() != main_pid:  # a forked worker: leave quietly, the parent reports the interrupt
            os._exit(EXIT_INTERRUPTED)
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main_thread else None
    try:
        with executor(args) as ex:
            return sweep(base, args.schedulers, rates, on_point=progress.update, executor=ex)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------------------------------------
# The sweep's text: one table per scheduler, a row per rate
# ---------------------------------------------------------------------------------------------------------
def _sweep_body(rows: list[tuple[str, list[str]]], columns: list[str]) -> list[str]:
    head = ["rate (req/s)"] + columns
    cells = [[r[0]] + r[1] for r in rows]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(head)]
    out = ["  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(f"{v:>{w}}" for v, w in zip(c, widths, strict=True)) for c in cells]
    return out


def sweep_lines(points: dict[str, list[dict]], knees: dict[str, float | None], rates: list[float],
                slo_target: float, bands: dict[str, tuple | None] | None = None) -> list[str]:
    """Per scheduler, a row per swept rate and its knee; then the knees explained. With several seeds (`bands`,
    sweep.knee_interval), each value is a mean with its 95% half-width and each knee comes with its interval."""
    columns = [BY_KEY[k] for k in SWEEP_COLUMNS]
    bands = bands or {}
    lines = []
    for s, pts in points.items():
        rows = [(g(p["rate"]), [mean_cell(value_at(p["metrics"], m.key), value_at(p.get("ci95", {}), m.key), m.kind)
                                for m in columns]) for p in pts]
        body = _sweep_body(rows, [label(m) for m in columns])
        lines.append("")
        lines.append(f" {s} (knee: {_knee_text(knees[s], rates)}) ".center(len(body[0]), "="))
        lines += body
    lines.append("")
    lines.append(f"Saturation knee: the highest swept rate up to which SLO attainment stays >= {slo_target * 100:g}%"
                 + (" (mean over seeds; in brackets, read off the 95% band: its lower edge, then its upper edge)"
                    if any(bands.values()) else ""))
    for s, knee in knees.items():
        if knee is None:
            text = f"none (even {g(rates[0])} req/s misses the target)"
        elif knee == rates[-1]:
            text = f">= {g(knee)} req/s (every swept rate meets the target; raise --max-rate)"
        else:
            text = f"{g(knee)} req/s"
        band = bands.get(s)
        if band:
            text += f"  [{_knee_text(band[0], rates)} .. {_knee_text(band[1], rates)}]"
        lines.append(f"  {s:<10} {text}")
    return lines


def _knee_text(knee: float | None, rates: list[float]) -> str:
    return "none" if knee is None else (f">= {g(knee)}" if knee == rates[-1] else g(knee)) + " req/s"
