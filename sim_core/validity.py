"""Warnings that say when a result stands on less than it seems: a GPU, model or weight format the validation
set has no measurement of (its step times are extrapolated from specs), or a run whose queue was still growing
when arrivals ended (its latencies then depend on how long the run was)."""

from __future__ import annotations

from functools import cache

import numpy as np

from .kernel.state import S_START, S_WAITING
from .studies.validation import VALIDATION_DIR, coverage

# A run is saturated when, as arrivals end, more than this share of its requests (and at least
# SATURATED_MIN_WAITING) are still waiting, more than at mid-run.
SATURATED_WAITING_SHARE = 0.05
SATURATED_MIN_WAITING = 5
# Formats measured alike: bf16 and fp16 GEMMs run at the same tensor rate.
SAME_FORMAT = {"bf16": "fp16"}


@cache
def _covered() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in coverage(VALIDATION_DIR).items()}


def coverage_warnings(hardware: str, model: str, quantization: str) -> list[str]:
    """One warning per deployment choice no row of validation/*.csv measured."""
    covered = _covered()
    if not covered:
        return []
    out = []
    for kind, name in (("hardware", hardware), ("model", model),
                       ("quantization", SAME_FORMAT.get(quantization, quantization))):
        if name not in covered[kind]:
            known = ", ".join(sorted(covered[kind]))
            out.append(f"{kind} {name} is outside the validation set (it measures {known}): its step times are "
                       "extrapolated from public specs, not checked against a measurement")
    return out


def saturation_warning(result) -> str | None:
    """A warning if the run's waiting queue was still long, and longer than at mid-run, when arrivals ended."""
    arrivals = result.requests.arrival_s
    steps = result.steps
    if len(arrivals) == 0 or len(steps) == 0:
        return None
    first, last = float(arrivals.min()), float(arrivals.max())

    def waiting_at(t: float) -> int:
        k = int(np.searchsorted(steps[:, S_START], t, side="right")) - 1
        return int(steps[k, S_WAITING]) if k >= 0 else 0

    at_end, at_mid = waiting_at(last), waiting_at((first + last) / 2)
    if at_end >= max(SATURATED_MIN_WAITING, SATURATED_WAITING_SHARE * len(arrivals)) and at_end > at_mid:
        return (f"saturated: {at_end} requests were still waiting when arrivals ended ({at_mid} at mid-run): the "
                "offered load exceeds what this deployment sustains, so latencies grow with the run's length")
    return None


def run_warnings(result) -> list[str]:
    """Every warning about a run (a Result), or about the seeds of a SeedRuns."""
    setup = result.resolved.setup
    out = coverage_warnings(setup.gpu.key, setup.model.key, setup.quantization)
    simplified = setup.kv_simplification()
    if simplified:
        out.append(simplified)
    runs = getattr(result, "results", [result])
    saturated = [w for w in (saturation_warning(r) for r in runs) if w]
    if saturated:
        out.append(saturated[0] + (f" (in {len(saturated)} of {len(runs)} seeds)" if len(runs) > 1 else ""))
    return out
