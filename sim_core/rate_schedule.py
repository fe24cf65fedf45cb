"""Load that changes over time: a rate schedule, the arrival rate as a function of time, and the arrivals it
gives.

A schedule is one line, the scenario's `rate_schedule` field (a CLI flag and a URL parameter like any other):

    0:5,600:20,1800:5                               piecewise: 5 req/s from 0 s, 20 from 600 s, 5 from 1800 s
    diurnal:period=86400,min=4,max=40,peak=50400    a day: a cosine from min (at peak - period/2) to max (at peak)
    ramp:from=2,to=20,over=600                      linear from 2 to 20 req/s over the first 600 s, then 20
    burst:base=5,peak=40,at=300,width=60,every=0    5 req/s, 40 during [300, 360); every > 0 repeats the burst

Arrivals under a schedule come from time rescaling: the workload's renewal process (gamma gaps, its CV the
scenario's burstiness; 1 is Poisson) is drawn at rate 1 in "operational time" u, and each arrival is placed at
the real time t where the schedule's cumulative rate Lambda(t) = integral of rate from 0 to t reaches u. With
Poisson gaps this is exactly a non-homogeneous Poisson process with that rate; with burstier gaps, the bursts
keep their shape relative to the local rate. A constant schedule gives the same arrivals as the `rate` field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Bounds of every rate a schedule names (the `rate` field's own bounds) and of its times (a week, the longest run).
MIN_RATE = 1e-6
MAX_RATE = 10_000.0
MAX_TIME_S = 7 * 24 * 3600.0
MAX_PIECES = 1000
# Continuous shapes are integrated on a grid this fine (seconds, or a 20,000th of the schedule's span if longer):
# far below a request's gap at any rate a shape is used for.
GRID_S = 1.0
MAX_GRID_POINTS = 200_000
SHAPES = {
    "diurnal": ("period", "min", "max", "peak"),
    "ramp": ("from", "to", "over"),
    "burst": ("base", "peak", "at", "width", "every"),
}
SYNTAX = ("piecewise 'seconds:rate,...' (e.g. 0:5,600:20), or one of "
          "diurnal:period=S,min=R,max=R[,peak=S]; ramp:from=R,to=R,over=S; burst:base=R,peak=R,at=S,width=S[,every=S]")


class ScheduleError(ValueError):
    """A schedule that cannot be used: the message says which part and what is allowed."""


@dataclass(frozen=True)
class RateSchedule:
    """The arrival rate over time, as one shape's parameters."""

    shape: str  # "piecewise", "diurnal", "ramp" or "burst"
    params: tuple[tuple[str, float], ...]  # (name, value); piecewise: (start second, rate) pairs as ("t", rate)

    # ----- the text form -----
    def text(self) -> str:
        """The canonical form (parse(s.text()) == s)."""
        if self.shape == "piecewise":
            return ",".join(f"{_num(t)}:{_num(r)}" for t, r in self.pieces)
        return f"{self.shape}:" + ",".join(f"{k}={_num(v)}" for k, v in self.params)

    @property
    def pieces(self) -> list[tuple[float, float]]:
        return [(float(k), v) for k, v in self.params]

    # ----- the rate -----
    def rate_at(self, t: np.ndarray | float) -> np.ndarray:
        """Requests/s at time(s) t >= 0."""
        t = np.asarray(t, dtype=np.float64)
        if self.shape == "piecewise":
            starts = np.array([s for s, _ in self.pieces])
            rates = np.array([r for _, r in self.pieces])
            return rates[np.searchsorted(starts, t, side="right") - 1]
        p = dict(self.params)
        if self.shape == "diurnal":
            phase = 2.0 * math.pi * (t - p["peak"]) / p["period"]
            return p["min"] + (p["max"] - p["min"]) * (1.0 + np.cos(phase)) / 2.0
        if self.shape == "ramp":
            return p["from"] + (p["to"] - p["from"]) * np.clip(t / p["over"], 0.0, 1.0)
        start = t - p["at"]
        if p["every"] > 0:
            start = np.where(start >= 0, np.mod(start, p["every"]), start)
        return np.where((start >= 0) & (start < p["width"]), p["peak"], p["base"])

    def mean_rate(self, duration_s: float) -> float:
        """The mean rate over [0, duration_s)."""
        return float(self.cumulative(np.array([duration_s]))[0] / duration_s)

    def peak_rate(self, duration_s: float) -> float:
        grid, _ = self._grid(duration_s)
        breaks = np.array([s for s, _ in self.pieces if s < duration_s]) if self.shape == "piecewise" else grid
        return float(self.rate_at(np.concatenate([grid, breaks])).max())

    # ----- arrivals by time rescaling -----
    def cumulative(self, t: np.ndarray) -> np.ndarray:
        """Lambda(t): expected arrivals in [0, t)."""
        grid, lam = self._grid(float(np.max(t, initial=0.0)))
        return np.interp(t, grid, lam)

    def times_of(self, u: np.ndarray, horizon_s: float) -> np.ndarray:
        """Real times at which Lambda reaches the operational times u (inf past the horizon's last arrival)."""
        grid, lam = self._grid(horizon_s)
        out = np.interp(u, lam, grid)
        return np.where(u > lam[-1], np.inf, out)

    def _grid(self, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(times, Lambda at them), exact at a piecewise schedule's breaks; a fine trapezoid for the shapes."""
        horizon_s = max(horizon_s, 1e-9)
        if self.shape == "piecewise":
            starts = [s for s, _ in self.pieces if s < horizon_s] + [horizon_s]
            rates = [r for s, r in self.pieces if s < horizon_s]
            lam = np.concatenate([[0.0], np.cumsum(np.diff(starts) * np.array(rates))])
            return np.array(starts, dtype=np.float64), lam
        points = int(min(MAX_GRID_POINTS, max(2, math.ceil(horizon_s / GRID_S) + 1)))
        grid = np.linspace(0.0, horizon_s, points)
        r = self.rate_at(grid)
        lam = np.concatenate([[0.0], np.cumsum((r[1:] + r[:-1]) / 2.0 * np.diff(grid))])
        return grid, lam


def arrivals(schedule: RateSchedule, rng: np.random.Generator, burstiness: float, n: int | None,
             duration_s: float) -> np.ndarray:
    """Arrival instants under the schedule: every one in [0, duration_s), or with `n` the first n (the schedule
    then runs on past duration_s as long as needed, its last rate continuing)."""
    shape = 1.0 / (burstiness * burstiness)
    if n is not None:
        gaps = rng.gamma(shape, 1.0 / shape, size=n)
        u = np.cumsum(gaps) - gaps[0]  # the first request at t = 0, as with a constant rate
        horizon = duration_s
        while schedule.cumulative(np.array([horizon]))[0] < u[-1]:
            if horizon > MAX_TIME_S * 1e3:
                raise ScheduleError(f"{n:,} requests take longer than {_num(MAX_TIME_S * 1e3)} s at this schedule's "
                                    "rates; set fewer requests or higher rates")
            horizon *= 2.0
        return schedule.times_of(u, horizon)
    expected = float(schedule.cumulative(np.array([duration_s]))[0])
    chunk = max(16, int(expected * 1.2) + 16)
    u_parts, u0 = [], 0.0
    while True:
        u_new = u0 + np.cumsum(rng.gamma(shape, 1.0 / shape, size=chunk))
        u_parts.append(u_new[u_new < expected])
        if u_new[-1] >= expected:
            break
        u0 = u_new[-1]
    return schedule.times_of(np.concatenate(u_parts), duration_s)


# ----- parsing -----
def parse(text: str) -> RateSchedule:
    """The field's text -> a RateSchedule, or ScheduleError naming what is wrong and what is allowed."""
    text = text.strip()
    if not text:
        raise ScheduleError(f"is empty; {_expected()}")
    if len(text) > 20_000:
        raise ScheduleError("is longer than 20,000 characters")
    head, _, rest = text.partition(":")
    if head in SHAPES:
        return _shape(head, rest)
    if head.strip().isidentifier() and head.strip().lower() not in ("inf", "infinity", "nan"):  # a shape's name?
        raise ScheduleError(f"has no shape {head.strip()!r}; {_expected()}")
    return _piecewise(text)


def _expected() -> str:
    """The accepted forms and the ranges of their numbers, for the errors of a text that has no form."""
    return (f"expected {SYNTAX}; rates (R) from {_num(MIN_RATE)} to {_num(MAX_RATE)} req/s (a piece's may be 0), "
            f"times (S) from 0 to {_num(MAX_TIME_S)} s")


def _piecewise(text: str) -> RateSchedule:
    parts = text.split(",")
    if len(parts) > MAX_PIECES:
        raise ScheduleError(f"has {len(parts)} pieces; at most {MAX_PIECES}")
    pieces = []
    for part in parts:
        t_text, sep, r_text = part.partition(":")
        if not sep:
            raise ScheduleError(f"piece {part.strip()!r} is not 'seconds:rate'; {_expected()}")
        t = _number(t_text, f"piece {part.strip()!r}: the start", 0.0, MAX_TIME_S, "s")
        # A piece may be quiet (rate 0: a night, or the gap a cluster scaled to zero waits through).
        r = 0.0 if _is_zero(r_text) else _number(r_text, f"piece {part.strip()!r}: the rate", MIN_RATE, MAX_RATE,
                                                 "req/s")
        if pieces and t <= pieces[-1][0]:
            raise ScheduleError(f"piece {part.strip()!r} starts at {_num(t)} s, not after the piece before "
                                f"({_num(pieces[-1][0])} s): starts must increase")
        pieces.append((t, r))
    if pieces[0][0] != 0.0:
        raise ScheduleError(f"the first piece starts at {_num(pieces[0][0])} s; it must start at 0")
    if all(r == 0.0 for _, r in pieces):
        raise ScheduleError("has no piece with a rate above 0: nothing would arrive")
    return RateSchedule("piecewise", tuple((_num(t), r) for t, r in pieces))


def _shape(shape: str, rest: str) -> RateSchedule:
    names = SHAPES[shape]
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, sep, v = part.partition("=")
        if not sep or k not in names:
            raise ScheduleError(f"{shape}: {part!r} is not one of {', '.join(n + '=' for n in names)}")
        if k in given:
            raise ScheduleError(f"{shape}: {k} is given twice")
        is_rate = k in ("min", "max", "from", "to", "base", "peak") and not (shape == "diurnal" and k == "peak")
        lo = MIN_RATE if is_rate else 0.0
        given[k] = _number(v, f"{shape}: {k}", lo, MAX_RATE if is_rate else MAX_TIME_S, "req/s" if is_rate else "s")
    defaults = {"diurnal": {"peak": None}, "burst": {"every": 0.0}}.get(shape, {})
    missing = [n for n in names if n not in given and n not in defaults]
    if missing:
        raise ScheduleError(f"{shape}: missing {', '.join(missing)} (expected {shape}:"
                            + ",".join(f"{n}=..." for n in names) + ")")
    _check_shape(shape, given)
    if shape == "diurnal" and "peak" not in given:
        given["peak"] = given["period"] / 2.0
    if shape == "burst" and "every" not in given:
        given["every"] = 0.0
    return RateSchedule(shape, tuple((n, given[n]) for n in names))


def _check_shape(shape: str, p: dict[str, float]) -> None:
    positive = {"diurnal": ("period",), "ramp": ("over",), "burst": ("width",)}[shape]
    for k in positive:
        if p[k] <= 0:
            raise ScheduleError(f"{shape}: {k} must be above 0 s (got {_num(p[k])})")
    if shape == "diurnal" and p["min"] > p["max"]:
        raise ScheduleError(f"diurnal: min ({_num(p['min'])}) must not exceed max ({_num(p['max'])})")
    if shape == "burst" and 0 < p.get("every", 0.0) < p["width"]:
        raise ScheduleError(f"burst: every ({_num(p['every'])} s) must be 0 (one burst) or at least the width "
                            f"({_num(p['width'])} s)")


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0.0
    except ValueError:
        return False  # _number says what is wrong with it


def _number(text: str, what: str, lo: float, hi: float, unit: str) -> float:
    try:
        v = float(text.strip())
    except ValueError:
        raise ScheduleError(f"{what} {text.strip()!r} is not a number") from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise ScheduleError(f"{what} must be between {_num(lo)} and {_num(hi)} {unit} (got {text.strip()})")
    return v


def _num(x: float) -> str:
    return f"{x:.10g}"
