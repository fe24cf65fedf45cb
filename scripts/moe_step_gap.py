"""Where the MoE offline rows' missing time is: each row of validation/moe_offline.csv (TensorRT-LLM's published
maximum-throughput tables) simulated as `sched-sim validate` simulates it, then the measured rate spread over the
simulated run's own steps (sim_core/studies/offline.py step_gap): the step time the measurement implies at the
simulated batch, and the time missing per output token and per (token, expert) pair of one MoE layer on one GPU.
A cost that is the same per pair across models and GPUs points at the grouped-expert kernels; one per token at
the engine's per-request host work; one neither at something else (issue #35).

    python scripts/moe_step_gap.py                      # every row at ISL/OSL 1024/1024
    python scripts/moe_step_gap.py --shape 1024/8192    # another table row
    python scripts/moe_step_gap.py --model gpt-oss      # rows whose model contains this text
"""

from __future__ import annotations

import argparse

from sim_core.catalog import MODELS
from sim_core.studies.check_rows import VALIDATION_DIR, int_of, read_rows
from sim_core.studies.offline import engine_settings, offline_run, row_deployment, step_gap
from sim_core.studies.row_names import hardware_key, kv_cache_dtype_of, model_key, row_quantization


def row_gap(row: dict) -> str:
    """One row's line: deployment, measured and simulated rate per GPU, mean step (simulated, implied), missing
    time per output token and per (token, expert) pair of one MoE layer."""
    hw, model = hardware_key(row["hardware"]), model_key(row["model"])
    engine = engine_settings(row)
    quantization = row_quantization(row["dtype"], hw, [])
    d = row_deployment(row, model, quantization, engine.kv_cache_dtype or kv_cache_dtype_of(row["dtype"]))
    requests, prompt, output = int(row["num_requests"]), int(row["input_len"]), int(row["output_len"])
    metrics = offline_run(d, prompt, output, engine, requests)
    gpus = int_of(row["gpus"])
    ranks = d.ep // d.tp if d.attention_dp else 1  # each attention-DP rank is an engine with its own steps
    m = MODELS[model]
    local_experts = -(-m.experts // d.ep)
    pairs = m.experts_per_token * m.moe_layers * local_experts / m.experts * ranks
    gap = step_gap(metrics["steps"] // ranks, metrics["duration_s"], requests * output // ranks,
                   float(row["value"]) * gpus / ranks, pairs)
    return (f"{model:16s} {quantization:5s} {hw:6s} ep={d.ep} adp={'y' if d.attention_dp else 'n'} "
            f"measured {float(row['value']):8.0f} simulated {metrics['output_throughput'] / gpus:8.0f} tok/s/GPU | "
            f"step {1e3 * gap.predicted_step_s:6.1f} ms, implied {1e3 * gap.implied_step_s:6.1f} ms | missing "
            f"{1e6 * gap.missing_per_token_s:6.2f} us/token, {1e9 * gap.missing_per_pair_s:6.1f} ns/pair")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1024/1024", help="ISL/OSL of the rows to simulate")
    ap.add_argument("--model", default="", help="only rows whose model contains this text")
    args = ap.parse_args()
    isl, osl = args.shape.split("/")
    for row in read_rows(VALIDATION_DIR / "moe_offline.csv"):
        if (row["input_len"], row["output_len"]) == (isl, osl) and args.model.lower() in row["model"].lower():
            print(row_gap(row), flush=True)


if __name__ == "__main__":
    main()
