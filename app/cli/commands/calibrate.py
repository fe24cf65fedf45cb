"""`sched-sim calibrate`: fit the cost model's constants to measured steps or a `vllm bench serve` result, write
the profile `--hardware-profile` reads, and show the fitted constants and how well each set predicts."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim_core import ScenarioError

from ..flags import UsageError, add_model_flags, read_text_file, scenario_error_text, scenario_input
from ..report import check_writable, columns, g, print_json, print_lines

# The most of --from read: a million-row steps CSV is ~40 MB, a detailed 20,000-request benchmark result about as
# much; /dev/zero or a mistaken multi-gigabyte file is refused after this many bytes, not read into memory whole.
MAX_FROM_BYTES = 256 << 20

NAME = "calibrate"
HELP = ("fit the cost model's efficiency and overhead constants to your own hardware from measured steps or a vllm "
        "bench serve result, and write a profile for --hardware-profile")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from sim_core.studies.calibration import CalibrationTarget  # the engine loads only on use

    p.add_argument("--from", dest="from_file", required=True, metavar="FILE",
                   help="a CSV of measured steps (prefill_tokens,context_tokens,decode_seqs,decode_context,"
                        "step_ms) or a `vllm bench serve --save-result --save-detailed` JSON")
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the profile (JSON)")
    add_model_flags(p, CalibrationTarget, "deployment", "what the measurements were taken on; for a benchmark "
                                                        "replay, --token-budget and --max-seqs are the server's "
                                                        "--max-num-batched-tokens and --max-num-seqs")
    p.add_argument("--json", action="store_true", help="print the profile document instead of tables")


def handle(args: argparse.Namespace) -> int:
    import json

    from sim_core.studies.calibration import CalibrationTarget, calibrate, parse_target
    from sim_core.studies.measurements import CalibrationError

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
    try:
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except OSError as e:  # a full or read-only disk, found only when writing
        raise UsageError(f"--out: cannot write {args.out!r}: {e.strerror or e}") from None
    if args.json:
        print_json(doc)
    else:
        print_lines(calibrate_lines(doc, args.out))
    return 0


def calibrate_lines(doc: dict, out: str) -> list[str]:
    """The fitted constants beside the catalog's, and how well each set predicts the measurements."""
    fit = doc["fit"]
    what = ("steps" if fit["kind"] == "steps_csv" else "benchmark statistics")
    lines = [f"{doc['model']} ({doc['quantization']}) on {doc['hardware']}, tp={doc['tp']}: fitted on "
             f"{fit['observations']:,} {what} from {fit['source']}", ""]
    rows = [[k, g(fit["catalog_constants"][k]), g(v), "fitted" if k in fit["fitted"] else "catalog's"]
            for k, v in doc["constants"].items()]
    lines += ["  " + x for x in columns(["constant", "catalog", "profile", ""], rows, right={1, 2})]
    lines.append("")
    rows = [[name, f"{fit[key]['median_abs_pct_error']:.2f}", f"{fit[key]['max_abs_pct_error']:.2f}",
             fit[key]["worst"]] for name, key in (("catalog", "catalog_residuals"), ("profile", "residuals"))]
    lines += ["  " + x for x in columns(["residuals", "median |err| %", "max |err| %", "worst"], rows,
                                         right={1, 2})]
    if fit.get("note"):
        lines.append(f"note: {fit['note']}")
    if fit.get("weakly_determined"):
        lines.append(f"note: a 10% change in {', '.join(fit['weakly_determined'])} moves no measured step by 1%: "
                     f"the rows barely constrain {'it' if len(fit['weakly_determined']) == 1 else 'them'} (add "
                     f"batch shapes that lean on {'it' if len(fit['weakly_determined']) == 1 else 'them'})")
    lines += ["", f"wrote {out}; use it with --hardware-profile {out} (run, compare, sweep, step-time)"]
    return lines
