"""Per-request timestamps and engine accumulators -> the summary users know from vLLM's benchmark tooling.

Latencies in milliseconds: TTFT (arrival -> first token), TPOT ((E2EL - TTFT) / (output tokens - 1)), ITL (every
gap between consecutive tokens of a request), E2EL (arrival -> last token); each with mean, p50, p90, p99.
Goodput counts completed requests per second that met every SLO; SLO attainment is the fraction of all requests
(rejected ones count as misses) that did.
"""

from __future__ import annotations

import numpy as np

from . import engine as E

PERCENTILES = (50, 90, 99)


def distribution_ms(values_s: np.ndarray) -> dict[str, float | None]:
    if len(values_s) == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    ms = values_s * 1e3
    p = np.percentile(ms, PERCENTILES)
    return {"mean": float(ms.mean()), "p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
            "max": float(ms.max())}


def histogram_percentile_s(fine: np.ndarray, coarse: np.ndarray, q: float) -> float:
    """q-th percentile (nearest rank) of values binned in 1 us bins (fine) then 1 ms bins (coarse); returns the
    bin centre, so it is within half a bin of the exact value."""
    n_fine = int(fine.sum())
    total = n_fine + int(coarse.sum())
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    if rank <= n_fine:
        idx = int(np.searchsorted(np.cumsum(fine), rank))
        return (idx + 0.5) * 1e-6
    idx = int(np.searchsorted(np.cumsum(coarse), rank - n_fine))
    return (idx + 0.5) * 1e-3


def itl_distribution_ms(fine: np.ndarray, coarse: np.ndarray, total_s: float, count: int,
                        max_s: float) -> dict[str, float | None]:
    if count == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    out: dict[str, float | None] = {"mean": total_s / count * 1e3}
    for q in PERCENTILES:
        out[f"p{q}"] = histogram_percentile_s(fine, coarse, q) * 1e3
    out["max"] = max_s * 1e3
    return out


def summarize(*, arrival_s, prompt_tokens, output_tokens, status, reject_reason, first_token_s, finish_s,
              max_itl_s, preemptions, acc, itl_fine, itl_coarse, num_blocks, peak_bytes_per_s,
              peak_flops_per_s, slo_ttft_ms, slo_tpot_ms) -> dict:
    done = status == E.FINISHED
    rejected = status == E.REJECTED
    n = len(arrival_s)
    ttft = (first_token_s - arrival_s)[done]
    e2el = (finish_s - arrival_s)[done]
    out_done = output_tokens[done]
    multi = out_done > 1
    tpot = ((finish_s - first_token_s)[done][multi]) / (out_done[multi] - 1)
    makespan = float(acc[E.A_END_S] - (arrival_s[0] if n else 0.0))
    per_s = 1.0 / makespan if makespan > 0 else 0.0

    tpot_all = np.zeros(int(done.sum()))
    tpot_all[multi] = tpot
    met = (ttft * 1e3 <= slo_ttft_ms) & (tpot_all * 1e3 <= slo_tpot_ms)
    busy = float(acc[E.A_BUSY_S])
    reasons = {E.REJECT_REASONS[k]: int((reject_reason[rejected] == k).sum())
               for k in range(1, len(E.REJECT_REASONS)) if (reject_reason[rejected] == k).any()}
    return {
        "num_requests": n,
        "completed": int(done.sum()),
        "rejected": int(rejected.sum()),
        "rejected_reasons": reasons,
        "duration_s": makespan,
        "request_throughput": float(done.sum()) * per_s,
        "output_throughput": float(out_done.sum()) * per_s,
        "total_token_throughput": float(out_done.sum() + prompt_tokens[done].sum()) * per_s,
        "ttft_ms": distribution_ms(ttft),
        "tpot_ms": distribution_ms(tpot),
        "itl_ms": itl_distribution_ms(itl_fine, itl_coarse, float(acc[E.A_ITL_SUM]), int(acc[E.A_ITL_COUNT]),
                                      float(max_itl_s.max()) if n else 0.0),
        "e2el_ms": distribution_ms(e2el),
        "slo": {"ttft_ms": slo_ttft_ms, "tpot_ms": slo_tpot_ms},
        "goodput": float(met.sum()) * per_s,
        "slo_attainment": float(met.sum()) / n if n else 0.0,
        "mbu": float(acc[E.A_BYTES]) / (busy * peak_bytes_per_s) if busy > 0 else 0.0,
        "mfu": float(acc[E.A_FLOPS]) / (busy * peak_flops_per_s) if busy > 0 else 0.0,
        "gpu_busy_fraction": busy / makespan if makespan > 0 else 0.0,
        "kv_cache_usage": {"mean": float(acc[E.A_KV_BLOCK_S]) / busy / num_blocks if busy > 0 else 0.0,
                           "peak": float(acc[E.A_KV_PEAK]) / num_blocks},
        "waiting": {"mean": float(acc[E.A_WAITING_S]) / busy if busy > 0 else 0.0,
                    "peak": int(acc[E.A_WAITING_PEAK])},
        "preemptions": int(acc[E.A_PREEMPTIONS]),
        "preempted_requests": int((preemptions > 0).sum()),
        "steps": int(acc[E.A_STEPS]),
        "prefill_tokens": int(acc[E.A_PREFILL_TOKENS]),
        "decode_tokens": int(acc[E.A_DECODE_TOKENS]),
    }
