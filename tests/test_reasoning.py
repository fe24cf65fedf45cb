"""Reasoning workloads (issue #39 item 3): hidden thinking tokens are decoded like any output token (they count in
decode steps, TPOT, the KV cache and energy) but are not visible output; `metrics.reasoning` reports the two
apart. The `reasoning` preset draws ML.ENERGY v3's problem-solving and conversation lengths; a trace says a
request's hidden tokens in our CSV's thinking_tokens column or OpenAI's reasoning_tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim_core import PRESETS, Scenario, TraceError, run
from sim_core.trace_formats import read_trace_records
from sim_core.workload import REASONING, synthesize

# Qwen3-8B (a thinking model, 40,960-token context) on one H100.
SERVER = dict(hardware="h100", model="qwen3-8b", scheduler="chunked")


def test_the_preset_draws_ml_energys_problem_solving_and_conversation_means():
    """ML.ENERGY v3: problem solving averages 6,988 output tokens, conversation 717 (the visible answer)."""
    preset = PRESETS["reasoning"]
    assert preset.classes == (REASONING,)
    reqs = synthesize(preset, 1.0, 1.0, 40_000, 0.0, seed=3)
    hidden = reqs.hidden_tokens()
    visible = reqs.output_tokens - hidden
    assert reqs.output_tokens.mean() == pytest.approx(6988, rel=0.03)
    assert visible.mean() == pytest.approx(717, rel=0.03)
    assert (hidden >= 1).all() and hidden.max() <= 32768 and (visible >= 4).all()
    again = synthesize(preset, 1.0, 1.0, 40_000, 0.0, seed=3)
    assert np.array_equal(again.thinking_tokens, reqs.thinking_tokens)  # seeded


def test_presets_without_thinking_have_no_hidden_tokens():
    reqs = synthesize(PRESETS["chat"], 4.0, 1.0, 50, 0.0, seed=1)
    assert reqs.thinking_tokens is None and not reqs.hidden_tokens().any()
    assert "reasoning" not in run(Scenario(workload="chat", num_requests=20, **SERVER)).metrics


def csv_trace(rows: list[tuple[float, int, int, int | None]]) -> str:
    head = "arrival_s,prompt_tokens,output_tokens,thinking_tokens"
    return "\n".join([head] + [f"{a},{p},{o},{'' if t is None else t}" for a, p, o, t in rows])


def test_a_traces_thinking_tokens_column_becomes_the_requests_hidden_tokens():
    parsed = read_trace_records(csv_trace([(0.0, 100, 50, 30), (1.0, 80, 20, None), (2.0, 10, 9, 0)]), 100)
    assert parsed.requests.thinking_tokens.tolist() == [30, 0, 0]
    assert parsed.fields["thinking_tokens"].tolist() == [30, -1, 0]  # -1: not recorded


@pytest.mark.parametrize(
    "cell, says", [("51", "from 0 to 50"), ("-1", "between 0 and"), ("x", "thinking_tokens")]
)
def test_a_bad_thinking_count_is_named_by_line_and_field(cell, says):
    with pytest.raises(TraceError, match=says) as caught:
        read_trace_records(csv_trace([(0.0, 10, 5, 1)]) + f"\n1.0,100,50,{cell}", 100)
    assert "line 3" in str(caught.value) and "thinking_tokens" in str(caught.value)


def test_openai_reasoning_tokens_are_hidden_thinking():
    rows = [
        {
            "created": 1_700_000_000 + k,
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": 400,
                "completion_tokens_details": {"reasoning_tokens": 300},
            },
        }
        for k in range(3)
    ]
    parsed = read_trace_records("\n".join(json.dumps(r) for r in rows), 100)
    assert parsed.requests.thinking_tokens.tolist() == [300, 300, 300]
    bad = {
        "created": 1_700_000_000,
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 4,
            "completion_tokens_details": {"reasoning_tokens": 9},
        },
    }
    with pytest.raises(TraceError, match="line 1: reasoning_tokens"):
        read_trace_records(json.dumps(bad), 100)


def paired_traces(tmp_path, n: int = 1000, gap_s: float = 10.0) -> tuple[str, str]:
    """The same requests and visible answers, without and with hidden thinking (the preset's lengths), arriving
    evenly over n x gap_s seconds: long enough that the run's drain is a small part of it."""
    rng = np.random.default_rng(7)
    prompt = rng.integers(100, 800, n)
    visible = REASONING.output.draw(rng, n)
    hidden = np.minimum(REASONING.thinking.draw(rng, n), 12_000)
    plain = csv_trace([(k * gap_s, int(prompt[k]), int(visible[k]), None) for k in range(n)])
    thinking = csv_trace(
        [(k * gap_s, int(prompt[k]), int(visible[k] + hidden[k]), int(hidden[k])) for k in range(n)]
    )
    paths = tmp_path / "plain.csv", tmp_path / "thinking.csv"
    for path, text in zip(paths, (plain, thinking), strict=True):
        path.write_text(text, encoding="utf-8")
    return str(paths[0]), str(paths[1])


def test_thinking_tokens_change_tpot_kv_and_energy_but_not_visible_output_throughput(tmp_path):
    plain_path, thinking_path = paired_traces(tmp_path)
    plain = run(Scenario(trace=plain_path, energy=True, **SERVER)).metrics
    thinking = run(Scenario(trace=thinking_path, energy=True, **SERVER)).metrics
    assert plain["completed"] == thinking["completed"] == 1000
    r = thinking["reasoning"]
    # Every output token but each request's first (sampled by its prefill) is a decode step's token, less those
    # a preemption's recompute prefilled again.
    decoded = thinking["decode_tokens"] + thinking["completed"]
    assert (
        0.99 * decoded <= r["visible_output_tokens"] + r["thinking_tokens"] and thinking["preemptions"] >= 0
    )
    # Decoded: each thinking token is a decode step's token, so more requests run at once, over longer contexts.
    assert thinking["decode_tokens"] > 5 * plain["decode_tokens"]
    assert thinking["tpot_ms"]["mean"] > 1.05 * plain["tpot_ms"]["mean"]
    assert thinking["kv_cache_usage"]["mean"] > 3 * plain["kv_cache_usage"]["mean"]
    assert thinking["energy"]["energy_j"] > 1.2 * plain["energy"]["energy_j"]  # idle power is in both
    assert thinking["output_throughput"] > 5 * plain["output_throughput"]
    # Not shown: the visible output is the same answers' as without thinking, per second of a run that drains
    # a little longer (the last requests think for up to 12,000 tokens after the last arrival).
    assert r["visible_output_tokens"] == round(plain["output_throughput"] * plain["duration_s"])
    assert r["visible_output_throughput"] * thinking["duration_s"] == pytest.approx(
        plain["output_throughput"] * plain["duration_s"]
    )
    assert thinking["duration_s"] - plain["duration_s"] < 0.05 * plain["duration_s"]
    assert r["visible_output_throughput"] == pytest.approx(plain["output_throughput"], rel=0.05)
    assert r["thinking_share"] == pytest.approx(
        r["thinking_tokens"] / (r["thinking_tokens"] + r["visible_output_tokens"])
    )
