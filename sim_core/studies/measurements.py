"""Reading the measurements `sched-sim calibrate` fits (calibration.py): a CSV of measured steps, or the JSON
`vllm bench serve --save-result --save-detailed` writes. Anything a fit cannot use is a CalibrationError naming
the line or field and what is wrong.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass

import numpy as np

from ..hardware_profile import CONSTANT_NAMES
from ..json_input import JSONInputError, Unreadable, loads
from ..quoting import quote

STEP_COLUMNS = ("prefill_tokens", "context_tokens", "decode_seqs", "decode_context", "step_ms")
MAX_ROWS = 1_000_000
MAX_BENCH_REQUESTS = 20_000
MAX_TOKENS = 10_000_000  # a request's prompt or output tokens, as a trace's (traces.MAX_TRACE_TOKENS)
# Per-token latency statistics need requests with at least two output tokens; fewer requests are not a fit.
MIN_OBSERVATIONS = 6


class CalibrationError(ValueError):
    """Input calibration cannot use; the message names the line or field and what is wrong."""


# ---------------------------------------------------------------------------------------------------------
# Measured steps
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Steps:
    shapes: np.ndarray  # int64 [row, (prefill_tokens, context_tokens, decode_seqs, decode_context)]
    seconds: np.ndarray
    lines: np.ndarray  # each row's line in the file


def read_steps_csv(text: str) -> Steps:
    """The steps CSV (header STEP_COLUMNS, any order, other columns ignored) -> Steps, or CalibrationError naming
    the line and column."""
    rows = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text.removeprefix("\ufeff"))), 1)
            if any(c.strip() for c in r)]
    if not rows:
        raise CalibrationError("the file is empty (expected a header " + ",".join(STEP_COLUMNS) + ")")
    header_line, header = rows[0]
    names = [h.strip() for h in header]
    missing = [c for c in STEP_COLUMNS if c not in names]
    if missing:
        raise CalibrationError(f"line {header_line}: missing column{'s' * (len(missing) > 1)} {', '.join(missing)} "
                               f"(the header must name {','.join(STEP_COLUMNS)})")
    col = {c: names.index(c) for c in STEP_COLUMNS}
    if len(rows) - 1 > MAX_ROWS:
        raise CalibrationError(f"{len(rows) - 1:,} rows; at most {MAX_ROWS:,}")
    shapes, seconds, lines = [], [], []
    for n, row in rows[1:]:
        if len(row) < len(names):
            raise CalibrationError(f"line {n}: {len(row)} fields, the header has {len(names)}")
        shape = []
        for c in STEP_COLUMNS[:4]:
            raw = row[col[c]].strip()
            if not raw.isdigit() or len(raw) > 9:
                raise CalibrationError(f"line {n}, {c}: must be a whole number of tokens or sequences, 0 to "
                                       f"999999999 (got {quote(raw)})")
            shape.append(int(raw))
        raw = row[col["step_ms"]].strip()
        try:
            ms = float(raw)
        except ValueError:
            ms = math.nan
        if not (math.isfinite(ms) and ms > 0):
            raise CalibrationError(f"line {n}, step_ms: must be a positive number of milliseconds (got {quote(raw)})")
        if shape[0] == 0 and shape[2] == 0:
            raise CalibrationError(f"line {n}: a step needs prefill_tokens or decode_seqs above 0")
        shapes.append(shape)
        seconds.append(ms / 1e3)
        lines.append(n)
    if len(shapes) < MIN_OBSERVATIONS:
        raise CalibrationError(f"{len(shapes)} step{'s' * (len(shapes) != 1)}; a fit of {len(CONSTANT_NAMES)} "
                               f"constants needs at least {MIN_OBSERVATIONS}, of varied batch shapes")
    return Steps(np.array(shapes, np.int64), np.array(seconds), np.array(lines, np.int64))


# ---------------------------------------------------------------------------------------------------------
# vllm bench serve results
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bench:
    """The successful requests of a `vllm bench serve --save-detailed` run."""

    input_lens: np.ndarray
    output_lens: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # per request with 2+ output tokens, else nan
    request_rate: float  # inf: all at once
    burstiness: float
    max_concurrency: int | None
    failed: int

    @property
    def closed_loop(self) -> bool:
        return self.max_concurrency is not None and self.max_concurrency < len(self.input_lens)


def _number_list(doc: dict, key: str, n: int | None, integer: bool) -> list:
    if key not in doc:
        raise CalibrationError(f"missing field {key!r} (save the benchmark with --save-result --save-detailed)")
    v = doc[key]
    if not isinstance(v, list):
        raise CalibrationError(f"field {key!r}: must be a list (got {type(v).__name__})")
    if n is not None and len(v) != n:
        raise CalibrationError(f"field {key!r}: {len(v)} entries, but input_lens has {n}")
    for i, x in enumerate(v):
        ok = not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x) and x >= 0
        if ok and integer:  # bounded: numpy's int64 takes no more (an OverflowError, not a message)
            ok = float(x).is_integer() and x <= MAX_TOKENS
        if not ok:
            kind = "a whole number of tokens" if integer else "a non-negative number of seconds"
            raise CalibrationError(f"field {key}[{i}]: must be {kind} (got {_written(x)})")
    return v


def _written(x: object) -> str:
    """A JSON value as an error message quotes it: as it was written, cut short."""
    if isinstance(x, Unreadable):
        return quote(x.text)
    return quote(x) if isinstance(x, list | dict) else quote(json.dumps(x))


def read_vllm_bench(text: str) -> Bench:
    """A `vllm bench serve --save-result --save-detailed` JSON -> Bench, or CalibrationError naming the field."""
    if not text.strip():
        raise CalibrationError("the file is empty (expected a vllm bench serve --save-result --save-detailed JSON)")
    try:
        doc = loads(text)
    except JSONInputError as e:
        raise CalibrationError(f"line {e.lineno}: not JSON ({e.msg})" if e.lineno else f"not JSON ({e.msg})") \
            from None
    if not isinstance(doc, dict):
        raise CalibrationError("must be a JSON object, as vllm bench serve --save-result writes")
    input_lens = _number_list(doc, "input_lens", None, True)
    n = len(input_lens)
    output_lens = _number_list(doc, "output_lens", n, True)
    ttfts = _number_list(doc, "ttfts", n, False)
    if "itls" not in doc or not isinstance(doc["itls"], list) or len(doc["itls"]) != n:
        raise CalibrationError("field 'itls': must be a list of one list of seconds per request, as many as "
                               "input_lens (save the benchmark with --save-detailed)")
    errors = doc.get("errors") or [""] * n
    if not isinstance(errors, list) or len(errors) != n:
        raise CalibrationError("field 'errors': must be a list of one message per request")
    if len(input_lens) > MAX_BENCH_REQUESTS:
        raise CalibrationError(f"{n:,} requests; at most {MAX_BENCH_REQUESTS:,} are replayed")
    ok, tpot = [], []
    for i in range(n):
        if errors[i] or output_lens[i] == 0:  # a failed request: vLLM records 0 output tokens and no ITLs
            continue
        if input_lens[i] < 1:
            raise CalibrationError(f"field input_lens[{i}]: a served request has at least one prompt token (got "
                                   f"{input_lens[i]})")
        itls = _number_list({f"itls[{i}]": doc["itls"][i]}, f"itls[{i}]", None, False)
        ok.append(i)
        tpot.append(sum(itls) / (output_lens[i] - 1) if output_lens[i] > 1 else math.nan)
    rate = doc.get("request_rate", "inf")
    if rate == "inf" or rate is None:
        rate = math.inf
    elif isinstance(rate, bool) or not isinstance(rate, int | float) or not (math.isfinite(rate) and rate > 0):
        raise CalibrationError(f"field 'request_rate': must be a positive number or \"inf\" (got {_written(rate)})")
    burstiness = doc.get("burstiness", 1.0)
    if burstiness is None:
        burstiness = 1.0
    if isinstance(burstiness, bool) or not isinstance(burstiness, int | float) or not burstiness > 0:
        raise CalibrationError(f"field 'burstiness': must be a positive number (got {_written(burstiness)})")
    concurrency = doc.get("max_concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise CalibrationError(f"field 'max_concurrency': must be a positive integer or null (got "
                               f"{_written(concurrency)})")
    idx = np.array(ok, np.int64)
    bench = Bench(np.array(input_lens, np.int64)[idx] if n else np.zeros(0, np.int64),
                  np.array(output_lens, np.int64)[idx] if n else np.zeros(0, np.int64),
                  np.array(ttfts, float)[idx] if n else np.zeros(0), np.array(tpot, float), float(rate),
                  float(burstiness), concurrency, n - len(ok))
    if int(np.sum(np.isfinite(bench.tpot_s))) < MIN_OBSERVATIONS:
        raise CalibrationError(f"{len(ok)} successful requests ({bench.failed} failed), "
                               f"{int(np.sum(np.isfinite(bench.tpot_s)))} with 2+ output tokens; a fit needs at "
                               f"least {MIN_OBSERVATIONS}")
    return bench
