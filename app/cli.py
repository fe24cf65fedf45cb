"""The `sched-sim` command line.

    sched-sim run --scheduler chunked --workload rag --hardware a100 [--trace-out trace.json] [--json]
    sched-sim compare --schedulers fcfs,chunked --workload rag --hardware rtx3050 --duration 10 [--json]
    sched-sim sweep --schedulers fcfs,chunked --hardware rtx3050 --min-rate 2 --max-rate 18 --step 4 [--json]
    sched-sim serve [--host 127.0.0.1] [--port 8000]
    sched-sim list [--json]

The scenario flags are generated from `sim_core.Scenario`'s fields (`token_budget` -> `--token-budget`, help from
the field's description), parsed as strings and validated by `sim_core.parse_scenario`, so the command line, the
dashboard's URLs and the JSON API accept exactly the same things. User errors exit with status 2 and one line on
stderr naming the flag; an interrupt exits with 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import threading
import types
import typing
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from sim_core import (
    GPUS,
    MODELS,
    PRESETS,
    SCHEDULER_NAMES,
    Scenario,
    ScenarioError,
    SetupError,
    SimulationError,
    TraceError,
    parse_scenario,
    resolve,
    run,
)
from sim_core.policies import BY_NAME
from sim_core.scenario import MAX_REQUESTS

PROG = "sched-sim"
EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130
# The rate grid's inputs (as sim_core.sweep.rate_grid names them) and the flags that give them.
RATE_GRID_FLAGS = {"rate_min": "--min-rate", "rate_max": "--max-rate", "rate_step": "--step"}
DEFAULT_SLO_TARGET = 0.9


class UsageError(Exception):
    """A user error: printed as one `error: ...` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump) raised as UsageError so `main` can return 2."""

    def error(self, message: str) -> typing.NoReturn:
        message = re.sub(r"^argument (\S+?)(/\S+)?: ", r"\1: ", message)
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------------------------------
# Scenario flags, generated from the pydantic model
# ---------------------------------------------------------------------------------------------------------
def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _literal_choices(annotation) -> tuple | None:
    """The allowed values of a Literal field (looking inside Optional[...]); None for other types."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _literal_choices(arg)
            if found is not None:
                return found
    return None


def _num_text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _bounds_text(info) -> str:
    lo = hi = None
    for m in info.metadata:
        if getattr(m, "ge", None) is not None:
            lo = f">= {_num_text(m.ge)}"
        if getattr(m, "gt", None) is not None:
            lo = f"> {_num_text(m.gt)}"
        if getattr(m, "le", None) is not None:
            hi = f"<= {_num_text(m.le)}"
        if getattr(m, "lt", None) is not None:
            hi = f"< {_num_text(m.lt)}"
    return ", ".join(x for x in (lo, hi) if x)


def _add_scenario_flags(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    group = parser.add_argument_group("scenario", "every scenario field; unset ones take the workload's or GPU's default")
    for name, info in Scenario.model_fields.items():
        if name in exclude:
            continue
        parts = [info.description or name]
        choices = _literal_choices(info.annotation)
        if choices:
            parts.append("one of: " + ", ".join(str(c) for c in choices))
        bounds = _bounds_text(info)
        if bounds:
            parts.append(bounds)
        if info.default is not None:
            parts.append(f"default: {info.default}")
        extra = {}
        if _is_bool(info.annotation):
            # `--adaptive-budget` alone means true; `--adaptive-budget false` is accepted too.
            metavar, extra = "{true,false}", {"nargs": "?", "const": "true"}
        elif name == "trace":
            metavar = "FILE"
        elif choices and len(choices) <= 5:
            metavar = "{" + ",".join(str(c) for c in choices) + "}"
        else:
            metavar = name.upper()
        group.add_argument(flag_name(name), dest=f"scenario__{name}", metavar=metavar, default=None,
                           help="; ".join(parts).replace("%", "%%"), **extra)


def _is_bool(annotation) -> bool:
    if annotation is bool:
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and bool in typing.get_args(annotation)


def _scenario_input(args: argparse.Namespace) -> dict[str, str]:
    """The scenario fields given on the command line, as strings."""
    out = {}
    for key, value in vars(args).items():
        if key.startswith("scenario__") and value is not None:
            field = key[len("scenario__"):]
            choices = _literal_choices(Scenario.model_fields[field].annotation)
            # Literal[8, 16, ...] fields only match ints (pydantic does not coerce "16" into a Literal int).
            if choices and all(isinstance(c, int) for c in choices) and re.fullmatch(r"[+-]?\d+", value.strip()):
                value = int(value)
            out[field] = value
    return out


def _unquote_numbers(message: str) -> str:
    return re.sub(r"\(got '([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)'\)", r"(got \1)", message)


_TYPE_ERRORS = (("Input should be a valid integer", "an integer"), ("Input should be a valid number", "a number"))


def _scenario_error_text(err: ScenarioError, rename: dict[str, str] | None = None) -> str:
    """Each problem as `--flag: message`; `rename` maps names that are not scenario fields (the rate grid's
    rate_min, ...) to their flags, in the field and in the message."""
    rename = rename or {}
    parts = []
    for field, message in err.problems:
        info = Scenario.model_fields.get(field)
        flag = rename.get(field) or (flag_name(field) if info is not None else field)
        for prefix, kind in _TYPE_ERRORS:
            if info is not None and message.startswith(prefix):
                got = re.search(r"\(got .*\)$", message)
                bounds = _bounds_text(info)
                message = f"must be {kind}" + (f" ({bounds})" if bounds else "") + (f" {got.group(0)}" if got else "")
        for name, other in rename.items():
            message = re.sub(rf"\b{name}\b", other, message)
        parts.append(f"{flag}: {_unquote_numbers(message)}")
    return "; ".join(parts)


_FIELD_WORDS = re.compile(r"\b(" + "|".join(sorted((f for f in Scenario.model_fields if "_" in f or f == "tp"),
                                                    key=len, reverse=True)) + r")\b")


def _setup_error_text(err: SetupError) -> str:
    """Name the flag a SetupError is about, and spell field names as flags."""
    msg = str(err)
    for prefix in (f"{err.field}=", f"{err.field} "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return f"{flag_name(err.field)}: {_FIELD_WORDS.sub(lambda m: flag_name(m.group(1)), msg)}"


def _trace_error_text(err: TraceError, path: str | None) -> str:
    msg = re.sub(r"^trace: ", "", str(err))
    return f"--trace {path}: {msg}" if path and "no such file" not in msg else f"--trace: {msg}"


def _build_scenario(args: argparse.Namespace, **fixed) -> Scenario:
    data = _scenario_input(args)
    data.update(fixed)
    return parse_scenario(data)


def _check_setup(scenario: Scenario) -> None:
    """Fail before simulating: impossible deployments, missing traces, runs too large to hold in memory."""
    resolved = resolve(scenario)
    if scenario.trace is not None:
        if not Path(scenario.trace).is_file():
            raise TraceError(f"no such file {scenario.trace!r}")
    elif scenario.num_requests is None:
        expected = resolved.rate * scenario.duration
        if expected > MAX_REQUESTS:
            raise UsageError(
                f"--duration: {_g(scenario.duration)} s at {_g(resolved.rate)} req/s is about {expected:,.0f} "
                f"requests; at most {MAX_REQUESTS:,} (shorten --duration or lower --rate)")


# ---------------------------------------------------------------------------------------------------------
# Small parsers for the non-scenario flags
# ---------------------------------------------------------------------------------------------------------
def _number(text: str, kind=float) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a{'n integer' if kind is int else ' number'} (got {text!r})") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text!r})")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0 (got {text})")
    return value


def _fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, a fraction of requests (got {text})")
    return value


def _workers(text: str) -> int:
    value = int(_number(text, int))
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1024 (got {text})")
    return value


def _port(text: str) -> int:
    value = int(_number(text, int))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535 (got {text})")
    return value


def _scheduler_list(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"give a comma-separated list of: {', '.join(SCHEDULER_NAMES)}")
    for name in names:
        if name not in SCHEDULER_NAMES:
            raise argparse.ArgumentTypeError(
                f"unknown scheduler {name!r}; choose from {', '.join(SCHEDULER_NAMES)}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise argparse.ArgumentTypeError(f"{', '.join(dup)} given more than once")
    return names


# ---------------------------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------------------------
def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _print_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(_jsonable(doc), indent=2, allow_nan=False) + "\n")


def _scenario_doc(scenario: Scenario, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in scenario.model_dump(mode="json").items() if k not in drop}


def _resolved_doc(resolved) -> dict:
    s = resolved.setup
    return {"gpu": s.gpu.key, "model": s.model.key, "quantization": s.quantization, "tp": s.tp,
            "kv_blocks": resolved.num_blocks, "block_size": s.block_size, "token_budget": resolved.token_budget,
            "max_seqs": s.max_num_seqs, "max_model_len": resolved.max_model_len, "rate": resolved.rate,
            "burstiness": resolved.burstiness, "slo_ttft_ms": resolved.slo_ttft_ms,
            "slo_tpot_ms": resolved.slo_tpot_ms, "admission": getattr(resolved, "admission", None),
            "prefix_cache": getattr(resolved, "prefix_cache", None)}


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f}"


def _g(value: float) -> str:
    return f"{value:g}"


def _per_scheduler(values: dict[str, str]) -> str:
    """One value if every scheduler has the same, else 'a (fcfs), b (chunked)'."""
    distinct = set(values.values())
    if len(distinct) == 1:
        return next(iter(distinct))
    return ", ".join(f"{v} ({k})" for k, v in values.items())


def _setup_lines(scenario: Scenario, resolved: dict, num_requests: int | None, rate_text: str | None = None) -> list[str]:
    """The resolved set-up, one value where every scheduler has the same, else one per scheduler."""
    first = next(iter(resolved.values()))
    su = first.setup
    gpu, model = su.gpu, su.model
    tflops = f"{_g(gpu.fp16_tflops)} TFLOPS fp16" + (f" / {_g(gpu.fp8_tflops)} fp8" if gpu.fp8_tflops else "")
    kv = _per_scheduler({k: f"{r.num_blocks:,} blocks = {r.num_blocks * r.setup.block_size:,} tokens"
                         for k, r in resolved.items()})
    budget = _per_scheduler({k: f"{r.token_budget:,}" for k, r in resolved.items()})
    count = f"{num_requests:,} requests" if num_requests is not None else None
    if scenario.trace:
        workload = [f"trace {scenario.trace}" + (f": {count}" if count else "")]
    else:
        arrivals = "Poisson" if first.burstiness == 1 else f"gamma (CV {_g(first.burstiness)})"
        if scenario.num_requests:
            span = f"{scenario.num_requests:,} requests"
        else:
            span = f"{_g(scenario.duration)} s of arrivals" + (f" ({count})" if count else "")
        rate = rate_text or f"{_g(first.rate)} req/s"
        workload = [f"{first.preset.name}: {arrivals} arrivals at {rate}, {span}, seed {scenario.seed}",
                    first.preset.summary]
    rows = [
        ("GPU", f"{gpu.name} ({gpu.key}) x{su.tp}: {_g(gpu.mem_gib)} GB, {_g(gpu.mem_bw_gbs)} GB/s, {tflops}"),
        ("Model", f"{model.key} ({_g(model.published_params_b)}B params), {su.quantization}, tp={su.tp}"),
        ("KV cache", f"{kv}; {su.block_size} tokens/block"),
        ("Token budget", f"{budget} tokens/step"),
        ("Batching", f"max {su.max_num_seqs} seqs/step, max_model_len {first.max_model_len:,}, "
                     f"preemption {scenario.preemption}"
                     + "".join(f", {k.replace('_', ' ')} {v}" for k, v in _policy_settings(scenario, resolved).items())),
        ("Workload", workload[0]),
        *(("", line) for line in workload[1:]),
        ("SLOs", f"TTFT <= {_g(first.slo_ttft_ms)} ms, TPOT <= {_g(first.slo_tpot_ms)} ms"),
    ]
    return ["Setup"] + [f"  {k:<13} {v}" for k, v in rows]


def _policy_settings(scenario: Scenario, resolved: dict) -> dict[str, str]:
    """Scheduler knobs worth showing: admission control (per scheduler) and any non-default policy field."""
    out = {}
    admission = {k: getattr(r, "admission", None) for k, r in resolved.items()}
    if any(a not in (None, "admit") for a in admission.values()):
        out["admission"] = _per_scheduler({k: str(a) for k, a in admission.items()})
    cache = {k: getattr(r, "prefix_cache", False) for k, r in resolved.items()}
    if any(cache.values()):
        out["prefix_cache"] = _per_scheduler({k: "on" if c else "off" for k, c in cache.items()})
    shown = {"scheduler", "hardware", "model", "quantization", "tp", "workload", "trace", "rate", "burstiness",
             "duration", "num_requests", "seed", "token_budget", "max_seqs", "block_size", "gpu_memory_utilization",
             "kv_blocks", "max_model_len", "preemption", "slo_ttft_ms", "slo_tpot_ms", "admission", "prefix_cache"}
    for name in scenario.model_fields_set - shown:
        value = getattr(scenario, name)
        if value != Scenario.model_fields[name].default:
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return dict(sorted(out.items()))


def _metric_rows(metrics: dict[str, dict]) -> list[tuple[str, list[str]] | str]:
    """Rows (label, one cell per scheduler), with section headings as plain strings."""
    ms = list(metrics.values())

    def row(label: str, get, fmt=_fmt) -> tuple[str, list[str]]:
        return label, [fmt(get(m)) for m in ms]

    def has(key: str) -> bool:
        return any(key in m for m in ms)

    slo = ms[0]["slo"]
    slo_text = f"TTFT<={_g(slo['ttft_ms'])}ms & TPOT<={_g(slo['tpot_ms'])}ms"
    if slo.get("by_class"):
        slo_text = "each class's SLOs, tightest " + slo_text
    if slo.get("transport_overhead_ms"):
        slo_text += f", incl. {_g(slo['transport_overhead_ms'])}ms transport"
    rows: list = [
        row("Requests", lambda m: m["num_requests"]),
        row("Completed", lambda m: m["completed"]),
        row("Rejected", lambda m: m["rejected"]),
    ]
    reasons = sorted({r for m in ms for r in m.get("rejected_reasons", {})})
    for reason in reasons:
        rows.append(row(f"  {reason}", lambda m, reason=reason: m["rejected_reasons"].get(reason, 0)))
    if has("degraded") and any(m.get("degraded") for m in ms):
        rows.append(row("Degraded (relaxed TTFT target)", lambda m: m.get("degraded")))
    rows += [
        row("Benchmark duration (s)", lambda m: m["duration_s"]),
        row("Request throughput (req/s)", lambda m: m["request_throughput"]),
        row("Output throughput (tok/s)", lambda m: m["output_throughput"]),
        row("Total token throughput (tok/s)", lambda m: m["total_token_throughput"]),
        row(f"Goodput (req/s, {slo_text})", lambda m: m["goodput"]),
    ]
    if has("token_goodput"):
        rows.append(row("Token goodput (tok/s on time)", lambda m: m.get("token_goodput")))
    rows.append(row("SLO attainment (%)", lambda m: m["slo_attainment"], _pct))
    for key, title in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token (excl. 1st token)"),
                       ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        short = key[:-3].upper()
        rows.append(title)
        for stat, name in (("mean", "Mean"), ("p50", "Median"), ("p90", "P90"), ("p99", "P99")):
            rows.append(row(f"{name} {short} (ms)", lambda m, key=key, stat=stat: m[key][stat]))
    rows += [
        "Engine",
        row("MBU (%)", lambda m: m["mbu"], _pct),
        row("MFU (%)", lambda m: m["mfu"], _pct),
        row("GPU busy (%)", lambda m: m["gpu_busy_fraction"], _pct),
        row("KV cache use, mean (%)", lambda m: m["kv_cache_usage"]["mean"], _pct),
        row("KV cache use, peak (%)", lambda m: m["kv_cache_usage"]["peak"], _pct),
        row("Waiting requests, mean", lambda m: m["waiting"]["mean"], lambda v: _fmt(v, 1)),
        row("Waiting requests, peak", lambda m: m["waiting"]["peak"]),
        row("Preemptions", lambda m: m["preemptions"]),
        row("Preempted requests", lambda m: m["preempted_requests"]),
        row("Steps", lambda m: m["steps"]),
    ]
    if any(m.get("prefix_cache") for m in ms):  # schedulers without the cache show "-"
        def cached(key):
            return lambda m: m.get(key) if m.get("prefix_cache") else None

        rows += [
            "Prefix cache",
            row("Prefix cache hit rate (%)", cached("prefix_cache_hit_rate"), _pct),
            row("Prefill tokens saved", cached("prefill_tokens_saved")),
            row("Cache evictions", cached("cache_evictions")),
        ]
    classes = list(dict.fromkeys(c for m in ms for c in m.get("per_class", {})))
    if len(classes) > 1:
        rows.append("Per request class")
        for c in classes:
            def cls(m, c=c):
                return m.get("per_class", {}).get(c) or {}

            target = (cls(ms[0]).get("slo") or {}) if slo.get("by_class") else {}
            own = f", TTFT<={_g(target['ttft_ms'])}ms & TPOT<={_g(target['tpot_ms'])}ms" if target else ""
            rows += [
                row(f"{c}: requests (completed)",
                    lambda m, cls=cls: f"{_fmt(cls(m).get('requests'))} ({_fmt(cls(m).get('completed'))})", str),
                row(f"{c}: SLO attainment (%{own})", lambda m, cls=cls: cls(m).get("slo_attainment"), _pct),
                row(f"{c}: P99 TTFT (ms)", lambda m, cls=cls: (cls(m).get("ttft_ms") or {}).get("p99")),
                row(f"{c}: P99 E2EL (ms)", lambda m, cls=cls: (cls(m).get("e2el_ms") or {}).get("p99")),
            ]
    return rows


def _table(title: str, columns: list[str], rows: list, label_width: int | None = None) -> list[str]:
    label_w = label_width or max(len(r[0]) for r in rows if isinstance(r, tuple))
    widths = [max(len(c), *(len(r[1][k]) for r in rows if isinstance(r, tuple))) for k, c in enumerate(columns)]
    total = label_w + sum(w + 2 for w in widths)
    out = [f" {title} ".center(total, "="), " " * label_w + "".join(f"  {c:>{w}}" for c, w in zip(columns, widths, strict=True))]
    for r in rows:
        if isinstance(r, str):
            out.append(f" {r} ".center(total, "-"))
        else:
            out.append(f"{r[0]:<{label_w}}" + "".join(f"  {v:>{w}}" for v, w in zip(r[1], widths, strict=True)))
    out.append("=" * total)
    return out


def _print_lines(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------------
# Trace output paths
# ---------------------------------------------------------------------------------------------------------
def _check_writable(path: str) -> None:
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"--trace-out: {path!r} is a directory")
    if not parent.is_dir():
        raise UsageError(f"--trace-out: cannot write {path!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"--trace-out: cannot write {path!r}: permission denied")


def trace_path_for(path: str, scheduler: str) -> str:
    """`trace.json` -> `trace-fcfs.json` (`run.trace.json` -> `run-fcfs.trace.json`)."""
    p = Path(path)
    name = p.name
    suffix = ".trace.json" if name.endswith(".trace.json") and name != ".trace.json" else p.suffix
    stem = name[: len(name) - len(suffix)] if suffix else name
    return str(p.with_name(f"{stem}-{scheduler}{suffix}"))


def _write_trace(result, path: str, out) -> None:
    from sim_core.trace_export import write_chrome_trace

    try:
        meta = write_chrome_trace(result, path)
    except OSError as e:
        raise UsageError(f"--trace-out: cannot write {path!r}: {e.strerror or e}") from None
    size = Path(path).stat().st_size
    print(f"wrote {path} ({meta['events']:,} events, {size / 1e6:.1f} MB) - open it at https://ui.perfetto.dev",
          file=out)
    for note in meta["notes"]:
        print(f"note: {path}: {note}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------------------
def _note_ignored_with_trace(scenario: Scenario) -> None:
    if scenario.trace is None:
        return
    ignored = [flag_name(f) for f in ("rate", "burstiness", "duration", "seed") if f in scenario.model_fields_set]
    if ignored:
        print(f"note: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect with --trace "
              f"(the trace sets the arrivals and lengths)", file=sys.stderr)


def _run_schedulers(args: argparse.Namespace, schedulers: list[str], record_events: bool) -> tuple[Scenario, dict]:
    base = _build_scenario(args)
    _note_ignored_with_trace(base)
    scenarios = {s: _build_scenario(args, scheduler=s) for s in schedulers}
    for sc in scenarios.values():
        _check_setup(sc)
    results = {s: run(sc, record_events=record_events) for s, sc in scenarios.items()}
    return base, results


def _report(args, base: Scenario, results: dict, drop: tuple[str, ...]) -> None:
    if args.json:
        _print_json({
            "scenario": _scenario_doc(base, drop),
            "schedulers": {s: {"resolved": _resolved_doc(r.resolved), "metrics": r.metrics} for s, r in results.items()},
        })
        return
    first = next(iter(results.values()))
    lines = _setup_lines(base, {s: r.resolved for s, r in results.items()}, len(first.requests))
    lines.append("")
    lines += _table("Serving Benchmark Result", list(results), _metric_rows({s: r.metrics for s, r in results.items()}))
    _print_lines(lines)


def cmd_run(args: argparse.Namespace) -> int:
    if args.trace_out:
        _check_writable(args.trace_out)
    scheduler = _build_scenario(args).scheduler
    base, results = _run_schedulers(args, [scheduler], record_events=bool(args.trace_out))
    _report(args, base, results, drop=())
    if args.trace_out:
        _write_trace(results[scheduler], args.trace_out, sys.stderr if args.json else sys.stdout)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    paths = {s: trace_path_for(args.trace_out, s) for s in args.schedulers} if args.trace_out else {}
    for p in paths.values():
        _check_writable(p)
    base, results = _run_schedulers(args, args.schedulers, record_events=bool(paths))
    _report(args, base, results, drop=("scheduler",))
    for s, p in paths.items():
        _write_trace(results[s], p, sys.stderr if args.json else sys.stdout)
    return 0


class _Progress:
    """`[#####.....] 7/10` on stderr, redrawn in place; silent when stderr is not a terminal."""

    WIDTH = 30

    def __init__(self, total: int):
        self.total = total
        self.enabled = sys.stderr.isatty()
        self.update(0, total)

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _rate_grid(args) -> list[float]:
    from sim_core.sweep import rate_grid

    try:
        return rate_grid(args.min_rate, args.max_rate, args.step)
    except ScenarioError as e:
        raise UsageError(_scenario_error_text(e, RATE_GRID_FLAGS)) from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from sim_core.sweep import knee_rate, sweep

    rates = _rate_grid(args)
    base = _build_scenario(args)
    if base.trace is not None:
        raise UsageError("--trace: a sweep varies the arrival rate, which a trace fixes; sweep a workload preset")
    for s in args.schedulers:
        for rate in (rates[0], rates[-1]):
            _check_setup(base.model_copy(update={"scheduler": s, "rate": rate}))
    progress = _Progress(len(args.schedulers) * len(rates))
    main_pid = os.getpid()

    def on_sigint(signum, frame):
        if os.getpid() != main_pid:  # a forked worker: leave quietly, the parent reports the interrupt
            os._exit(EXIT_INTERRUPTED)
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main_thread else None
    try:
        points = sweep(base, args.schedulers, rates, workers=args.workers, on_point=progress.update)
    except BrokenProcessPool:
        return _error("a sweep worker process died (out of memory?); try fewer --workers or a smaller scenario",
                      EXIT_INTERNAL)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
    knees = {s: knee_rate(pts, args.slo_target) for s, pts in points.items()}
    if args.json:
        _print_json({
            "scenario": _scenario_doc(base, ("scheduler", "rate")),
            "rates": rates,
            "slo_target": args.slo_target,
            "schedulers": {s: {"points": pts, "knee_rate": knees[s]} for s, pts in points.items()},
        })
        return 0
    resolved = {s: resolve(base.model_copy(update={"scheduler": s, "rate": rates[0]})) for s in args.schedulers}
    rate_text = f"{_g(rates[0])} to {_g(rates[-1])} req/s ({len(rates)} rates)"
    lines = _setup_lines(base, resolved, None, rate_text)
    target = f"{args.slo_target * 100:g}%"
    for s, pts in points.items():
        rows = []
        for p in pts:
            m = p["metrics"]
            rows.append((_g(p["rate"]), [
                _fmt(m["goodput"]), _pct(m["slo_attainment"]), _fmt(m["ttft_ms"]["p99"]),
                _fmt(m["tpot_ms"]["p99"]), _fmt(m["itl_ms"]["p99"]), _fmt(m["completed"]), _fmt(m["rejected"]),
                _fmt(m["preemptions"]),
            ]))
        columns = ["goodput (req/s)", "SLO attain (%)", "p99 TTFT (ms)", "p99 TPOT (ms)", "p99 ITL (ms)",
                   "completed", "rejected", "preemptions"]
        knee = knees[s]
        knee_text = "none" if knee is None else (f">= {_g(knee)}" if knee == rates[-1] else _g(knee)) + " req/s"
        body = _sweep_body(rows, columns)
        lines.append("")
        lines.append(f" {s} (knee: {knee_text}) ".center(len(body[0]), "="))
        lines += body
    lines.append("")
    lines.append(f"Saturation knee: the highest swept rate up to which SLO attainment stays >= {target}")
    for s, knee in knees.items():
        if knee is None:
            text = f"none (even {_g(rates[0])} req/s misses the target)"
        elif knee == rates[-1]:
            text = f">= {_g(knee)} req/s (every swept rate meets the target; raise --max-rate)"
        else:
            text = f"{_g(knee)} req/s"
        lines.append(f"  {s:<10} {text}")
    _print_lines(lines)
    return 0


def _sweep_body(rows: list[tuple[str, list[str]]], columns: list[str]) -> list[str]:
    head = ["rate (req/s)"] + columns
    cells = [[r[0]] + r[1] for r in rows]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(head)]
    out = ["  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(f"{v:>{w}}" for v, w in zip(c, widths, strict=True)) for c in cells]
    return out


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
    }


def _columns(head: list[str], rows: list[list[str]], right: set[int], wrap_last: int = 88) -> list[str]:
    """A plain text table; the last column (free text) wraps at `wrap_last` characters."""
    import textwrap

    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    widths[-1] = min(widths[-1], wrap_last)

    def line(cells):
        return "  ".join(f"{c:>{w}}" if k in right else f"{c:<{w}}"
                         for k, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [line(head), line(["-" * w for w in widths])]
    for r in rows:
        last = textwrap.wrap(r[-1], wrap_last) or [""]
        out.append(line(r[:-1] + [last[0]]))
        out += [line([""] * (len(r) - 1) + [more]) for more in last[1:]]
    return out


def cmd_list(args: argparse.Namespace) -> int:
    cat = _catalog()
    if args.json:
        _print_json(cat)
        return 0
    lines = ["GPUs (--hardware)"]
    lines += ["  " + x for x in _columns(
        ["key", "name", "memory", "bandwidth", "TFLOPS fp16", "fp8", "default model"],
        [[g["key"], g["name"], f"{_g(g['memory_gb'])} GB", f"{_g(g['bandwidth_gbs'])} GB/s", _g(g["fp16_tflops"]),
          _g(g["fp8_tflops"]) if g["fp8_tflops"] else "-", g["default_model"]] for g in cat["gpus"]],
        right={2, 3, 4, 5})]
    lines += ["", "Models (--model)"]
    lines += ["  " + x for x in _columns(
        ["key", "params", "layers", "context", "hugging face"],
        [[m["key"], f"{_g(m['params_b'])}B" + (f" ({m['experts']} experts)" if m["experts"] > 1 else ""),
          str(m["layers"]), f"{m['max_context']:,}", m["hf_name"]] for m in cat["models"]],
        right={1, 2, 3})]
    lines += ["", "Workload presets (--workload; --trace FILE replays a CSV instead)"]
    lines += ["  " + x for x in _columns(
        ["name", "rate (req/s)", "SLO TTFT", "SLO TPOT", "summary"],
        [[p["name"], _g(p["rate"]), f"{_g(p['slo_ttft_ms'])} ms", f"{_g(p['slo_tpot_ms'])} ms", p["summary"]]
         for p in cat["workloads"]],
        right={1, 2, 3})]
    lines += ["", "Schedulers (--scheduler, --schedulers)"]
    lines += ["  " + x for x in _columns(["name", "summary"], [[s["name"], s["summary"]] for s in cat["schedulers"]],
                                         right=set())]
    _print_lines(lines)
    return 0


# ---------------------------------------------------------------------------------------------------------
# Parser and entry point
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, allow_abbrev=False,
                     description="Simulate LLM-serving schedulers: latency, throughput and goodput of a policy on "
                                 "a GPU, model and workload. 'sched-sim list' shows the valid names.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)

    p = add("run", "simulate one scheduler on one scenario and print its metrics")
    _add_scenario_flags(p)
    p.add_argument("--trace-out", metavar="FILE", help="write a Perfetto / Chrome trace of the run to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_run)

    p = add("compare", "simulate several schedulers on the same scenario and requests, side by side")
    p.add_argument("--schedulers", "--scheduler", type=_scheduler_list, default=list(SCHEDULER_NAMES),
                   metavar="A,B,...", help=f"comma-separated schedulers (default: all: {','.join(SCHEDULER_NAMES)})")
    _add_scenario_flags(p, exclude=("scheduler",))
    p.add_argument("--trace-out", metavar="FILE",
                   help="write one Perfetto trace per scheduler (FILE with the scheduler's name before the extension)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_compare)

    p = add("sweep", "simulate schedulers over a grid of arrival rates and find each one's saturation knee")
    p.add_argument("--schedulers", "--scheduler", type=_scheduler_list, default=list(SCHEDULER_NAMES),
                   metavar="A,B,...", help=f"comma-separated schedulers (default: all: {','.join(SCHEDULER_NAMES)})")
    grid = p.add_argument_group("rate grid", "rates min, min+step, ... up to max (requests/s)")
    grid.add_argument("--min-rate", type=_positive_float, required=True, metavar="RATE", help="lowest arrival rate")
    grid.add_argument("--max-rate", type=_positive_float, required=True, metavar="RATE", help="highest arrival rate")
    grid.add_argument("--step", type=_positive_float, default=None, metavar="RATE",
                      help="rate increment (default: (max - min) / 8, nine rates)")
    p.add_argument("--slo-target", type=_fraction, default=DEFAULT_SLO_TARGET, metavar="FRACTION",
                   help=f"SLO attainment the knee must keep, 0-1 (default: {DEFAULT_SLO_TARGET})")
    p.add_argument("--workers", type=_workers, default=None, metavar="N",
                   help="worker processes (default: one per CPU core)")
    _add_scenario_flags(p, exclude=("scheduler", "rate"))
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.set_defaults(func=cmd_sweep)

    p = add("serve", "start the web dashboard")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port (default: 8000)")
    p.set_defaults(func=cmd_serve)

    p = add("list", "list the GPUs, models, workload presets and schedulers")
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
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        args = build_parser().parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handlers below, not at exit
        return code
    except UsageError as e:
        return _error(str(e))
    except ScenarioError as e:
        return _error(_scenario_error_text(e))
    except SetupError as e:
        return _error(_setup_error_text(e))
    except TraceError as e:
        path = getattr(args, "scenario__trace", None) if args is not None else None
        return _error(_trace_error_text(e, path))
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


if __name__ == "__main__":
    sys.exit(main())
