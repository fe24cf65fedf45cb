"""How far the step-time model can be off, read from its own validation residuals, and the interval that puts on
a run's metrics ("model error bars", beside the seeds' `ci95`).

The residuals. Every validation row that times a whole engine step or a whole benchmark run (the groups "step"
and "serving": what a simulation predicts, not one kernel of it) gives the factor by which the model's step time
would have to be scaled to match the measurement: measured / predicted for a time, predicted / measured for a
throughput. Its logarithm is the row's residual. `sim_core/data/model_error.json` keeps them, written by
scripts/gen_validation_md.py from the same validation run as docs/VALIDATION.md (a test keeps both current).

The spread. Rows of one source share its engine version, settings and way of measuring, so their residuals are
correlated: a new deployment is a new source. The spread is therefore a random-effects one: a source's mean
residual varies around the overall mean with variance tau^2 (between sources, each source one sample), and a row
varies around its source's mean with variance sigma^2 (pooled within sources); a new row's residual has variance
tau^2 + sigma^2 around the mean of the source means.

The ensemble. Member k scales every step's time by exp(mu + sd * z_k), z_k the normal quantiles at
(k + 1/2) / K (stratified, so 16 members already span the distribution evenly), through the cost model's
STEP_TIME_SCALE. A residual measures a whole step, not each constant of it: the rows cannot say whether the GEMM
efficiency or the CPU overhead was off, so the member scales the step, which is also exactly what the residual
describes (an offline run's throughput under factor f is the model's / f, to the last bit of scheduling).
Every member replays the same requests (common random numbers), so what differs between members is the model
alone. A metric's interval is the `level` quantile range of its members' values. Two schedulers whose order on a
metric differs between members are flagged: within the model's error, the ranking is not settled.

Held out one source at a time, the nominal 90% interval of the serving rows covers the share that
`held_out_coverage` computes (quoted in docs/MODEL.md); the sources are few, so that figure is itself rough.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..deployment import resolve
from ..metric_catalog import value_at
from ..runner import RunOptions, make_requests, simulate_requests
from ..statistics import is_number

PATH = Path(__file__).resolve().parents[1] / "data" / "model_error.json"
# The validation groups whose rows time what a simulation predicts: whole steps and whole runs.
GROUPS = ("step", "serving")
MEMBERS = 16  # ensemble members of a model interval
LEVEL = 0.90  # the interval's nominal coverage


@dataclass(frozen=True)
class Residual:
    source: str
    group: str
    what: str
    log_factor: float  # log of (the step time the measurement implies / the step time the model predicts)


@dataclass(frozen=True)
class Spread:
    """The random-effects spread of log step-time factors (see the module's docstring)."""

    mean: float  # mean of the source means
    between_sd: float  # tau: sources' means around `mean`
    within_sd: float  # sigma: rows around their source's mean
    sources: int
    rows: int

    @property
    def sd(self) -> float:
        return math.hypot(self.between_sd, self.within_sd)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The [low, high] log step-time factor a new deployment's row falls in with probability `level`."""
        z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
        return self.mean - z * self.sd, self.mean + z * self.sd

    def factors(self, members: int = MEMBERS) -> np.ndarray:
        """The ensemble's step-time factors, stratified over the normal quantiles, in increasing order."""
        normal = statistics.NormalDist()
        return np.array([math.exp(self.mean + self.sd * normal.inv_cdf((k + 0.5) / members))
                         for k in range(members)])


def residual_of(check) -> Residual | None:
    """A validation Check -> its residual; None when it does not time a step or a run or was not predicted."""
    if check.group not in GROUPS or not check.predicted or check.reference <= 0:
        return None
    ratio = check.reference / check.predicted
    if check.unit == "ms":
        log_factor = math.log(ratio)
    elif check.unit.startswith("tok/s"):
        log_factor = -math.log(ratio)  # a throughput scales as 1 / step time
    else:
        return None
    return Residual(check.source, check.group, check.what, log_factor)


def document(checks: Iterable) -> str:
    """The text of sim_core/data/model_error.json for these validation checks."""
    rows = [r for r in (residual_of(c) for c in checks) if r is not None]
    doc = {"about": "log step-time factors (measured / predicted step time) of the validation rows in groups "
                    f"{', '.join(GROUPS)}; written by scripts/gen_validation_md.py, read by "
                    "sim_core/studies/model_error.py",
           "residuals": [{"source": r.source, "group": r.group, "what": r.what,
                          "log_factor": round(r.log_factor, 6)} for r in rows]}
    return json.dumps(doc, indent=1) + "\n"


def load(path: Path = PATH) -> list[Residual]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [Residual(r["source"], r["group"], r["what"], float(r["log_factor"])) for r in doc["residuals"]]


def spread(residuals: Iterable[Residual], exclude_source: str | None = None) -> Spread:
    """The random-effects spread of the residuals, leaving out one source's rows if asked."""
    by_source: dict[str, list[float]] = {}
    for r in residuals:
        if r.source != exclude_source:
            by_source.setdefault(r.source, []).append(r.log_factor)
    if len(by_source) < 2:
        raise ValueError("a spread between sources needs residuals from at least two sources")
    means = [statistics.fmean(v) for v in by_source.values()]
    deviations = [x - m for v, m in zip(by_source.values(), means, strict=True) for x in v]
    rows = len(deviations)
    within = math.sqrt(math.fsum(d * d for d in deviations) / max(rows - len(means), 1))
    return Spread(statistics.fmean(means), statistics.stdev(means), within, len(means), rows)


def held_out_coverage(residuals: list[Residual], group: str = "serving", level: float = LEVEL) -> tuple[int, int]:
    """(covered, rows): each `group` row against the interval built without its own source's rows."""
    covered = total = 0
    for source in sorted({r.source for r in residuals if r.group == group}):
        low, high = spread(residuals, exclude_source=source).interval(level)
        for r in residuals:
            if r.group == group and r.source == source:
                total += 1
                covered += low <= r.log_factor <= high
    return covered, total


def quantile_range(docs: list[dict], level: float = LEVEL) -> dict:
    """Metric documents of the ensemble's members -> [low, high] beside each numeric leaf (the nesting of
    `ci95`): the `level` range of the members' values, interpolated between members."""
    out = {}
    for key, first in docs[0].items():
        values = [d.get(key) for d in docs]
        if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            sub = quantile_range(values, level)
            if sub:
                out[key] = sub
        elif all(is_number(v) for v in values):
            low, high = np.quantile(np.array(values, float), [0.5 - level / 2, 0.5 + level / 2])
            out[key] = [float(low), float(high)]
    return out


@dataclass
class Ensemble:
    """A scenario's run under each of the ensemble's step-time factors (the same requests every time)."""

    factors: np.ndarray
    members: list[dict]  # each member's metrics, in the order of `factors`
    level: float

    @property
    def interval(self) -> dict:
        """`model_ci`: [low, high] beside each numeric metric, the same keys as `ci95`."""
        return quantile_range(self.members, self.level)


def ensemble(scenario, *, members: int = MEMBERS, level: float = LEVEL, residuals: list[Residual] | None = None,
             trace_text: str | None = None, cancel: np.ndarray | None = None) -> Ensemble:
    """Run `scenario` (its first seed) once per ensemble member, every step's time scaled by the member's factor;
    the requests are made once, so the members differ by the model alone."""
    factors = spread(residuals if residuals is not None else load()).factors(members)
    one = scenario.model_copy(update={"seeds": 1})
    r = resolve(one)
    reqs = make_requests(one, r, trace_text)
    # With the bounds (each member's own, from its scaled step model), so model_ci has the keys ci95 has.
    options = RunOptions(cancel=cancel, bounds=True)
    runs = [simulate_requests(one, replace(r, step_time_scale=float(f)), reqs, options).metrics for f in factors]
    return Ensemble(factors, runs, level)


# The metrics whose order between two schedulers the warnings check (the ones a comparison is read off).
RANKED_METRICS = ("goodput", "slo_attainment", "ttft_ms.mean", "ttft_ms.p99", "itl_ms.p99", "e2el_ms.mean")


def order_flips(ensembles: dict[str, Ensemble], keys: tuple[str, ...] = RANKED_METRICS) -> list[str]:
    """Warnings for each pair of schedulers whose order on a metric differs between ensemble members: within the
    model's error that comparison is not settled. Members are compared pairwise (member k of one scheduler with
    member k of the other: the same factor), so an error shared by both runs does not count as a flip."""
    names = list(ensembles)
    out = []
    for key in keys:
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                diffs = [value_at(x, key) - value_at(y, key) for x, y in
                         zip(ensembles[a].members, ensembles[b].members, strict=True)
                         if is_number(value_at(x, key)) and is_number(value_at(y, key))]
                if any(d > 0 for d in diffs) and any(d < 0 for d in diffs):
                    out.append(f"{a} and {b} swap places on {key} within the model's error "
                               f"({sum(d > 0 for d in diffs)} of {len(diffs)} ensemble members put {a} higher)")
    return out


def flips_about(flips: list[str], scheduler: str) -> list[str]:
    """The order_flips warnings that name `scheduler`."""
    return [f for f in flips if scheduler in f.split(" swap places", 1)[0].split(" and ")]
