"""What several commands print: JSON documents, formatted values, plain-text tables, the resolved set-up that
run, compare, sweep and capacity head their text with, the progress bar, and the one-line errors. What only one
command prints lives in that command's module (app/cli/commands/); run's and compare's metrics tables in
`results`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from sim_core import Scenario
from sim_core.expert_parallel import ep_text, pool_ranks_text
from sim_core.links import KV_LINKS
from sim_core.metric_catalog import Metric
from sim_core.tensor_parallel import domains, tp_text

from ..write_problems import read_only
from .usage import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, UsageError, error  # noqa: F401 (what the commands import from here)


# ---------------------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------------------
def jsonable(value):
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(jsonable(doc), indent=2, allow_nan=False) + "\n")


def scenario_doc(scenario: Scenario, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in scenario.model_dump(mode="json").items() if k not in drop}


# ---------------------------------------------------------------------------------------------------------
# Plain-text values and tables
# ---------------------------------------------------------------------------------------------------------
def fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f}"


def g(value: float) -> str:
    return f"{value:g}"


def cell(value, kind: str) -> str:
    """A metric's value as the tables print it, by the catalogue's display kind (a % metric's label carries the
    unit, so its cells are bare numbers)."""
    if value is None:
        return "-"
    if kind == "flag" or isinstance(value, bool):
        return "yes" if value else "no"
    if kind == "count":
        return fmt(int(value))
    if kind == "fraction":
        return pct(value)
    if kind == "average":
        return fmt(value, 1)
    return fmt(value)


def label(metric: Metric, note: str | None = None) -> str:
    """`P99 TTFT (ms)`, `Goodput (req/s, TTFT<=1000ms & TPOT<=100ms)`, `Completed`."""
    inside = ", ".join(x for x in (metric.unit_text, note) if x)
    return f"{metric.label} ({inside})" if inside else metric.label


def print_lines(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")


def _per_scheduler(values: dict[str, str]) -> str:
    """One value if every scheduler has the same, else 'a (fcfs), b (chunked)'."""
    distinct = set(values.values())
    if len(distinct) == 1:
        return next(iter(distinct))
    return ", ".join(f"{v} ({k})" for k, v in values.items())


def setup_lines(scenario: Scenario, resolved: dict, num_requests: int | None, rate_text: str | None = None) -> list[str]:
    """The resolved set-up, one value where every scheduler has the same, else one per scheduler."""
    first = next(iter(resolved.values()))
    su = first.setup
    gpu, model = su.gpu, su.model
    tflops = f"{g(gpu.fp16_tflops)} TFLOPS fp16" + (f" / {g(gpu.fp8_tflops)} fp8" if gpu.fp8_tflops else "")
    tflops += f" / {g(gpu.fp4_tflops)} fp4" if gpu.fp4_tflops else ""
    kv = _per_scheduler({k: f"{r.num_blocks:,} blocks = {r.num_blocks * r.setup.block_size:,} tokens"
                         for k, r in resolved.items()})
    budget = _per_scheduler({k: f"{r.token_budget:,}" for k, r in resolved.items()})
    workload = _workload_lines(scenario, first, num_requests, rate_text)
    rows = [
        ("GPU", f"{gpu.name} ({gpu.key}) x{su.tp}: {g(gpu.mem_gib)} GB, {g(gpu.mem_bw_gbs)} GB/s, {tflops}"),
        ("Model", f"{model.key} ({g(model.published_params_b)}B params), {su.quantization}, tp={su.tp}"),
        ("Weights", f"{su.quantization}: {first.weight_path}"),
        ("KV cache", f"{kv}; {su.block_size} tokens/block"),
        ("Token budget", f"{budget} tokens/step"),
        ("Batching", f"max {su.max_num_seqs} seqs/step, max_model_len {first.max_model_len:,}, "
                     f"preemption {scenario.preemption}"
                     + "".join(f", {k.replace('_', ' ')} {v}" for k, v in _policy_settings(scenario, resolved).items())),
        ("Workload", workload[0]),
        *(("", line) for line in workload[1:]),
        ("SLOs", f"TTFT <= {g(first.slo_ttft_ms)} ms, TPOT <= {g(first.slo_tpot_ms)} ms"),
    ]
    if su.expert_parallel.enabled:
        rows.insert(2, ("Expert par.", ep_text(model, su.expert_parallel, su.tp)))
    across = [(pool.role, pool.setup) for pool in first.deployment if domains(pool.setup.tp, pool.setup.gpu) > 1]
    if across:  # each pool whose tensor-parallel group spans nodes, named by its role in P/D pools
        rows.insert(2, ("Tensor par.", "; ".join((f"{role}: " if role != "replicas" else "")
                                                 + tp_text(s.gpu, s.tp, s.scale_out_link) for role, s in across)))
    if scenario.hardware_profile:
        constants = scenario.hardware_profile.partition(":")[2].replace(",", ", ").replace("=", " ")
        rows.insert(2, ("Profile", f"fitted by sched-sim calibrate: {constants}"))
    if scenario.disaggregated:
        link = KV_LINKS[scenario.kv_link]
        gpus = sum(n * scenario.pool_ranks(p) * scenario.pool_deployment(p)[1]
                   for n, p in ((scenario.prefill_replicas, "prefill"), (scenario.decode_replicas, "decode")))
        on = pool_ranks_text(scenario)
        on += "".join(f", {p} on {hw} x{tp}" for p, (hw, tp) in ((p, scenario.pool_deployment(p))
                                                                   for p in ("prefill", "decode"))) \
            if scenario.heterogeneous else ""
        rows.insert(1, ("Pools", f"{scenario.prefill_replicas} prefill + {scenario.decode_replicas} decode engines "
                                 f"({gpus} GPUs{on}), {scenario.router} router; KV over {link.name}"))
    elif scenario.replicas > 1:
        stale = f", load seen up to {g(scenario.router_staleness_ms)} ms late" if scenario.router_staleness_ms else ""
        rows.insert(1, ("Replicas", f"{scenario.replicas} x the GPUs above ({scenario.replicas * su.tp} GPUs), "
                                    f"{scenario.router} router{stale}"))
    return ["Setup"] + [f"  {k:<13} {v}" for k, v in rows]


def _workload_lines(scenario: Scenario, first, num_requests: int | None, rate_text: str | None) -> list[str]:
    """The Workload rows of the set-up: what arrives and how (a trace, a closed loop, open-loop arrivals at a rate
    or a rate schedule), then the preset's summary and, for the random workload, its length ranges."""
    count = f"{num_requests:,} requests" if num_requests is not None else None
    loop = None
    if scenario.concurrency is not None:  # a closed loop: the requests go out as users free up, at no set rate
        think = f", {g(scenario.think_time_s)} s think time" if scenario.think_time_s else ""
        loop = f"closed loop of {scenario.concurrency:,} users{think}" if scenario.concurrency_mode == "users" \
            else f"closed loop of {scenario.concurrency:,} slots (semaphore){think}"
    if scenario.trace:
        workload = [f"trace {scenario.trace}" + (f": {count}" if count else "") + (f", {loop}" if loop else "")]
    elif loop:
        drawn = f"{scenario.num_requests:,} requests" if scenario.num_requests else \
            f"the requests of {g(scenario.duration)} s at {g(first.rate)} req/s" + (f" ({count})" if count else "")
        workload = [f"{first.preset.name}: {drawn}, {loop}, seed {scenario.seed}", first.preset.summary]
    else:
        arrivals = "Poisson" if first.burstiness == 1 else f"gamma (CV {g(first.burstiness)})"
        if scenario.num_requests:
            span = f"{scenario.num_requests:,} requests"
        else:
            span = f"{g(scenario.duration)} s of arrivals" + (f" ({count})" if count else "")
        rate = rate_text or f"{g(first.rate)} req/s"
        if scenario.rate_schedule is not None:
            rate = f"a rate following {scenario.rate_schedule} (mean {g(first.rate)} req/s)"
        workload = [f"{first.preset.name}: {arrivals} arrivals at {rate}, {span}, seed {scenario.seed}",
                    first.preset.summary]
    if scenario.workload == "random" and not scenario.trace:
        cls = first.preset.classes[0]
        workload.append("lengths uniform in: " + ", ".join(
            f"{what} {d.low:,}" + (f"-{d.high:,}" if d.high != d.low else "") + " tokens"
            for what, d in (("prompt", cls.prompt), ("output", cls.output))))
    return workload


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
             "kv_blocks", "max_model_len", "preemption", "slo_ttft_ms", "slo_tpot_ms", "admission", "prefix_cache",
             "hardware_profile", "rate_schedule", "model_uncertainty", "concurrency", "think_time_s", "isl", "osl",
             "length_range", "length_range_mode", "concurrency_mode"}
    for name in scenario.model_fields_set - shown:
        value = getattr(scenario, name)
        if value != Scenario.model_fields[name].default:
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return dict(sorted(out.items()))


def mean_cell(value, interval, kind: str) -> str:
    """A mean over seeds with its 95% interval's half-width (`interval` [low, high]), or the value alone."""
    if not (isinstance(interval, list) and len(interval) == 2 and isinstance(value, int | float)):
        return cell(value, kind)
    half = (interval[1] - interval[0]) / 2
    return f"{cell(value, kind)} ± {cell(half, kind)}"


def columns(head: list[str], rows: list[list[str]], right: set[int], wrap_last: int = 88) -> list[str]:
    """A plain text table; the last column (free text) wraps at `wrap_last` characters."""
    import textwrap

    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    widths[-1] = min(widths[-1], wrap_last)

    def line(cells):
        return "  ".join(f"{c:>{w}}" if k in right else f"{c:<{w}}"
                         for k, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [line(head), line(["-" * w for w in widths])]
    for r in rows:
        last = textwrap.wrap(r[-1], wrap_last, break_on_hyphens=False) or [""]
        out.append(line(r[:-1] + [last[0]]))
        out += [line([""] * (len(r) - 1) + [more]) for more in last[1:]]
    return out


# ---------------------------------------------------------------------------------------------------------
# Progress (sweep, plan) and output files (run, compare, calibrate)
# ---------------------------------------------------------------------------------------------------------
class Progress:
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


def check_writable(path: str, flag: str = "--trace-out") -> None:
    """Fail before simulating if the file `flag` names cannot be written."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{flag}: {path!r} is a directory")
    if not parent.is_dir():
        raise UsageError(f"{flag}: cannot write {path!r}: directory {str(parent)!r} does not exist")
    if read_only(parent):
        raise UsageError(f"{flag}: cannot write {path!r}: read-only file system")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{flag}: cannot write {path!r}: permission denied")
