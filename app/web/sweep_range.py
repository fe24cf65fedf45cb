"""The rate range a sweep form proposes around a scenario's rate, within the web's limits (inputs.py)."""

from __future__ import annotations

import math

from sim_core import Scenario, ScenarioError
from sim_core.fields import field_info
from sim_core.studies.sweep import default_rate_range

from .inputs import MAX_REQUESTS, NO_TRACE_RATE, RateRange, TraceInfo, _least_trace_rate

RATE_BOUND = field_info("rate").hi  # the most requests/s a scenario (so a sweep's point) may ask for


def default_sweep(s: Scenario, trace: TraceInfo | None = None) -> RateRange:
    """A rate range around the scenario's rate (an uploaded trace's: its recorded one) that a sweep form proposes,
    clipped to the web's limits. Raises ScenarioError when there is no rate to sweep around."""
    if trace is not None:
        rate = s.rate or trace.own_rate
        if rate is None:
            raise ScenarioError([("upload", NO_TRACE_RATE)])
        # A dense trace's own rate (10 us gaps: 100,000 req/s) is past what the rate field takes: the range
        # proposed goes up to twice the rate it is centred on, so it is centred on at most half the field's bound.
        step, top, _ = default_rate_range(min(rate, RATE_BOUND / 2))
        low = max(step, math.ceil(_least_trace_rate(s, trace) / step - 1e-9) * step)
        return RateRange(low, max(top, low), step)
    rate = s.offered_rate()
    cap = MAX_REQUESTS / s.duration if s.num_requests is None else None
    return RateRange(*default_rate_range(rate, cap))
