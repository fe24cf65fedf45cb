"""sim_core/studies/mlenergy_workload.py: each ML.ENERGY row is simulated with the requests, engine settings and
steady-state cut its benchmark run had (ml-energy/benchmark configs and client)."""

from __future__ import annotations

import numpy as np
import pytest

from sim_core.studies.mlenergy_workload import (
    GPQA_PROMPT_TOKENS,
    MAX_OUTPUT_TOKENS,
    chat_prompt_lengths,
    max_model_len,
    num_requests,
    output_lengths,
    request_trace,
    steady_window,
)
from sim_core.workload import CHAT_FOLLOW_UP, CHAT_TURNS


def _row(**over) -> dict:
    row = {"task": "lm-arena-chat", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "B200",
           "max_num_seqs": "64", "avg_output_len": "390"}
    return row | over


def test_request_count_is_the_tasks_times_the_sweeps_repeats():
    assert num_requests(_row()) == 1024  # repeats 1 below 128 on this sweep
    assert num_requests(_row(max_num_seqs="2048")) == 1024 * 8
    assert num_requests(_row(gpu="H100", max_num_seqs="512")) == 1024 * 2
    assert num_requests(_row(task="gpqa", model="openai/gpt-oss-120b", max_num_seqs="3072")) == 198 * 18
    assert num_requests(_row(task="gpqa", model="Qwen/Qwen3-8B", gpu="H100", max_num_seqs="96")) == 198


def test_max_model_len_is_the_configs_within_the_models_context():
    assert max_model_len(_row(), 131072) == 20480
    assert max_model_len(_row(), 8192) == 8192
    assert max_model_len(_row(task="gpqa", model="Qwen/Qwen3-8B"), 131072) == 40960
    assert max_model_len(_row(task="gpqa", model="openai/gpt-oss-120b"), 131072) == 51200


def test_outputs_keep_the_rows_mean_and_spread_under_the_benchmarks_cut():
    rng = np.random.default_rng(1)
    chat = output_lengths(_row(), rng, 20000)
    assert chat.mean() == pytest.approx(390, rel=0.05)
    assert chat.std() > 0.5 * chat.mean()  # spread, not one length for all
    gpqa = output_lengths(_row(task="gpqa", avg_output_len="30000"), rng, 5000)
    assert gpqa.max() == MAX_OUTPUT_TOKENS["gpqa"]  # the benchmark's --max-output-tokens cuts the tail


def test_a_chat_conversation_gives_one_request_per_turn_each_prompt_holding_the_history_before_it():
    prompts = chat_prompt_lengths(np.random.default_rng(2), 20000)
    longer = prompts[1:] > prompts[:-1]  # every later turn repeats its history, so is longer than the turn before
    # With CHAT_TURNS turns per conversation on average, 1 - 1/CHAT_TURNS of requests are later turns (and a new
    # conversation's first message is longer than the request before it some of the time).
    assert longer.mean() >= 1 - 1 / CHAT_TURNS - 0.02
    first_messages = CHAT_FOLLOW_UP.draw(np.random.default_rng(3), 20000)
    assert prompts.mean() > 1.5 * first_messages.mean()


def test_the_trace_sends_everything_at_once_and_fits_the_context():
    text = request_trace(_row(), 8192)
    lines = text.splitlines()
    assert lines[0] == "arrival_s,prompt_tokens,output_tokens" and len(lines) == 1 + 1024
    rows = np.array([[float(x) for x in line.split(",")] for line in lines[1:]])
    assert (rows[:, 0] == 0).all() and (rows[:, 1] + rows[:, 2] <= 8192).all()
    gpqa = request_trace(_row(task="gpqa", model="Qwen/Qwen3-8B", avg_output_len="8000"), 40960)
    assert {line.split(",")[1] for line in gpqa.splitlines()[1:]} == {str(GPQA_PROMPT_TOKENS)}
    assert request_trace(_row(), 8192) == text  # seeded: the same row, the same requests


def test_steady_window_is_the_benchmarks_request_tracker_cut():
    first = np.array([0.1, 0.2, 0.3, 0.4, 5.0, 6.0, 7.0, 8.0])
    finish = np.array([1.0, 2.0, 3.0, 4.0, 9.0, 10.0, 11.0, 12.0])
    # 3 seats, 8 requests: starts at the 3rd first token, ends when 8 - 3 - 1 = 4 have finished.
    assert steady_window(first, finish, 3) == (0.3, 4.0)
