"""What the commands print: JSON documents, the set-up and metrics tables, the sweep's per-rate tables, the
`list` tables, the progress bar, and the Perfetto trace files `--trace-out` writes.

The metrics tables render from `sim_core.metric_catalog` (names, units, which rows), the same catalogue the
dashboard's table and `/docs` render; this module only formats the values.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from sim_core import Scenario
from sim_core.links import KV_LINKS
from sim_core.metric_catalog import BY_KEY, METRICS, Metric, table_sections, value_at
from sim_core.validity import run_warnings

from .flags import UsageError


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


def resolved_doc(resolved) -> dict:
    s = resolved.setup
    return {"gpu": s.gpu.key, "model": s.model.key, "quantization": s.quantization, "tp": s.tp,
            "kv_blocks": resolved.num_blocks, "block_size": s.block_size, "token_budget": resolved.token_budget,
            "max_seqs": s.max_num_seqs, "max_model_len": resolved.max_model_len, "rate": resolved.rate,
            "burstiness": resolved.burstiness, "slo_ttft_ms": resolved.slo_ttft_ms,
            "slo_tpot_ms": resolved.slo_tpot_ms, "admission": getattr(resolved, "admission", None),
            "prefix_cache": getattr(resolved, "prefix_cache", None)}


def metric_doc(m: Metric) -> dict:
    """One catalogue entry as `sched-sim list --json` shows it."""
    return {"key": m.doc_key, "label": m.doc_label, "unit": m.unit, "description": m.description,
            "better": m.better, "group": m.group}


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
    kv = _per_scheduler({k: f"{r.num_blocks:,} blocks = {r.num_blocks * r.setup.block_size:,} tokens"
                         for k, r in resolved.items()})
    budget = _per_scheduler({k: f"{r.token_budget:,}" for k, r in resolved.items()})
    count = f"{num_requests:,} requests" if num_requests is not None else None
    if scenario.trace:
        workload = [f"trace {scenario.trace}" + (f": {count}" if count else "")]
    else:
        arrivals = "Poisson" if first.burstiness == 1 else f"gamma (CV {g(first.burstiness)})"
        if scenario.num_requests:
            span = f"{scenario.num_requests:,} requests"
        else:
            span = f"{g(scenario.duration)} s of arrivals" + (f" ({count})" if count else "")
        rate = rate_text or f"{g(first.rate)} req/s"
        workload = [f"{first.preset.name}: {arrivals} arrivals at {rate}, {span}, seed {scenario.seed}",
                    first.preset.summary]
    rows = [
        ("GPU", f"{gpu.name} ({gpu.key}) x{su.tp}: {g(gpu.mem_gib)} GB, {g(gpu.mem_bw_gbs)} GB/s, {tflops}"),
        ("Model", f"{model.key} ({g(model.published_params_b)}B params), {su.quantization}, tp={su.tp}"),
        ("KV cache", f"{kv}; {su.block_size} tokens/block"),
        ("Token budget", f"{budget} tokens/step"),
        ("Batching", f"max {su.max_num_seqs} seqs/step, max_model_len {first.max_model_len:,}, "
                     f"preemption {scenario.preemption}"
                     + "".join(f", {k.replace('_', ' ')} {v}" for k, v in _policy_settings(scenario, resolved).items())),
        ("Workload", workload[0]),
        *(("", line) for line in workload[1:]),
        ("SLOs", f"TTFT <= {g(first.slo_ttft_ms)} ms, TPOT <= {g(first.slo_tpot_ms)} ms"),
    ]
    if scenario.hardware_profile:
        constants = scenario.hardware_profile.partition(":")[2].replace(",", ", ").replace("=", " ")
        rows.insert(2, ("Profile", f"fitted by sched-sim calibrate: {constants}"))
    if scenario.disaggregated:
        link = KV_LINKS[scenario.kv_link]
        gpus = sum(n * scenario.pool_deployment(p)[1] for n, p in ((scenario.prefill_replicas, "prefill"),
                                                                    (scenario.decode_replicas, "decode")))
        on = "".join(f", {p} on {hw} x{tp}" for p, (hw, tp) in ((p, scenario.pool_deployment(p))
                                                                  for p in ("prefill", "decode"))) \
            if scenario.heterogeneous else ""
        rows.insert(1, ("Pools", f"{scenario.prefill_replicas} prefill + {scenario.decode_replicas} decode engines "
                                 f"({gpus} GPUs{on}), {scenario.router} router; KV over {link.name}"))
    elif scenario.replicas > 1:
        stale = f", load seen up to {g(scenario.router_staleness_ms)} ms late" if scenario.router_staleness_ms else ""
        rows.insert(1, ("Replicas", f"{scenario.replicas} x the GPUs above ({scenario.replicas * su.tp} GPUs), "
                                    f"{scenario.router} router{stale}"))
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
             "kv_blocks", "max_model_len", "preemption", "slo_ttft_ms", "slo_tpot_ms", "admission", "prefix_cache",
             "hardware_profile"}
    for name in scenario.model_fields_set - shown:
        value = getattr(scenario, name)
        if value != Scenario.model_fields[name].default:
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return dict(sorted(out.items()))


def _slo_note(slo: dict) -> str:
    return f"TTFT<={g(slo['ttft_ms'])}ms & TPOT<={g(slo['tpot_ms'])}ms"


def _label_notes(runs: list[dict]) -> dict[str, str]:
    """What the labels add for a text reader: the SLOs goodput (and each class's attainment) counted against."""
    slo = runs[0]["slo"]
    goodput = _slo_note(slo)
    if slo.get("by_class"):
        goodput = "each class's SLOs, tightest " + goodput
    if slo.get("transport_overhead_ms"):
        goodput += f", incl. {g(slo['transport_overhead_ms'])}ms transport"
    notes = {"goodput": goodput}
    if slo.get("by_class"):
        for name, c in (runs[0].get("per_class") or {}).items():
            notes[f"per_class.{name}.slo_attainment"] = _slo_note(c["slo"])
    return notes


def metric_rows(metrics: dict[str, dict], ci95: dict[str, dict] | None = None) -> list[tuple[str, list[str]] | str]:
    """The catalogue's table for these runs: (label, one cell per scheduler) rows under section headings (plain
    strings). With `ci95` (runs over several seeds), each mean is followed by its 95% interval's half-width."""
    runs = list(metrics.values())
    intervals = list((ci95 or {}).values()) or [{} for _ in runs]
    notes = _label_notes(runs)
    rows: list[tuple[str, list[str]] | str] = []
    for section in table_sections(runs):
        rows.append(section.title)
        rows += [(label(r.metric, notes.get(r.metric.key)),
                  [_mean_cell(v, _dig(ci, r.metric.key), r.metric.kind) for v, ci in zip(r.values, intervals, strict=True)])
                 for r in section.rows]
    return rows


def _dig(doc: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _mean_cell(value, interval, kind: str) -> str:
    if not (isinstance(interval, list) and len(interval) == 2 and isinstance(value, int | float)):
        return cell(value, kind)
    half = (interval[1] - interval[0]) / 2
    return f"{cell(value, kind)} ± {cell(half, kind)}"


def table(title: str, columns: list[str], rows: list, label_width: int | None = None) -> list[str]:
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


def report(args, base: Scenario, results: dict, drop: tuple[str, ...]) -> None:
    """`run` and `compare`: one JSON document, or the set-up and the metrics side by side."""
    if args.json:
        print_json({"scenario": scenario_doc(base, drop),
                    "schedulers": {s: _scheduler_doc(r) for s, r in results.items()}})
        return
    first = next(iter(results.values()))
    lines = setup_lines(base, {s: r.resolved for s, r in results.items()}, len(first.requests))
    lines.append("")
    seeds = getattr(first, "seeds", None)
    title = "Serving Benchmark Result" + (f", mean ± 95% CI over {len(seeds)} seeds" if seeds else "")
    cis = {s: r.ci95 for s, r in results.items()} if seeds else None
    lines += table(title, list(results), metric_rows({s: r.metrics for s, r in results.items()}, cis))
    for s, r in results.items():
        if "replicas" in r.metrics:
            lines += ["", *replica_lines(s, r.metrics)]
    warned = {s: run_warnings(r) for s, r in results.items()}
    for w in dict.fromkeys(w for ws in warned.values() for w in ws):
        who = [s for s, ws in warned.items() if w in ws]
        lines.append(f"warning: {w}" + (f" [{', '.join(who)}]" if len(results) > 1 and len(who) < len(results) else ""))
    print_lines(lines)


REPLICA_COLUMNS = (("requests", "requests"), ("completed", "completed"), ("served tokens", "served_tokens"),
                   ("GPU busy %", "gpu_busy_fraction"), ("KV used % (mean)", "kv_cache_usage_mean"),
                   ("waiting peak", "waiting_peak"), ("preemptions", "preemptions"))


def replica_lines(scheduler: str, metrics: dict) -> list[str]:
    """Each replica's share of a cluster run (one row per replica)."""
    rows = [[f'{row["replica"]} {row["pool"]}' if row["pool"] != "replicas" else str(row["replica"])] + [pct(row[k]) if k in ("gpu_busy_fraction", "kv_cache_usage_mean")
                                      else f"{row[k]:,}" for _, k in REPLICA_COLUMNS] for row in metrics["replicas"]]
    head = ["replica"] + [h for h, _ in REPLICA_COLUMNS]
    out = [f"{scheduler}: {len(rows)} engines, load imbalance (max / mean served tokens within a pool) "
           f"{metrics['load_imbalance']:.2f}"]
    if "kv_transfer_ms" in metrics:
        t = metrics["kv_transfer_ms"]
        out.append(f"KV transfers: {metrics['kv_transfers']:,}, "
                   f"{metrics['kv_transfer_bytes'] / 1e9:,.2f} GB, mean {fmt(t['mean'])} ms, p99 {fmt(t['p99'])} ms, "
                   f"link busy {pct(metrics['kv_link_utilization'])}%")
    return out + _columns(head + [""], [r + [""] for r in rows], right=set(range(1, len(head))))


def _scheduler_doc(r) -> dict:
    """`metrics` (means over seeds, with --seeds) and, with --seeds, `ci95` beside them and the seeds run."""
    doc = {"resolved": resolved_doc(r.resolved), "metrics": r.metrics}
    if getattr(r, "seeds", None):
        doc["ci95"] = r.ci95
        doc["seeds"] = r.seeds
    doc["warnings"] = run_warnings(r)
    return doc


# ---------------------------------------------------------------------------------------------------------
# The sweep: one table per scheduler, a row per rate
# ---------------------------------------------------------------------------------------------------------
SWEEP_COLUMNS = ("goodput", "slo_attainment", "ttft_ms.p99", "tpot_ms.p99", "itl_ms.p99", "completed", "rejected",
                 "preemptions")


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
        rows = [(g(p["rate"]), [_mean_cell(value_at(p["metrics"], m.key), value_at(p.get("ci95", {}), m.key), m.kind)
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


# ---------------------------------------------------------------------------------------------------------
# `list`: what the names mean
# ---------------------------------------------------------------------------------------------------------
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
        last = textwrap.wrap(r[-1], wrap_last, break_on_hyphens=False) or [""]
        out.append(line(r[:-1] + [last[0]]))
        out += [line([""] * (len(r) - 1) + [more]) for more in last[1:]]
    return out


def catalog_lines(cat: dict) -> list[str]:
    lines = ["GPUs (--hardware)"]
    lines += ["  " + x for x in _columns(
        ["key", "name", "memory", "bandwidth", "TFLOPS fp16", "fp8", "default model"],
        [[c["key"], c["name"], f"{g(c['memory_gb'])} GB", f"{g(c['bandwidth_gbs'])} GB/s", g(c["fp16_tflops"]),
          g(c["fp8_tflops"]) if c["fp8_tflops"] else "-", c["default_model"]] for c in cat["gpus"]],
        right={2, 3, 4, 5})]
    lines += ["", "Models (--model)"]
    lines += ["  " + x for x in _columns(
        ["key", "params", "layers", "context", "hugging face"],
        [[m["key"], f"{g(m['params_b'])}B" + (f" ({m['experts']} experts)" if m["experts"] > 1 else ""),
          str(m["layers"]), f"{m['max_context']:,}", m["hf_name"]] for m in cat["models"]],
        right={1, 2, 3})]
    lines += ["", "Workload presets (--workload; --trace FILE replays a CSV instead)"]
    lines += ["  " + x for x in _columns(
        ["name", "rate (req/s)", "SLO TTFT", "SLO TPOT", "summary"],
        [[p["name"], g(p["rate"]), f"{g(p['slo_ttft_ms'])} ms", f"{g(p['slo_tpot_ms'])} ms", p["summary"]]
         for p in cat["workloads"]],
        right={1, 2, 3})]
    lines += ["", "Schedulers (--scheduler, --schedulers)"]
    lines += ["  " + x for x in _columns(["name", "summary"], [[s["name"], s["summary"]] for s in cat["schedulers"]],
                                         right=set())]
    lines += ["", "Metrics (schedulers.<name>.metrics.<key> in --json output; % metrics are fractions 0-1 there)"]
    lines += metric_lines()
    return lines


def metric_lines() -> list[str]:
    """The catalogue, by table section: name, unit, key and meaning."""
    out = []
    for group in dict.fromkeys(m.group for m in METRICS):
        rows = [[m.doc_label, m.unit, m.doc_key, m.description] for m in METRICS if m.group == group]
        out += ["", f"  {group}"] + ["    " + x for x in _columns(["name", "unit", "key", "meaning"], rows, set(),
                                                                  wrap_last=72)]
    return out


# ---------------------------------------------------------------------------------------------------------
# Trace files (--trace-out)
# ---------------------------------------------------------------------------------------------------------
def check_writable(path: str) -> None:
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


def write_trace(result, path: str, out) -> None:
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
# step-time
# ---------------------------------------------------------------------------------------------------------
def step_time_lines(doc: dict) -> list[str]:
    """One step's time and its components, largest first, with their shares."""
    batch = []
    if doc["prefill_tokens"]:
        batch.append(f"a {doc['prefill_tokens']:,}-token prefill chunk after {doc['context_tokens']:,} cached")
    if doc["decode_seqs"]:
        batch.append(f"{doc['decode_seqs']:,} decoding sequences of {doc['decode_context']:,} tokens of context")
    formats = doc["quantization"] + (", fp8 KV cache" if doc.get("kv_cache_dtype") == "fp8" else "")
    lines = [f"{doc['model']} ({formats}) on {doc['hardware']}, tp={doc['tp']}: " + " + ".join(batch),
             f"step time {fmt(doc['step_ms'])} ms, {doc['bound']}-bound (MBU {pct(doc['mbu'])}%, "
             f"MFU {pct(doc['mfu'])}%)", ""]
    total = doc["step_ms"]
    rows = sorted(doc["components_ms"].items(), key=lambda kv: -kv[1])
    lines += ["  " + x for x in _columns(["component", "ms", "share %"],
                                         [[k, fmt(v, 3), pct(v / total if total else 0.0)] for k, v in rows],
                                         right={1, 2})]
    lines += [f"warning: {w}" for w in doc.get("warnings", [])]
    return lines


# ---------------------------------------------------------------------------------------------------------
# calibrate
# ---------------------------------------------------------------------------------------------------------
def calibrate_lines(doc: dict, out: str) -> list[str]:
    """The fitted constants beside the catalog's, and how well each set predicts the measurements."""
    fit = doc["fit"]
    what = ("steps" if fit["kind"] == "steps_csv" else "benchmark statistics")
    lines = [f"{doc['model']} ({doc['quantization']}) on {doc['hardware']}, tp={doc['tp']}: fitted on "
             f"{fit['observations']:,} {what} from {fit['source']}", ""]
    rows = [[k, g(fit["catalog_constants"][k]), g(v), "fitted" if k in fit["fitted"] else "catalog's"]
            for k, v in doc["constants"].items()]
    lines += ["  " + x for x in _columns(["constant", "catalog", "profile", ""], rows, right={1, 2})]
    lines.append("")
    rows = [[name, f"{fit[key]['median_abs_pct_error']:.2f}", f"{fit[key]['max_abs_pct_error']:.2f}",
             fit[key]["worst"]] for name, key in (("catalog", "catalog_residuals"), ("profile", "residuals"))]
    lines += ["  " + x for x in _columns(["residuals", "median |err| %", "max |err| %", "worst"], rows,
                                         right={1, 2})]
    if fit.get("note"):
        lines.append(f"note: {fit['note']}")
    if fit.get("weakly_determined"):
        lines.append(f"note: a 10% change in {', '.join(fit['weakly_determined'])} moves no measured step by 1%: "
                     f"the rows barely constrain {'it' if len(fit['weakly_determined']) == 1 else 'them'} (add "
                     f"batch shapes that lean on {'it' if len(fit['weakly_determined']) == 1 else 'them'})")
    lines += ["", f"wrote {out}; use it with --hardware-profile {out} (run, compare, sweep, step-time)"]
    return lines


# ---------------------------------------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------------------------------------
def _err(value) -> str:
    return "skipped" if value is None else f"{value * 100:+.1f}%"


def _abs_pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def validate_doc(rows, summary: dict, speedups: list[dict]) -> dict:
    return {"summary": summary, "speedups": speedups,
            "rows": [{"group": c.group, "source": c.source, "what": c.what, "reference": c.reference,
                      "predicted": c.predicted, "unit": c.unit, "error": c.error, "note": c.note} for c in rows]}


def validate_lines(doc: dict) -> list[str]:
    lines = ["Cost model against validation/*.csv (validation/SOURCES.md says what each row measured)", ""]
    lines += ["  " + x for x in _columns(
        ["group", "rows", "skipped", "median |error|", "worst |error|"],
        [[g, str(s["rows"]), str(s["skipped"]), _abs_pct(s["median_abs_error"]), _abs_pct(s["worst_abs_error"])]
         for g, s in doc["summary"].items()], right={1, 2, 3, 4})]
    lines += ["", "Speed-ups (tp/fp8 rows over their baseline)"]
    lines += ["  " + x for x in _columns(
        ["variant", "vs", "measured", "predicted", "series"],
        [[s["variant"], s["baseline"], f"{s['measured']:.2f}x", f"{s['predicted']:.2f}x", s["series"]]
         for s in doc["speedups"]], right={2, 3})]
    lines += ["", "Rows"]
    lines += ["  " + x for x in _columns(
        ["group", "reference", "predicted", "unit", "error", "row (note)"],
        [[r["group"], f"{r['reference']:.4g}", "-" if r["predicted"] is None else f"{r['predicted']:.4g}",
          r["unit"], _err(r["error"]), r["what"] + (f" ({r['note']})" if r["note"] else "")]
         for r in doc["rows"]], right={1, 2, 4}, wrap_last=100)]
    return lines


def validate_markdown(doc: dict) -> list[str]:
    """The same tables in Markdown, for the README."""
    def md(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| group | rows | skipped | median abs. error | worst abs. error |", "|---|--:|--:|--:|--:|"]
    lines += [f"| {g} | {s['rows']} | {s['skipped']} | {_abs_pct(s['median_abs_error'])} | "
              f"{_abs_pct(s['worst_abs_error'])} |" for g, s in doc["summary"].items()]
    lines += ["", "| series | variant | vs | measured | predicted |", "|---|---|---|--:|--:|"]
    lines += [f"| {md(s['series'])} | {md(s['variant'])} | {md(s['baseline'])} | {s['measured']:.2f}x | "
              f"{s['predicted']:.2f}x |" for s in doc["speedups"]]
    lines += ["", "<details><summary>Every row</summary>", "",
              "| group | row | reference | predicted | unit | error | note |", "|---|---|--:|--:|---|--:|---|"]
    lines += [f"| {r['group']} | {md(r['what'])} | {r['reference']:.4g} | "
              f"{'-' if r['predicted'] is None else format(r['predicted'], '.4g')} | {md(r['unit'])} | "
              f"{_err(r['error'])} | {md(r['note'])} |" for r in doc["rows"]]
    lines += ["", "</details>"]
    return lines


# ---------------------------------------------------------------------------------------------------------
# plan: one row per deployment, cheapest first
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
    out = [f"Plans for {base.model} on {traffic} at {g(rate)} req/s, >= {pct(target)}% SLO attainment "
           f"({len(result.plans)} found, {result.simulations} simulations; * = Pareto front of cost and P99 TTFT)"]
    out += _columns(head + [""], [r + [""] for r in rows], right=set(range(2, len(head)))) if rows else [
        "  no deployment meets the SLO within the limits"]
    for i in result.infeasible:
        budget = f" budget {i.token_budget}" if i.token_budget else ""
        topo = f" P:D {i.topology}" if i.topology != "colocated" else ""
        out.append(f"  not {i.hardware} tp{i.tp} {i.scheduler}{budget}{topo}: {i.reason}")
    return out


def deployment_text(s: Scenario) -> str:
    """'3 x h100 tp1 chunked', or '2P + 4D x h100 tp1 chunked' for disaggregated pools; the budget if set."""
    engines = f"{s.prefill_replicas}P + {s.decode_replicas}D" if s.disaggregated else str(s.replicas)
    budget = f" budget {s.token_budget}" if s.token_budget is not None else ""
    return f"{engines} x {s.hardware} tp{s.tp} {s.scheduler}{budget}"
