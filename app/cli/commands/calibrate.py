"""`sched-sim calibrate`: fit the cost model's constants to measured steps or a `vllm bench serve` result, write
the profile `--hardware-profile` reads, and show the fitted constants and how well each set predicts."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim_core import ScenarioError, SetupError, parse_scenario
from sim_core.prometheus_parse import ScrapeError, read_scrapes
from sim_core.studies.calibration import CalibrationTarget, calibrate, parse_target
from sim_core.studies.measurements import CalibrationError
from sim_core.studies.prometheus_fit import calibrate_prometheus

from ..flags import (
    UsageError,
    add_model_flags,
    read_text_file,
    scenario_error_text,
    scenario_input,
    setup_error_text,
)
from ..report import check_writable, columns, g, print_json, print_lines

# The most of --from read: a million-row steps CSV is ~40 MB, a detailed 20,000-request benchmark result about as
# much; /dev/zero or a mistaken multi-gigabyte file is refused after this many bytes, not read into memory whole.
MAX_FROM_BYTES = 256 << 20

NAME = "calibrate"


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="a CSV of measured steps (prefill_tokens,context_tokens,decode_seqs,decode_context,"
        "step_ms) or a `vllm bench serve --save-result --save-detailed` JSON",
    )
    source.add_argument(
        "--from-prometheus",
        nargs="+",
        metavar="FILE",
        help="a vLLM or SGLang server's Prometheus metrics: a /metrics scrape (two or more, in time "
        "order: the window between the first and last), an OpenMetrics series (`run "
        "--metrics-interval`) or a Prometheus query_range JSON answer; state the load with "
        "--scenario (what it leaves out is derived from the counters, and reported)",
    )
    p.add_argument(
        "--scenario",
        dest="scenario_query",
        metavar="QUERY",
        help="with --from-prometheus: the load the server ran, as a scenario query string (e.g. "
        "rate=4&workload=random&isl=1024&osl=256); the deployment flags below override its fields",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the profile (JSON)")
    add_model_flags(
        p,
        CalibrationTarget,
        "deployment",
        "what the measurements were taken on; for a benchmark "
        "replay, --token-budget and --max-seqs are the server's "
        "--max-num-batched-tokens and --max-num-seqs",
    )
    p.add_argument("--json", action="store_true", help="print the profile document instead of tables")


def handle(args: argparse.Namespace) -> int:
    if args.scenario_query and not args.from_prometheus:
        raise UsageError("--scenario: states the load of a Prometheus scrape; it goes with --from-prometheus")
    if args.from_prometheus:
        return _from_prometheus(args)
    try:
        target = parse_target(scenario_input(args, CalibrationTarget))
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e, model=CalibrationTarget)) from None
    text = read_text_file(args.from_file, "--from", MAX_FROM_BYTES, "a steps CSV or a benchmark result")
    check_writable(args.out, "--out")
    try:
        doc = calibrate(target, text, args.from_file)
    except CalibrationError as e:
        raise UsageError(f"--from {args.from_file}: {e}") from None
    return _write_and_report(args, doc)


def _write_and_report(args: argparse.Namespace, doc: dict) -> int:
    import json

    try:
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except OSError as e:  # a full or read-only disk, found only when writing
        raise UsageError(f"--out: cannot write {args.out!r}: {e.strerror or e}") from None
    if args.json:
        print_json(doc)
    else:
        print_lines(calibrate_lines(doc, args.out))
    return 0


def _from_prometheus(args: argparse.Namespace) -> int:
    """--from-prometheus: the scrapes read, the load stated (and derived), the fit."""
    files = [
        (path, read_text_file(path, "--from-prometheus", MAX_FROM_BYTES, "a Prometheus scrape"))
        for path in args.from_prometheus
    ]
    check_writable(args.out, "--out")
    try:
        load = parse_scenario(scenario_input(args))  # --scenario's fields, then the deployment flags'
    except ScenarioError as e:
        raise UsageError(scenario_error_text(e)) from None
    try:
        doc = calibrate_prometheus(load, read_scrapes(files), [Path(p).name for p in args.from_prometheus])
    except ScrapeError as e:
        raise UsageError(f"--from-prometheus: {e}") from None
    except ScenarioError as e:  # a derived rate or length out of its field's bounds
        raise UsageError(
            "--from-prometheus: the load derived from the scrape: " + scenario_error_text(e)
        ) from None
    except SetupError as e:
        raise UsageError(setup_error_text(e)) from None
    return _write_and_report(args, doc)


def calibrate_lines(doc: dict, out: str) -> list[str]:
    """The fitted constants beside the catalog's, and how well each set predicts the measurements."""
    fit = doc["fit"]
    what = {
        "steps_csv": "steps",
        "vllm_bench_serve": "benchmark statistics",
        "prometheus": "histogram means",
    }[fit["kind"]]
    lines = [
        f"{doc['model']} ({doc['quantization']}) on {doc['hardware']}, tp={doc['tp']}: fitted on "
        f"{fit['observations']:,} {what} from {fit['source']}",
        "",
    ]
    rows = [
        [k, g(fit["catalog_constants"][k]), g(v), "fitted" if k in fit["fitted"] else "catalog's"]
        for k, v in doc["constants"].items()
    ]
    lines += ["  " + x for x in columns(["constant", "catalog", "profile", ""], rows, right={1, 2})]
    lines.append("")
    rows = [
        [
            name,
            f"{fit[key]['median_abs_pct_error']:.2f}",
            f"{fit[key]['max_abs_pct_error']:.2f}",
            fit[key]["worst"],
        ]
        for name, key in (("catalog", "catalog_residuals"), ("profile", "residuals"))
    ]
    lines += [
        "  " + x for x in columns(["residuals", "median |err| %", "max |err| %", "worst"], rows, right={1, 2})
    ]
    if fit.get("note"):
        lines.append(f"note: {fit['note']}")
    if fit["kind"] == "prometheus":
        lines += drift_lines(fit)
    if fit.get("weakly_determined"):
        lines.append(
            f"note: a 10% change in {', '.join(fit['weakly_determined'])} moves no measured step by 1%: "
            f"the rows barely constrain {'it' if len(fit['weakly_determined']) == 1 else 'them'} (add "
            f"batch shapes that lean on {'it' if len(fit['weakly_determined']) == 1 else 'them'})"
        )
    lines += ["", f"wrote {out}; use it with --hardware-profile {out} (run, compare, sweep, step-time)"]
    return lines


def drift_lines(fit: dict) -> list[str]:
    """A Prometheus fit's load (what was derived) and its drift report: what the fitted model still misses."""
    load, drift = fit["load"], fit["drift"]
    derived = ", ".join(f"{k}={g(v) if isinstance(v, float) else v}" for k, v in load["derived"].items())
    lines = [
        "",
        f"load replayed: {load['scenario']}" + (f" (derived from the scrape: {derived})" if derived else ""),
    ]
    rows = [
        [
            k,
            g(row["measured"]),
            "-" if row["predicted"] is None else g(row["predicted"]),
            "-" if row["error_pct"] is None else f"{row['error_pct']:+.1f}",
        ]
        for k, row in drift["statistics"].items()
    ]
    lines += [
        "  " + x for x in columns(["statistic", "measured", "fitted model", "error %"], rows, right={1, 2, 3})
    ]
    if drift["unexplained"]:
        lines.append(
            f"drift: the fitted model misses {', '.join(drift['unexplained'])} by more than "
            f"{g(drift['threshold_pct'])}% (fraction rows: percentage points)"
        )
    else:
        lines.append(f"drift: every statistic within {g(drift['threshold_pct'])}%")
    if drift["not_modelled"]:
        lines.append(f"not modelled (in the scrape, not compared): {', '.join(drift['not_modelled'])}")
    return lines
