"""The energy model against ML.ENERGY's measurements (validation group "energy", issue #40): each row of
validation/energy_mlenergy.csv whose model and GPU the catalogue has, simulated as the benchmark ran it (its requests,
engine settings and steady-state cut: sim_core/studies/mlenergy_workload.py), its steady state's joules per output token
compared with the measured one. J/token = power / throughput, so the error splits in two, each a group of its own:
"energy: power" compares the measured power per GPU with the power the model gives the simulated steady state's
work (its steps' bytes and FLOPs) done at the measured throughput (each step stretched by the simulated over the
measured throughput): the power model's error alone, which is also its J/token error at the measured throughput;
"energy: throughput" compares output throughput, the step-time model's part.

Nothing here is fitted: the power model's constants are derived from InferenceX's B200 records
(sim_core/studies/power_shares.py), a source disjoint from these rows; the settings below come from the
benchmark's published configuration and client (validation/ENERGY_SOURCES.md, mlenergy_workload.py).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from ..catalog import MODELS
from ..energy import power_model, step_power_trace
from ..kernel.state import S_BYTES, S_DECODE_SEQS, S_DURATION, S_FLOPS, S_RUNNING, S_START
from ..runner import run
from ..scenario import ScenarioError, parse_scenario
from .check_rows import Check, read_rows
from .mlenergy_workload import (
    ENGINE_ASYNC_SCHEDULING,
    ENGINE_TOKEN_BUDGET,
    max_model_len,
    request_trace,
    steady_window,
)
from .row_names import model_key

ENERGY_GROUP = "energy"
POWER_GROUP = "energy: power"
THROUGHPUT_GROUP = "energy: throughput"
GROUPS = (ENERGY_GROUP, POWER_GROUP, THROUGHPUT_GROUP)
GPU_KEYS = {"H100": "h100", "B200": "b200"}
# Llama-3.1-70B is Llama-3-70B's architecture (only RoPE scaling for long context differs: row_names.model_key),
# which the catalogue keys as llama-3-70b; model_key maps "llama-3.1-8b" but not the 70B's name.
QUANTIZATIONS = {
    "bfloat16": "auto",
    "fp8": "fp8",
    "mxfp4": "auto",
}  # auto: the checkpoint's own (MXFP4 experts)
FAR = 1.5  # a prediction more than 1.5x off either way


def _row_settings(row: dict) -> tuple[dict | None, str]:
    """The scenario fields of one row (its engine as the benchmark configured it), or None and why it is
    skipped; its requests are mlenergy_workload.request_trace's."""
    model, hw = model_key(row["model"].replace("Llama-3.1-70B", "Llama-3-70B")), GPU_KEYS.get(row["gpu"])
    if model not in MODELS or hw is None:
        return None, f"model {row['model']} or GPU {row['gpu']} not in the catalogue"
    if int(row["ep"]) > 1:
        return None, (
            f"tp {row['tp']} x ep {row['ep']} x dp {row['dp']} on {row['num_gpus']} GPUs: vLLM's expert "
            f"parallel group spans tp x dp, so how these GPUs split the attention is not published"
        )
    return {
        "model": model,
        "hardware": hw,
        "tp": int(row["tp"]),
        "quantization": QUANTIZATIONS[row["weight_precision"]],
        "max_seqs": int(row["max_num_seqs"]),
        "token_budget": ENGINE_TOKEN_BUDGET,
        "async_scheduling": ENGINE_ASYNC_SCHEDULING,
        "energy": True,
        "max_model_len": max_model_len(row, MODELS[model].max_context),
    }, ""


def steady_state(result, seats: int) -> dict:
    """Joules per output token, output tokens/s and mean power per GPU over the benchmark's steady state
    (mlenergy_workload.steady_window): the steps that started inside it, idle gaps between them at idle power."""
    setup = result.resolved.setup
    model = power_model(setup)
    steps = np.asarray(result.steps)
    start, end = steady_window(result.first_token_s, result.finish_s, seats)
    inside = np.flatnonzero((steps[:, S_START] >= start) & (steps[:, S_START] < end))
    if inside.size == 0:
        raise ValueError(f"no step inside the window [{start:.3f}, {end:.3f}) s: the engine held fewer than "
                         f"{seats} requests until the run drained")
    window = steps[inside[0] : inside[-1] + 1]
    begin, seconds, power = step_power_trace(window, model)
    span = float(begin[-1] + seconds[-1] - begin[0])
    stride = int(result.step_stride)
    busy_j = float((power * seconds).sum()) * stride
    idle_j = model.idle_w * max(span - float(seconds.sum()) * stride, 0.0)
    joules = (busy_j + idle_j) * setup.tp
    tokens = float(window[:, S_DECODE_SEQS].sum()) * stride  # each decoding sequence emits one token a step
    return {
        "joules_per_output_token": joules / tokens,
        "throughput_tok_s": tokens / span,
        "power_w_per_gpu": joules / setup.tp / span,
        "batch": float(window[:, S_RUNNING].mean()),
        "window": window,
    }


def power_at_pace(window: np.ndarray, model, stretch: float) -> float:
    """Mean power per GPU (W) of a steady state's steps each taking `stretch` times as long, with the same bytes
    and FLOPs: the power the model gives the simulated work at another pace (the measured one)."""
    seconds = window[:, S_DURATION] * stretch
    power = model.step_power_w(seconds, window[:, S_BYTES], window[:, S_FLOPS])
    busy = float(seconds.sum())
    return float((power * seconds).sum() / busy) if busy > 0 else model.idle_w


def simulate_row(row: dict) -> dict | str:
    """One row's steady state as steady_state gives it, or why it cannot be simulated."""
    fields, why = _row_settings(row)
    if fields is None:
        return why
    try:
        result = run(parse_scenario(fields), trace_text=request_trace(row, fields["max_model_len"]))
    except (ScenarioError, ValueError) as e:  # SetupError is a ValueError: a deployment that does not fit
        return f"cannot simulate: {e}"
    try:
        got = steady_state(result, int(row["max_num_seqs"]))
    except ValueError as e:  # the simulated engine never held the batch size the benchmark measured at
        return f"no steady state: {e}"
    window = got.pop("window")
    stretch = got["throughput_tok_s"] / float(row["throughput_tok_s"])
    got["power_w_per_gpu_at_measured_pace"] = power_at_pace(window, power_model(result.resolved.setup), stretch)
    return got


def energy_checks(directory: Path, simulate: bool = True) -> list:
    """The "energy" and "energy: throughput" rows (validation.Check), each measured row predicted or skipped."""
    path = directory / "energy_mlenergy.csv"
    if not path.is_file():
        return []
    out = []
    for row in read_rows(path):
        what = (
            f"{row['model']} {row['task']} on {row['num_gpus']}x {row['gpu']} tp{row['tp']} ep{row['ep']}, "
            f"max_num_seqs {row['max_num_seqs']}"
        )
        series, variant = (
            f"{row['model']} {row['task']} on {row['gpu']} tp{row['tp']} ep{row['ep']}",
            row["max_num_seqs"],
        )
        got = simulate_row(row) if simulate else (_row_settings(row)[1] or "simulated rows skipped (--quick)")
        for group, key, unit, column in (
            (ENERGY_GROUP, "joules_per_output_token", "J/tok", "joules_per_output_token"),
            (POWER_GROUP, "power_w_per_gpu_at_measured_pace", "W", "avg_power_w_per_gpu_derived"),
            (THROUGHPUT_GROUP, "throughput_tok_s", "tok/s", "throughput_tok_s"),
        ):
            predicted = got[key] if isinstance(got, dict) else None
            note = "" if isinstance(got, dict) else got
            out.append(
                Check(group, row["source"], what, float(row[column]), unit, predicted, note, series, variant)
            )
    return out


def energy_summary(rows: list) -> dict:
    """Median and worst |error| of the energy rows, how many are more than FAR x off, and the same for their power
    and throughput, so that the shares of the energy error the power and step-time models carry show."""
    out = {}
    for group in GROUPS:
        errors = [c.error for c in rows if c.group == group and c.error is not None]
        far = sum(1 for e in errors if not 1 / FAR <= 1 + e <= FAR)
        out[group] = {
            "rows": len(errors),
            "median_abs_error": statistics.median(abs(e) for e in errors) if errors else None,
            "worst_abs_error": max((abs(e) for e in errors), default=None),
            "median_error": statistics.median(errors) if errors else None,
            "beyond_1_5x": far,
        }
    return out


def batch_trend(rows: list, series: str) -> list[tuple[int, float, float | None]]:
    """(max_num_seqs, measured J/token, predicted J/token) of one series (model, task, GPU, parallelism) in batch
    order: the trend to compare."""
    points = [
        (int(c.variant), c.reference, c.predicted)
        for c in rows
        if c.group == ENERGY_GROUP and c.series == series
    ]
    return sorted(points)
