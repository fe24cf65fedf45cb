"""Workloads: seeded presets, arrival processes, length distributions, and the trace readers."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

from sim_core import PRESETS, TraceError
from sim_core import workload as W
from sim_core.kernel.content_hash import content_hashes
from sim_core.traces import read_csv_trace, read_trace
from sim_core.workload import LengthDist, arrival_times, synthesize


def _arrays(reqs) -> dict:
    return {f.name: getattr(reqs, f.name) for f in dataclasses.fields(reqs)
            if isinstance(getattr(reqs, f.name), np.ndarray)}


# -------------------------------------------------------------------------------------------------------------
# Presets
# -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_seeded_and_reproducible(name):
    p = PRESETS[name]
    a = synthesize(p, p.rate, p.burstiness, None, 60.0, 7)
    b = synthesize(p, p.rate, p.burstiness, None, 60.0, 7)
    c = synthesize(p, p.rate, p.burstiness, None, 60.0, 8)
    assert len(a) > 10
    for key, arr in _arrays(a).items():
        assert np.array_equal(arr, _arrays(b)[key]), key
    assert a.class_names == b.class_names
    assert len(a) != len(c) or not np.array_equal(a.prompt_tokens, c.prompt_tokens)
    # Open-loop arrivals are sorted and inside the window; every length is at least one token.
    parent = a.parents() if hasattr(a, "parents") else np.full(len(a), -1)
    opened = a.arrival_s[parent < 0]
    assert (np.diff(opened) >= 0).all() and opened.min() >= 0 and opened.max() < 60.0
    assert (a.prompt_tokens >= 1).all() and (a.output_tokens >= 1).all()
    assert ((a.request_class >= 0) & (a.request_class < len(a.class_names))).all()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_lengths_stay_within_their_clip_bounds(name):
    p = PRESETS[name]
    reqs = synthesize(p, p.rate, p.burstiness, 3000, 60.0, 3)
    system = getattr(p, "system_prompt_tokens", 0)
    structure = getattr(p, "structure", "plain")
    for k, cls in enumerate(p.classes):
        mine = reqs.request_class == k
        if not mine.any():
            continue
        hidden = reqs.hidden_tokens()[mine]  # a reasoning class's thinking, decoded before its visible answer
        out = reqs.output_tokens[mine] - hidden
        assert out.min() >= cls.output.low and out.max() <= cls.output.high
        if cls.thinking is not None:
            assert hidden.min() >= cls.thinking.low and hidden.max() <= cls.thinking.high
        else:
            assert not hidden.any()
        if structure == "plain":  # the prompt is the shared system prompt + the request's own text
            own = reqs.prompt_tokens[mine] - system
            assert own.min() >= cls.prompt.low and own.max() <= cls.prompt.high
        assert (reqs.prompt_tokens[mine] >= cls.prompt.low + system).all()
    # The draws themselves, many of them: clipped, never outside the bounds, and not all at a bound.
    rng = np.random.default_rng(0)
    for cls in p.classes:
        for dist in (cls.prompt, cls.output) + (() if cls.thinking is None else (cls.thinking,)):
            x = dist.draw(rng, 20_000)
            assert x.dtype == np.int64 and x.min() >= dist.low and x.max() <= dist.high
            if dist.low == dist.high:  # an exact length (the random preset's default: vLLM's range ratio 0)
                assert (x == dist.low).all()
                continue
            assert ((x > dist.low) & (x < dist.high)).mean() > 0.5


def test_rag_has_a_quarter_retrieval_prompts_of_three_to_four_thousand_tokens():
    reqs = synthesize(PRESETS["rag"], 6.0, 1.0, 40_000, 60.0, 0)
    retrieval = reqs.request_class == reqs.class_names.index("retrieval")
    assert retrieval.mean() == pytest.approx(0.25, abs=0.01)  # binomial sd 0.002
    long = reqs.prompt_tokens[retrieval]
    assert 3000 <= np.median(long) <= 4000
    assert ((long >= 3000) & (long <= 4000)).mean() > 0.8
    lo, hi = getattr(W, "RAG_DOC_TOKENS", (3000, 4000))
    question = W.RETRIEVAL.prompt if hasattr(W, "RETRIEVAL") else None
    system = getattr(PRESETS["rag"], "system_prompt_tokens", 0)
    if question is not None and hasattr(W, "RAG_DOC_TOKENS"):  # system prompt + document + question
        assert long.min() >= system + lo + question.low and long.max() <= system + hi + question.high
    # The chat streams are short by comparison.
    assert np.median(reqs.prompt_tokens[~retrieval]) < 500


def test_exact_request_count_starts_at_zero():
    for name, p in PRESETS.items():
        reqs = synthesize(p, p.rate, p.burstiness, 50, 60.0, 1)
        assert 1 <= len(reqs) <= 50, name
        assert reqs.arrival_s.min() == 0.0, name


# -------------------------------------------------------------------------------------------------------------
# Arrival processes
# -------------------------------------------------------------------------------------------------------------
def _cv(x):
    return x.std() / x.mean()


@pytest.mark.parametrize("burstiness, cv_tol", [(1.0, 0.05), (3.0, 0.3), (0.5, 0.03)])
def test_arrival_gaps_have_the_requested_rate_and_burstiness(burstiness, cv_tol):
    rng = np.random.default_rng(11)
    t = arrival_times(rng, 5.0, burstiness, 40_000, 0.0)
    assert t[0] == 0.0 and (np.diff(t) >= 0).all()
    gaps = np.diff(t)
    # Mean gap 1/rate: the sample mean's sd is cv/(rate sqrt(n)) ~ 0.5-1.5% of it.
    assert 1.0 / gaps.mean() == pytest.approx(5.0, rel=0.05 if burstiness > 1 else 0.03)
    assert _cv(gaps) == pytest.approx(burstiness, abs=cv_tol)


@pytest.mark.parametrize("burstiness", [1.0, 3.0])
def test_arrivals_over_a_duration_count_rate_times_duration(burstiness):
    rate, duration = 20.0, 1000.0
    counts = []
    for seed in range(5):
        t = arrival_times(np.random.default_rng(seed), rate, burstiness, None, duration)
        assert t.min() >= 0 and t.max() < duration and (np.diff(t) >= 0).all()
        counts.append(len(t))
    # A renewal process's count over T has sd ~ cv sqrt(rate T) (~140 for cv 1, ~420 for cv 3, of 20,000).
    assert np.mean(counts) == pytest.approx(rate * duration, abs=5 * burstiness * np.sqrt(rate * duration))
    if burstiness == 1.0:
        gaps = np.diff(arrival_times(np.random.default_rng(0), rate, 1.0, None, duration))
        assert _cv(gaps) == pytest.approx(1.0, abs=0.05)


def test_arrivals_spanning_many_chunks_keep_going():
    # The duration generator draws gaps in chunks: a long window must not stop at the end of the first one.
    t = arrival_times(np.random.default_rng(3), 0.5, 20.0, None, 100_000.0)
    assert t.max() > 80_000


# -------------------------------------------------------------------------------------------------------------
# CSV traces
# -------------------------------------------------------------------------------------------------------------
def test_csv_trace_reader_sorts_by_arrival_and_shifts_to_zero():
    text = ("prompt_tokens, arrival_s ,output_tokens,comment\n"
            "100,12.5,20,b\n"
            "\n"
            "50,10.0,5,a\n"
            "70,12.5,7,c\n")
    reqs = read_csv_trace(text, 100)
    assert list(reqs.arrival_s) == [0.0, 2.5, 2.5]
    assert list(reqs.prompt_tokens) == [50, 100, 70]  # stable: equal arrivals keep file order
    assert list(reqs.output_tokens) == [5, 20, 7]
    assert reqs.prompt_tokens.dtype == np.int64 and reqs.arrival_s.dtype == np.float64


@pytest.mark.parametrize("text, words", [
    ("arrival_s,prompt_tokens\n0,5\n", ["output_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,5\nsoon,5,5\n", ["line 3", "arrival_s"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,5\n-1,5,5\n", ["line 3", "arrival_s"]),
    ("arrival_s,prompt_tokens,output_tokens\nnan,5,5\n", ["line 2", "arrival_s"]),
    ("arrival_s,prompt_tokens,output_tokens\ninf,5,5\n", ["line 2", "arrival_s"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,0,5\n", ["line 2", "prompt_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,0\n", ["line 2", "output_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,-3\n", ["line 2", "output_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,1.5,3\n", ["line 2", "prompt_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,x\n", ["line 2", "output_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,5\n", ["line 2", "columns"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,99999999999,5\n", ["line 2", "prompt_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n", ["no requests"]),
    ("", ["empty"]),
])
def test_csv_trace_reader_rejects_malformed_files_naming_line_and_field(text, words):
    with pytest.raises(TraceError) as err:
        read_csv_trace(text, 100)
    for w in words:
        assert w in str(err.value)


def test_csv_trace_reader_enforces_the_row_limit():
    text = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},5,5\n" for i in range(4))
    assert len(read_csv_trace(text, 4)) == 4
    with pytest.raises(TraceError, match="more than 3"):
        read_csv_trace(text, 3)


def test_csv_trace_with_a_byte_order_mark_is_read():
    """Regression: Excel's 'CSV UTF-8' starts with a byte-order mark, which made the first column unreadable."""
    reqs = read_csv_trace("\ufeffarrival_s,prompt_tokens,output_tokens\n0,5,5\n", 10)
    assert len(reqs) == 1


# -------------------------------------------------------------------------------------------------------------
# Other trace formats
# -------------------------------------------------------------------------------------------------------------
def test_mooncake_jsonl_trace():
    lines = [{"timestamp": 2000, "input_length": 700, "output_length": 10, "hash_ids": [1, 2]},
             {"timestamp": 500, "input_length": 600, "output_length": 5, "hash_ids": [1, 3]}]
    reqs = read_trace("\n".join(json.dumps(x) for x in lines) + "\n", 100)
    assert list(reqs.arrival_s) == [0.0, 1.5]  # ms -> s, sorted, shifted
    assert list(reqs.prompt_tokens) == [600, 700] and list(reqs.output_tokens) == [5, 10]
    # Both prompts start with the same 512-token block (hash id 1): their first block hashes match.
    hashes, off = content_hashes(*reqs.content(), 16)
    assert np.array_equal(hashes[off[0]:off[0] + 32], hashes[off[1]:off[1] + 32])
    assert not np.array_equal(hashes[off[0] + 32:off[0] + 37], hashes[off[1] + 32:off[1] + 37])


@pytest.mark.parametrize("line, words", [
    ('{"timestamp": 1, "input_length": 5}', ["line 1", "output_length"]),
    ('{"timestamp": -1, "input_length": 5, "output_length": 5}', ["line 1", "timestamp"]),
    ('{"timestamp": 1, "input_length": 0, "output_length": 5}', ["line 1", "input_length"]),
    ('{"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": [-2]}', ["line 1", "hash_ids"]),
    ('{"timestamp": 1, "input_length": 5, "output_length": 5}\n{oops', ["line 2", "JSON"]),
])
def test_mooncake_trace_errors_name_line_and_field(line, words):
    with pytest.raises(TraceError) as err:
        read_trace(line, 100)
    for w in words:
        assert w in str(err.value)


AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:47.0000000,300,20\n"
         "2023-11-16 18:15:46.5000000,100,10\n")


def test_azure_trace():
    reqs = read_trace(AZURE, 100)
    assert list(reqs.arrival_s) == pytest.approx([0.0, 0.5])
    assert list(reqs.prompt_tokens) == [100, 300] and list(reqs.output_tokens) == [10, 20]
    with pytest.raises(TraceError, match="line 2"):
        read_trace(AZURE.replace("2023-11-16 18:15:47.0000000", "yesterday"), 100)
    with pytest.raises(TraceError, match="line 3.*ContextTokens"):
        read_trace(AZURE.replace(",100,", ",0,"), 100)


def test_azure_trace_times_do_not_depend_on_the_local_time_zone(monkeypatch):
    """Regression: naive TIMESTAMPs were read as local time, so gaps across a daylight-saving change depended on
    the machine's time zone."""
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-03-12 01:59:00,5,5\n2023-03-12 03:01:00,5,5\n"
    gaps = {}
    for tz in ("UTC", "America/New_York"):
        monkeypatch.setenv("TZ", tz)
        time.tzset()
        gaps[tz] = float(read_trace(text, 10).arrival_s[1])
    monkeypatch.undo()
    time.tzset()
    assert gaps["UTC"] == gaps["America/New_York"] == 62 * 60


@pytest.mark.parametrize("dist", [LengthDist(300, 1.2, 1, 2000), LengthDist(2.5, 0.3, 1, 10),
                                  LengthDist(low=3, high=9, uniform=True)])
def test_draw_one_is_draw_of_one_from_the_same_stream(dist):
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [int(dist.draw(a, 1)[0]) for _ in range(5000)] == [dist.draw_one(b) for _ in range(5000)]
    assert a.random() == b.random()  # and each consumed the same random numbers
