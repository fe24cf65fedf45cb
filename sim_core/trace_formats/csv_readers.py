"""Readers of the CSV traces: our own (arrival_s,prompt_tokens,output_tokens), Azure's LLM inference traces (2023,
2024; 2025's multimodal one adds NumImages) and BurstGPT's. Each takes an iterator of lines (common.lines_of) and
returns a ParsedTrace; columns are found by name, so extra or reordered columns are fine."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

from ..quoting import quote
from .common import (
    ParsedTrace,
    TraceBuilder,
    TraceError,
    cell_number,
    csv_header,
    csv_rows,
    data_rows,
    seconds,
    token_count,
)

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
TRACE_THINKING = (
    "thinking_tokens"  # our CSV's optional column of hidden thinking tokens (common.HIDDEN_FIELDS)
)
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
AZURE_IMAGES = "NumImages"  # the 2025 multimodal trace's (AzureLMMInferenceDataset2025.md, "Schema")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
BURSTGPT_SESSION = "Session ID"  # in BurstGPT's later files (its README, "Schema")


def read_own_csv(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """Our CSV: header arrival_s,prompt_tokens,output_tokens, and optionally thinking_tokens: how many of the
    output tokens are a reasoning model's hidden thinking (decoded, not shown; empty: none). Other columns are
    ignored."""
    rows = csv_rows(lines)
    width, idx = csv_header(rows, TRACE_COLUMNS, (TRACE_THINKING,))
    out = TraceBuilder(max_rows, {TRACE_THINKING: "q"} if idx[3] >= 0 else None)
    for line_no, row in data_rows(rows, width):
        cells = [row[k] for k in idx[:3]]
        hidden = row[idx[3]].strip() if idx[3] >= 0 else ""
        out.add(
            line_no,
            seconds(line_no, "arrival_s", cell_number(cells[0], float), cells[0]),
            token_count(line_no, "prompt_tokens", cell_number(cells[1], int), cells[1]),
            token_count(line_no, "output_tokens", cell_number(cells[2], int), cells[2]),
            thinking_tokens=token_count(line_no, TRACE_THINKING, cell_number(hidden, int), hidden, least=0)
            if hidden
            else None,
        )
    return out.finish()


def azure_time(value: str, line_no: int, name: str = "TIMESTAMP") -> float:
    """ "2023-11-16 18:15:46.6805900" (up to 7 fractional digits; datetime takes 6) as seconds since the epoch;
    a time without a zone is read as UTC, so no machine's daylight-saving rules apply."""
    text = value.strip()
    if "." in text:
        head, frac = text.split(".", 1)
        digits = len(frac) - len(frac.lstrip("0123456789"))
        text = f"{head}.{frac[: min(digits, 6)]}{frac[digits:]}"
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    except (ValueError, OverflowError):
        raise TraceError(
            f"line {line_no}: {name} must be a date-time like 2023-11-16 18:15:46.68, got {quote(value)}"
        ) from None


def read_azure(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens; 2023 and 2024) and the 2025
    multimodal one (NumImages too, kept as the field `images`); no prefix sharing information."""
    rows = csv_rows(lines)
    width, idx = csv_header(rows, AZURE_COLUMNS, (AZURE_IMAGES,))
    out = TraceBuilder(max_rows, {"images": "q"})
    for line_no, row in data_rows(rows, width):
        images = None
        if idx[3] >= 0:
            images = token_count(line_no, AZURE_IMAGES, cell_number(row[idx[3]], int), row[idx[3]], least=0)
        out.add(
            line_no,
            azure_time(row[idx[0]], line_no),
            token_count(line_no, AZURE_COLUMNS[1], cell_number(row[idx[1]], int), row[idx[1]]),
            token_count(line_no, AZURE_COLUMNS[2], cell_number(row[idx[2]], int), row[idx[2]]),
            images=images,
        )
    return out.finish()


def _burstgpt_tokens(line_no: int, cells: list[str]) -> list[int]:
    """A row's Request and Response tokens. 0 is a failed request's count, kept for the caller to leave the row
    out; anything else must be a token count like any trace's."""
    tokens = []
    for column, cell in zip(BURSTGPT_COLUMNS[1:], cells, strict=True):
        n = cell_number(cell, int)
        tokens.append(0 if n == 0 else token_count(line_no, column, n, cell))
    return tokens


def read_burstgpt(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """BurstGPT's CSV (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type; its later files add
    Session ID and Elapsed time), read by column name; Timestamp is in seconds. A row with 0 Response tokens is a
    request that failed (BurstGPT's README says so) and one with 0 Request tokens has nothing to serve: both are
    left out, as BurstGPT's own `_without_fails` files leave them out. Keeps `model` and `session` (codes)."""
    rows = csv_rows(lines)
    width, idx = csv_header(rows, BURSTGPT_COLUMNS, ("Model", BURSTGPT_SESSION))
    out = TraceBuilder(max_rows, {"model": "q", "session": "q"}, text_fields=("model", "session"))
    out.skipped_why = "failed requests (0 Request or Response tokens)"
    for line_no, row in data_rows(rows, width):
        cells = [row[k] for k in idx[:3]]
        arrival = seconds(line_no, "Timestamp", cell_number(cells[0], float), cells[0])
        tokens = _burstgpt_tokens(line_no, cells[1:])
        if 0 in tokens:
            out.skipped += 1
            continue
        model = out.code("model", row[idx[3]].strip()) if idx[3] >= 0 else None
        session = out.code("session", row[idx[4]].strip()) if idx[4] >= 0 and row[idx[4]].strip() else None
        out.add(line_no, arrival, tokens[0], tokens[1], model=model, session=session)
    return out.finish()
