"""What `run` and `compare` print: one JSON document, or the set-up and the metrics side by side (a column per
scheduler), each cluster run's per-replica table, and the Perfetto trace files `--trace-out` writes.

The metrics tables render from `sim_core.metric_catalog` (names, units, which rows), the same catalogue the
dashboard's table and `/docs` render; this module only formats the values.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sim_core import Scenario
from sim_core.expert_parallel import ep_report
from sim_core.metric_catalog import BY_KEY, table_sections, value_at
from sim_core.studies import model_error
from sim_core.tensor_parallel import tp_report
from sim_core.trace_export import write_chrome_trace
from sim_core.validity import REJECTED_PREFIX, run_warnings

from .flags import UsageError
from .report import (
    columns,
    fmt,
    g,
    label,
    mean_cell,
    pct,
    print_json,
    print_lines,
    scenario_doc,
    setup_lines,
)
from .simulate import first_seed, model_ensembles


def resolved_doc(resolved) -> dict:
    s = resolved.setup
    return {"gpu": s.gpu.key, "model": s.model.key, "quantization": s.quantization,
            "weight_path": getattr(resolved, "weight_path", ""), "tp": s.tp,
            "kv_blocks": resolved.num_blocks, "block_size": s.block_size, "token_budget": resolved.token_budget,
            "max_seqs": s.max_num_seqs, "max_model_len": resolved.max_model_len, "rate": resolved.rate,
            "burstiness": resolved.burstiness, "slo_ttft_ms": resolved.slo_ttft_ms,
            "slo_tpot_ms": resolved.slo_tpot_ms, "admission": getattr(resolved, "admission", None),
            "prefix_cache": getattr(resolved, "prefix_cache", None), **s.kv_report(),
            **ep_report(s.model, s.expert_parallel, s.tp), **tp_report(s.gpu, s.tp, s.scale_out_link),
            **_pool_tp_reports(resolved)}


def _pool_tp_reports(resolved) -> dict:
    """P/D pools whose tensor-parallel group spans nodes: {"pools_tensor_parallel": {role: tp_report}}."""
    pools = {p.role: tp_report(p.setup.gpu, p.setup.tp, p.setup.scale_out_link)
             for p in resolved.deployment if p.role != "replicas"}
    pools = {role: doc for role, doc in pools.items() if doc}
    return {"pools_tensor_parallel": pools} if pools else {}


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
                  [mean_cell(v, _dig(ci, r.metric.key), r.metric.kind) for v, ci in zip(r.values, intervals, strict=True)])
                 for r in section.rows]
    return rows


def bounds_lines(metrics: dict[str, dict]) -> list[str]:
    """A line per scheduler saying how much of what a clairvoyant scheduler could reach it reached
    (metrics.bounds, sim_core/bounds.py)."""
    lines = []
    for name, m in metrics.items():
        b = m.get("bounds")
        if not b:
            continue
        parts = []
        if b["goodput_fraction"] is not None:
            parts.append(f"{b['goodput_fraction']:.0%} of the achievable goodput (at most "
                         f"{b['goodput_upper']:.3g} req/s)")
        if b["deadline_met_fraction"] is not None:
            parts.append(f"{b['deadline_met_fraction']:.0%} of the TTFT deadlines any scheduler could meet "
                         f"({b['deadline_met']:g} of at most {b['deadline_met_upper']:g})")
        for what, key in (("TTFT", "ttft"), ("E2EL", "e2el")):
            if b[f"{key}_mean_fraction"]:  # the run's mean over the bound, the way latencies are compared
                parts.append(f"mean {what} {1 / b[f'{key}_mean_fraction']:.2g}x its lower bound "
                             f"({b[f'{key}_mean_lower_ms']:.0f} ms)")
        if parts:
            lines.append(f"bounds: {name} reaches " + "; ".join(parts))
    return [""] + lines if lines else []


def _dig(doc: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def table(title: str, names: list[str], rows: list, label_width: int | None = None) -> list[str]:
    """Label rows with a column per name, under section headings (the plain strings in `rows`)."""
    label_w = label_width or max(len(r[0]) for r in rows if isinstance(r, tuple))
    widths = [max(len(c), *(len(r[1][k]) for r in rows if isinstance(r, tuple))) for k, c in enumerate(names)]
    total = label_w + sum(w + 2 for w in widths)
    out = [f" {title} ".center(total, "="), " " * label_w + "".join(f"  {c:>{w}}" for c, w in zip(names, widths, strict=True))]
    for r in rows:
        if isinstance(r, str):
            out.append(f" {r} ".center(total, "-"))
        else:
            out.append(f"{r[0]:<{label_w}}" + "".join(f"  {v:>{w}}" for v, w in zip(r[1], widths, strict=True)))
    out.append("=" * total)
    return out


def print_results(args, base: Scenario, results: dict, drop: tuple[str, ...]) -> None:
    """`run` and `compare`: one JSON document, or the set-up and the metrics side by side."""
    ensembles = model_ensembles(results)
    flips = model_error.order_flips(ensembles) if len(ensembles) > 1 else []
    if args.json:
        print_json({"scenario": scenario_doc(base, drop),
                    "schedulers": {s: _scheduler_doc(r, ensembles.get(s), flips) for s, r in results.items()}})
        return
    first = next(iter(results.values()))
    warned = {s: run_warnings(r) + model_error.flips_about(flips, s) for s, r in results.items()}
    # Rejections change what every figure below counts: said before them.
    lines = [f"warning: {w}" for w in dict.fromkeys(w for ws in warned.values() for w in ws)
             if w.startswith(REJECTED_PREFIX)]
    lines += setup_lines(base, {s: r.resolved for s, r in results.items()}, len(first.requests))
    lines.append("")
    seeds = getattr(first, "seeds", None)
    title = "Serving Benchmark Result" + (f", mean ± 95% CI over {len(seeds)} seeds" if seeds else "")
    cis = {s: r.ci95 for s, r in results.items()} if seeds else None
    lines += table(title, list(results), metric_rows({s: r.metrics for s, r in results.items()}, cis))
    lines += bounds_lines({s: r.metrics for s, r in results.items()})
    if ensembles:
        lines += ["", *model_interval_lines(ensembles)]
    for s, r in results.items():
        if "replicas" in r.metrics:
            lines += ["", *replica_lines(s, r.metrics)]
    for w in dict.fromkeys(w for ws in warned.values() for w in ws if not w.startswith(REJECTED_PREFIX)):
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
    return out + columns(head + [""], [r + [""] for r in rows], right=set(range(1, len(head))))


def _scheduler_doc(r, ensemble=None, flips: list[str] = ()) -> dict:
    """`metrics` (means over seeds, with --seeds) and, with --seeds, `ci95` beside them and the seeds run; with
    --model-uncertainty, `model_ci` (the same keys as `ci95`) and the ensemble's step-time factors."""
    doc = {"resolved": resolved_doc(r.resolved), "metrics": r.metrics}
    if getattr(r, "seeds", None):
        doc["ci95"] = r.ci95
        doc["seeds"] = r.seeds
    if ensemble is not None:
        doc["model_ci"] = ensemble.interval
        doc["model_ensemble"] = {"level": ensemble.level, "step_time_factors": [float(f) for f in ensemble.factors]}
    name = first_seed(r).scenario.scheduler
    doc["warnings"] = run_warnings(r) + model_error.flips_about(flips, name)
    return doc


def model_interval_lines(ensembles: dict) -> list[str]:
    """The ranked metrics' model intervals, one row per metric, one column per scheduler."""
    first = next(iter(ensembles.values()))
    factors = first.factors
    head = (f"Model interval ({first.level:.0%} of {len(factors)} step-time models, "
            f"{factors[0]:.2f}x to {factors[-1]:.2f}x the model's step time, spread as its validation errors)")
    rows = []
    for key in model_error.RANKED_METRICS:
        metric = BY_KEY.get(key)
        cells = [value_at(e.interval, key) for e in ensembles.values()]
        if metric is None or any(c is None for c in cells):
            continue
        rows.append([f"{metric.label} ({metric.unit})"]
                    + [f"{_shown(c[0], metric)} - {_shown(c[1], metric)}" for c in cells])
    return [head, *columns(["", *ensembles], rows, right=set(range(1, len(ensembles) + 1)))]


def _shown(value: float, metric) -> str:
    return pct(value) if metric.unit == "%" else fmt(value)


# ---------------------------------------------------------------------------------------------------------
# Trace files (--trace-out)
# ---------------------------------------------------------------------------------------------------------
def trace_path_for(path: str, scheduler: str) -> str:
    """`trace.json` -> `trace-fcfs.json` (`run.trace.json` -> `run-fcfs.trace.json`)."""
    p = Path(path)
    name = p.name
    suffix = ".trace.json" if name.endswith(".trace.json") and name != ".trace.json" else p.suffix
    stem = name[: len(name) - len(suffix)] if suffix else name
    return str(p.with_name(f"{stem}-{scheduler}{suffix}"))


def write_trace(result, path: str, out) -> None:
    try:
        meta = write_chrome_trace(result, path)
    except OSError as e:
        raise UsageError(f"--trace-out: cannot write {path!r}: {e.strerror or e}") from None
    size = Path(path).stat().st_size
    print(f"wrote {path} ({meta['events']:,} events, {size / 1e6:.1f} MB) - open it at https://ui.perfetto.dev",
          file=out)
    for note in meta["notes"]:
        print(f"note: {path}: {note}", file=sys.stderr)
