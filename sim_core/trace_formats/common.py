"""What every trace reader shares: the error it raises, the bounds a field must keep, reading a file a line at a time,
and `TraceBuilder`, which collects a reader's requests into arrays (8 bytes a number, never a dict per row) and hands
them back as a `ParsedTrace`: the `Requests` the engine runs plus the per-request fields it cannot run yet.

Bad input is a TraceError naming the line and the field, quoting what it found; nothing else escapes a reader.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from ..quoting import quote
from ..workload import TRACE_BLOCK_SEGMENT, UNIQUE, Requests


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the line and the field, quoting what it found."""


MAX_TRACE_TOKENS = 10_000_000  # per request, prompt or output: far beyond any model context
MAX_TRACE_SECONDS = 1e10  # an arrival time (~300 years); beyond it float64 loses the microseconds
# A number written with more characters than this is out of every field's range (and int() refuses 4,300+ digits).
MAX_NUMBER_CHARS = 100
# A line longer than this is no request (a Mooncake row listing a 10M-token prompt's blocks is ~160 KB). Lines are
# read at most this long, so a file without newlines (/dev/zero) is refused after 1 MiB, not read whole.
MAX_LINE_CHARS = 1 << 20
# Content segments over a whole trace (8 bytes each, twice): a bound on memory however the rows are written. A
# run of consecutive block ids is one segment (TraceBuilder._add_content), so it is also more blocks than any
# public trace lists (Mooncake's conversation trace lists ~290,000).
MAX_TRACE_BLOCKS = 50_000_000
# A block's segment id, TRACE_BLOCK_SEGMENT + hash id, must stay below the ids of requests' own text.
MAX_HASH_ID = UNIQUE - TRACE_BLOCK_SEGMENT - 1


def lines_of(source: str | TextIO, max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a trace (with their ends), from its text or an open text file, each at most `max_chars`.
    A file is read one line at a time: a reader keeps only the numbers it parsed (in arrays, 8 bytes each), so a
    gigabyte file is streamed, never held. Newlines as Python's text files read them: \\n, \\r\\n or \\r."""
    f = io.StringIO(source, newline=None) if isinstance(source, str) else source
    for line_no in itertools.count(1):
        line = f.readline(max_chars + 1)
        if not line:
            return
        if len(line) > max_chars and not line.endswith("\n"):
            raise TraceError(
                f"line {line_no}: longer than {max_chars:,} characters; a trace has one request a line"
            )
        yield line.removeprefix("\ufeff") if line_no == 1 else line  # Excel's "CSV UTF-8" starts with a BOM


def csv_rows(lines: Iterable[str]):
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


def csv_header(rows, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> tuple[int, list[int]]:
    """(width, the index of each of `columns` then of each of `optional`, -1 if absent) of the header."""
    expected = ",".join(columns)
    try:
        line_no, names = next(rows)
    except StopIteration:
        raise TraceError(f"trace is empty; expected a header {expected}") from None
    names = [h.strip() for h in names]
    missing = [c for c in columns if c not in names]
    if missing:
        raise TraceError(
            f"line {line_no}: the trace header lacks column(s) {', '.join(missing)}; expected "
            f"{expected} (got {quote(','.join(names))})"
        )
    return len(names), [names.index(c) for c in columns] + [
        names.index(c) if c in names else -1 for c in optional
    ]


def data_rows(rows, width: int):
    """The rows after the header, refusing short rows."""
    for line_no, row in rows:
        if len(row) < width:
            raise TraceError(f"line {line_no}: expected {width} columns, got {len(row)}")
        yield line_no, row


def cell_number(cell: str, kind: type[int] | type[float]) -> int | float | None:
    """A CSV cell read as `kind`; None if it is no such number, inf if it is too long to be in any range."""
    text = cell.strip()
    if len(text) > MAX_NUMBER_CHARS:
        return math.inf
    try:
        return kind(text)
    except ValueError:
        return None


def seconds(
    line_no: int,
    name: str,
    value: object,
    written: str | None = None,
    *,
    scale: float = 1.0,
    unit: str = "seconds",
) -> float:
    """A finite time in [0, MAX_TRACE_SECONDS] (given in units of `scale` seconds), as seconds. `written`: the
    CSV cell the value was read from, which the error quotes."""
    limit = MAX_TRACE_SECONDS / scale
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:  # NaN too
        raise TraceError(
            f"line {line_no}: {name} must be a number of {unit} from 0 to {limit:g}, "
            f"got {quote(value if written is None else written)}"
        )
    return float(value) * scale


def token_count(line_no: int, name: str, value: object, written: str | None = None, *, least: int = 1) -> int:
    """A whole number of tokens in [least, MAX_TRACE_TOKENS]. `written`: the CSV cell it was read from."""
    number = int(value) if isinstance(value, float) and value.is_integer() else value  # JSON may write 512.0
    if isinstance(number, bool) or not isinstance(number, int) or not least <= number <= MAX_TRACE_TOKENS:
        raise TraceError(
            f"line {line_no}: {name} must be between {least} and {MAX_TRACE_TOKENS} (whole "
            f"tokens), got {quote(value if written is None else written)}"
        )
    return number


class Unreadable:
    """A JSON number no field accepts (NaN, Infinity, one too large for a float or too long to read), kept as
    its text so that the field's check can quote it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _json_float(text: str) -> float | Unreadable:
    value = float(text)
    return value if math.isfinite(value) else Unreadable(text)


def _json_int(text: str) -> int | Unreadable:
    return int(text) if len(text) <= MAX_NUMBER_CHARS else Unreadable(text)


_JSON = json.JSONDecoder(parse_constant=Unreadable, parse_float=_json_float, parse_int=_json_int)


def json_object(line_no: int, line: str, what: str = "a trace row") -> dict:
    """One line's JSON object; TraceError naming the line if it is no JSON object."""
    try:
        row = _JSON.decode(line)
    except json.JSONDecodeError as e:
        raise TraceError(f"line {line_no}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise TraceError(f"line {line_no}: JSON nested too deeply for {what}") from None
    if not isinstance(row, dict):
        raise TraceError(f"line {line_no}: expected a JSON object, got {quote(row)}")
    return row


def require(line_no: int, row: dict, *names: str) -> None:
    for name in names:
        if name not in row:
            raise TraceError(f"line {line_no}: missing field {name}")


def hash_ids(line_no: int, value: object, name: str = "hash_ids") -> list[int] | np.ndarray:
    """A list of block hash ids, each in [0, MAX_HASH_ID]."""
    allowed = f"{name} must be a list of integers from 0 to {MAX_HASH_ID}"
    if isinstance(value, np.ndarray):  # parsed ahead, digits only (weka.py): only the range is left to check
        if len(value) and value.max() > MAX_HASH_ID:
            k = int(np.argmax(value > MAX_HASH_ID))
            raise TraceError(f"line {line_no}: {allowed}; item {k} is {int(value[k])}")
        return value
    if not isinstance(value, list):
        raise TraceError(f"line {line_no}: {allowed}, got {quote(value)}")
    for k, h in enumerate(value):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(f"line {line_no}: {allowed}; item {k} is {quote(h)}")
    return value


# A field a reader keeps beside the Requests: (array typecode, the value that means "not recorded").
FIELD_KINDS = {"d": math.nan, "q": -1}
# The fields that count a request's hidden thinking tokens among its output tokens (our CSV's thinking_tokens,
# OpenAI's usage.completion_tokens_details.reasoning_tokens): they become Requests.thinking_tokens.
HIDDEN_FIELDS = ("thinking_tokens", "reasoning_tokens")


@dataclass
class ParsedTrace:
    """A trace as read: the requests the engine replays (open loop, in arrival order, the first at 0) and
    `fields`, one array per recorded field the engine does not use yet (session ids, parents, think times...),
    aligned with the requests (NaN or -1 where a row did not record it). `labels[name]` names the codes of a
    text field (labels["model"][code]). `block_tokens`: the tokens each hash id covers, None without hashes."""

    requests: Requests
    fields: dict[str, np.ndarray] = field(default_factory=dict)
    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    block_tokens: int | None = None
    skipped: int = 0  # rows left out as failed requests (BurstGPT, Swiss AI, AIPerf errors)


class TraceBuilder:
    """Collects rows into arrays. `fields`: name -> typecode ('d' float seconds, 'q' int) of the extra fields this
    reader records; `text_fields`: those whose values are text, stored as codes; `row_fields`: those whose values
    are row numbers (in the order added; renumbered when the rows are sorted). `block_tokens`: with it, each
    row's hash ids become the prompt's content segments (equal ids, equal tokens: what the prefix cache shares)."""

    def __init__(
        self,
        max_rows: int,
        fields: dict[str, str] | None = None,
        block_tokens: int | None = None,
        text_fields: tuple[str, ...] = (),
        row_fields: tuple[str, ...] = (),
    ):
        self.max_rows, self.block_tokens, self.row_fields = max_rows, block_tokens, row_fields
        self.arrivals, self.prompts, self.outputs = array("d"), array("q"), array("q")
        self.kinds = dict(fields or {})
        self.columns = {name: array(code) for name, code in self.kinds.items()}
        self.codes: dict[str, dict[str, int]] = {name: {} for name in text_fields}
        self.seg = (array("q"), array("q"), array("q", [0])) if block_tokens else None
        self.skipped = 0
        self.skipped_why = "failed requests"

    def __len__(self) -> int:
        return len(self.arrivals)

    def code(self, name: str, text: object) -> int:
        """The code of a text value of field `name` (its index among the distinct values, in order seen)."""
        codes = self.codes[name]
        key = str(text)[:200]
        return codes.setdefault(key, len(codes))

    def add(self, line_no: int, arrival: float, prompt: int, output: int, hashes=None, **values) -> None:
        if len(self.arrivals) >= self.max_rows:
            raise TraceError(f"trace has more than {self.max_rows} requests (the limit)")
        if self.seg is not None:
            self._add_content(line_no, prompt, output, () if hashes is None else hashes)
        self.arrivals.append(arrival)
        self.prompts.append(prompt)
        self.outputs.append(output)
        for name, column in self.columns.items():
            value = values.get(name)
            if name in HIDDEN_FIELDS and value is not None and value > output:
                raise TraceError(
                    f"line {line_no}: {name} counts hidden tokens among the {output} output tokens, so it must "
                    f"be from 0 to {output}, got {value}"
                )
            column.append(FIELD_KINDS[self.kinds[name]] if value is None else value)

    def _add_content(self, line_no: int, prompt: int, output: int, hashes) -> None:
        """The prompt's segments: its hashed blocks, then its own text, then its output. A run of consecutive ids
        (k, k+1, ...) is one segment named by its first id, its blocks told apart by their position in it: equal
        prefixes of ids still give equal content block by block (their runs start at the same ids) and different
        ones differ from where they differ, so the prefix cache sees what per-block segments would show, and a
        trace whose ids count up (Mooncake's, Weka's: 0, 1, 2, ...) costs a few segments a request, not one per
        block."""
        seg_ids, seg_lens, seg_off = self.seg
        if len(seg_ids) > MAX_TRACE_BLOCKS:
            raise TraceError(
                f"line {line_no}: the trace has more than {MAX_TRACE_BLOCKS:,} content segments (the limit)"
            )
        block, n = self.block_tokens, len(self.arrivals)
        full = min(len(hashes), prompt // block)
        if full:
            ids = np.asarray(hashes[:full], np.int64)
            starts = np.flatnonzero(
                np.diff(ids, prepend=-2) != 1
            )  # runs of consecutive ids: 7, 8, 9 | 3 | 12
            seg_ids.extend((TRACE_BLOCK_SEGMENT + ids[starts]).tolist())
            seg_lens.extend((np.diff(starts, append=full) * block).tolist())
        left = prompt - full * block
        if left > 0 and len(hashes) > full:  # a last, partial block the trace hashed too (Bailian's ceil)
            seg_ids.append(TRACE_BLOCK_SEGMENT + int(hashes[full]))
            seg_lens.append(left)
        elif left > 0:  # prompt text beyond the listed blocks is this request's own
            seg_ids.append(UNIQUE + 2 * n)
            seg_lens.append(left)
        seg_ids.append(UNIQUE + 2 * n + 1)
        seg_lens.append(output)
        seg_off.append(len(seg_ids))

    def finish(self) -> ParsedTrace:
        """The rows sorted by arrival (stable), shifted so that the first arrives at 0."""
        if not self.arrivals:
            raise TraceError(
                f"trace has no requests: its {self.skipped} row(s) are all {self.skipped_why}"
                if self.skipped
                else "trace has no requests"
            )
        seg = None
        if self.seg is not None:
            seg = tuple(np.array(a, np.int64) for a in self.seg)
            self.seg = None  # copied: half the peak memory of a large trace
        a = np.array(self.arrivals, np.float64)
        order = np.argsort(a, kind="stable")
        reqs = Requests(
            a - a[order[0]],
            np.array(self.prompts, np.int64),
            np.array(self.outputs, np.int64),
            np.zeros(len(a), np.int64),
            ("trace",),
            None,
            None,
            *(seg or (None, None, None)),
        )
        reqs = in_order(reqs, order)
        fields = {name: np.array(column)[order] for name, column in self.columns.items()}
        hidden = next((fields[name] for name in HIDDEN_FIELDS if name in fields), None)
        if hidden is not None and (hidden > 0).any():  # decoded like any output token, not shown
            reqs.thinking_tokens = np.maximum(hidden, 0).astype(np.int64)
        rank = np.empty(len(a), np.int64)
        rank[order] = np.arange(len(a))
        for name in self.row_fields:  # a row number points at the same request after sorting
            fields[name] = np.where(fields[name] >= 0, rank[np.maximum(fields[name], 0)], -1)
        labels = {name: tuple(codes) for name, codes in self.codes.items()}
        return ParsedTrace(reqs, fields, labels, self.block_tokens, self.skipped)


def in_order(reqs: Requests, order: np.ndarray) -> Requests:
    """reqs.subset(order) for open-loop requests, with their segments gathered in one vectorised pass (subset
    builds an index array a request, ~100 bytes each: 1 GB for a 10M-request trace); unchanged if in order.
    Parents and think times are left for the caller to set (sessions.py)."""
    if np.array_equal(order, np.arange(len(order))):
        return reqs
    seg = (None, None, None)
    if reqs.seg_off is not None:
        counts = np.diff(reqs.seg_off)[order]
        off = np.concatenate([[0], np.cumsum(counts)])
        gather = np.repeat(reqs.seg_off[order] - off[:-1], counts) + np.arange(off[-1])
        seg = (reqs.seg_ids[gather], reqs.seg_lens[gather], off)
    hidden = None if reqs.thinking_tokens is None else reqs.thinking_tokens[order]
    return Requests(
        reqs.arrival_s[order],
        reqs.prompt_tokens[order],
        reqs.output_tokens[order],
        reqs.request_class[order],
        reqs.class_names,
        None,
        None,
        *seg,
        thinking_tokens=hidden,
    )
