"""A run as one CSV row per request, for a spreadsheet or pandas: what arrived when, how long it was, and what
the scheduler made of it. Latencies are the metrics' own (metrics.request_latencies_s), in milliseconds; a request
that was never served leaves them empty and says why in `reject_reason`."""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from .kernel import state as E
from .kernel.attribution import AT_TRANSPORT, ATTRIBUTION_PARTS
from .metrics import request_latencies_s

# Column -> what it holds (the header row is the keys, in this order).
COLUMNS = {
    "request": "the request's index in the run (arrival order; follow-up turns after their conversation's first)",
    "class": "its request class (the workload preset's, or 'default')",
    "arrival_s": "when it arrived, seconds of simulated time",
    "prompt_tokens": "prompt length, tokens",
    "output_tokens": "output length, tokens",
    "status": "finished, or rejected (shed by admission control counts as rejected)",
    "ttft_ms": "time to first token, as the client sees it",
    "tpot_ms": "time per output token after the first (empty with a single output token)",
    "e2el_ms": "end-to-end latency, arrival to last token",
    "max_itl_ms": "its longest gap between consecutive tokens",
    "preemptions": "times it was preempted",
    "cached_prompt_tokens": "prompt tokens found in the prefix cache when first admitted",
    "met_slo": "1 if it met its class's TTFT and TPOT targets",
    "reject_reason": "why it was never served (empty if it was)",
    **{f"{part}_ms": f"where its E2EL went: {part.replace('_', ' ')} (attribution.py; the six sum to e2el_ms)"
       for part in ATTRIBUTION_PARTS},
}
STATUS_NAMES = {E.FINISHED: "finished", E.REJECTED: "rejected"}


def _ms(value_s: float) -> str:
    return f"{value_s * 1e3:.3f}" if math.isfinite(value_s) else ""


def requests_csv(result) -> str:
    """The run's requests as CSV text with a header row (COLUMNS), one row per request."""
    reqs = result.requests
    latency = request_latencies_s(result)
    cached = np.asarray(result.cached_prefix)
    split_s = np.zeros((len(reqs), len(ATTRIBUTION_PARTS))) if result.attribution is None else \
        np.array(result.attribution, np.float64)
    split_s[:, AT_TRANSPORT] += result.scenario.transport_overhead_ms / 1e3  # E2EL counts it, as metrics do
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in range(len(reqs)):
        served = bool(latency["finished"][r])
        writer.writerow([
            r, reqs.class_names[int(reqs.request_class[r])], f"{reqs.arrival_s[r]:.6f}",
            int(reqs.prompt_tokens[r]), int(reqs.output_tokens[r]),
            STATUS_NAMES.get(int(result.status[r]), "not served"),
            _ms(latency["ttft"][r]) if served else "",
            _ms(latency["tpot"][r]) if latency["multi_token"][r] else "",
            _ms(latency["e2el"][r]) if served else "",
            _ms(result.max_itl_s[r]) if served else "",
            int(result.preemptions[r]), max(0, int(cached[r])), int(latency["met_slo"][r]),
            E.REJECT_REASONS[int(result.reject_reason[r])],
            *(_ms(v) if served else "" for v in split_s[r]),
        ])
    return out.getvalue()
