"""Trace formats: the one registry (FORMATS) of the traces sched-sim reads, which the CLI's --trace-format, the
scenario's trace_format field and the docs' table all read; detection of a trace's format from its first line;
and `read_trace_records`, which streams a trace through its reader into a ParsedTrace.

A format's reader takes (lines, max_rows, block_tokens) and keeps, beside the Requests, the fields the engine
cannot replay yet (`fields`: sessions, parents, think and tool times, hidden thinking, cached tokens, images),
so that a sessions replay can be built on them."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ..quoting import quote
from .common import MAX_LINE_CHARS, ParsedTrace, TraceError, lines_of
from .csv_readers import AZURE_COLUMNS, BURSTGPT_COLUMNS, read_azure, read_burstgpt, read_own_csv
from .jsonl_readers import (
    BAILIAN_BLOCK_TOKENS,
    MOONCAKE_BLOCK_TOKENS,
    SWISSAI_BLOCK_TOKENS,
    read_aiperf,
    read_bailian,
    read_mooncake,
    read_openai,
    read_otel,
    read_swissai,
)
from .sessions import SESSION_FIELDS
from .weka import WEKA_FIELDS, WEKA_MAX_LINE_CHARS, is_weka_head, read_weka


@dataclass(frozen=True)
class TraceFormat:
    """One trace format: its reader, what it is, the fields it keeps beside the requests and the tokens its
    hash ids cover (None: no prefix identity; the reader's default when the trace does not say)."""

    name: str
    title: str
    read: Callable[..., ParsedTrace]
    fields: tuple[str, ...]
    block_tokens: int | None
    max_line_chars: int = MAX_LINE_CHARS


FORMATS = {
    f.name: f
    for f in (
        TraceFormat(
            "csv",
            "sched-sim's CSV: arrival_s,prompt_tokens,output_tokens[,thinking_tokens]",
            read_own_csv,
            ("thinking_tokens",),
            None,
        ),
        TraceFormat(
            "azure",
            "Azure LLM inference trace 2023/2024 CSV; 2025 multimodal (NumImages)",
            read_azure,
            ("images",),
            None,
        ),
        TraceFormat(
            "burstgpt", "BurstGPT CSV (failed rows left out)", read_burstgpt, ("model", "session"), None
        ),
        TraceFormat(
            "mooncake",
            "Mooncake JSONL (hash_ids of 512-token blocks, or trace_block_tokens)",
            read_mooncake,
            (),
            MOONCAKE_BLOCK_TOKENS,
        ),
        TraceFormat(
            "bailian",
            "Alibaba Qwen-Bailian JSONL (To-C, To-B, thinking, coder; parent_chat_id sessions)",
            read_bailian,
            ("chat_id", "parent_chat_id", "turn", "type"),
            BAILIAN_BLOCK_TOKENS,
        ),
        TraceFormat(
            "weka",
            "Weka / Claude Code sessions JSONL (SemiAnalysis cc-traces-weka; subagents, think time)",
            read_weka,
            tuple(WEKA_FIELDS),
            64,
            WEKA_MAX_LINE_CHARS,
        ),
        TraceFormat(
            "swissai",
            "Swiss AI serving trace JSONL (created_at, reported_token_*, bucket_ids)",
            read_swissai,
            ("model", "latency_s"),
            SWISSAI_BLOCK_TOKENS,
        ),
        TraceFormat(
            "openai",
            "OpenAI-style request logs JSONL (time, usage with cached and reasoning tokens)",
            read_openai,
            ("cached_tokens", "reasoning_tokens", "session"),
            None,
        ),
        TraceFormat(
            "aiperf",
            "AIPerf profile_export.jsonl (per-request records)",
            read_aiperf,
            ("session", "turn", "ttft_s", "latency_s"),
            None,
        ),
        TraceFormat(
            "otel",
            "OpenTelemetry OTLP/JSON span export (GenAI gen_ai.usage.* attributes)",
            read_otel,
            ("session", "cached_tokens", "latency_s"),
            None,
        ),
    )
}
TRACE_FORMAT_NAMES = tuple(FORMATS)
# The formats whose readers keep what links requests into sessions (replay=sessions replays them).
SESSION_FORMATS = tuple(name for name, f in FORMATS.items() if set(f.fields) & set(SESSION_FIELDS))

# JSON keys that tell a JSON-lines format by its first row, tried in order; Mooncake when none matches.
_JSON_KEYS = (
    ("otel", ("resourceSpans",)),
    ("aiperf", ("metadata", "metrics")),
    ("bailian", ("chat_id",)),
    ("swissai", ("created_at", "reported_token_input")),
    ("openai", ("usage",)),
    ("openai", ("prompt_tokens", "completion_tokens")),
)


def _header_has(first_line: str, columns: tuple[str, ...]) -> bool:
    names = [h.strip() for h in first_line.rstrip("\n").split(",")]
    return all(c in names for c in columns)


def detect_format(first_line: str) -> str:
    """The format a trace's first line with something in it says it is (FORMATS' name)."""
    text = first_line.lstrip("\ufeff").lstrip()
    if text[:1] == "{":
        if is_weka_head(text):
            return "weka"
        try:
            row = json.loads(text) if len(text) <= MAX_LINE_CHARS else None
        except (ValueError, RecursionError):
            row = None  # the Mooncake reader says what is wrong with it, at its line
        keys = row if isinstance(row, dict) else {}
        return next((name for name, needs in _JSON_KEYS if all(k in keys for k in needs)), "mooncake")
    if _header_has(text, AZURE_COLUMNS):
        return "azure"
    if _header_has(text, BURSTGPT_COLUMNS):
        return "burstgpt"
    return "csv"


class _Replayed:
    """A text file whose first lines were read ahead (to tell its format), read again from the start."""

    def __init__(self, head: list[str], rest: TextIO):
        self.head, self.rest = head, rest

    def readline(self, limit: int = -1) -> str:
        return self.head.pop(0) if self.head else self.rest.readline(limit)


def _first_lines(f: TextIO, fmt: str | None) -> tuple[list[str], int]:
    """The blank lines, then the first line with something in it (read whole up to its format's line limit),
    and that limit. Read MAX_LINE_CHARS at a time first, so a file without newlines costs 1 MiB to refuse."""
    head: list[str] = []
    while chunk := f.readline(MAX_LINE_CHARS + 1):
        head.append(chunk)
        if chunk.strip():
            break
    first = head[-1] if head else ""
    weka = fmt == "weka" or (fmt is None and is_weka_head(first.lstrip("\ufeff")))
    limit = WEKA_MAX_LINE_CHARS if weka else MAX_LINE_CHARS
    if len(first) > MAX_LINE_CHARS and not first.endswith("\n") and weka:
        head[-1] = first + f.readline(limit - len(first) + 1)
    return head, limit


def read_trace_records(
    source: str | TextIO, max_rows: int, fmt: str | None = None, block_tokens: int | None = None
) -> ParsedTrace:
    """A trace (its text, or an open text file to stream) in format `fmt` (FORMATS; None: told by its first
    line), with hash ids covering `block_tokens` tokens (None: the format's own)."""
    if fmt is not None and fmt not in FORMATS:
        raise TraceError(f"trace_format must be one of {', '.join(FORMATS)}, got {quote(fmt)}")
    f = io.StringIO(source, newline=None) if isinstance(source, str) else source
    head, limit = _first_lines(f, fmt)
    name = fmt or detect_format(head[-1] if head else "")
    if block_tokens is not None and FORMATS[name].block_tokens is None:
        raise TraceError(f"trace_block_tokens: the {name} format has no block hashes to size; leave it unset")
    return FORMATS[name].read(lines_of(_Replayed(head, f), limit), max_rows, block_tokens)
