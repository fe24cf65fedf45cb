"""Rows of each trace format as its documentation describes them (for the formats without a real sample here:
sim_core/data/traces/README.md says why), and bad rows: each named by its line and field, and no input at all
making a reader raise anything but a TraceError (fuzzed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core.trace_formats import FORMATS, detect_format, read_trace_records
from sim_core.traces import TraceError


def parse(text: str, fmt: str | None = None):
    return read_trace_records(text, 10_000, fmt)


def error_of(text: str, fmt: str | None = None) -> str:
    with pytest.raises(TraceError) as caught:
        parse(text, fmt)
    return str(caught.value)


# Two session starts as the Qwen-Bailian README's schema writes them (its example row, and a second).
BAILIAN_ROWS = [
    {
        "chat_id": 0,
        "parent_chat_id": -1,
        "timestamp": 0.0,
        "input_length": 502,
        "output_length": 1494,
        "type": "thinking",
        "turn": 1,
        "hash_ids": list(range(32)),
    },
    {
        "chat_id": 1,
        "parent_chat_id": -1,
        "timestamp": 0.37,
        "input_length": 40,
        "output_length": 7,
        "type": "text",
        "turn": 1,
        "hash_ids": [0, 32, 33],
    },
]


# ----- the formats without a fetchable sample, in their documented shapes -----

AIPERF = {
    "metadata": {
        "conversation_id": "c1",
        "turn_index": 0,
        "request_start_ns": 1759813207532900363,
        "request_end_ns": 1759813207838764604,
    },
    "metrics": {
        "input_sequence_length": {"value": 550, "unit": "tokens"},
        "time_to_first_token": {"value": 255.9, "unit": "ms"},
        "request_latency": {"value": 297.5, "unit": "ms"},
        "output_sequence_length": {"value": 9, "unit": "tokens"},
    },
    "error": None,
}


def _otel(start_ns: int, tokens: tuple[int, int], session: str) -> dict:
    attrs = [
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(tokens[0])}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": str(tokens[1])}},
        {"key": "gen_ai.usage.cache_read.input_tokens", "value": {"intValue": "64"}},
        {"key": "gen_ai.conversation.id", "value": {"stringValue": session}},
    ]
    spans = [
        {
            "name": "chat m",
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(start_ns + 2 * 10**9),
            "attributes": attrs,
        },
        {"name": "http", "startTimeUnixNano": str(start_ns), "attributes": []},
    ]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}


DOCUMENTED = {
    "azure": (
        "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2024-10-15 00:00:01.5,2,1200,40\n"
        "2024-10-15 00:00:03.0,0,800,12\n",
        {"images": [2, 0]},
        [1200, 800],
        [0.0, 1.5],
    ),
    "bailian": (
        "\n".join(json.dumps(r) for r in BAILIAN_ROWS),
        {"parent_chat_id": [-1, -1]},
        None,
        [0, 0.37],
    ),
    "swissai": (
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "created_at": "2025-09-01T10:00:00.000Z",
                    "finished_at": "2025-09-01T10:00:04.000Z",
                    "status": "DEFAULT",
                    "model": "Qwen/Qwen3-32B",
                    "reported_token_input": 40,
                    "reported_token_output": 9,
                    "bucket_ids": [5, 6],
                },
                {
                    "created_at": "2025-09-01T10:00:01.000Z",
                    "status": "DEFAULT",
                    "model": "Qwen/Qwen3-32B",
                    "reported_token_input": -1,
                    "reported_token_output": -1,
                },
                {
                    "created_at": "2025-09-01T10:00:02.000Z",
                    "finished_at": "2025-09-01T10:00:03.000Z",
                    "status": "DEFAULT",
                    "model": "swiss-ai/Apertus-70B",
                    "reported_token_input": 33,
                    "reported_token_output": 4,
                    "bucket_ids": [5, 7],
                },
            ]
        ),
        {"latency_s": [4.0, 1.0], "model": [0, 1]},
        [40, 33],
        [0.0, 2.0],
    ),
    "openai": (
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "created": 1700000000,
                    "session_id": "s1",
                    "usage": {
                        "prompt_tokens": 100,
                        "completion_tokens": 20,
                        "prompt_tokens_details": {"cached_tokens": 64},
                        "completion_tokens_details": {"reasoning_tokens": 12},
                    },
                },
                {"timestamp": "2023-11-14T22:13:25Z", "prompt_tokens": 50, "completion_tokens": 5},
            ]
        ),
        {"cached_tokens": [64, -1], "reasoning_tokens": [12, -1], "session": [0, -1]},
        [100, 50],
        [0.0, 5.0],
    ),
    "aiperf": (
        "\n".join(json.dumps(r) for r in [AIPERF, {**AIPERF, "error": {"code": 499}, "metrics": {}}]),
        {"ttft_s": [0.2559], "turn": [0]},
        [550],
        [0.0],
    ),
    "otel": (
        json.dumps(_otel(10**18, (300, 20), "c"))
        + "\n"
        + json.dumps(_otel(10**18 + 5 * 10**8, (40, 2), "d")),
        {"cached_tokens": [64, 64], "session": [0, 1], "latency_s": [2.0, 2.0]},
        [300, 40],
        [0.0, 0.5],
    ),
}


@pytest.mark.parametrize("fmt", DOCUMENTED)
def test_documented_rows_read_as_their_format(fmt):
    text, fields, prompts, arrivals = DOCUMENTED[fmt]
    assert detect_format(text.splitlines()[0]) == fmt
    parsed = parse(text)
    assert set(parsed.fields) == set(FORMATS[fmt].fields)
    for name, values in fields.items():
        assert parsed.fields[name].tolist() == pytest.approx(values, abs=1e-6), name
    if prompts is not None:
        assert parsed.requests.prompt_tokens.tolist() == prompts
    assert parsed.requests.arrival_s.tolist() == pytest.approx(arrivals, abs=1e-6)


def test_failed_rows_are_counted_not_replayed():
    assert parse(DOCUMENTED["swissai"][0]).skipped == 1
    assert parse(DOCUMENTED["aiperf"][0]).skipped == 1
    assert "all failed requests" in error_of(json.dumps({**AIPERF, "error": {"code": 500}}))


# ----- bad rows: named by line and field -----

WEKA_OK = {
    "id": "x",
    "models": ["m"],
    "block_size": 64,
    "hash_id_scope": "local",
    "requests": [{"t": 0, "type": "n", "model": "m", "in": 128, "out": 4, "hash_ids": [1, 2]}],
}


def _weka(**change) -> str:
    req = {**WEKA_OK["requests"][0], **change}
    return json.dumps({**WEKA_OK, "requests": [req]})


@pytest.mark.parametrize(
    "text, words",
    [
        ("\n" + _weka(out=0), ["line 2", "requests[0].out", "0"]),
        (_weka(t=-1), ["line 1", "requests[0].t"]),
        (_weka(hash_ids=[1, -2]), ["line 1", "requests[0].hash_ids", "item 1"]),
        (_weka(hash_ids=[1 << 30]), ["line 1", "requests[0].hash_ids", "local id"]),
        (_weka(type="x"), ["line 1", "requests[0].type", "'x'"]),
        (json.dumps({**WEKA_OK, "block_size": 0}), ["line 1", "block_size"]),
        (json.dumps({**WEKA_OK, "hash_id_scope": "planet"}), ["line 1", "hash_id_scope", "planet"]),
        (_weka() + "\n" + json.dumps({**WEKA_OK, "block_size": 16}), ["line 2", "block_size is 16"]),
        (
            '{"chat_id": 1, "timestamp": 1, "input_length": 5, "output_length": "9"}',
            ["line 1", "output_length"],
        ),
        ('{"chat_id": -4, "timestamp": 1, "input_length": 5, "output_length": 9}', ["line 1", "chat_id"]),
        (
            '{"created_at": "yesterday", "reported_token_input": 1, "reported_token_output": 1}',
            ["line 1", "created_at", "yesterday"],
        ),
        (
            '{"created": 1, "usage": {"prompt_tokens": 0, "completion_tokens": 1}}',
            ["line 1", "prompt_tokens"],
        ),
        ('{"created": 1, "usage": {"prompt_tokens": 5}}', ["line 1", "completion_tokens"]),
        (
            json.dumps({**AIPERF, "metrics": {"input_sequence_length": {"value": 1.5}}}),
            ["line 1", "metrics.input_sequence_length"],
        ),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": 7}]}]}), ["line 1", "spans", "list"]),
        (
            "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2024-10-15 00:00:01,-1,5,5\n",
            ["line 2", "NumImages"],
        ),
    ],
)
def test_bad_rows_name_their_line_and_field(text, words):
    message = error_of(text)
    for w in words:
        assert w in message, message
    assert len(message) < 300


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(max_size=300)
    | st.lists(
        st.sampled_from(
            [
                '{"t": 0',
                '"requests": [',
                '"hash_ids": [1, 2]',
                '{"chat_id": 1,',
                '"timestamp": 5,',
                '"in": 3',
                "]}",
                "}",
                '"block_size": 64,',
                '"resourceSpans": [',
                '"metadata": {}',
                '"usage": {',
                "NaN",
                "1e999",
                ",",
                "\n",
                '"',
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_no_input_makes_a_reader_raise_anything_but_a_trace_error(fmt, text):
    try:
        parse(text, fmt)
    except TraceError:
        pass


def test_a_weka_line_longer_than_other_formats_allow_is_read():
    hashes = list(range(1, 150_000))  # 1.2 MB of ids: beyond the 1 MiB a line of any other format may have
    text = _weka(**{"in": 64 * len(hashes), "hash_ids": hashes})
    assert len(text) > 1 << 20
    parsed = parse(text)
    assert parsed.requests.prompt_tokens.tolist() == [64 * len(hashes)]
    assert "longer than" in error_of(
        '{"timestamp": 1, "input_length": 5, "output_length": 5, "x": "' + "9" * (2 << 20) + '"}'
    )


@pytest.mark.parametrize("written", ["²", "9" * 5000, "12.5", "-3"])
def test_otel_integers_written_as_odd_strings_are_named(written):
    span = {
        "startTimeUnixNano": "1",
        "attributes": [
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": written}},
            {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "3"}},
        ],
    }
    message = error_of(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    assert "line 1" in message and "gen_ai.usage.input_tokens" in message
