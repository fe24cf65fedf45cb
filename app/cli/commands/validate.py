"""`sched-sim validate`: predict every row of the validation set (public kernel, step and serving measurements)
and print the errors per group and per row, as tables, JSON, or the README's Markdown (`--markdown`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim_core.input_files import input_file_problem
from sim_core.quoting import quote
from sim_core.studies.check_rows import row_doc

from ..flags import UsageError
from ..report import columns, print_json, print_lines

NAME = "validate"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", metavar="DIR", help="directory of kernels.csv, steps.csv, serving.csv, tp_fp8.csv "
                                                "(default: the repository's validation/)")
    p.add_argument("--quick", action="store_true", help="skip the rows that need a simulated benchmark run")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables (the README's)")


def handle(args: argparse.Namespace) -> int:
    from sim_core.studies import validation

    directory = Path(args.dir) if args.dir else validation.VALIDATION_DIR
    if not directory.is_dir():
        raise UsageError(f"--dir: {quote(str(directory))} is not a directory" if directory.exists()
                         else f"--dir: no such directory {quote(str(directory))}")
    rows = _checks(validation, directory, not args.quick)
    doc = validate_doc(rows, validation.summary(rows), validation.speedups(rows))
    if args.json:
        print_json(doc)
    elif args.markdown:
        print_lines(validate_markdown(doc))
    else:
        print_lines(validate_lines(doc))
    return 0


def _checks(validation, directory: Path, simulate: bool) -> list:
    """validation.checks on a --dir: its tables refused, naming --dir, when one is missing, not a regular file (a
    FIFO there hung the command) or not a validation table."""
    for path in sorted(directory.iterdir()):
        problem = input_file_problem(str(path), "a validation table") if path.suffix in (".csv", ".json") else None
        if problem:
            raise UsageError(f"--dir: {quote(str(path))} {problem}")
    try:
        return validation.checks(directory, simulate=simulate)
    except OSError as e:
        raise UsageError(f"--dir: {quote(str(e.filename or directory))}: {e.strerror or e} (a validation directory "
                         f"holds kernels.csv, steps.csv, serving.csv and tp_fp8.csv)") from None
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, ArithmeticError) as e:  # a column missing, a bad cell
        raise UsageError(f"--dir {quote(str(directory))}: not a validation directory like validation/ "
                         f"({e.__class__.__name__}: {quote(str(e))})") from None


def _err(value) -> str:
    return "skipped" if value is None else f"{value * 100:+.1f}%"


def _abs_pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def validate_doc(rows, summary: dict, speedups: list[dict]) -> dict:
    from sim_core.studies import inferencex, lora_checks, moe_kernels

    return {"summary": summary, "speedups": speedups, "frontier": inferencex.frontier_summary(rows),
            "lora_shape": lora_checks.shape(rows), "moe_kernel_by_tokens": moe_kernels.errors_by_tokens(rows),
            "rows": [row_doc(c) for c in rows]}


def validate_lines(doc: dict) -> list[str]:
    lines = ["Cost model against validation/*.csv (validation/SOURCES.md says what each row measured)", ""]
    lines += ["  " + x for x in columns(
        ["group", "rows", "skipped", "median |error|", "worst |error|"],
        [[g, str(s["rows"]), str(s["skipped"]), _abs_pct(s["median_abs_error"]), _abs_pct(s["worst_abs_error"])]
         for g, s in doc["summary"].items()], right={1, 2, 3, 4})]
    lines += ["", "Speed-ups (tp/fp8 rows over their baseline)"]
    lines += ["  " + x for x in columns(
        ["variant", "vs", "measured", "predicted", "series"],
        [[s["variant"], s["baseline"], f"{s['measured']:.2f}x", f"{s['predicted']:.2f}x", s["series"]]
         for s in doc["speedups"]], right={2, 3})]
    lines += _frontier_lines(doc)
    lines += _lora_shape_lines(doc)
    lines += _moe_kernel_lines(doc)
    lines += ["", "Rows"]
    lines += ["  " + x for x in columns(
        ["group", "reference", "predicted", "unit", "error", "row (note)"],
        [[r["group"], f"{r['reference']:.4g}", "-" if r["predicted"] is None else f"{r['predicted']:.4g}",
          r["unit"], _err(r["error"]), r["what"] + (f" ({r['note']})" if r["note"] else "")]
         for r in doc["rows"]], right={1, 2, 4}, wrap_last=100)]
    return lines


def _frontier_lines(doc: dict) -> list[str]:
    """InferenceX's frontier points: per model the error of throughput per GPU, per level the GPU pairs in the
    measured order (plain Markdown tables: they read as well in a terminal)."""
    from sim_core.studies import inferencex

    table = inferencex.frontier_lines(doc["frontier"])
    return ["", "InferenceX frontier points (throughput per GPU; studies/inferencex.py)", ""] + table if table else []


def _lora_shape_lines(doc: dict) -> list[str]:
    """S-LoRA's throughput per adapter count over its series' smallest count, measured and predicted (issue #23:
    within 20% at each point; studies/lora_checks.py), as a plain Markdown table."""
    shape = [s for s in doc.get("lora_shape", []) if s["adapters"] != min(
        t["adapters"] for t in doc["lora_shape"] if (t["group"], t["series"]) == (s["group"], s["series"]))]
    if not shape:
        return []
    return ["", "LoRA: throughput vs adapters, relative to the series' fewest (studies/lora_checks.py)", "",
            "| source | series | adapters | measured | predicted | error |", "|---|---|--:|--:|--:|--:|"] + [
        f"| {s['group']} | {s['series']} | {s['adapters']} | {s['measured']:.3f} | {s['predicted']:.3f} | "
        f"{s['error'] * 100:+.1f}% |" for s in shape]


def _moe_kernel_lines(doc: dict) -> list[str]:
    """The "kernel, MoE" group's signed errors by batch size (issue #35; studies/moe_kernels.py)."""
    bands = doc.get("moe_kernel_by_tokens") or {}
    if not bands:
        return []
    return ["", "One fused MoE layer against kernel timings, by tokens (studies/moe_kernels.py)"] + ["  " + x for x in columns(
        ["tokens", "rows", "median error", "least", "greatest"],
        [[band, str(b["rows"]), _err(b["median_error"]), _err(b["min_error"]), _err(b["max_error"])]
         for band, b in bands.items()], right={1, 2, 3, 4})]


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
    lines += _frontier_lines(doc)
    lines += _lora_shape_lines(doc)
    lines += ["", "<details><summary>Every row</summary>", "",
              "| group | row | reference | predicted | unit | error | note |", "|---|---|--:|--:|---|--:|---|"]
    lines += [f"| {r['group']} | {md(r['what'])} | {r['reference']:.4g} | "
              f"{'-' if r['predicted'] is None else format(r['predicted'], '.4g')} | {md(r['unit'])} | "
              f"{_err(r['error'])} | {md(r['note'])} |" for r in doc["rows"]]
    lines += ["", "</details>"]
    return lines
