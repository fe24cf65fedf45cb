"""The commands (run, compare, sweep, serve, list), the parser that wires their flags, and `main`.

Modules only some commands need are imported inside them: `serve` imports the web stack (uvicorn, FastAPI,
Jinja2, Plotly), `sweep` the process pool; `run` loads neither.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sim_core import (
    GPUS,
    MODELS,
    PRESETS,
    SCHEDULER_NAMES,
    Scenario,
    ScenarioError,
    SeedRuns,
    SetupError,
    SimulationError,
    TraceError,
    resolve,
    run,
    run_seeds,
)
from sim_core.metric_catalog import METRICS
from sim_core.policies import BY_NAME
from sim_core.quoting import quote
from sim_core.runner import least_engine_steps, make_requests
from sim_core.scenario import MAX_REQUESTS, MIN_RATE

from . import report
from .flags import (
    Parser,
    UsageError,
    add_model_flags,
    add_scenario_flags,
    build_scenario,
    flag_name,
    fraction,
    port,
    positive_float,
    query_scenario,
    scenario_error_text,
    scenario_input,
    scheduler_list,
    setup_error_text,
    trace_error_text,
    workers,
)

PROG = "sched-sim"
EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130
DEFAULT_SLO_TARGET = 0.9
# The rate grid's inputs (as sim_core.sweep.rate_grid names them) and the flags that give them.
RATE_GRID_FLAGS = {"rate_min": "--min-rate", "rate_max": "--max-rate", "rate_step": "--step"}
# Runs of at least NOTE_STEPS engine steps get a note with the estimate first; workloads under NOTE_REQUESTS
# requests (or traces under NOTE_TRACE_BYTES) are not generated an extra time to check.
NOTE_STEPS = 5_000_000
NOTE_REQUESTS = 2_000
NOTE_TRACE_BYTES = 1 << 20


def _check_setup(scenario: Scenario) -> None:
    """Fail before simulating: impossible deployments, missing traces, runs too large to hold in memory."""
    resolved = resolve(scenario)
    if scenario.trace is not None:
        path = Path(scenario.trace)
        if not path.exists():
            raise TraceError(f"no such file {quote(scenario.trace)}")
        if not path.is_file():
            raise TraceError(f"{quote(scenario.trace)} is not a regular file (a trace is a CSV or JSONL file)")
    elif scenario.num_requests is None:
        expected = resolved.rate * scenario.duration
        if expected > MAX_REQUESTS:
            raise UsageError(
                f"--duration: {report.g(scenario.duration)} s at {report.g(resolved.rate)} req/s is about "
                f"{expected:,.0f} requests; at most {MAX_REQUESTS:,} (shorten --duration or lower --rate)")


def _note_ignored_with_trace(scenario: Scenario) -> None:
    if scenario.trace is None:
        return
    ignored = [flag_name(f) for f in ("burstiness", "duration", "seed") if f in scenario.model_fields_set]
    if ignored:
        print(f"note: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect with --trace "
              f"(the trace sets the arrivals and lengths; --rate scales its gaps)", file=sys.stderr)


def _trace_rate(scenario: Scenario, searched: str) -> Scenario:
    """A search over arrival rates replays a trace at each rate tried, its recorded gaps scaled (--rate: where it
    starts; default: the trace's own mean rate, made explicit so the plans' scenario strings reproduce it)."""
    from sim_core.workload import own_rate

    if scenario.trace is None:
        return scenario
    _check_setup(scenario)
    rate = own_rate(make_requests(scenario.model_copy(update={"rate": None}), resolve(scenario)))
    if rate is None:
        raise UsageError(f"--trace: {searched} replays the trace at other arrival rates, by scaling the gaps "
                         "between its arrivals; this trace's requests all arrive at one instant")
    return scenario if scenario.rate is not None else scenario.model_copy(update={"rate": rate})


def _note_large_run(scenarios: dict[str, Scenario]) -> None:
    """The CLI runs anything (a user's own machine), but says beforehand when a run will take a while."""
    first = next(iter(scenarios.values()))
    expected = first.num_requests or resolve(first).rate * first.duration  # sessions: agent turns are not seen
    if first.trace is None and expected < NOTE_REQUESTS:
        return  # small enough to skip generating the workload twice
    if first.trace is not None and Path(first.trace).stat().st_size < NOTE_TRACE_BYTES:
        return
    reqs = make_requests(first, resolve(first))
    steps = sum(least_engine_steps(reqs, resolve(sc).token_budget) for sc in scenarios.values()) * first.seeds
    if steps >= NOTE_STEPS:
        runs = len(scenarios) * first.seeds
        print(f"note: {len(reqs):,} requests, at least {steps:,} engine steps over {runs} run{'s' * (runs > 1)} "
              f"(prompt + output tokens / token budget); at a few microseconds a step this takes a while",
              file=sys.stderr)


def _run_schedulers(args: argparse.Namespace, schedulers: list[str], record_events: bool) -> tuple[Scenario, dict]:
    base = build_scenario(args)
    _note_ignored_with_trace(base)
    scenarios = {s: build_scenario(args, scheduler=s) for s in schedulers}
    record_events = record_events and base.engines == 1  # a cluster's trace shows its engines' steps, no events
    for sc in scenarios.values():
        _check_setup(sc)
    _note_large_run(scenarios)
    if base.seeds > 1:
        return base, {s: run_seeds(sc, record_events=record_events) for s, sc in scenarios.items()}
    results = {s: run(sc, record_events=record_events) for s, sc in scenarios.items()}
    return base, results


def _first_seed(result):
    """A trace shows one run: with --seeds, the first seed's."""
    return result.results[0] if isinstance(result, SeedRuns) else result


# ---------------------------------------------------------------------------------------------------------
# run, compare
# ---------------------------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    if args.trace_out:
        report.check_writable(args.trace_out)
    scheduler = build_scenario(args).scheduler
    base, results = _run_schedulers(args, [scheduler], record_events=bool(args.trace_out))
    report.report(args, base, results, drop=())
    if args.trace_out:
        report.write_trace(_first_seed(results[scheduler]), args.trace_out, sys.stderr if args.json else sys.stdout)
    return 0


def _chosen_schedulers(args: argparse.Namespace) -> list[str]:
    """--schedulers, else the ones --scenario names (its schedulers, or its scheduler), else every scheduler."""
    if args.schedulers:
        return args.schedulers
    if getattr(args, "scenario_query", None):
        fields, schedulers = query_scenario(args.scenario_query)
        if schedulers or "scheduler" in fields:
            try:
                return scheduler_list(",".join(schedulers or [fields["scheduler"]]))
            except argparse.ArgumentTypeError as e:
                raise UsageError(f"--scenario: schedulers {e}") from None
    return list(SCHEDULER_NAMES)


def cmd_compare(args: argparse.Namespace) -> int:
    args.schedulers = _chosen_schedulers(args)
    paths = {s: report.trace_path_for(args.trace_out, s) for s in args.schedulers} if args.trace_out else {}
    for p in paths.values():
        report.check_writable(p)
    base, results = _run_schedulers(args, args.schedulers, record_events=bool(paths))
    report.report(args, base, results, drop=("scheduler",))
    for s, p in paths.items():
        report.write_trace(_first_seed(results[s]), p, sys.stderr if args.json else sys.stdout)
    return 0


# ---------------------------------------------------------------------------------------------------------
# Executors: where sweeps, capacity searches and plans run their simulations
# ---------------------------------------------------------------------------------------------------------
def _add_executor_flags(p: argparse.ArgumentParser) -> None:
    from sim_core.executor import EXECUTORS

    g = p.add_argument_group("executor", "where the simulations run")
    g.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: this machine's processes (default); ray: a Ray cluster (pip install 'sched-sim[ray]')")
    g.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="with --executor ray: the cluster to join ('auto' for the one `ray start` made on this node, "
                        "ray://HOST:10001 for a remote head); default: start a local one")
    g.add_argument("--workers", type=workers, default=None, metavar="N",
                   help="worker processes (local), or CPUs of the local Ray cluster (default: one per CPU core)")


def _executor(args: argparse.Namespace):
    from sim_core.executor import ExecutorError, make_executor

    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address: only with --executor ray")
    try:
        return make_executor(args.executor, workers=args.workers, address=args.ray_address)
    except ExecutorError as e:
        raise UsageError(str(e)) from None


# ---------------------------------------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------------------------------------
def _rate_grid(args: argparse.Namespace) -> list[float]:
    from sim_core.sweep import rate_grid

    try:
        return rate_grid(args.min_rate, args.max_rate, args.step)
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, RATE_GRID_FLAGS)) from None


def cmd_sweep(args: argparse.Namespace) -> int:
    # Imported here: only a sweep needs the process pool (and multiprocessing behind it).
    import signal
    import threading
    from concurrent.futures.process import BrokenProcessPool

    from sim_core.sweep import knee_interval, knee_rate, sweep

    args.schedulers = _chosen_schedulers(args)
    rates = _rate_grid(args)
    base = _trace_rate(build_scenario(args), "a sweep")
    for s in args.schedulers:
        for rate in (rates[0], rates[-1]):
            _check_setup(base.model_copy(update={"scheduler": s, "rate": rate}))
    progress = report.Progress(len(args.schedulers) * len(rates) * base.seeds)
    main_pid = os.getpid()

    def on_sigint(signum, frame):
        if os.getpid() != main_pid:  # a forked worker: leave quietly, the parent reports the interrupt
            os._exit(EXIT_INTERRUPTED)
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main_thread else None
    try:
        with _executor(args) as executor:
            points = sweep(base, args.schedulers, rates, on_point=progress.update, executor=executor)
    except BrokenProcessPool:
        return _error("a sweep worker process died (out of memory?); try fewer --workers or a smaller scenario",
                      EXIT_INTERNAL)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
    knees = {s: knee_rate(pts, args.slo_target) for s, pts in points.items()}
    bands = {s: knee_interval(pts, args.slo_target) for s, pts in points.items()}
    if args.json:
        report.print_json({
            "scenario": report.scenario_doc(base, ("scheduler", "rate")),
            "rates": rates,
            "slo_target": args.slo_target,
            "schedulers": {s: {"points": pts, "knee_rate": knees[s]}
                           | ({"knee_interval": list(bands[s])} if bands[s] else {}) for s, pts in points.items()},
        })
        return 0
    resolved = {s: resolve(base.model_copy(update={"scheduler": s, "rate": rates[0]})) for s in args.schedulers}
    rate_text = f"{report.g(rates[0])} to {report.g(rates[-1])} req/s ({len(rates)} rates)"
    lines = report.setup_lines(base, resolved, None, rate_text)
    lines += report.sweep_lines(points, knees, rates, args.slo_target, bands)
    report.print_lines(lines)
    return 0


# ---------------------------------------------------------------------------------------------------------
# capacity
# ---------------------------------------------------------------------------------------------------------
def cmd_capacity(args: argparse.Namespace) -> int:
    from sim_core.capacity import capacity

    base = _trace_rate(build_scenario(args), "a capacity search")
    _check_setup(base)
    with _executor(args) as executor:
        cap = capacity(base, args.target, args.tolerance, executor=executor)
    seeds = [base.seed + k for k in range(base.seeds)]
    if args.json:
        report.print_json({"scenario": report.scenario_doc(base, ("rate", "seeds")), "target_attainment": args.target,
                           "max_rate": {"mean": cap.mean, "ci95": list(cap.ci95) if cap.ci95 else None,
                                        "per_seed": cap.per_seed, "seeds": seeds}, "simulations": cap.runs})
        return 0
    r = resolve(base)
    lines = report.setup_lines(base, {base.scheduler: r}, None, "searched")
    lines.append("")
    if cap.mean is None:
        lines.append(f"No rate down to {MIN_RATE:g} req/s meets {report.pct(args.target)}% SLO attainment "
                     f"(TTFT <= {report.g(r.slo_ttft_ms)} ms, TPOT <= {report.g(r.slo_tpot_ms)} ms) with seed(s) "
                     f"{', '.join(str(s) for s, v in zip(seeds, cap.per_seed, strict=True) if v is None)}.")
    else:
        interval = f" (95% CI {report.g(cap.ci95[0])} - {report.g(cap.ci95[1])})" if cap.ci95 else ""
        lines.append(f"Capacity: {report.g(cap.mean)} req/s{interval} at >= {report.pct(args.target)}% SLO "
                     f"attainment (TTFT <= {report.g(r.slo_ttft_ms)} ms, TPOT <= {report.g(r.slo_tpot_ms)} ms)")
        lines.append("  per seed: " + ", ".join(f"seed {s}: {report.g(v)}" for s, v in zip(seeds, cap.per_seed,
                                                                                          strict=True)))
    lines.append(f"  {cap.runs} simulations, rates bracketed then bisected to within "
                 f"{report.pct(args.tolerance)}%")
    report.print_lines(lines)
    return 0


# ---------------------------------------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------------------------------------
PLAN_FIXED = ("hardware", "tp", "scheduler", "replicas", "prefill_replicas", "decode_replicas")  # the search sets them


PLAN_INPUT_FLAGS = {"gpus": "gpus", "tp": "tp", "schedulers": "schedulers", "token_budgets": "token_budgets",
                    "topologies": "topologies", "max_gpus": "max_gpus", "attainment": "attainment"}


def _plan_inputs(args: argparse.Namespace):
    """The plan flags through sim_core.plan_space (the dashboard's Plan form and /api/plan parse the same way)."""
    from sim_core.plan_space import parse_plan_inputs

    try:
        return parse_plan_inputs({name: getattr(args, f"plan__{name}") for name in PLAN_INPUT_FLAGS})
    except ScenarioError as e:
        raise UsageError("; ".join(f"{flag_name(f)}: {m}" for f, m in e.problems)) from None


def plan_doc(rate: float, target: float, result) -> dict:
    """`sched-sim plan --json`: plans cheapest first, each with the scenario query string that runs it."""
    docs = [{"scenario": p.scenario.to_query(), "gpus": p.gpus, "cost_per_hour": p.cost_per_hour,
             "cost_per_mtok": p.cost_per_mtok, "replica_capacity": p.replica_capacity, "pareto": p.pareto,
             "topology": p.candidate.topology if p.candidate else "colocated",
             "attainment_low": p.attainment_low, "metrics": p.metrics} for p in result.plans]
    return {"rate": rate, "target_attainment": target, "plans": docs,
            "infeasible": [vars(i) for i in result.infeasible], "simulations": result.simulations,
            "candidates": result.candidates}


def cmd_plan(args: argparse.Namespace) -> int:
    from sim_core.planner import no_plan_text, plan

    inputs = _plan_inputs(args)
    base = build_scenario(args)
    if base.model is None:
        raise UsageError("--model: a plan compares GPUs serving one model; name it (sched-sim list shows them)")
    base = _trace_rate(base, "a plan")
    rate = base.rate or resolve(base).rate
    progress = report.Progress(inputs.candidates() * base.seeds * 3)
    with _executor(args) as executor:
        result = plan(base, rate, inputs.space(), target=inputs.attainment, executor=executor,
                      on_progress=progress.update)
    no_plan = None if result.plans else no_plan_text(result, base.model, inputs.max_gpus, inputs.attainment)
    if args.json:
        report.print_json({**plan_doc(rate, inputs.attainment, result), **({"no_plan": no_plan} if no_plan else {})})
    else:
        report.print_lines(report.plan_lines(base, rate, inputs.attainment, result))
    if no_plan:
        raise UsageError(f"no plan: {no_plan}")
    return 0


# ---------------------------------------------------------------------------------------------------------
# serve, list
# ---------------------------------------------------------------------------------------------------------
def _web_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("app.web") is not None
    except ImportError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    if not _web_available():
        return _error("the dashboard (app.web) is not installed in this copy of sched-sim", EXIT_INTERNAL)
    import uvicorn  # imported here: the other commands do not need the web stack

    uvicorn.run("app.web:app", host=args.host, port=args.port)
    return 0


def _catalog() -> dict:
    return {
        "gpus": [{"key": g.key, "name": g.name, "memory_gb": g.mem_gib, "bandwidth_gbs": g.mem_bw_gbs,
                  "fp16_tflops": g.fp16_tflops, "fp8_tflops": g.fp8_tflops, "default_model": g.default_model}
                 for g in GPUS.values()],
        "models": [{"key": m.key, "hf_name": m.hf_name, "params_b": m.published_params_b, "layers": m.layers,
                    "max_context": m.max_context, "experts": m.experts} for m in MODELS.values()],
        "workloads": [{"name": p.name, "rate": p.rate, "burstiness": p.burstiness, "slo_ttft_ms": p.slo_ttft_ms,
                       "slo_tpot_ms": p.slo_tpot_ms, "summary": p.summary} for p in PRESETS.values()],
        "schedulers": [{"name": s.name, "summary": s.summary} for s in (BY_NAME[n] for n in SCHEDULER_NAMES)],
        "metrics": [report.metric_doc(m) for m in METRICS],
    }


def cmd_step_time(args: argparse.Namespace) -> int:
    from sim_core.step_time import StepShape, parse_step_shape, step_time_doc

    try:
        shape = parse_step_shape(scenario_input(args, StepShape))
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, model=StepShape)) from None
    doc = step_time_doc(shape)
    if args.json:
        report.print_json(doc)
    else:
        report.print_lines(report.step_time_lines(doc))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import json

    from sim_core.calibration import CalibrationError, CalibrationTarget, calibrate, parse_target

    try:
        target = parse_target(scenario_input(args, CalibrationTarget))
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, model=CalibrationTarget)) from None
    path = Path(args.from_file)
    if not path.is_file():
        raise UsageError(f"--from: no such file {quote(args.from_file)}")
    report.check_writable(args.out)
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        doc = calibrate(target, text, args.from_file)
    except CalibrationError as e:
        raise UsageError(f"--from {args.from_file}: {e}") from None
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if args.json:
        report.print_json(doc)
    else:
        report.print_lines(report.calibrate_lines(doc, args.out))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from sim_core import validation

    directory = Path(args.dir) if args.dir else validation.VALIDATION_DIR
    if not directory.is_dir():
        raise UsageError(f"--dir: no such directory {quote(str(directory))}")
    rows = validation.checks(directory, simulate=not args.quick)
    doc = report.validate_doc(rows, validation.summary(rows), validation.speedups(rows))
    if args.json:
        report.print_json(doc)
    elif args.markdown:
        report.print_lines(report.validate_markdown(doc))
    else:
        report.print_lines(report.validate_lines(doc))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    cat = _catalog()
    if args.json:
        report.print_json(cat)
        return 0
    report.print_lines(report.catalog_lines(cat))
    return 0


# ---------------------------------------------------------------------------------------------------------
# Parser and entry point
# ---------------------------------------------------------------------------------------------------------
def _add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The search space's flags, one per sim_core.plan_space.PlanInputs field (its help and bounds come from there)."""
    from sim_core.plan_space import LIST_INPUTS, PlanInputs

    g = p.add_argument_group("search space", "what a plan may choose from; lists are comma-separated")
    for name, info in PlanInputs.model_fields.items():
        default = info.default
        shown = ",".join(str(v) for v in default) if isinstance(default, tuple) else f"{default:g}"
        flags = [flag_name(name)] + (["--scheduler"] if name == "schedulers" else [])
        g.add_argument(*flags, dest=f"plan__{name}", default=None,
                       metavar="A,B" if name in LIST_INPUTS else name.upper(),
                       help=f"{info.description} (default: {shown or 'none'})".replace("%", "%%"))


class _VersionAction(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata parses package metadata)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only` (the command a command line names), the flags of the commands that
    read a model's fields off modules the run does not otherwise import (plan, step-time, calibrate) only for that
    command: a `run` need not import the planner, the step-time model and the calibrator to parse its flags."""
    parser = Parser(prog=PROG, allow_abbrev=False,
                    description="Simulate LLM-serving schedulers: latency, throughput and goodput of a policy on "
                                "a GPU, model and workload. 'sched-sim list' shows the valid names and what each "
                                "metric measures.")
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)

    p = add("run", "simulate one scheduler on one scenario and print its metrics")
    add_scenario_flags(p)
    p.add_argument("--trace-out", metavar="FILE", help="write a Perfetto / Chrome trace of the run to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_run)

    p = add("compare", "simulate several schedulers on the same scenario and requests, side by side")
    p.add_argument("--schedulers", "--scheduler", type=scheduler_list, default=None,
                   metavar="A,B,...", help=f"comma-separated schedulers (default: those --scenario names, else all: {','.join(SCHEDULER_NAMES)})")
    add_scenario_flags(p, exclude=("scheduler",))
    p.add_argument("--trace-out", metavar="FILE",
                   help="write one Perfetto trace per scheduler (FILE with the scheduler's name before the extension)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_compare)

    p = add("sweep", "simulate schedulers over a grid of arrival rates and find each one's saturation knee")
    p.add_argument("--schedulers", "--scheduler", type=scheduler_list, default=None,
                   metavar="A,B,...", help=f"comma-separated schedulers (default: those --scenario names, else all: {','.join(SCHEDULER_NAMES)})")
    grid = p.add_argument_group("rate grid", "rates min, min+step, ... up to max (requests/s)")
    grid.add_argument("--min-rate", type=positive_float, required=True, metavar="RATE", help="lowest arrival rate")
    grid.add_argument("--max-rate", type=positive_float, required=True, metavar="RATE", help="highest arrival rate")
    grid.add_argument("--step", type=positive_float, default=None, metavar="RATE",
                      help="rate increment (default: (max - min) / 8, nine rates)")
    p.add_argument("--slo-target", type=fraction, default=DEFAULT_SLO_TARGET, metavar="FRACTION",
                   help=f"SLO attainment the knee must keep, 0-1 (default: {DEFAULT_SLO_TARGET})")
    _add_executor_flags(p)
    add_scenario_flags(p, exclude=("scheduler", "rate"))
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_sweep)

    def wanted(name: str) -> bool:
        return only is None or only == name

    p = add("capacity", "the highest arrival rate a deployment serves within its SLOs, over seeds")
    p.add_argument("--target", type=fraction, default=DEFAULT_SLO_TARGET, metavar="FRACTION",
                   help=f"SLO attainment to keep, 0-1 (default: {DEFAULT_SLO_TARGET})")
    p.add_argument("--tolerance", type=fraction, default=0.03, metavar="FRACTION",
                   help="stop when the rate is known within this fraction (default: 0.03)")
    _add_executor_flags(p)
    add_scenario_flags(p)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.set_defaults(func=cmd_capacity)

    p = add("plan", "the cheapest deployments (GPU, TP, scheduler, replicas) that meet the SLOs at a rate")
    if wanted("plan"):
        _add_plan_flags(p)
        _add_executor_flags(p)
        add_scenario_flags(p, exclude=PLAN_FIXED)
        p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.set_defaults(func=cmd_plan)

    p = add("serve", "start the web dashboard")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8000, help="port (default: 8000)")
    p.set_defaults(func=cmd_serve)

    p = add("step-time", "predict one engine step's time and where it goes (GEMMs, attention, elementwise, lm "
                         "head, communication, CPU overhead)")
    if wanted("step-time"):
        from sim_core.step_time import StepShape  # a small module: pydantic model and the cost model's entry

        add_model_flags(p, StepShape, "step", "the deployment and the step's batch: one prefill chunk plus "
                                              "decoding sequences")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.set_defaults(func=cmd_step_time)

    p = add("calibrate", "fit the cost model's efficiency and overhead constants to your own hardware from measured "
                         "steps or a vllm bench serve result, and write a profile for --hardware-profile")
    if wanted("calibrate"):
        from sim_core.calibration import CalibrationTarget  # the engine loads only on use

        p.add_argument("--from", dest="from_file", required=True, metavar="FILE",
                       help="a CSV of measured steps (prefill_tokens,context_tokens,decode_seqs,decode_context,"
                            "step_ms) or a `vllm bench serve --save-result --save-detailed` JSON")
        p.add_argument("--out", required=True, metavar="FILE", help="where to write the profile (JSON)")
        add_model_flags(p, CalibrationTarget, "deployment", "what the measurements were taken on; for a benchmark "
                                                            "replay, --token-budget and --max-seqs are the server's "
                                                            "--max-num-batched-tokens and --max-num-seqs")
        p.add_argument("--json", action="store_true", help="print the profile document instead of tables")
    p.set_defaults(func=cmd_calibrate)

    p = add("validate", "predict every row of the validation set (public kernel, step and serving measurements) "
                        "and print the errors, per row and per group")
    p.add_argument("--dir", metavar="DIR", help="directory of kernels.csv, steps.csv, serving.csv, tp_fp8.csv "
                                                "(default: the repository's validation/)")
    p.add_argument("--quick", action="store_true", help="skip the rows that need a simulated benchmark run")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables (the README's)")
    p.set_defaults(func=cmd_validate)

    p = add("list", "list the GPUs, models, workload presets, schedulers and metrics (name, unit, meaning)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_list)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("sched-sim")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def _error(message: str, code: int = EXIT_USAGE) -> int:
    """One line on stderr; control characters escaped (a trace or a path may carry terminal escapes)."""
    line = " ".join(message.split())
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    print(f"error: {line}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        words = sys.argv[1:] if argv is None else [str(a) for a in argv]
        args = build_parser(only=next((w for w in words if not w.startswith("-")), None)).parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handlers below, not at exit
        return code
    except UsageError as e:
        return _error(str(e))
    except ScenarioError as e:
        return _error(scenario_error_text(e))
    except SetupError as e:
        return _error(setup_error_text(e))
    except TraceError as e:
        path = getattr(args, "scenario__trace", None) if args is not None else None
        return _error(trace_error_text(e, path))
    except BrokenPipeError:  # e.g. `sched-sim list | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INTERNAL
    except OSError as e:  # a file the scenario names could not be read
        trace = getattr(args, "scenario__trace", None) if args is not None else None
        if trace is not None and e.filename is not None and str(e.filename) == str(trace):
            return _error(f"--trace {trace}: cannot read it: {e.strerror}")
        return _error(f"{e.filename or ''}: {e.strerror or e}", EXIT_INTERNAL)
    except SimulationError as e:
        return _error(f"internal error in the simulator (please report it with the command line): {e}", EXIT_INTERNAL)
    except SystemExit as e:  # --help / --version
        return e.code if isinstance(e.code, int) else (0 if e.code is None else _error(str(e.code)))
    except KeyboardInterrupt:
        print(("\n" if sys.stderr.isatty() else "") + "interrupted", file=sys.stderr)  # after a progress bar
        return EXIT_INTERRUPTED
