"""Workloads: arrival processes, prompt/output length distributions, named presets, and trace replay.

Everything is drawn from one seeded numpy Generator, so a scenario and seed give the same requests on every run.
The presets' length statistics come from public traces (../shared/reference/workloads_and_slos.json); their SLOs
from DistServe's evaluation settings.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LengthDist:
    """Lognormal token counts given by median and sigma of log, clipped to [low, high]; or uniform when
    `uniform` is set (median and sigma unused)."""

    median: float = 0.0
    sigma: float = 0.0
    low: int = 1
    high: int = 1 << 20
    uniform: bool = False

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.uniform:
            x = rng.integers(self.low, self.high + 1, size=n)
        else:
            x = np.rint(rng.lognormal(math.log(self.median), self.sigma, size=n))
        return np.clip(x, self.low, self.high).astype(np.int64)


@dataclass(frozen=True)
class RequestClass:
    """A kind of request (or a tenant): its share of arrivals, lengths, and optionally its own SLOs and
    fair-share weight (the preset's SLOs apply where a class sets none)."""

    name: str
    share: float
    prompt: LengthDist
    output: LengthDist
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    weight: float = 1.0


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    classes: tuple[RequestClass, ...]
    rate: float  # default arrival rate, requests/s
    burstiness: float  # coefficient of variation of inter-arrival gaps (1 = Poisson)
    slo_ttft_ms: float
    slo_tpot_ms: float


# First turns of ShareGPT conversations, the dataset of vLLM's serving benchmarks: prompts average ~160-260
# tokens (vLLM paper: 161; our count of the pip-packaged copy: mean 264), answers ~300 (338 / 312).
FIRST_TURN = RequestClass("first-turn", 1.0, LengthDist(150, 1.0, 4, 4000), LengthDist(240, 0.7, 4, 1500))
# Azure LLM inference trace 2023, conversation: prompt median 1020 / mean 1155 / p90 2735 tokens (multi-turn
# history included), output median 129 / mean 211 / p90 424.
CONVERSATION = RequestClass("conversation", 1.0, LengthDist(1020, 0.7, 16, 8000), LengthDist(129, 0.9, 2, 1024))
# Short interactive turns (ShareGPT first turns, LMSYS: prompts of tens to hundreds of tokens).
SHORT_CHAT = RequestClass("chat", 0.75, LengthDist(250, 0.6, 16, 2000), LengthDist(150, 0.6, 8, 600))
# Retrieval-augmented prompts: 3-4k tokens of retrieved context (seed 004).
RETRIEVAL = RequestClass("retrieval", 0.25, LengthDist(low=3000, high=4000, uniform=True),
                         LengthDist(200, 0.5, 16, 600))
# Azure code trace 2023: prompt median 1469 / mean 2048, output median 13 / mean 28.
CODE = RequestClass("code", 1.0, LengthDist(1469, 0.8, 16, 8000), LengthDist(13, 1.2, 1, 512))
# arXiv summarisation (Vidur's processed trace): prompt median 2730, output median 167.
SUMMARY = RequestClass("summarize", 0.15, LengthDist(2730, 0.3, 512, 7000), LengthDist(167, 0.8, 8, 1024))
# Per-class SLOs in `mixed` and `multitenant` follow DistServe's evaluation settings (OSDI'24): chatbot (OPT-66B)
# TTFT 0.4 s / TPOT 0.1 s, code completion TTFT 0.125 s / TPOT 0.2 s, summarisation TTFT 15 s / TPOT 0.15 s.

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        # A chat service sees both: new conversations and follow-ups that resend the history. SLOs: DistServe's
        # chatbot setting for OPT-66B (TTFT 0.4 s, TPOT 0.1 s).
        Preset("chat", "chat turns: half ShareGPT first turns, half follow-ups carrying their history (Azure 2023)",
               (RequestClass("first-turn", 0.5, FIRST_TURN.prompt, FIRST_TURN.output),
                RequestClass("follow-up", 0.5, CONVERSATION.prompt, CONVERSATION.output)), 4.0, 1.0, 400, 100),
        Preset("conversation", "multi-turn conversations with Azure-2023 conversation-trace lengths",
               (CONVERSATION,), 2.0, 1.0, 500, 100),
        Preset("rag", "short chat streams mixed with 3-4k-token retrieval prompts (seed 004)",
               (SHORT_CHAT, RETRIEVAL), 6.0, 1.0, 1000, 100),
        Preset("code", "code completion with Azure-2023 code-trace lengths, bursty arrivals",
               (CODE,), 4.0, 2.0, 125, 200),
        Preset("mixed", "chat, code completion and summarisation sharing one server",
               (RequestClass("conversation", 0.6, CONVERSATION.prompt, CONVERSATION.output, 400, 100),
                RequestClass("code", 0.25, CODE.prompt, CODE.output, 125, 200),
                RequestClass("summarize", 0.15, SUMMARY.prompt, SUMMARY.output, 15000, 150)), 4.0, 1.0, 400, 100),
        # Two tenants on one server, one sending four times the other's traffic: with fair sharing the light
        # tenant's latency stays bounded while the heavy one floods the queue (VTC, Sheng et al., OSDI'24).
        Preset("multitenant", "a heavy and a light tenant sharing a server (same chat lengths, 4:1 traffic)",
               (RequestClass("heavy", 0.8, FIRST_TURN.prompt, FIRST_TURN.output),
                RequestClass("light", 0.2, FIRST_TURN.prompt, FIRST_TURN.output)), 20.0, 1.0, 400, 100),
    ]
}


@dataclass
class Requests:
    """The workload as arrays sorted by arrival time."""

    arrival_s: np.ndarray  # float64
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    request_class: np.ndarray  # int64 index into class_names
    class_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.arrival_s)


def arrival_times(rng: np.random.Generator, rate: float, burstiness: float, n: int | None,
                  duration_s: float) -> np.ndarray:
    """Arrival instants of a renewal process with mean rate `rate` and gap CV `burstiness` (gamma gaps; CV 1 is
    Poisson). With `n`, exactly n arrivals; otherwise every arrival in [0, duration_s)."""
    shape = 1.0 / (burstiness * burstiness)
    scale = 1.0 / (rate * shape)
    if n is not None:
        gaps = rng.gamma(shape, scale, size=n)
        return np.cumsum(gaps) - gaps[0]  # first request at t = 0
    times = []
    t = 0.0
    chunk = max(16, int(rate * duration_s * 1.2) + 16)
    while True:
        gaps = rng.gamma(shape, scale, size=chunk)
        arr = t + np.cumsum(gaps)
        inside = arr[arr < duration_s]
        times.append(inside)
        if len(inside) < chunk:
            break
        t = arr[-1]
    out = np.concatenate(times)
    return out


def synthesize(preset: Preset, rate: float, burstiness: float, n: int | None, duration_s: float,
               seed: int) -> Requests:
    rng = np.random.default_rng(seed)
    arrivals = arrival_times(rng, rate, burstiness, n, duration_s)
    count = len(arrivals)
    shares = np.array([c.share for c in preset.classes])
    cls = rng.choice(len(preset.classes), size=count, p=shares / shares.sum())
    prompt = np.zeros(count, np.int64)
    output = np.zeros(count, np.int64)
    for k, c in enumerate(preset.classes):
        mask = cls == k
        m = int(mask.sum())
        prompt[mask] = c.prompt.draw(rng, m)
        output[mask] = c.output.draw(rng, m)
    return Requests(arrivals.astype(np.float64), prompt, output, cls.astype(np.int64),
                    tuple(c.name for c in preset.classes))


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the line and the field."""


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
MAX_TRACE_TOKENS = 10_000_000  # per request, prompt or output: far beyond any model context


def read_csv_trace(text: str, max_rows: int) -> Requests:
    """Parse a CSV trace with header `arrival_s,prompt_tokens,output_tokens` (extra columns are ignored).
    Rows are sorted by arrival (stable); times are shifted so the first arrival is at 0."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise TraceError("trace is empty; expected a header arrival_s,prompt_tokens,output_tokens") from None
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise TraceError(f"trace header lacks column(s) {', '.join(missing)}; expected "
                         f"arrival_s,prompt_tokens,output_tokens (got {','.join(header)[:200]})")
    idx = [header.index(c) for c in TRACE_COLUMNS]
    arrivals, prompts, outputs = [], [], []
    for line_no, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(arrivals) >= max_rows:
            raise TraceError(f"trace has more than {max_rows} requests (the limit)")
        if len(row) < len(header):
            raise TraceError(f"line {line_no}: expected {len(header)} columns, got {len(row)}")
        try:
            a = float(row[idx[0]])
        except ValueError:
            raise TraceError(f"line {line_no}: arrival_s must be a number of seconds, got {row[idx[0]]!r}") from None
        if not math.isfinite(a) or a < 0:
            raise TraceError(f"line {line_no}: arrival_s must be a finite number >= 0, got {row[idx[0]]!r}")
        vals = []
        for col, k in zip(TRACE_COLUMNS[1:], idx[1:], strict=False):
            try:
                v = int(row[k])
            except ValueError:
                raise TraceError(f"line {line_no}: {col} must be an integer, got {row[k]!r}") from None
            if not 1 <= v <= MAX_TRACE_TOKENS:
                raise TraceError(f"line {line_no}: {col} must be between 1 and {MAX_TRACE_TOKENS}, got {v}")
            vals.append(v)
        arrivals.append(a)
        prompts.append(vals[0])
        outputs.append(vals[1])
    if not arrivals:
        raise TraceError("trace has a header but no requests")
    a = np.asarray(arrivals, np.float64)
    order = np.argsort(a, kind="stable")
    a = a[order] - a[order[0]]
    return Requests(a, np.asarray(prompts, np.int64)[order], np.asarray(outputs, np.int64)[order],
                    np.zeros(len(a), np.int64), ("trace",))
