"""Trace replay: reading a recorded trace (Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV, or our own CSV)
into `Requests`, and replaying it at another arrival rate. Samples of public traces ship in sim_core/data/traces/
(its README.md says where each comes from): `--trace NAME` reads one by its name in BUNDLED_TRACES.

Bad input is a TraceError naming the line and the field, quoting what it found; nothing else escapes a reader.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import math
import os
from array import array
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

import numpy as np

from .input_files import input_file_problem
from .quoting import quote
from .workload import TRACE_BLOCK_SEGMENT, UNIQUE, Requests


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the line and the field, quoting what it found."""


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
MAX_TRACE_TOKENS = 10_000_000  # per request, prompt or output: far beyond any model context
MAX_TRACE_SECONDS = 1e10  # an arrival time (~300 years); beyond it float64 loses the microseconds
# A number written with more characters than this is out of every field's range (and int() refuses 4,300+ digits).
MAX_NUMBER_CHARS = 100
# A line longer than this is no request (a Mooncake row listing a 10M-token prompt's blocks is ~160 KB). Lines are
# read at most this long, so a file without newlines (/dev/zero) is refused after 1 MiB, not read whole.
MAX_LINE_CHARS = 1 << 20
# Prompt blocks listed over a whole Mooncake trace (8 bytes each, twice): a bound on memory however the rows are
# written, ~2,000 times the public trace's.
MAX_TRACE_BLOCKS = 50_000_000


def _lines(source: str | TextIO) -> Iterator[str]:
    """The lines of a trace (with their ends), from its text or an open text file, each at most MAX_LINE_CHARS.
    A file is read one line at a time: a reader keeps only the numbers it parsed (in arrays, 8 bytes each), so a
    gigabyte file is streamed, never held. Newlines as Python's text files read them: \\n, \\r\\n or \\r."""
    f = io.StringIO(source, newline=None) if isinstance(source, str) else source
    for line_no in itertools.count(1):
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            raise TraceError(f"line {line_no}: longer than {MAX_LINE_CHARS:,} characters; a trace has one request "
                             f"a line")
        yield line.removeprefix("\ufeff") if line_no == 1 else line  # Excel's "CSV UTF-8" starts with a BOM


def _csv_rows(lines: Iterable[str]):
    """(line number, row) of each row of a CSV text with something in it: blank lines are skipped."""
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # a NUL, an overlong field, ...
            raise TraceError(f"line {reader.line_num}: not readable as CSV ({e})") from None
        if any(c.strip() for c in row):
            yield reader.line_num, row


def _csv_header(rows, columns: tuple[str, ...]) -> tuple[int, list[int]]:
    """(width, the index of each of `columns`) of the header, the first row with something in it."""
    expected = ",".join(columns)
    try:
        line_no, names = next(rows)
    except StopIteration:
        raise TraceError(f"trace is empty; expected a header {expected}") from None
    names = [h.strip() for h in names]
    missing = [c for c in columns if c not in names]
    if missing:
        raise TraceError(f"line {line_no}: the trace header lacks column(s) {', '.join(missing)}; expected "
                         f"{expected} (got {quote(','.join(names))})")
    return len(names), [names.index(c) for c in columns]


def _data_rows(rows, width: int, max_rows: int):
    """The rows after the header, refusing short rows and more than max_rows."""
    for count, (line_no, row) in enumerate(rows, start=1):
        if count > max_rows:
            raise TraceError(f"trace has more than {max_rows} requests (the limit)")
        if len(row) < width:
            raise TraceError(f"line {line_no}: expected {width} columns, got {len(row)}")
        yield line_no, row


def _cell_number(cell: str, kind: type[int] | type[float]) -> int | float | None:
    """A CSV cell read as `kind`; None if it is no such number, inf if it is too long to be in any range."""
    text = cell.strip()
    if len(text) > MAX_NUMBER_CHARS:
        return math.inf
    try:
        return kind(text)
    except ValueError:
        return None


def _seconds(line_no: int, field: str, value: object, written: str | None = None, *, scale: float = 1.0,
             unit: str = "seconds") -> float:
    """A finite time in [0, MAX_TRACE_SECONDS] (given in units of `scale` seconds), as seconds. `written`: the
    CSV cell the value was read from, which the error quotes."""
    limit = MAX_TRACE_SECONDS / scale
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:  # NaN too
        raise TraceError(f"line {line_no}: {field} must be a number of {unit} from 0 to {limit:g}, "
                         f"got {quote(value if written is None else written)}")
    return float(value) * scale


def _token_count(line_no: int, field: str, value: object, written: str | None = None) -> int:
    """A whole number of tokens in [1, MAX_TRACE_TOKENS]. `written`: the CSV cell it was read from."""
    number = int(value) if isinstance(value, float) and value.is_integer() else value  # JSON may write 512.0
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_TRACE_TOKENS:
        raise TraceError(f"line {line_no}: {field} must be between 1 and {MAX_TRACE_TOKENS} (whole tokens), "
                         f"got {quote(value if written is None else written)}")
    return number


def read_csv_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Parse a CSV trace with header `arrival_s,prompt_tokens,output_tokens` (extra columns are ignored).
    Rows are sorted by arrival (stable); times are shifted so the first arrival is at 0."""
    return _read_csv(_lines(text), max_rows)


def _read_csv(lines: Iterable[str], max_rows: int) -> Requests:
    rows = _csv_rows(lines)
    width, idx = _csv_header(rows, TRACE_COLUMNS)
    arrivals, prompts, outputs = array("d"), array("q"), array("q")
    for line_no, row in _data_rows(rows, width, max_rows):
        cells = [row[k] for k in idx]
        arrivals.append(_seconds(line_no, "arrival_s", _cell_number(cells[0], float), cells[0]))
        prompts.append(_token_count(line_no, "prompt_tokens", _cell_number(cells[1], int), cells[1]))
        outputs.append(_token_count(line_no, "output_tokens", _cell_number(cells[2], int), cells[2]))
    if not arrivals:
        raise TraceError("trace has a header but no requests")
    return _sorted_trace(arrivals, prompts, outputs)


def _sorted_trace(arrivals, prompts, outputs, seg=None) -> Requests:
    a = np.array(arrivals, np.float64)
    order = np.argsort(a, kind="stable")
    reqs = Requests(a - a[order[0]], np.array(prompts, np.int64), np.array(outputs, np.int64),
                    np.zeros(len(a), np.int64), ("trace",), None, None, *(seg or (None, None, None)))
    return reqs.subset(order)


MOONCAKE_BLOCK_TOKENS = 512
# A block's segment id, TRACE_BLOCK_SEGMENT + hash id, must stay below the ids of requests' own text.
MAX_HASH_ID = UNIQUE - TRACE_BLOCK_SEGMENT - 1


class _Unreadable:
    """A JSON number no field accepts (NaN, Infinity, one too large for a float or too long to read), kept as
    its text so that the field's check can quote it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _json_float(text: str) -> float | _Unreadable:
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(text)


def _json_int(text: str) -> int | _Unreadable:
    return int(text) if len(text) <= MAX_NUMBER_CHARS else _Unreadable(text)


_MOONCAKE_JSON = json.JSONDecoder(parse_constant=_Unreadable, parse_float=_json_float, parse_int=_json_int)


def _mooncake_row(line_no: int, line: str) -> dict:
    try:
        row = _MOONCAKE_JSON.decode(line)
    except json.JSONDecodeError as e:
        raise TraceError(f"line {line_no}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise TraceError(f"line {line_no}: JSON nested too deeply for a Mooncake row") from None
    if not isinstance(row, dict):
        raise TraceError(f"line {line_no}: expected a JSON object, got {quote(row)}")
    for field in ("timestamp", "input_length", "output_length"):
        if field not in row:
            raise TraceError(f"line {line_no}: missing field {field}")
    return row


def _hash_ids(line_no: int, value: object) -> list[int]:
    allowed = f"hash_ids must be a list of integers from 0 to {MAX_HASH_ID}"
    if not isinstance(value, list):
        raise TraceError(f"line {line_no}: {allowed}, got {quote(value)}")
    for k, h in enumerate(value):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(f"line {line_no}: {allowed}; item {k} is {quote(h)}")
    return value


def read_mooncake_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Mooncake's JSONL traces: one object per line with timestamp (ms), input_length, output_length and
    hash_ids, the ids of the prompt's 512-token blocks (equal ids = shared content)."""
    return _read_mooncake(_lines(text), max_rows)


def _read_mooncake(lines: Iterable[str], max_rows: int) -> Requests:
    arrivals, prompts, outputs = array("d"), array("q"), array("q")
    seg_ids, seg_lens, seg_off = array("q"), array("q"), array("q", [0])
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(arrivals) >= max_rows:
            raise TraceError(f"trace has more than {max_rows} requests (the limit)")
        if len(seg_ids) > MAX_TRACE_BLOCKS:
            raise TraceError(f"line {line_no}: the trace lists more than {MAX_TRACE_BLOCKS:,} prompt blocks "
                             f"(the limit)")
        row = _mooncake_row(line_no, line)
        ts = _seconds(line_no, "timestamp", row["timestamp"], scale=1e-3, unit="ms")
        p_len = _token_count(line_no, "input_length", row["input_length"])
        o_len = _token_count(line_no, "output_length", row["output_length"])
        left = p_len
        for h in _hash_ids(line_no, row.get("hash_ids", [])):
            if left <= 0:
                break
            seg_ids.append(TRACE_BLOCK_SEGMENT + h)
            seg_lens.append(min(MOONCAKE_BLOCK_TOKENS, left))
            left -= MOONCAKE_BLOCK_TOKENS
        if left > 0:  # prompt text beyond the listed blocks is this request's own
            seg_ids.append(UNIQUE + 2 * len(arrivals))
            seg_lens.append(left)
        seg_ids.append(UNIQUE + 2 * len(arrivals) + 1)
        seg_lens.append(o_len)
        seg_off.append(len(seg_ids))
        arrivals.append(ts)
        prompts.append(p_len)
        outputs.append(o_len)
    if not arrivals:
        raise TraceError("trace has no requests")
    seg = (np.array(seg_ids, np.int64), np.array(seg_lens, np.int64), np.array(seg_off, np.int64))
    del seg_ids, seg_lens  # copied: half the peak memory of a large trace
    return _sorted_trace(arrivals, prompts, outputs, seg)


AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _azure_time(value: str, line_no: int) -> float:
    # "2023-11-16 18:15:46.6805900": up to 7 fractional digits; datetime takes at most 6.
    text = value.strip()
    if "." in text:
        head, frac = text.split(".", 1)
        text = f"{head}.{frac[:6]}"
    try:
        moment = datetime.fromisoformat(text)
        # The trace's times carry no zone: read them as UTC, so no machine's daylight-saving rules apply.
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    except ValueError:
        raise TraceError(f"line {line_no}: TIMESTAMP must be a date-time like 2023-11-16 18:15:46.68, "
                         f"got {quote(value)}") from None


def read_azure_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens); no prefix sharing information."""
    return _read_azure(_lines(text), max_rows)


def _read_azure(lines: Iterable[str], max_rows: int) -> Requests:
    rows = _csv_rows(lines)
    width, idx = _csv_header(rows, AZURE_COLUMNS)
    arrivals, prompts, outputs = array("d"), array("q"), array("q")
    for line_no, row in _data_rows(rows, width, max_rows):
        arrivals.append(_azure_time(row[idx[0]], line_no))
        for column, k, out in ((AZURE_COLUMNS[1], idx[1], prompts), (AZURE_COLUMNS[2], idx[2], outputs)):
            out.append(_token_count(line_no, column, _cell_number(row[k], int), row[k]))
    if not arrivals:
        raise TraceError("trace has a header but no requests")
    return _sorted_trace(arrivals, prompts, outputs)


BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def read_burstgpt_trace(text: str | TextIO, max_rows: int) -> Requests:
    """BurstGPT's CSV (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type; its later files add
    Session ID and Elapsed time), read by column name; Timestamp is in seconds. A row with 0 Response tokens is a
    request that failed (BurstGPT's README says so) and one with 0 Request tokens has nothing to serve: both are
    left out, as BurstGPT's own `_without_fails` files leave them out."""
    return _read_burstgpt(_lines(text), max_rows)


def _burstgpt_tokens(line_no: int, cells: list[str]) -> list[int]:
    """A row's Request and Response tokens. 0 is a failed request's count, kept for the caller to leave the row
    out; anything else must be a token count like any trace's."""
    tokens = []
    for column, cell in zip(BURSTGPT_COLUMNS[1:], cells, strict=True):
        n = _cell_number(cell, int)
        tokens.append(0 if n == 0 else _token_count(line_no, column, n, cell))
    return tokens


def _read_burstgpt(lines: Iterable[str], max_rows: int) -> Requests:
    rows = _csv_rows(lines)
    width, idx = _csv_header(rows, BURSTGPT_COLUMNS)
    arrivals, prompts, outputs = array("d"), array("q"), array("q")
    failed = 0
    for line_no, row in _data_rows(rows, width, max_rows):
        cells = [row[k] for k in idx]
        arrival = _seconds(line_no, "Timestamp", _cell_number(cells[0], float), cells[0])
        tokens = _burstgpt_tokens(line_no, cells[1:])
        if 0 in tokens:
            failed += 1
            continue
        arrivals.append(arrival)
        prompts.append(tokens[0])
        outputs.append(tokens[1])
    if not arrivals:
        raise TraceError(f"trace has no requests: its {failed} row(s) are all failed requests (0 Request or "
                         f"Response tokens)" if failed else "trace has a header but no requests")
    return _sorted_trace(arrivals, prompts, outputs)


def _header_has(first_line: str, columns: tuple[str, ...]) -> bool:
    names = [h.strip() for h in first_line.rstrip("\n").split(",")]
    return all(c in names for c in columns)


def read_trace(text: str | TextIO, max_rows: int) -> Requests:
    """Any supported trace, by its shape: Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV, or our CSV
    (arrival_s,prompt_tokens,output_tokens). `text`: the trace's text, or an open text file to stream."""
    lines = _lines(text)
    head: list[str] = []  # the blank lines, then the first with something in it
    for line in lines:
        head.append(line)
        if line.strip():
            break
    first_line = head[-1].lstrip() if head else ""
    lines = itertools.chain(head, lines)
    if first_line[:1] == "{":
        return _read_mooncake(lines, max_rows)
    if _header_has(first_line, AZURE_COLUMNS):
        return _read_azure(lines, max_rows)
    if _header_has(first_line, BURSTGPT_COLUMNS):
        return _read_burstgpt(lines, max_rows)
    return _read_csv(lines, max_rows)


# Samples of public traces shipped with the package (package data: pyproject.toml), by the name `--trace` takes.
BUNDLED_TRACE_DIR = Path(__file__).resolve().parent / "data" / "traces"
BUNDLED_TRACES = {"burstgpt-1-first400": "BurstGPT_1_first400.csv"}


def trace_path(name: str) -> str:
    """The file a trace name means: a bundled sample's path for its name (BUNDLED_TRACES), unless a file of that
    name exists, which wins; any other name unchanged."""
    if name in BUNDLED_TRACES and not os.path.exists(name):
        return str(BUNDLED_TRACE_DIR / BUNDLED_TRACES[name])
    return name


def read_trace_file(path: str, max_rows: int) -> Requests:
    """The trace file at `path` (or the bundled sample it names), streamed (see _lines); TraceError if none."""
    path = trace_path(path)
    problem = input_file_problem(path, "a trace file")  # a FIFO would block the open, /dev/zero never ends
    if problem == "no such file":
        raise TraceError(f"trace: no such file {path!r} (bundled samples: {', '.join(BUNDLED_TRACES)})")
    if problem:
        raise TraceError(f"trace: {path!r} {problem}")
    with open(path, "rb") as f:
        _refuse_over_rows(f, max_rows)
    with open(path, encoding="utf-8", errors="replace") as f:
        return read_trace(f, max_rows)


MIN_ROW_CHARS = 5  # the shortest row any trace format has ("1,2,3"); shorter lines are blank or noise
COUNT_CHUNK_BYTES = 1 << 23


def _refuse_over_rows(f, max_rows: int) -> None:
    """TraceError when the file holds more than max_rows rows besides its header, counted (lines of at least
    MIN_ROW_CHARS bytes) before any is parsed: parsing a 1 GB trace's first 10M rows to find it too long took
    205 s (bench/bench_big_trace.py); counting its newlines stops at the limit within a second. A line without
    end (no newline at all) is left to the reader, which refuses it after MAX_LINE_CHARS."""
    rows, carried = 0, 0  # carried: bytes since the last newline, from earlier chunks
    while chunk := f.read(COUNT_CHUNK_BYTES):
        ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
        if not len(ends):
            carried += len(chunk)
            if carried > MAX_LINE_CHARS:
                return  # a line too long: the reader says so at its line number
            continue
        lengths = np.diff(ends, prepend=-1) - 1
        lengths[0] += carried
        rows += int((lengths >= MIN_ROW_CHARS).sum())
        carried = len(chunk) - 1 - int(ends[-1])
        if rows - 1 > max_rows:
            raise TraceError(f"trace has more than {max_rows} requests (the limit): counted {rows - 1:,}+ rows "
                             f"after its header before reading them")


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
        raise TraceError("the trace's requests all arrive at one instant, so it has no arrival rate to scale: "
                         "leave rate unset to replay it as recorded")
    open_loop = reqs.parents() == -1
    start = float(reqs.arrival_s[open_loop][0])
    arrival = reqs.arrival_s.copy()  # follow-up turns (inf until their parent ends) keep their think times
    arrival[open_loop] = start + (arrival[open_loop] - start) * (own / rate)
    return dataclasses.replace(reqs, arrival_s=arrival)
