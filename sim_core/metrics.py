"""Per-request timestamps and engine accumulators -> the summary users know from vLLM's benchmark tooling.

Latencies in milliseconds: TTFT (arrival -> first token), TPOT ((E2EL - TTFT) / (output tokens - 1)), ITL (every
gap between consecutive tokens of a request), E2EL (arrival -> last token); each with mean, p50, p90, p99.
Goodput counts completed requests per second of the arrival window that met every SLO (each request against its
class's targets), so that at full attainment it equals the offered rate; `goodput_over_run` divides by the whole
run instead, drain included, as vLLM's benchmark does;
SLO attainment is the fraction of all requests (rejected and shed ones count as misses) that did; token goodput
counts tokens delivered by their own deadline (arrival + TTFT target + (k-1) x TPOT target for the k-th token)
per second, so a late request still scores the tokens it delivered in time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernel import state as E
from .kernel.attribution import AT_TRANSPORT, ATTRIBUTION_PARTS
from .kernel.cost_constants import PEAK_BW, PEAK_FLOPS
from .kernel.cost_model import cost_params
from .prices import deployment_cost_per_hour
from .spec_decode import spec_tokens

PERCENTILES = (50, 90, 99)


def distribution_ms(values_s: np.ndarray) -> dict[str, float | None]:
    if len(values_s) == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    ms = values_s * 1e3
    p = np.percentile(ms, PERCENTILES)
    return {"mean": float(ms.mean()), "p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
            "max": float(ms.max())}


def histogram_percentiles_s(fine: np.ndarray, coarse: np.ndarray, qs) -> list[float]:
    """Percentiles (nearest rank) of values binned in 1 us bins (fine) then 1 ms bins (coarse); each is a bin
    centre, so within half a bin of the exact value."""
    fine_cum = np.cumsum(fine)
    coarse_cum = np.cumsum(coarse)
    n_fine = int(fine_cum[-1])
    total = n_fine + int(coarse_cum[-1])
    out = []
    for q in qs:
        rank = max(1, int(np.ceil(q / 100.0 * total)))
        if rank <= n_fine:
            out.append((int(np.searchsorted(fine_cum, rank)) + 0.5) * 1e-6)
        else:
            out.append((int(np.searchsorted(coarse_cum, rank - n_fine)) + 0.5) * 1e-3)
    return out


def histogram_percentile_s(fine: np.ndarray, coarse: np.ndarray, q: float) -> float:
    return histogram_percentiles_s(fine, coarse, [q])[0]


def itl_distribution_ms(fine: np.ndarray, coarse: np.ndarray, total_s: float, count: int,
                        max_s: float) -> dict[str, float | None]:
    if count == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    out: dict[str, float | None] = {"mean": total_s / count * 1e3}
    for q, v in zip(PERCENTILES, histogram_percentiles_s(fine, coarse, PERCENTILES), strict=True):
        out[f"p{q}"] = v * 1e3
    out["max"] = max_s * 1e3
    return out


def arrival_window_s(arrival_s: np.ndarray, makespan: float) -> float:
    """The span the arrivals measure, n gaps long: the n - 1 gaps between the first and last arrival, plus one
    mean gap. Goodput and the arrival rate divide by it, so at full attainment goodput equals the offered rate
    (vLLM's benchmark divides by the whole run, drain included: `goodput_over_run`)."""
    n = len(arrival_s)
    if n < 2:
        return makespan
    span = float(arrival_s.max() - arrival_s.min())
    return span * n / (n - 1) if span > 0 else makespan


def request_latencies_s(result) -> dict[str, np.ndarray]:
    """Per request of a run: its client-visible TTFT and E2EL (device latency plus the transport overhead, seed
    003's "measurement aliasing"), its TPOT (0 with a single output token), whether it finished, and whether it met
    its class's SLO. Meaningful where `finished`; the summary and the per-request CSV both read them from here."""
    reqs = result.requests
    transport_s = result.scenario.transport_overhead_ms / 1e3
    done = result.status == E.FINISHED
    ttft = result.first_token_s - reqs.arrival_s + transport_s
    e2el = result.finish_s - reqs.arrival_s + transport_s
    multi = done & (reqs.output_tokens > 1)
    tpot = np.zeros(len(reqs))
    tpot[multi] = (result.finish_s - result.first_token_s)[multi] / (reqs.output_tokens[multi] - 1)
    cls = reqs.request_class
    met = done & (ttft <= result.class_ttft_s[cls] + 1e-12) & (tpot <= result.class_tpot_s[cls] + 1e-12)
    return {"ttft": ttft, "e2el": e2el, "tpot": tpot, "finished": done, "multi_token": multi, "met_slo": met}


def attribution_ms(result, done: np.ndarray) -> dict[str, float | None]:
    """Where the time went (attribution.py), the mean per completed request of each part in ms; they sum to the
    mean E2EL: the client's transport overhead, which E2EL counts, is part of `transport`."""
    if not done.any() or result.attribution is None:
        return {name: None for name in ATTRIBUTION_PARTS}
    means = _row_sum(result.attribution, done) / done.sum() * 1e3
    means[AT_TRANSPORT] += result.scenario.transport_overhead_ms
    return {name: float(means[k]) for k, name in enumerate(ATTRIBUTION_PARTS)}


# Rows per chunk of a masked row sum: the selected rows are copied a chunk at a time, not all at once (the
# attribution of a day's 8.6M requests: 410 MB).
ROW_CHUNK = 1 << 16


def _row_sum(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """a[mask].sum(axis=0), bit for bit: numpy sums a 2-D array's rows along axis 0 one after another, so each
    chunk's sum starts from the chunks' before it."""
    total = None
    for start in range(0, len(a), ROW_CHUNK):
        rows = a[start:start + ROW_CHUNK][mask[start:start + ROW_CHUNK]]
        if total is None:
            total = rows.sum(axis=0) if len(rows) else None
        else:
            total = np.add.reduce(np.concatenate([total[None], rows]), axis=0)
    return total


def deployment(scenario, resolved) -> tuple[int, float | None]:
    """(GPUs, dollars per hour at list on-demand prices; None if a GPU has no price) of the whole deployment: each
    pool at its own GPU type and tensor-parallel degree."""
    gpus, cost = 0, 0.0
    for pool in resolved.deployment:
        gpus += pool.engines * pool.setup.tp
        price = deployment_cost_per_hour(pool.setup.gpu.key, pool.engines * pool.setup.tp)
        cost = None if price is None or cost is None else cost + price
    return gpus, cost


def summarize(result) -> dict:
    """The metrics of a finished run (runner.Result), in the order the summary lists them."""
    latency = request_latencies_s(result)
    span = _Span.of(result)
    acc = result.accumulators
    return {
        **_request_counts(result, latency),
        "duration_s": span.makespan,
        **_throughputs(result, latency, span),
        **_latency_distributions(result, latency),
        **_slo_and_goodput(result, latency, span),
        **_utilisation(result, span),
        **_prefix_cache_and_preemptions(result),
        "steps": int(acc[E.A_STEPS]),
        **_cost(result, latency, span),
        "prefill_tokens": int(acc[E.A_PREFILL_TOKENS]),
        "decode_tokens": int(acc[E.A_DECODE_TOKENS]),
        **_spec_decode(result, span),
        **_reasoning(result, latency, span),
    }


def _reasoning(result, latency, span: _Span) -> dict:
    """A reasoning workload's output split (only when some request thinks): the completed requests' hidden
    thinking and visible output tokens, and the visible ones per second of the run. output_throughput, TPOT and
    the KV figures count both, as the engine decodes both."""
    hidden = result.requests.thinking_tokens
    if hidden is None:
        return {}
    done = latency["finished"]
    thinking = int(hidden[done].sum())
    output = int(result.requests.output_tokens[done].sum())
    return {"reasoning": {
        "thinking_tokens": thinking,
        "visible_output_tokens": output - thinking,
        "thinking_share": thinking / output if output else 0.0,
        "visible_output_throughput": (output - thinking) * span.per_s,
    }}


def _spec_decode(result, span: _Span) -> dict:
    """Speculative decoding (only when on): tokens a verification emits on average (accepted drafts plus the
    bonus token), the share of drafts accepted, and the shares of busy time the proposer and the verification
    steps took."""
    acc = result.accumulators
    if spec_tokens(result.scenario) == 0:
        return {}
    busy = span.busy if span.busy > 0 else 1.0
    verified = acc[E.A_SPEC_SEQ_STEPS] > 0  # none when every request ended at its first decode step
    return {"spec_decode": {
        "tokens_per_step": int(spec_tokens(result.scenario)),
        "acceptance_length": float(acc[E.A_SPEC_EMITTED] / acc[E.A_SPEC_SEQ_STEPS]) if verified else None,
        "acceptance_rate": float(acc[E.A_SPEC_ACCEPTED] / acc[E.A_SPEC_DRAFTED]) if verified else None,
        "drafted_tokens": int(acc[E.A_SPEC_DRAFTED]),
        "accepted_tokens": int(acc[E.A_SPEC_ACCEPTED]),
        "draft_time_share": float(acc[E.A_SPEC_DRAFT_S] / busy),
        "verify_time_share": float(acc[E.A_SPEC_VERIFY_S] / busy),
    }}


@dataclass(frozen=True)
class _Span:
    """The times a run's rates divide by."""

    makespan: float  # first arrival -> the end of the last step
    per_s: float  # 1 / makespan; 0 for a run that took no time
    window: float  # the arrivals' window (arrival_window_s)
    per_window_s: float  # 1 / window; 0 likewise
    busy: float  # seconds the engine had a batch to run

    @classmethod
    def of(cls, result) -> _Span:
        arrival_s, acc = result.requests.arrival_s, result.accumulators
        makespan = float(acc[E.A_END_S] - (arrival_s.min() if len(arrival_s) else 0.0))
        window = arrival_window_s(arrival_s, makespan)
        return cls(makespan, 1.0 / makespan if makespan > 0 else 0.0, window, 1.0 / window if window > 0 else 0.0,
                   float(acc[E.A_BUSY_S]))


def _request_counts(result, latency) -> dict:
    """How many requests arrived, completed, were rejected (and why), shed or degraded."""
    acc, reject_reason = result.accumulators, result.reject_reason
    rejected = result.status == E.REJECTED
    reasons = {E.REJECT_REASONS[k]: int((reject_reason[rejected] == k).sum())
               for k in range(1, len(E.REJECT_REASONS)) if (reject_reason[rejected] == k).any()}
    return {
        "num_requests": len(result.requests),
        "completed": int(latency["finished"].sum()),
        "rejected": int(rejected.sum()),
        "rejected_reasons": reasons,
        "shed": int(acc[E.A_SHED]),
        "degraded": int(acc[E.A_DEGRADED]),
    }


def _throughputs(result, latency, span: _Span) -> dict:
    """Completed requests, their output tokens, and their prompt plus output tokens, per second of the run."""
    reqs, done = result.requests, latency["finished"]
    out_done = reqs.output_tokens[done]
    return {
        "request_throughput": float(done.sum()) * span.per_s,
        "output_throughput": float(out_done.sum()) * span.per_s,
        "total_token_throughput": float(out_done.sum() + reqs.prompt_tokens[done].sum()) * span.per_s,
    }


def _latency_distributions(result, latency) -> dict:
    """TTFT, TPOT, ITL and E2EL of the completed requests, and where their time went."""
    done, acc = latency["finished"], result.accumulators
    itl = itl_distribution_ms(result.itl_fine, result.itl_coarse, float(acc[E.A_ITL_SUM]), int(acc[E.A_ITL_COUNT]),
                              float(result.max_itl_s.max()) if len(result.requests) else 0.0)
    return {
        "ttft_ms": distribution_ms(latency["ttft"][done]),
        "tpot_ms": distribution_ms(latency["tpot"][latency["multi_token"]]),
        "itl_ms": itl,
        "e2el_ms": distribution_ms(latency["e2el"][done]),
        "attribution_ms": attribution_ms(result, done),
    }


def _slo_and_goodput(result, latency, span: _Span) -> dict:
    """The SLO targets, the requests and tokens that met them, and the same for each request class."""
    class_ttft_s, class_tpot_s = result.class_ttft_s, result.class_tpot_s
    met, n = latency["met_slo"], len(result.requests)
    transport_s = result.scenario.transport_overhead_ms / 1e3
    return {
        # The targets goodput used; where classes differ, the tightest, and each class's own under per_class.
        "slo": {"ttft_ms": float(class_ttft_s.min() * 1e3), "tpot_ms": float(class_tpot_s.min() * 1e3),
                "by_class": bool(np.ptp(class_ttft_s) > 0 or np.ptp(class_tpot_s) > 0),
                "transport_overhead_ms": transport_s * 1e3},
        "goodput": float(met.sum()) * span.per_window_s,
        "goodput_over_run": float(met.sum()) * span.per_s,
        "arrival_window_s": span.window,
        "arrival_rate": n * span.per_window_s,
        "slo_attainment": float(met.sum()) / n if n else 0.0,
        "token_goodput": float(result.on_time_tokens.sum()) * span.per_s,
        "per_class": _per_class(result, latency),
    }


def _per_class(result, latency) -> dict:
    """Each request class's counts, SLO targets, attainment and latencies."""
    reqs, done, met = result.requests, latency["finished"], latency["met_slo"]
    rejected = result.status == E.REJECTED
    per_class = {}
    for k, name in enumerate(reqs.class_names):
        mine = reqs.request_class == k
        per_class[name] = {
            "requests": int(mine.sum()),
            "completed": int((done & mine).sum()),
            "rejected": int((rejected & mine).sum()),
            "slo": {"ttft_ms": float(result.class_ttft_s[k] * 1e3), "tpot_ms": float(result.class_tpot_s[k] * 1e3)},
            "slo_attainment": float((met & mine).sum()) / max(1, int(mine.sum())),
            "ttft_ms": distribution_ms(latency["ttft"][done & mine]),
            "e2el_ms": distribution_ms(latency["e2el"][done & mine]),
        }
    return per_class


def _utilisation(result, span: _Span) -> dict:
    """How much of the GPUs' bandwidth, compute, time and KV cache the run used, and how long the queue grew."""
    acc, busy, num_blocks = result.accumulators, span.busy, result.resolved.num_blocks
    cost = cost_params(result.resolved.setup)
    return {
        "mbu": float(acc[E.A_BYTES]) / (busy * cost[PEAK_BW]) if busy > 0 else 0.0,
        "mfu": float(acc[E.A_FLOPS]) / (busy * cost[PEAK_FLOPS]) if busy > 0 else 0.0,
        "gpu_busy_fraction": busy / (span.makespan * result.scenario.engines) if span.makespan > 0 else 0.0,
        "kv_cache_usage": {"mean": float(acc[E.A_KV_BLOCK_S]) / busy / num_blocks if busy > 0 else 0.0,
                           "peak": float(acc[E.A_KV_PEAK]) / num_blocks},
        "waiting": {"mean": float(acc[E.A_WAITING_S]) / busy if busy > 0 else 0.0,
                    "peak": int(acc[E.A_WAITING_PEAK])},
    }


def _prefix_cache_and_preemptions(result) -> dict:
    """What the prefix cache saved and evicted, and how often requests were preempted."""
    acc, cached_prefix, prompt_tokens = result.accumulators, result.cached_prefix, result.requests.prompt_tokens
    return {
        # Prefix cache: prompt tokens found cached at each request's first admission over all admitted prompt
        # tokens; prefill tokens saved also counts hits when preempted requests come back.
        "prefix_cache": result.resolved.prefix_cache,
        "prefix_cache_hit_rate": float(cached_prefix[cached_prefix >= 0].sum())
        / max(1, int(prompt_tokens[cached_prefix >= 0].sum())),
        "prefill_tokens_saved": int(acc[E.A_CACHED_TOKENS]),
        "cache_evictions": int(acc[E.A_EVICTIONS]),
        "preemptions": int(acc[E.A_PREEMPTIONS]),
        "preempted_requests": int((result.preemptions > 0).sum()),
    }


def _cost(result, latency, span: _Span) -> dict:
    """The deployment's GPUs, its price per hour, and its price per million output tokens at this run's pace."""
    gpus, cost_per_hour = deployment(result.scenario, result.resolved)
    output_tokens_per_hour = float(result.requests.output_tokens[latency["finished"]].sum()) * span.per_s * 3600.0
    return {
        "gpus": gpus,
        "cost_per_hour": cost_per_hour,
        "cost_per_mtok": (cost_per_hour / output_tokens_per_hour * 1e6
                          if cost_per_hour is not None and output_tokens_per_hour > 0 else None),
    }
