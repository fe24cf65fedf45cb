"""Reading Prometheus scrapes of vLLM or SGLang for `sched-sim calibrate --from-prometheus`: the text format a
/metrics endpoint serves (one scrape, or timestamped samples: OpenMetrics, as `run --metrics-out --metrics-interval`
writes), and a Prometheus HTTP API query answer (`/api/v1/query_range` matrix or `/api/v1/query` vector JSON).

Several snapshots of one server (several files in time order, or timestamps) make a window: counters and histograms
are read as their increase from the first snapshot to the last, gauges as their mean. One snapshot is read as it
stands (everything since the server started). Series of several label sets (engines, finish reasons) are summed;
a scrape of several models is refused. Errors are ScrapeError, naming the file, line and what is wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .json_input import JSONInputError, loads
from .prometheus_names import COUNTER, FLAVOURS, GAUGE, HISTOGRAM, LEGACY_NAMES, METRICS, MetricSpec

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+(\S+))?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
# What the fit needs at least: without these two there is no latency to fit to.
REQUIRED = ("ttft", "itl")


class ScrapeError(ValueError):
    """A file that is not a usable scrape: the message names the file, the line or metric, and what is wrong."""


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]  # (name, sorted labels) -> value


@dataclass(frozen=True)
class Snapshot:
    timestamp_s: float | None
    samples: Samples


def _labels(text: str, where: str) -> tuple[tuple[str, str], ...]:
    body, out, pos = text[1:-1], [], 0
    while pos < len(body):
        m = _LABEL.match(body, pos)
        if not m or m.end() == pos:
            raise ScrapeError(f"{where}: bad label set {text[:80]!r}")
        value = m.group(2).replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        out.append((m.group(1), value))
        pos = m.end()
    return tuple(sorted(out))


def _number(text: str, where: str) -> float:
    try:
        return float(text.replace("Inf", "inf"))
    except ValueError:
        raise ScrapeError(f"{where}: {text[:40]!r} is not a number") from None


def parse_text(text: str, source: str) -> list[Snapshot]:
    """Prometheus or OpenMetrics text -> its snapshots (one per timestamp, in time order; one without)."""
    openmetrics = "# EOF" in text
    by_time: dict[float | None, Samples] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}: line {n}"
        m = _SAMPLE.match(line)
        if not m:
            raise ScrapeError(
                f"{where}: not a Prometheus sample line (NAME{{LABELS}} VALUE [TIMESTAMP]): {line[:80]!r}"
            )
        labels = _labels(m.group(2), where) if m.group(2) else ()
        ts = None
        if m.group(4) is not None:
            ts = _number(m.group(4), where) / (1.0 if openmetrics else 1000.0)  # seconds / text format's ms
        by_time.setdefault(ts, {})[(m.group(1), labels)] = _number(m.group(3), where)
    if not by_time:
        raise ScrapeError(f"{source}: no samples: not a Prometheus text scrape (a /metrics page's text)")
    if None in by_time and len(by_time) > 1:
        raise ScrapeError(
            f"{source}: some samples have timestamps and some not: one scrape or one series, please"
        )
    return [Snapshot(t, by_time[t]) for t in sorted(by_time, key=lambda t: -math.inf if t is None else t)]


def parse_query_json(text: str, source: str) -> list[Snapshot]:
    """A Prometheus HTTP API answer (matrix or vector) -> snapshots per timestamp."""
    try:
        doc = loads(text)
        data = doc["data"]
        kind, result = data["resultType"], data["result"]
    except (JSONInputError, ValueError, KeyError, TypeError):
        raise ScrapeError(
            f"{source}: not a Prometheus query answer (JSON with data.resultType and data.result)"
        ) from None
    if kind not in ("matrix", "vector") or not isinstance(result, list):
        raise ScrapeError(f"{source}: data.resultType must be matrix or vector (got {str(kind)[:20]!r})")
    by_time: dict[float, Samples] = {}
    for k, series in enumerate(result):
        try:
            labels = dict(series["metric"])
            name = labels.pop("__name__")
            points = series["values"] if kind == "matrix" else [series["value"]]
            for ts, value in points:
                by_time.setdefault(float(ts), {})[(name, tuple(sorted(labels.items())))] = float(value)
        except (KeyError, TypeError, ValueError):
            raise ScrapeError(
                f"{source}: data.result[{k}] is not a series with metric.__name__ and values "
                f'[[time, "value"], ...]'
            ) from None
    if not by_time:
        raise ScrapeError(f"{source}: the query answer holds no samples")
    return [Snapshot(t, by_time[t]) for t in sorted(by_time)]


def parse_scrape(text: str, source: str) -> list[Snapshot]:
    return parse_query_json(text, source) if text.lstrip()[:1] == "{" else parse_text(text, source)


def flavour_of(snapshots: list[Snapshot], source: str) -> str:
    counts = {
        f: sum(1 for s in snapshots for name, _ in s.samples if name.startswith(f + ":")) for f in FLAVOURS
    }
    best = max(counts, key=counts.get)
    if not counts[best]:
        raise ScrapeError(
            f"{source}: no vLLM or SGLang metrics (no name starts with vllm: or sglang:): is this "
            f"an inference server's /metrics?"
        )
    return best


# ---------------------------------------------------------------------------------------------------------
# A window: what the fit compares
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HistogramWindow:
    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]  # to each bound, then +Inf
    sum: float
    count: float


@dataclass(frozen=True)
class Window:
    flavour: str
    histograms: dict[str, HistogramWindow]
    counters: dict[str, float]
    gauges: dict[str, float]  # mean over the snapshots
    seconds: float | None  # the window's length, when the snapshots carry times
    snapshots: int
    unknown: tuple[str, ...]  # metric names of the flavour that sched-sim does not model


def _sum_family(s: Samples, name: str, suffix: str) -> dict[str, float]:
    """A family's samples summed over every label but le: {le or "": value}."""
    out: dict[str, float] = {}
    for (n, labels), v in s.items():
        if n == name + suffix:
            le = dict(labels).get("le", "")
            out[le] = out.get(le, 0.0) + v
    return out


def _name_in(snapshots: list[Snapshot], m: MetricSpec, flavour: str) -> str | None:
    names = {n for s in snapshots for n, _ in s.samples}
    suffix = {HISTOGRAM: "_count", COUNTER: "_total", GAUGE: ""}[m.kind]
    for name in (m.name, *LEGACY_NAMES.get(flavour, {}).get(m.concept, ())):
        if name + suffix in names:
            return name
    return None


def _value(snap: Snapshot, name: str, suffix: str) -> float:
    return sum(_sum_family(snap.samples, name, suffix).values())


def _histogram(first: Snapshot | None, last: Snapshot, name: str, source: str) -> HistogramWindow:
    def buckets(s: Snapshot) -> dict[float, float]:
        return {
            _number(le, f"{source}: {name}_bucket le"): v
            for le, v in _sum_family(s.samples, name, "_bucket").items()
        }

    b = buckets(last)
    if first is not None:
        b0 = buckets(first)
        b = {le: v - b0.get(le, 0.0) for le, v in b.items()}
    bounds = tuple(sorted(le for le in b if math.isfinite(le)))
    count = _value(last, name, "_count") - (_value(first, name, "_count") if first else 0.0)
    total = _value(last, name, "_sum") - (_value(first, name, "_sum") if first else 0.0)
    if count < 0 or any(v < 0 for v in b.values()):
        raise ScrapeError(f"{source}: {name} went down between snapshots (did the server restart?)")
    return HistogramWindow(bounds, tuple(b[x] for x in bounds) + (count,), total, count)


def _family_name(sample_name: str, known: set[str]) -> str:
    """The family a sample belongs to: its name less a histogram's or counter's suffix, if that names one."""
    for suffix in ("_bucket", "_count", "_sum", "_total", "_created"):
        if sample_name.endswith(suffix) and sample_name.removesuffix(suffix) in known:
            return sample_name.removesuffix(suffix)
    return re.sub(r"(_bucket|_count|_sum|_total|_created)$", "", sample_name)


def window(snapshots: list[Snapshot], source: str) -> Window:
    """The snapshots (of one server, in time order) as one window of the flavour they hold."""
    flavour = flavour_of(snapshots, source)
    models = {v for s in snapshots for (_, labels) in s.samples for k, v in labels if k == "model_name"}
    if len(models) > 1:
        raise ScrapeError(
            f"{source}: metrics of {len(models)} models ({', '.join(sorted(models)[:4])}): give the "
            f"scrape of one model's server"
        )
    first, last = (snapshots[0], snapshots[-1]) if len(snapshots) > 1 else (None, snapshots[0])
    hists, counters, gauges = {}, {}, {}
    for m in METRICS[flavour]:
        name = _name_in(snapshots, m, flavour)
        if name is None:
            continue
        if m.kind == HISTOGRAM:
            hists[m.concept] = _histogram(first, last, name, source)
        elif m.kind == COUNTER:
            counters[m.concept] = _value(last, name, "_total") - (
                _value(first, name, "_total") if first else 0.0
            )
            if counters[m.concept] < 0:
                raise ScrapeError(
                    f"{source}: {name}_total went down between snapshots (did the server restart?)"
                )
        else:
            gauges[m.concept] = sum(_value(s, name, "") for s in snapshots) / len(snapshots)
    missing = [
        METRICS[flavour][[m.concept for m in METRICS[flavour]].index(c)].name
        for c in REQUIRED
        if c not in hists
    ]
    if missing:
        raise ScrapeError(
            f"{source}: no {' or '.join(missing)}: the fit needs the TTFT and inter-token latency "
            f"histograms ({flavour} exports them by default)"
        )
    if hists["ttft"].count <= 0:
        raise ScrapeError(
            f"{source}: no request reached its first token in the window (identical scrapes, or an "
            f"idle server?): the fit needs traffic"
        )
    known = {n for m in METRICS[flavour] for n in (m.name, *LEGACY_NAMES.get(flavour, {}).get(m.concept, ()))}
    unknown = sorted(
        {_family_name(n, known) for s in snapshots for n, _ in s.samples if n.startswith(flavour + ":")}
        - known
    )
    times = [s.timestamp_s for s in snapshots if s.timestamp_s is not None]
    seconds = times[-1] - times[0] if len(times) > 1 and times[-1] > times[0] else None
    return Window(flavour, hists, counters, gauges, seconds, len(snapshots), tuple(unknown))


def read_scrapes(files: list[tuple[str, str]]) -> Window:
    """(source, text) of each file, in time order -> one window over all their snapshots."""
    parsed = [(source, parse_scrape(text, source)) for source, text in files]
    flavours = {flavour_of(snaps, source) for source, snaps in parsed}
    if len(flavours) > 1:
        raise ScrapeError(f"the files mix engines ({', '.join(sorted(flavours))}): give one server's scrapes")
    snapshots = [s for _, snaps in parsed for s in snaps]
    if len(files) > 1 and all(s.timestamp_s is not None for s in snapshots):
        snapshots.sort(key=lambda s: s.timestamp_s)
    return window(snapshots, ", ".join(source for source, _ in files))
