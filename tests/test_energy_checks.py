"""sim_core/studies/energy_checks.py: the "energy" validation group (ML.ENERGY's J per output token) is registered,
its rows are mapped or skipped with a reason, a simulated row's steady state is physical, and J/token falls with
the batch as measured."""

from __future__ import annotations

import json
import statistics

import pytest

from sim_core.catalog import GPUS
from sim_core.studies import validation_rows as placed_rows
from sim_core.studies.energy_checks import (
    ENERGY_GROUP,
    GROUPS,
    POWER_GROUP,
    THROUGHPUT_GROUP,
    batch_trend,
    energy_checks,
    energy_summary,
    simulate_row,
)
from sim_core.studies.offline import read_rows
from sim_core.studies.validation import VALIDATION_DIR, Check, checks

ROWS = read_rows(VALIDATION_DIR / "energy_mlenergy.csv")
LLAMA_8B_H100 = "meta-llama/Llama-3.1-8B-Instruct lm-arena-chat on H100 tp1 ep1"


def _row(model: str, gpu: str, seats: int) -> dict:
    return next(
        r for r in ROWS if r["model"] == model and r["gpu"] == gpu and int(r["max_num_seqs"]) == seats
    )


def test_the_group_is_registered_and_every_row_is_predicted_or_skipped_with_a_reason():
    rows = [c for c in checks(simulate=False) if c.group in GROUPS]
    assert len(rows) == len(GROUPS) * len(ROWS)
    assert all(c.predicted is None and c.note for c in rows)
    mapped = energy_checks(VALIDATION_DIR, simulate=False)
    ep = [c for c in mapped if "ep8" in c.what]
    assert ep and all("expert parallel" in c.note for c in ep)


def test_a_simulated_row_is_physical():
    row = _row("meta-llama/Llama-3.1-8B-Instruct", "H100", 64)
    got = simulate_row(row)
    assert isinstance(got, dict), got
    for power in (got["power_w_per_gpu"], got["power_w_per_gpu_at_measured_pace"]):
        assert GPUS["h100"].idle_power_w < power <= GPUS["h100"].board_power_w * (1 + 1e-12)  # a mean's rounding
    assert got["joules_per_output_token"] == pytest.approx(got["power_w_per_gpu"] / got["throughput_tok_s"])
    assert 0.85 * 64 <= got["batch"] <= 64
    # The same work done at the measured pace draws less power where the simulated engine is the faster one.
    at_pace, own = got["power_w_per_gpu_at_measured_pace"], got["power_w_per_gpu"]
    assert at_pace <= own if got["throughput_tok_s"] > float(row["throughput_tok_s"]) else at_pace >= own


# Rows whose power the model misses by more than 1.5x, each for a known reason: H100 engines at batch 8-16 draw
# 400-440 W where the model (its shares derived from InferenceX's B200 records) gives 670-700 W; gpt-oss-120b on
# 2 x B200 at 2,048-3,072 sequences is host-bound (its measured throughput stays flat from 512 sequences up while
# its power falls), so the simulated GPU work stretched to that pace draws too little.
KNOWN_POWER_MISSES = {
    "meta-llama/Llama-3.1-70B-Instruct lm-arena-chat on 4x H100 tp4 ep1, max_num_seqs 8",
    "Qwen/Qwen3-30B-A3B-Instruct-2507 lm-arena-chat on 1x H100 tp1 ep1, max_num_seqs 8",
    "Qwen/Qwen3-30B-A3B-Instruct-2507 lm-arena-chat on 1x H100 tp1 ep1, max_num_seqs 16",
    "openai/gpt-oss-120b gpqa on 2x B200 tp2 ep1, max_num_seqs 2048",
    "openai/gpt-oss-120b gpqa on 2x B200 tp2 ep1, max_num_seqs 3072",
}


def test_the_power_model_alone_meets_the_issue_bar_on_every_simulated_row():
    """Issue #40's bar, on the power model's own error (the J/token error it makes at the measured throughput):
    median |error| at most 15 %, none beyond 1.5x but the known misses named in KNOWN_POWER_MISSES. Read from the
    rows `validate` predicts as sim_core/data/validation_rows.json keeps them, which tests/test_validation.py checks
    are the model's now: the suite simulates the energy rows once, there (this test re-simulated all ~150)."""
    doc = json.loads(placed_rows.PATH.read_text(encoding="utf-8"))
    power = [r for r in (dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"])
             if r["group"] == POWER_GROUP and r["error"] is not None]
    assert len(power) >= 150 and statistics.median(abs(r["error"]) for r in power) <= 0.15
    far = {r["what"] for r in power if not 2 / 3 <= 1 + r["error"] <= 1.5}
    assert far <= KNOWN_POWER_MISSES, far - KNOWN_POWER_MISSES


def test_energy_per_token_falls_with_the_batch_as_measured():
    seats = (8, 64, 512)
    measured = [
        float(_row("meta-llama/Llama-3.1-8B-Instruct", "H100", n)["joules_per_output_token"]) for n in seats
    ]
    predicted = [
        simulate_row(_row("meta-llama/Llama-3.1-8B-Instruct", "H100", n))["joules_per_output_token"]
        for n in seats
    ]
    assert measured == sorted(measured, reverse=True)
    assert predicted == sorted(predicted, reverse=True)


def test_summary_counts_rows_beyond_one_and_a_half_times_either_way():
    rows = [
        Check(ENERGY_GROUP, "s", "a", 1.0, "J/tok", 1.1, series="x", variant="8"),
        Check(ENERGY_GROUP, "s", "b", 1.0, "J/tok", 0.6, series="x", variant="16"),
        Check(ENERGY_GROUP, "s", "c", 1.0, "J/tok", 1.6, series="x", variant="32"),
        Check(ENERGY_GROUP, "s", "d", 1.0, "J/tok", None, "skipped"),
        Check(THROUGHPUT_GROUP, "s", "a", 10.0, "tok/s", 10.0),
        Check(POWER_GROUP, "s", "a", 100.0, "W", 160.0),
    ]
    s = energy_summary(rows)
    assert s[POWER_GROUP]["beyond_1_5x"] == 1
    assert s[ENERGY_GROUP]["rows"] == 3 and s[ENERGY_GROUP]["beyond_1_5x"] == 2
    assert s[ENERGY_GROUP]["worst_abs_error"] == pytest.approx(0.6)
    assert s[THROUGHPUT_GROUP]["median_abs_error"] == 0.0
    assert batch_trend(rows, "x") == [(8, 1.0, 1.1), (16, 1.0, 0.6), (32, 1.0, 1.6)]
