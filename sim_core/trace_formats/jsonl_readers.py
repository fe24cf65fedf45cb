"""Readers of the JSON-lines traces with one request a line: Mooncake (hash ids of `block_tokens`-token blocks,
512 in its published traces), Alibaba's Qwen-Bailian traces (16-token blocks, sessions through parent_chat_id),
the Swiss AI serving trace, OpenAI-style request logs, AIPerf's profile_export.jsonl and OpenTelemetry (OTLP/JSON)
span exports with the GenAI semantic conventions, as inference-perf and instrumented servers write them."""

from __future__ import annotations

from collections.abc import Iterable

from ..quoting import quote
from .common import (
    MAX_NUMBER_CHARS,
    ParsedTrace,
    TraceBuilder,
    TraceError,
    hash_ids,
    json_object,
    require,
    seconds,
    token_count,
)
from .csv_readers import azure_time

MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's published traces (its README: "hash_ids ... 512 tokens per block")
BAILIAN_BLOCK_TOKENS = (
    16  # qwen-bailian-usagetraces-anon README: "Salted SipHash blocks (16 tokens per block)"
)
SWISSAI_BLOCK_TOKENS = 16  # eth-easl/swissai-serving-trace's bucket_ids: 16-token buckets


def json_rows(lines: Iterable[str]):
    """(line number, object) of each line with something in it."""
    for line_no, line in enumerate(lines, start=1):
        if line.strip():
            yield line_no, json_object(line_no, line)


def read_mooncake(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """Mooncake's JSONL: timestamp (ms), input_length, output_length and hash_ids, the ids of the prompt's
    `block_tokens`-token blocks (512 in Mooncake's own traces; equal ids = shared content)."""
    out = TraceBuilder(max_rows, block_tokens=block_tokens or MOONCAKE_BLOCK_TOKENS)
    for line_no, row in json_rows(lines):
        require(line_no, row, "timestamp", "input_length", "output_length")
        out.add(
            line_no,
            seconds(line_no, "timestamp", row["timestamp"], scale=1e-3, unit="ms"),
            token_count(line_no, "input_length", row["input_length"]),
            token_count(line_no, "output_length", row["output_length"]),
            hash_ids(line_no, row.get("hash_ids", [])),
        )
    return out.finish()


def _whole(line_no: int, name: str, value: object, least: int = -1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 1 << 62:
        raise TraceError(f"line {line_no}: {name} must be a whole number from {least} up, got {quote(value)}")
    return value


def read_bailian(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """Qwen-Bailian (alibaba-edu/qwen-bailian-usagetraces-anon: To-C traceA, To-B traceB, thinking, coder):
    chat_id, parent_chat_id (-1 for a session's first request), timestamp (s), input_length, output_length,
    type, turn, hash_ids (16-token blocks, the last one partial). Keeps chat_id, parent_chat_id, turn, type."""
    fields = {"chat_id": "q", "parent_chat_id": "q", "turn": "q", "type": "q"}
    out = TraceBuilder(max_rows, fields, block_tokens or BAILIAN_BLOCK_TOKENS, text_fields=("type",))
    for line_no, row in json_rows(lines):
        require(line_no, row, "chat_id", "timestamp", "input_length", "output_length")
        out.add(
            line_no,
            seconds(line_no, "timestamp", row["timestamp"]),
            token_count(line_no, "input_length", row["input_length"]),
            token_count(line_no, "output_length", row["output_length"]),
            hash_ids(line_no, row.get("hash_ids", [])),
            chat_id=_whole(line_no, "chat_id", row["chat_id"], 0),
            parent_chat_id=_whole(line_no, "parent_chat_id", row.get("parent_chat_id", -1)),
            turn=_whole(line_no, "turn", row.get("turn", 1), 0),
            type=out.code("type", row.get("type", "")),
        )
    return out.finish()


def _iso_seconds(line_no: int, name: str, value: object) -> float:
    if not isinstance(value, str):
        raise TraceError(f"line {line_no}: {name} must be an ISO-8601 date-time, got {quote(value)}")
    return azure_time(value, line_no, name)


def read_swissai(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """The Swiss AI serving trace (eth-easl/swissai-serving-trace, trace.jsonl and its *-buckets files):
    created_at and finished_at (ISO-8601), status, model, reported_token_input / reported_token_output (-1 when
    not recorded: such rows, and status ERROR ones, are left out) and, in the buckets files, bucket_ids (16-token
    blocks). Keeps model and latency_s (finished_at - created_at)."""
    out = TraceBuilder(
        max_rows,
        {"model": "q", "latency_s": "d"},
        block_tokens or SWISSAI_BLOCK_TOKENS,
        text_fields=("model",),
    )
    for line_no, row in json_rows(lines):
        require(line_no, row, "created_at", "reported_token_input", "reported_token_output")
        start = _iso_seconds(line_no, "created_at", row["created_at"])
        tokens = (row["reported_token_input"], row["reported_token_output"])
        if str(row.get("status", "")).upper() == "ERROR" or -1 in tokens:
            out.skipped += 1
            continue
        end = row.get("finished_at")
        latency = None if end is None else max(0.0, _iso_seconds(line_no, "finished_at", end) - start)
        out.add(
            line_no,
            start,
            token_count(line_no, "reported_token_input", tokens[0]),
            token_count(line_no, "reported_token_output", tokens[1]),
            hash_ids(line_no, row.get("bucket_ids", []), "bucket_ids"),
            model=out.code("model", row.get("model", "")),
            latency_s=latency,
        )
    return out.finish()


def _number_at(row: dict, path: tuple[str, ...]) -> object:
    """row[path[0]][path[1]]...; None where a key is missing."""
    for key in path:
        if not isinstance(row, dict) or key not in row:
            return None
        row = row[key]
    return row


def _openai_time(line_no: int, row: dict) -> float:
    for name in ("timestamp", "created", "created_at"):
        if name in row:
            value = row[name]
            return (
                _iso_seconds(line_no, name, value)
                if isinstance(value, str)
                else seconds(line_no, name, value)
            )
    raise TraceError(f"line {line_no}: missing field timestamp (or created, created_at)")


def read_openai(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """OpenAI-style request logs, one JSON object a line: a time (timestamp, created or created_at: seconds
    since the epoch or ISO-8601) and the response's usage: prompt_tokens, completion_tokens,
    prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens (also accepted at the top
    level), with an optional session_id (or user). Keeps cached_tokens, reasoning_tokens and session."""
    fields = {"cached_tokens": "q", "reasoning_tokens": "q", "session": "q"}
    out = TraceBuilder(max_rows, fields, text_fields=("session",))
    for line_no, row in json_rows(lines):
        usage = row.get("usage") if isinstance(row.get("usage"), dict) else row
        require(line_no, usage, "prompt_tokens", "completion_tokens")
        cached = _number_at(usage, ("prompt_tokens_details", "cached_tokens"))
        hidden = _number_at(usage, ("completion_tokens_details", "reasoning_tokens"))
        session = row.get("session_id", row.get("user"))
        out.add(
            line_no,
            _openai_time(line_no, row),
            token_count(line_no, "prompt_tokens", usage["prompt_tokens"]),
            token_count(line_no, "completion_tokens", usage["completion_tokens"]),
            cached_tokens=None if cached is None else token_count(line_no, "cached_tokens", cached, least=0),
            reasoning_tokens=None
            if hidden is None
            else token_count(line_no, "reasoning_tokens", hidden, least=0),
            session=None if session is None else out.code("session", session),
        )
    return out.finish()


def _metric(row: dict, name: str) -> object:
    value = _number_at(row, ("metrics", name))
    return value.get("value") if isinstance(value, dict) else value


def read_aiperf(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """AIPerf's per-request export (profile_export.jsonl): metadata.request_start_ns, conversation_id and
    turn_index, metrics.input_sequence_length and output_sequence_length ({"value": n}); a record with an error
    is a failed request, left out. Keeps session (conversation_id), turn, ttft_s and latency_s as measured."""
    fields = {"session": "q", "turn": "q", "ttft_s": "d", "latency_s": "d"}
    out = TraceBuilder(max_rows, fields, text_fields=("session",))
    for line_no, row in json_rows(lines):
        require(line_no, row, "metadata", "metrics")
        if row.get("error") is not None or not isinstance(row["metrics"], dict):
            out.skipped += 1
            continue
        meta = row["metadata"] if isinstance(row["metadata"], dict) else {}
        require(line_no, meta, "request_start_ns")
        ttft, latency = _metric(row, "time_to_first_token"), _metric(row, "request_latency")
        out.add(
            line_no,
            seconds(
                line_no, "metadata.request_start_ns", meta["request_start_ns"], scale=1e-9, unit="nanoseconds"
            ),
            token_count(line_no, "metrics.input_sequence_length", _metric(row, "input_sequence_length")),
            token_count(line_no, "metrics.output_sequence_length", _metric(row, "output_sequence_length")),
            session=out.code("session", meta.get("conversation_id", meta.get("x_correlation_id", ""))),
            turn=meta.get("turn_index") if isinstance(meta.get("turn_index"), int) else None,
            ttft_s=ttft / 1e3 if isinstance(ttft, int | float) else None,
            latency_s=latency / 1e3 if isinstance(latency, int | float) else None,
        )
    return out.finish()


OTEL_INPUT = "gen_ai.usage.input_tokens"  # OpenTelemetry GenAI semantic conventions (gen-ai-spans.md)
OTEL_OUTPUT = "gen_ai.usage.output_tokens"
OTEL_CACHED = "gen_ai.usage.cache_read.input_tokens"
OTEL_SESSION = "gen_ai.conversation.id"


def _int_text(value: object) -> object:
    """OTLP/JSON writes 64-bit integers as strings ("intValue": "12"): such a string as an int, else the value
    as it is (for the field's check to quote)."""
    digits = (
        isinstance(value, str) and value.isascii() and value.isdecimal() and len(value) <= MAX_NUMBER_CHARS
    )
    return int(value) if digits else value


def _otel_attributes(span: dict) -> dict[str, object]:
    """An OTLP/JSON span's attributes [{"key": k, "value": {"intValue": "12"}}, ...] as {k: value}."""
    found: dict[str, object] = {}
    attributes = span.get("attributes")
    for item in attributes if isinstance(attributes, list) else ():
        if isinstance(item, dict) and isinstance(item.get("value"), dict) and item["value"]:
            value = next(iter(item["value"].values()))
            found[str(item.get("key"))] = _int_text(value)
    return found


def _otel_spans(line_no: int, row: dict):
    """Every span of one OTLP/JSON export line (resourceSpans[].scopeSpans[].spans[])."""
    for resource in row.get("resourceSpans") or ():
        for scope in (resource.get("scopeSpans") or ()) if isinstance(resource, dict) else ():
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                raise TraceError(
                    f"line {line_no}: resourceSpans[].scopeSpans[].spans must be a list, got {quote(spans)}"
                )
            yield from (s for s in spans if isinstance(s, dict))


def _nanos(line_no: int, name: str, value: object) -> float:
    number = _int_text(value)
    return seconds(line_no, name, number, scale=1e-9, unit="nanoseconds")


def read_otel(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """OpenTelemetry trace exports in OTLP/JSON, one export a line (the collector's file exporter; inference-perf
    and instrumented servers emit these): each span with gen_ai.usage.input_tokens and output_tokens is a request
    at its startTimeUnixNano; other spans are skipped. Keeps session (gen_ai.conversation.id), cached_tokens
    (gen_ai.usage.cache_read.input_tokens) and latency_s (end - start)."""
    out = TraceBuilder(
        max_rows, {"session": "q", "cached_tokens": "q", "latency_s": "d"}, text_fields=("session",)
    )
    for line_no, row in json_rows(lines):
        require(line_no, row, "resourceSpans")
        for span in _otel_spans(line_no, row):
            attrs = _otel_attributes(span)
            if OTEL_INPUT not in attrs or OTEL_OUTPUT not in attrs:
                continue
            start = _nanos(line_no, "startTimeUnixNano", span.get("startTimeUnixNano"))
            end = span.get("endTimeUnixNano")
            cached = attrs.get(OTEL_CACHED)
            out.add(
                line_no,
                start,
                token_count(line_no, OTEL_INPUT, attrs[OTEL_INPUT]),
                token_count(line_no, OTEL_OUTPUT, attrs[OTEL_OUTPUT]),
                session=out.code("session", attrs[OTEL_SESSION]) if OTEL_SESSION in attrs else None,
                cached_tokens=None if cached is None else token_count(line_no, OTEL_CACHED, cached, least=0),
                latency_s=None if end is None else max(0.0, _nanos(line_no, "endTimeUnixNano", end) - start),
            )
    return out.finish()
