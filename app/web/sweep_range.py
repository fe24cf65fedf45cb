"""The rate range a sweep form proposes around a scenario's rate, within the web's limits (inputs.py)."""

from __future__ import annotations

import math

from sim_core import Scenario, ScenarioError
from sim_core.studies.sweep import default_rate_range

from .inputs import MAX_REQUESTS, NO_TRACE_RATE, RateRange, TraceInfo, _least_trace_rate


def default_sweep(s: Scenario, trace: TraceInfo | None = None) -> RateRange:
    """A rate range around the scenario's rate (an uploaded trace's: its recorded one) that a sweep form proposes,
    clipped to the web's limits. Raises ScenarioError when there is no rate to sweep around."""
    if trace is not None:
        rate = s.rate or trace.own_rate
        if rate is None:
            raise ScenarioError([("upload", NO_TRACE_RATE)])
        step, top, _ = default_rate_range(rate)
        low = max(step, math.ceil(_least_trace_rate(s, trace) / step - 1e-9) * step)
        return RateRange(low, max(top, low), step)
    rate = s.offered_rate()
    cap = MAX_REQUESTS / s.duration if s.num_requests is None else None
    return RateRange(*default_rate_range(rate, cap))
