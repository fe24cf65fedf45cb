"""A simulated run as the Prometheus metrics its engine would have exported (`sched-sim run --metrics-out`):
names, labels and buckets from prometheus_names.py, values from the run's per-request records, step logs and
inter-token histogram.

Two shapes. `exposition_text`: one scrape at the end of the run in the Prometheus text format (0.0.4, what a
server's /metrics serves), counters and histograms over the whole run, gauges as they stand once it drained.
`openmetrics_series`: a sample every `interval_s` of simulated time, each with its timestamp, in OpenMetrics text,
the format `promtool tsdb create-blocks-from openmetrics` backfills into a Prometheus (and so into Grafana); the
plain text format's timestamps are not ingested by a scrape, and a range-query JSON is what Prometheus answers,
not what it imports.

What is exact and what is not. Per-request histograms (TTFT, E2E, queue, prefill, decode, lengths) are exact: each
request is observed when vLLM observes it (TTFT at its first token, the rest when it finishes). The end-of-run
inter-token histogram of one engine is the engine's own per-token histogram (1 us bins); in a time series, and for
each engine of a cluster, a token's gap is its step's gap from the engine's previous step (its duration where the
log is sampled). Token counters in a time series spread a request's generated tokens evenly between its first token
and its end. Engine steps past the step log's bound are a sample, counted `step_stride` times each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .kernel.state import A_ITL_SUM
from .prometheus_names import (
    ABORTED_REASON,
    COUNTER,
    FINISHED_REASON,
    GAUGE,
    HISTOGRAM,
    METRICS,
    MetricSpec,
    buckets_of,
)
from .views import RequestState, engine_logs, step_columns

ENGINE_LABEL_POOLS = ("replicas", "decode")  # the pools whose engines see a request finish
# The most points a series holds: each is a full snapshot (every histogram over every request), and Grafana shows
# a few thousand points per series anyway.
MAX_SERIES_POINTS = 10_000


class SeriesTooLong(ValueError):
    """An interval that would make more than MAX_SERIES_POINTS points; the message says how many."""


@dataclass(frozen=True)
class Histogram:
    bounds: tuple[float, ...]  # upper bounds, +Inf not included
    cumulative: tuple[float, ...]  # count <= each bound, then the total (+Inf)
    sum: float

    @property
    def count(self) -> float:
        return self.cumulative[-1]


def histogram_of(
    values: np.ndarray, bounds: tuple[float, ...], weights: np.ndarray | None = None
) -> Histogram:
    values = np.asarray(values, float)
    w = np.ones(len(values)) if weights is None else np.asarray(weights, float)
    order = np.argsort(values, kind="stable")
    cum_w = np.concatenate([[0.0], np.cumsum(w[order])])
    at = np.searchsorted(values[order], np.asarray(bounds, float), side="right")
    return Histogram(
        tuple(bounds), tuple(float(x) for x in cum_w[at]) + (float(cum_w[-1]),), float(np.sum(values * w))
    )


def fine_histogram(
    fine: np.ndarray, coarse: np.ndarray, total_s: float, bounds: tuple[float, ...]
) -> Histogram:
    """The engine's inter-token histogram (1 us bins, then 1 ms bins) in Prometheus buckets: a value in bin i is
    about (i + 1/2) us, so it is <= a bound b (a whole number of us) exactly when i < b us."""
    fine_cum = np.concatenate([[0], np.cumsum(fine)])
    coarse_cum = np.concatenate([[0], np.cumsum(coarse)])
    fine_s = len(fine) * 1e-6
    cum = []
    for b in bounds:
        if b < fine_s:
            cum.append(float(fine_cum[int(round(b * 1e6))]))
        else:
            cum.append(float(fine_cum[-1] + coarse_cum[min(int(round(b * 1e3)), len(coarse))]))
    return Histogram(tuple(bounds), tuple(cum) + (float(fine_cum[-1] + coarse_cum[-1]),), float(total_s))


@dataclass(frozen=True)
class EngineRecord:
    label: str  # the `engine` label: its index in the run
    served: np.ndarray  # bool per request: the requests this engine reports (those that finish on it)
    steps: dict[str, np.ndarray]
    stride: int
    num_blocks: int


def engines_of(result) -> list[EngineRecord]:
    """One record per engine; a prefill pool's engines report steps and gauges, no requests."""
    logs = engine_logs(result)
    if not logs:
        n = len(result.requests)
        return [
            EngineRecord(
                "0",
                np.ones(n, bool),
                step_columns(result),
                int(result.step_stride),
                int(result.resolved.num_blocks),
            )
        ]
    return [
        EngineRecord(
            str(k),
            log.served if log.pool in ENGINE_LABEL_POOLS else np.zeros_like(log.served),
            log.steps,
            log.step_stride,
            log.num_blocks,
        )
        for k, log in enumerate(logs)
    ]


def step_itl(e: EngineRecord, until_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(gap, tokens) per logged step that ended by until_s: its decode tokens each waited the gap since the
    engine's previous step ended (its duration where the log is a sample)."""
    end = e.steps["start_s"] + e.steps["duration_s"]
    keep = end <= until_s + 1e-12
    gaps = (
        e.steps["duration_s"].copy()
        if e.stride > 1
        else np.diff(end, prepend=end[:1] - e.steps["duration_s"][:1])
    )
    return gaps[keep], e.steps["decode_seqs"][keep] * e.stride


def _request_times(result) -> dict[str, np.ndarray]:
    r = result.requests
    return {
        "arrival": r.arrival_s,
        "scheduled": result.first_scheduled_s,
        "first": result.first_token_s,
        "finish": result.finish_s,
        "done": result.status == int(RequestState.FINISHED),
        "rejected": result.status == int(RequestState.REJECTED),
    }


def _request_histograms(result, t: dict, mask: np.ndarray, max_len: int, specs, at_s: float) -> dict:
    """The per-request histograms of the requests `mask` selects, as they stand at at_s."""
    first = mask & t["done"] & (t["first"] <= at_s)
    fin = mask & t["done"] & (t["finish"] <= at_s)
    values = {
        "ttft": (t["first"] - t["arrival"])[first],
        "e2e": (t["finish"] - t["arrival"])[fin],
        "queue": (t["scheduled"] - t["arrival"])[fin],
        "prefill": (t["first"] - t["scheduled"])[fin],
        "decode": (t["finish"] - t["first"])[fin],
        "inference": (t["finish"] - t["scheduled"])[fin],
        "prompt_len": result.requests.prompt_tokens[fin],
        "output_len": result.generated[fin],
    }
    return {
        m.concept: histogram_of(values[m.concept], buckets_of(m, max_len))
        for m in specs
        if m.concept in values
    }


def _counters(result, t: dict, mask: np.ndarray, at_s: float) -> dict[str, float]:
    first = mask & t["done"] & (t["first"] <= at_s)
    fin = mask & t["done"] & (t["finish"] <= at_s)
    admitted = mask & t["done"] & (t["scheduled"] <= at_s)
    gen = result.generated.astype(float)
    span = np.maximum(t["finish"] - t["first"], 1e-12)
    partial = np.floor(1 + (gen - 1) * np.clip((at_s - t["first"]) / span, 0, 1))
    emitted = np.where(fin, gen, np.where(first, partial, 0.0))
    cached = np.maximum(result.cached_prefix, 0)
    return {
        "prompt_tokens": float(result.requests.prompt_tokens[first].sum()),
        "generation_tokens": float(emitted.sum()),
        "requests": float(fin.sum()),
        "preemptions": float(result.preemptions[fin].sum()),
        "prefix_queries": float(result.requests.prompt_tokens[admitted].sum()),
        "prefix_hits": float(cached[admitted].sum()),
    }


def _gauges(t: dict, e: EngineRecord, at_s: float, end_s: float) -> dict[str, float]:
    m = e.served
    running = m & (t["scheduled"] <= at_s) & (t["finish"] > at_s)
    waiting = m & (t["arrival"] <= at_s) & ~(t["scheduled"] <= at_s) & ~t["rejected"]
    logged = np.searchsorted(e.steps["start_s"], at_s, side="right") - 1
    usage = 0.0 if at_s >= end_s or logged < 0 else float(e.steps["kv_blocks"][logged]) / max(e.num_blocks, 1)
    return {"running": float(running.sum()), "waiting": float(waiting.sum()), "kv_usage": usage}


def time_averages(result) -> dict[str, float]:
    """The KV gauge (mean over engines) and the running requests (summed) averaged over the run's time: what the
    mean of a series' samples estimates. Each logged step's values hold until the next logged step starts."""
    end_s = result.end_s
    kv, running = [], 0.0
    for e in engines_of(result):
        start = e.steps["start_s"]
        if end_s <= 0 or not len(start):
            kv.append(0.0)
            continue
        held = np.diff(np.append(start, max(end_s, float(start[-1]))))
        kv.append(float(np.sum(e.steps["kv_blocks"] * held)) / end_s / max(e.num_blocks, 1))
        running += float(np.sum(e.steps["running"] * held)) / end_s
    return {"kv_usage": float(np.mean(kv)), "running": running}


def snapshot(result, flavour: str, at_s: float | None = None) -> list[tuple[MetricSpec, dict, object]]:
    """Every metric of `flavour` as it stands at simulated time at_s (None: the end of the run, drained):
    (spec, labels, value) with a Histogram or a number for value, in METRICS' order."""
    end_s = result.end_s
    at = end_s if at_s is None else at_s
    t = _request_times(result)
    specs = METRICS[flavour]
    max_len = int(result.resolved.max_model_len)
    engines = engines_of(result)
    groups = [(e.label, [e]) for e in engines] if flavour == "vllm" else [("", engines)]
    out = []
    for label, group in groups:
        mask = np.logical_or.reduce([e.served for e in group])
        labels = {"model_name": result.resolved.setup.model.key} | (
            {"engine": label} if flavour == "vllm" else {}
        )
        hists = _request_histograms(result, t, mask, max_len, specs, at)
        hists |= _step_histograms(result, group, specs, at, exact=at_s is None and len(engines) == 1)
        counters = _counters(result, t, mask, at)
        gauges = [_gauges(t, e, at, end_s) for e in group]
        for m in specs:
            if m.kind == HISTOGRAM and m.concept in hists:
                out.append((m, labels, hists[m.concept]))
            elif m.kind == COUNTER and m.concept == "requests" and flavour == "vllm":
                # A refused request has no engine: all are counted on the first (their sum is what a query sums).
                aborted = (
                    float((t["rejected"] & (t["arrival"] <= at)).sum()) if label == groups[0][0] else 0.0
                )
                out.append((m, labels | {"finished_reason": FINISHED_REASON}, counters["requests"]))
                out.append((m, labels | {"finished_reason": ABORTED_REASON}, aborted))
            elif m.kind == COUNTER:
                out.append((m, labels, counters[m.concept]))
            elif m.kind == GAUGE:
                values = [g[m.concept] for g in gauges]
                out.append((m, labels, float(np.mean(values) if m.concept == "kv_usage" else np.sum(values))))
    return out


def _step_histograms(result, group: list[EngineRecord], specs, at_s: float, exact: bool) -> dict:
    out = {}
    gaps, tokens, per_step, strides = [], [], [], []
    for e in group:
        g, k = step_itl(e, at_s)
        gaps.append(g)
        tokens.append(k)
        ended = e.steps["start_s"] + e.steps["duration_s"] <= at_s + 1e-12
        per_step.append((e.steps["prefill_tokens"] + e.steps["decode_seqs"])[ended])
        strides.append(np.full(int(ended.sum()), e.stride))
    for m in specs:
        if m.concept in ("itl", "itl_legacy"):
            if exact:
                out[m.concept] = fine_histogram(
                    result.itl_fine,
                    result.itl_coarse,
                    float(result.accumulators[A_ITL_SUM]),
                    tuple(m.buckets),
                )
            else:
                out[m.concept] = histogram_of(np.concatenate(gaps), tuple(m.buckets), np.concatenate(tokens))
        elif m.concept == "iteration_tokens":
            out[m.concept] = histogram_of(np.concatenate(per_step), tuple(m.buckets), np.concatenate(strides))
    return out


# ---------------------------------------------------------------------------------------------------------
# Text formats
# ---------------------------------------------------------------------------------------------------------
def number_text(x: float) -> str:
    """As Prometheus' Go client and prometheus_client write a float: +Inf, -Inf, NaN, else repr."""
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if math.isnan(x):
        return "NaN"
    return repr(float(x))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels_text(labels: dict) -> str:
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}" if labels else ""


def sample_lines(m: MetricSpec, labels: dict, value, suffix: str = "") -> list[str]:
    """One metric's sample lines (a histogram's buckets, count and sum), each ending in `suffix` (a timestamp)."""
    if m.kind == HISTOGRAM:
        lines = [
            f"{m.name}_bucket{_labels_text(labels | {'le': number_text(b)})} {number_text(c)}{suffix}"
            for b, c in zip((*value.bounds, math.inf), value.cumulative, strict=True)
        ]
        return lines + [
            f"{m.name}_count{_labels_text(labels)} {number_text(value.count)}{suffix}",
            f"{m.name}_sum{_labels_text(labels)} {number_text(value.sum)}{suffix}",
        ]
    name = m.name + "_total" if m.kind == COUNTER else m.name
    return [f"{name}{_labels_text(labels)} {number_text(value)}{suffix}"]


def _families(samples) -> list[tuple[MetricSpec, list]]:
    out: dict[str, tuple[MetricSpec, list]] = {}
    for m, labels, value in samples:
        out.setdefault(m.name, (m, []))[1].append((labels, value))
    return list(out.values())


def exposition_text(result, flavour: str) -> str:
    """The run's end-of-run scrape in the Prometheus text format, as prometheus_client writes it (a counter's HELP
    and TYPE name it with _total)."""
    lines = []
    for m, rows in _families(snapshot(result, flavour)):
        name = m.name + "_total" if m.kind == COUNTER else m.name
        lines += [f"# HELP {name} {m.help}", f"# TYPE {name} {m.kind}"]
        for labels, value in rows:
            lines += sample_lines(m, labels, value)
    return "\n".join(lines) + "\n"


def series_times(end_s: float, interval_s: float) -> list[float]:
    """interval_s, 2 interval_s, ... up to the end of the run, and the end itself."""
    n = int(math.floor(end_s / interval_s + 1e-9))
    times = [k * interval_s for k in range(1, n + 1)]
    return times + [end_s] if not times or times[-1] < end_s - 1e-9 else times


def openmetrics_series(result, flavour: str, interval_s: float, start_unix_s: float) -> str:
    """A sample of every metric every interval_s of simulated time (and at the end), timestamped start_unix_s +
    simulated seconds, in OpenMetrics text: each series' points in time order, families one after another."""
    points = result.end_s / interval_s
    if not points <= MAX_SERIES_POINTS:  # also an interval so small the quotient overflows
        raise SeriesTooLong(
            f"{interval_s:g} s over a {result.end_s:.6g} s run is {points:,.0f} points; at most "
            f"{MAX_SERIES_POINTS:,} (a longer interval)"
        )
    times = series_times(result.end_s, interval_s)
    snaps = [snapshot(result, flavour, t) for t in times[:-1]] + [snapshot(result, flavour)]
    per_family: dict[str, tuple[MetricSpec, dict[str, list]]] = {}
    for t, snap in zip(times, snaps, strict=True):
        for m, labels, value in snap:
            series = per_family.setdefault(m.name, (m, {}))[1]
            series.setdefault(_labels_text(labels), []).append((labels, value, t))
    lines = []
    for m, series in per_family.values():
        lines += [f"# TYPE {m.name} {m.kind}", f"# HELP {m.name} {m.help}"]
        for points in series.values():
            for labels, value, t in points:
                lines += sample_lines(m, labels, value, f" {start_unix_s + t:.3f}")
    return "\n".join(lines) + "\n# EOF\n"
