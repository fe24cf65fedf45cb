"""A twin of a served deployment: a Prometheus scrape of a vLLM or SGLang server (prometheus_parse) beside the
simulation of the load it saw on the deployment the user names (the dashboard's /twin page).

The load comes from the scrape as `calibrate --from-prometheus` derives it (prometheus_fit.derive_load: lengths from
the length histograms, the rate from the request counter over the window, as many requests as the window served, at
most FIT_MAX_REQUESTS); the deployment (GPU, model, tp, engine, scheduler, ...) is what the user states. The
simulated run is read the way the scrape was (prometheus_fit.run_window), so both sides are the same histograms in
the same buckets: what differs is the model, not the measurement. Quantiles are estimated from the buckets as
Prometheus' histogram_quantile does (linear within a bucket), on both sides alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .prometheus_export import snapshot
from .prometheus_names import ABORTED_REASON, COUNTER
from .prometheus_parse import HistogramWindow, Window

# The distributions overlaid, in the order they are drawn: (concept, label, unit shown, factor from the histogram's
# unit). The lengths show what the derived load keeps of the scrape's: its means (a fixed isl and osl), not spread.
DISTRIBUTIONS = (("ttft", "TTFT", "ms", 1000.0), ("itl", "ITL (TPOT)", "ms", 1000.0),
                 ("e2e", "E2E latency", "ms", 1000.0), ("prompt_len", "Prompt length", "tok", 1.0),
                 ("output_len", "Output length", "tok", 1.0))
QUANTILES = (0.5, 0.9, 0.99)
# A difference under this (percent) is within what the bucket widths and one seed's noise allow: said as close.
CLOSE_PCT = 10.0


@dataclass(frozen=True)
class Row:
    """One compared figure: the scrape's value, the simulation's, and the simulation's difference from it."""

    key: str
    label: str
    unit: str
    measured: float | None
    simulated: float | None

    @property
    def diff_pct(self) -> float | None:
        if self.measured is None or self.simulated is None or not self.measured:
            return None
        return (self.simulated / self.measured - 1) * 100


def histogram_quantile(q: float, h: HistogramWindow) -> float | None:
    """Prometheus' histogram_quantile: the bucket holding rank q * count, linear within it (from 0 for the first
    bucket); in the +Inf bucket, the highest finite bound. None for an empty histogram."""
    if h.count <= 0 or not h.bounds:
        return None
    rank = q * h.count
    lower, below = 0.0, 0.0
    for bound, cum in zip(h.bounds, h.cumulative, strict=False):
        if cum >= rank:
            width = cum - below
            return bound if width <= 0 else lower + (bound - lower) * (rank - below) / width
        lower, below = bound, cum
    return h.bounds[-1]


def cdf(h: HistogramWindow | None) -> tuple[list[float], list[float]]:
    """(bucket bounds, fraction of observations at or under each): the histogram as its buckets state it."""
    if h is None or h.count <= 0:
        return [], []
    return list(h.bounds), [c / h.count for c in h.cumulative[: len(h.bounds)]]


def _mean(h: HistogramWindow | None) -> float | None:
    return h.sum / h.count if h is not None and h.count > 0 else None


def _quantile(h: HistogramWindow | None, q: float) -> float | None:
    return histogram_quantile(q, h) if h is not None else None


def latency_rows(measured: Window, simulated: Window) -> list[Row]:
    """Mean and quantiles of each overlaid distribution, in its shown unit."""
    rows = []
    for concept, label, unit, factor in DISTRIBUTIONS:
        m, s = measured.histograms.get(concept), simulated.histograms.get(concept)
        rows.append(Row(f"{concept}_mean", f"{label} mean", unit, _scaled(_mean(m), factor), _scaled(_mean(s), factor)))
        for q in QUANTILES:
            name = f"p{q * 100:g}"
            rows.append(Row(f"{concept}_{name}", f"{label} {name}", unit, _scaled(_quantile(m, q), factor),
                            _scaled(_quantile(s, q), factor)))
    return rows


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _per_second(w: Window, counter: str, seconds: float | None) -> float | None:
    value = w.counters.get(counter)
    return value / seconds if value is not None and seconds else None


def _counters_at(result, flavour: str, at_s: float) -> dict[str, float]:
    """The run's counters as a scrape at simulated time at_s would read them (summed over engines; aborts out)."""
    out: dict[str, float] = {}
    for m, labels, value in snapshot(result, flavour, at_s):
        if m.kind == COUNTER and labels.get("finished_reason") != ABORTED_REASON:
            out[m.concept] = out.get(m.concept, 0.0) + float(value)
    return out


def simulated_rates(result, flavour: str) -> dict[str, float]:
    """Requests and generated tokens per second over the run's arrival window (first to last arrival) shifted by
    the median E2E latency, read from two snapshots as a rate() over a scrape's window is: what the offered load
    completes in steady state, without the ramp-up before the first answers nor the drain after the last arrival,
    which a window of a serving server does not hold. Empty when nothing finished or every request arrived at once."""
    arrivals = np.asarray(result.requests.arrival_s, float)
    e2e = (result.finish_s - arrivals)[result.finished]
    if not len(e2e) or arrivals.max() <= arrivals.min():
        return {}
    lag = float(np.median(e2e))
    start, end = float(arrivals.min()) + lag, float(arrivals.max()) + lag
    first, last = _counters_at(result, flavour, start), _counters_at(result, flavour, end)
    return {k: (last[k] - first.get(k, 0.0)) / (end - start) for k in ("requests", "generation_tokens") if k in last}


def load_rows(measured: Window, simulated: Window, rates: dict[str, float]) -> list[Row]:
    """Throughput (over the scrape's window; the run's arrival window, simulated_rates), KV usage (a window's mean
    gauge; a single scrape's is one instant, not compared), tokens per engine step and the lengths."""
    rows = [
        Row("request_throughput", "Request throughput", "req/s",
            _per_second(measured, "requests", measured.seconds), rates.get("requests")),
        Row("output_throughput", "Output token throughput", "tok/s",
            _per_second(measured, "generation_tokens", measured.seconds), rates.get("generation_tokens")),
    ]
    kv_m = measured.gauges.get("kv_usage") if measured.snapshots > 1 else None
    kv_s = simulated.gauges.get("kv_usage")
    rows.append(Row("kv_usage", "KV-cache usage (mean)", "%", None if kv_m is None else kv_m * 100,
                    None if kv_s is None else kv_s * 100))
    for concept, label, unit in (("iteration_tokens", "Tokens per engine step (mean)", "tok"),):
        rows.append(Row(f"{concept}_mean", label, unit, _mean(measured.histograms.get(concept)),
                        _mean(simulated.histograms.get(concept))))
    return rows


def differences(rows: list[Row]) -> list[str]:
    """The differences stated in words, largest first: each figure the simulation misses by CLOSE_PCT or more."""
    off = sorted((r for r in rows if r.diff_pct is not None and abs(r.diff_pct) >= CLOSE_PCT),
                 key=lambda r: -abs(r.diff_pct))
    return [f"{r.label}: simulated {_fmt(r.simulated)} {r.unit} against {_fmt(r.measured)} {r.unit} measured "
            f"({r.diff_pct:+.0f}%)" for r in off]


def _fmt(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"
