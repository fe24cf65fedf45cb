"""Where sim_core/energy.py's ACTIVE_SHARE and MEMORY_SHARE come from: InferenceX's validated per-GPU power of its
B200 runs without speculative decoding (validation/energy_inferencex.csv, source inferencex_power_p90_backfill:
SGLang serving Qwen3.5-397B-A17B at 8k/1k, FP8 at TP8 and TP4, FP4 at TP2 and TP4, concurrency 1 to 640), each run
simulated as InferenceX ran it (sim_core/studies/inferencex.py's client: prompts and outputs uniform in
[0.8 L, L], a closed loop of CONC users, max_num_seqs CONC, async scheduling, 8,192-token budget), and its measured
power's share of the dynamic range regressed on the run's simulated utilisations:

    (P - P_idle) / (P_board - P_idle) - u_compute = ACTIVE_SHARE + MEMORY_SHARE x u_memory

u_compute and u_memory are the run's FLOPs and bytes per GPU over its span, at the cost model's GEMM rate and
streaming bandwidth (sim_core/energy.py). These records are another engine's, another model's and another
benchmark's than the ML.ENERGY rows `validate` checks the model against (validation/energy_mlenergy.csv), so the
check stays a check. `python -m sim_core.studies.power_shares` prints the derivation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..energy import power_model
from ..kernel.state import S_BYTES, S_FLOPS
from ..runner import run
from ..scenario import Scenario
from .check_rows import VALIDATION_DIR, read_rows
from .inferencex import RANGE_RATIO, TOKEN_BUDGET

SOURCE = "inferencex_power_p90_backfill"
MODEL = "qwen3.5-397b-a17b"
REQUESTS_PER_USER = 5  # enough for a closed loop's steady state; InferenceX sends 10 per user


def calibration_rows(directory: Path = VALIDATION_DIR) -> list[dict]:
    """The records the shares are derived from: B200, fixed 8k/1k, no speculative decoding."""
    return [
        r
        for r in read_rows(directory / "energy_inferencex.csv")
        if r["source"] == SOURCE
        and r["gpu"] == "B200"
        and r["spec_decode"] == "none"
        and r["workload"] == "fixed 8k/1k"
    ]


def utilisation(row: dict) -> tuple[float, float, float]:
    """(u_compute, u_memory, measured share of the dynamic range) of one record, simulated as it ran."""
    conc, isl, osl = int(row["concurrency"]), int(row["input_len"]), int(row["output_len"])
    centre, spread = (1 + RANGE_RATIO) / 2, (1 - RANGE_RATIO) / (1 + RANGE_RATIO)
    s = Scenario(
        hardware="b200",
        model=MODEL,
        quantization=row["precision"],
        tp=int(row["tp"]),
        workload="random",
        isl=round(isl * centre),
        osl=round(osl * centre),
        length_range=spread,
        concurrency=conc,
        concurrency_mode="semaphore",
        num_requests=conc * REQUESTS_PER_USER,
        token_budget=TOKEN_BUDGET,
        max_seqs=conc,
        async_scheduling=True,
        max_model_len=isl + osl,
        engine="sglang",
    )
    result = run(s)
    model = power_model(result.resolved.setup)
    steps, span = np.asarray(result.steps), float(result.metrics["duration_s"])
    u_compute = float(steps[:, S_FLOPS].sum()) * result.step_stride / span / model.compute_flops_per_s
    u_memory = float(steps[:, S_BYTES].sum()) * result.step_stride / span / model.stream_bytes_per_s
    share = (float(row["avg_power_w_per_gpu"]) - model.idle_w) / (model.board_w - model.idle_w)
    return u_compute, u_memory, share


def derive_shares(directory: Path = VALIDATION_DIR) -> dict:
    """ACTIVE_SHARE and MEMORY_SHARE by least squares over the calibration records, with the fit's residuals."""
    points = np.array([utilisation(r) for r in calibration_rows(directory)])
    u_compute, u_memory, share = points.T
    (active, memory), *_ = np.linalg.lstsq(
        np.c_[np.ones_like(u_memory), u_memory], share - u_compute, rcond=None
    )
    fitted = np.minimum(active + u_compute + memory * u_memory, 1.0)
    return {
        "records": len(points),
        "active_share": float(active),
        "memory_share": float(memory),
        "median_abs_residual": float(np.median(np.abs(fitted - share))),
    }


if __name__ == "__main__":
    print(derive_shares())
