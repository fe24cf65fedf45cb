"""Trace replay: reading a recorded trace into `Requests` and replaying it at another arrival rate. The formats
and their readers live in sim_core/trace_formats/ (FORMATS, one registry); this module names files (a bundled
sample by its name in BUNDLED_TRACES: sim_core/data/traces/, its README.md says where each comes from), refuses
files too long before parsing them, and scales a trace's arrivals.

Bad input is a TraceError naming the line and the field, quoting what it found; nothing else escapes a reader.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TextIO

import numpy as np

from .input_files import input_file_problem
from .trace_formats import (
    FORMATS,
    SESSION_FORMATS,
    TRACE_FORMAT_NAMES,
    ParsedTrace,
    detect_format,
    read_trace_records,
)
from .trace_formats.common import (
    MAX_HASH_ID,
    MAX_LINE_CHARS,
    MAX_NUMBER_CHARS,
    MAX_TRACE_BLOCKS,
    MAX_TRACE_SECONDS,
    MAX_TRACE_TOKENS,
    TraceError,
)
from .trace_formats.csv_readers import AZURE_COLUMNS, BURSTGPT_COLUMNS, TRACE_COLUMNS
from .trace_formats.jsonl_readers import MOONCAKE_BLOCK_TOKENS
from .trace_formats.sessions import has_sessions, session_requests
from .workload import Requests

__all__ = [
    "AZURE_COLUMNS",
    "BURSTGPT_COLUMNS",
    "BUNDLED_TRACES",
    "FORMATS",
    "MAX_HASH_ID",
    "MAX_LINE_CHARS",
    "MAX_NUMBER_CHARS",
    "MAX_TRACE_BLOCKS",
    "MAX_TRACE_SECONDS",
    "MAX_TRACE_TOKENS",
    "MOONCAKE_BLOCK_TOKENS",
    "TRACE_COLUMNS",
    "TRACE_FORMAT_NAMES",
    "ParsedTrace",
    "TraceError",
    "at_rate",
    "detect_format",
    "own_rate",
    "read_trace",
    "read_trace_file",
    "read_trace_records",
    "replayed_requests",
]


def read_trace(
    text: str | TextIO,
    max_rows: int,
    fmt: str | None = None,
    block_tokens: int | None = None,
    replay: str | None = None,
) -> Requests:
    """Any supported trace's requests (FORMATS), its format told by its first line unless `fmt` names it.
    `text`: the trace's text, or an open text file to stream. `replay` "sessions": replayed as its sessions
    (replayed_requests); otherwise open loop at the recorded times."""
    return replayed_requests(read_trace_records(text, max_rows, fmt, block_tokens), replay)


def replayed_requests(parsed: ParsedTrace, replay: str | None) -> Requests:
    """A parsed trace's requests as `replay` (sim_core/replay_fields.py REPLAY_MODES) sends them: "sessions",
    each after what it waited for (trace_formats/sessions.py); any other, open loop at the recorded times (a
    closed loop is built from these by runner.make_requests)."""
    if replay != "sessions":
        return parsed.requests
    if not has_sessions(parsed):
        raise TraceError(
            "replay: sessions needs a trace that records its sessions (formats "
            f"{', '.join(SESSION_FORMATS)}); this one links no request to another: use replay timestamps or closed"
        )
    return session_requests(parsed)[0]


def read_csv_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Our CSV, header arrival_s,prompt_tokens,output_tokens (extra columns are ignored)."""
    return read_trace(text, max_rows, "csv")


def read_mooncake_trace(text: str | TextIO, max_rows: int, block_tokens: int | None = None) -> Requests:
    """Mooncake's JSONL: timestamp (ms), input_length, output_length and hash_ids (blocks of 512 tokens unless
    `block_tokens` says otherwise; equal ids = shared content)."""
    return read_trace(text, max_rows, "mooncake", block_tokens)


def read_azure_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens[,NumImages])."""
    return read_trace(text, max_rows, "azure")


def read_burstgpt_trace(text: str | TextIO, max_rows: int) -> Requests:
    """BurstGPT's CSV, its failed requests (0 tokens) left out."""
    return read_trace(text, max_rows, "burstgpt")


# Samples of public traces shipped with the package (package data: pyproject.toml), by the name `--trace` takes.
BUNDLED_TRACE_DIR = Path(__file__).resolve().parent / "data" / "traces"
BUNDLED_TRACES = {
    "burstgpt-1-first400": "BurstGPT_1_first400.csv",
    "mooncake-conversation-first200": "mooncake_conversation_first200.jsonl",
    "azure-code-2023-first200": "AzureLLMInferenceTrace_code_first200.csv",
    "weka-cc-trace-0291": "weka_trace_0291.json",
}


def trace_path(name: str) -> str:
    """The file a trace name means: a bundled sample's path for its name (BUNDLED_TRACES), unless a file of that
    name exists, which wins; any other name unchanged."""
    if name in BUNDLED_TRACES and not os.path.exists(name):
        return str(BUNDLED_TRACE_DIR / BUNDLED_TRACES[name])
    return name


def read_trace_file_records(
    path: str, max_rows: int, fmt: str | None = None, block_tokens: int | None = None
) -> ParsedTrace:
    """The trace file at `path` (or the bundled sample it names), streamed; TraceError if none."""
    path = trace_path(path)
    problem = input_file_problem(path, "a trace file")  # a FIFO would block the open, /dev/zero never ends
    if problem == "no such file":
        raise TraceError(f"trace: no such file {path!r} (bundled samples: {', '.join(BUNDLED_TRACES)})")
    if problem:
        raise TraceError(f"trace: {path!r} {problem}")
    with open(path, "rb") as f:
        _refuse_over_rows(f, max_rows)
    with open(path, encoding="utf-8", errors="replace") as f:
        return read_trace_records(f, max_rows, fmt, block_tokens)


def read_trace_file(
    path: str,
    max_rows: int,
    fmt: str | None = None,
    block_tokens: int | None = None,
    replay: str | None = None,
) -> Requests:
    """The requests of the trace file at `path` (read_trace_file_records), as `replay` sends them (read_trace)."""
    return replayed_requests(read_trace_file_records(path, max_rows, fmt, block_tokens), replay)


MIN_ROW_CHARS = 5  # the shortest row any trace format has ("1,2,3"); shorter lines are blank or noise
COUNT_CHUNK_BYTES = 1 << 23


def _refuse_over_rows(f, max_rows: int) -> None:
    """TraceError when the file holds more than max_rows rows besides its header, counted (lines of at least
    MIN_ROW_CHARS bytes) before any is parsed: parsing a 1 GB trace's first 10M rows to find it too long took
    205 s (bench/bench_big_trace.py); counting its newlines stops at the limit within a second. A line without
    end (no newline at all) is left to the reader, which refuses it after MAX_LINE_CHARS. Every format has at
    least one request a line (a Weka line is a whole session), so the count never refuses a trace within it."""
    rows, carried = 0, 0  # carried: bytes since the last newline, from earlier chunks
    while chunk := f.read(COUNT_CHUNK_BYTES):
        ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
        if not len(ends):
            carried += len(chunk)
            if carried > MAX_LINE_CHARS:
                return  # a line too long (or a Weka session): the reader decides at its line number
            continue
        lengths = np.diff(ends, prepend=-1) - 1
        lengths[0] += carried
        rows += int((lengths >= MIN_ROW_CHARS).sum())
        carried = len(chunk) - 1 - int(ends[-1])
        if rows - 1 > max_rows:
            raise TraceError(
                f"trace has more than {max_rows} requests (the limit): counted {rows - 1:,}+ rows "
                f"after its header before reading them"
            )


def own_rate(reqs: Requests) -> float | None:
    """A trace's own mean arrival rate, requests/s: the arrivals after the first over the time they span. None
    when it has none (one request, or every request at one instant)."""
    open_loop = reqs.arrival_s[reqs.parents() == -1]
    span = float(open_loop[-1] - open_loop[0]) if len(open_loop) else 0.0
    rate = (len(open_loop) - 1) / span if span > 0 else np.inf
    return float(rate) if np.isfinite(rate) else None  # gaps of 5e-324 s overflow: as good as one instant


def at_rate(reqs: Requests, rate: float) -> Requests:
    """The trace replayed at `rate` requests/s: every gap between arrivals scaled by one factor, so its bursts and
    lulls keep their shape (as Vidur's and BLIS's trace time-scaling do); the first arrival stays where it is.
    A planner or a sweep asks "what if this traffic came faster?" of a recorded trace this way."""
    own = own_rate(reqs)
    if own is None:
        raise TraceError(
            "the trace's requests all arrive at one instant, so it has no arrival rate to scale: "
            "leave rate unset to replay it as recorded"
        )
    open_loop = reqs.parents() == -1
    start = float(reqs.arrival_s[open_loop][0])
    arrival = reqs.arrival_s.copy()  # follow-up turns (inf until their parent ends) keep their think times
    arrival[open_loop] = start + (arrival[open_loop] - start) * (own / rate)
    return dataclasses.replace(reqs, arrival_s=arrival)
