"""Warnings that say when a result stands on less than it seems: a GPU, model, weight format or engine that no row
`sched-sim validate` predicts has measured (its step times are extrapolated from specs), or a run whose queue was
still growing when arrivals ended (its latencies then depend on how long the run was)."""

from __future__ import annotations

from functools import cache

import numpy as np

from .deployment import max_seqs_of
from .engines import engine_of
from .kernel.state import (
    REJECT_LARGER_THAN_KV_POOL,
    REJECT_LONGER_THAN_BUDGET,
    REJECT_LONGER_THAN_MODEL,
    REJECTED,
    S_START,
    S_WAITING,
)
from .studies.inferencex import FILE as INFERENCEX_FILE
from .studies.row_names import quantization_for
from .studies.validation import VALIDATION_DIR, coverage, hardware_key, model_key, read_rows

# A run is saturated when, as arrivals end, more than this share of its requests (and at least
# SATURATED_MIN_WAITING) are still waiting, more than at mid-run.
SATURATED_WAITING_SHARE = 0.05
SATURATED_MIN_WAITING = 5
# Formats measured alike: bf16 and fp16 GEMMs run at the same tensor rate.
SAME_FORMAT = {"bf16": "fp16"}


@cache
def _covered() -> dict[str, frozenset[str]]:
    """What the rows `validate` predicts measured: the kernel, step and serving files' GPUs, models and formats
    (studies.validation.coverage), InferenceX's closed-loop points (as studies.inferencex runs them: its weight
    format on that GPU), and the engines of every row that names its framework."""
    found = {k: set(v) for k, v in coverage(VALIDATION_DIR).items()}
    if not found:
        return {}
    found["engine"] = set()
    for name in ("steps.csv", "serving.csv", "tp_fp8.csv"):
        found["engine"].update(engine_of(r.get("framework", "")) for r in read_rows(VALIDATION_DIR / name))
    for r in read_rows(VALIDATION_DIR / INFERENCEX_FILE):
        hw, model = hardware_key(r["hardware"]), model_key(r["model"])
        if hw is None or model is None:
            continue
        found["hardware"].add(hw)
        found["model"].add(model)
        found["quantization"].add(quantization_for(r["dtype"], hw)[0])
        found["engine"].add(engine_of(r["framework"]))
    return {k: frozenset(v) for k, v in found.items()}


def coverage_warnings(hardware: str, model: str, quantization: str, engine: str | None = None) -> list[str]:
    """One warning per deployment choice (GPU, model, weight format, engine) no predicted row of validation/
    measured."""
    covered = _covered()
    if not covered:
        return []
    out = []
    for kind, name in (("hardware", hardware), ("model", model),
                       ("quantization", SAME_FORMAT.get(quantization, quantization)), ("engine", engine)):
        if name is None:
            continue
        if name not in covered[kind]:
            known = ", ".join(sorted(covered[kind]))
            out.append(f"{kind} {name} is outside the validation set (it measures {known}): its step times are "
                       "extrapolated from public specs, not checked against a measurement")
    return out


def _waiting_at(result, t: float) -> int:
    """Requests waiting at time t: the step log's count for one engine; for several engines, which keep no merged
    step log, the requests that had arrived and were not yet scheduled (rejected ones never wait)."""
    steps = result.steps
    if len(steps):
        k = int(np.searchsorted(steps[:, S_START], t, side="right")) - 1
        return int(steps[k, S_WAITING]) if k >= 0 else 0
    served = result.status != REJECTED
    return int((served & (result.requests.arrival_s <= t) & (result.first_scheduled_s > t)).sum())


def saturation_warning(result) -> str | None:
    """A warning if the run's waiting queue was still long, and longer than at mid-run, when arrivals ended."""
    arrivals = result.requests.arrival_s
    if len(arrivals) == 0:
        return None
    first, last = float(arrivals.min()), float(arrivals.max())
    at_end, at_mid = _waiting_at(result, last), _waiting_at(result, (first + last) / 2)
    if at_end >= max(SATURATED_MIN_WAITING, SATURATED_WAITING_SHARE * len(arrivals)) and at_end > at_mid:
        return (f"saturated: {at_end} requests were still waiting when arrivals ended ({at_mid} at mid-run): the "
                "offered load exceeds what this deployment sustains, so latencies grow with the run's length")
    return None


# Warnings a face shows first, before the results they change (rejection_warning's text starts so).
REJECTED_PREFIX = "rejected: "


def rejection_warning(result) -> str | None:
    """Requests the deployment refused (longer than max_model_len, than the KV pool, or than the token budget of a
    scheduler that does not chunk), how many, and the setting that fixes it, saying which of those the user left
    at its default. None when none was."""
    s, r = result.scenario, result.resolved
    rejected = result.status == REJECTED
    total = len(result.status)
    parts = []
    for reason, text in ((REJECT_LONGER_THAN_MODEL, _too_long_for_model), (REJECT_LARGER_THAN_KV_POOL, _too_large_for_pool),
                         (REJECT_LONGER_THAN_BUDGET, _too_long_for_budget)):
        n = int((rejected & (result.reject_reason == reason)).sum())
        if n:
            parts.append(f"{n:,} of {total:,} requests {text(s, r)}")
    return REJECTED_PREFIX + "; ".join(parts) + " (the results count only the requests served)" if parts else None


def _too_long_for_model(s, r) -> str:
    if s.max_model_len is not None:
        return (f"are longer (prompt + output) than max_model_len {r.max_model_len:,}, which you set: raise it, up to "
                f"{r.setup.model.key}'s context of {r.setup.model.max_context:,} tokens")
    if r.max_model_len < r.setup.model.max_context:
        return (f"are longer (prompt + output) than max_model_len {r.max_model_len:,}, the longest sequence the KV "
                f"cache holds (you left max_model_len unset; {s.engine} lowers it to that): free memory for the KV "
                f"cache (more GPUs, gpu_memory_utilization, kv_cache_dtype fp8)")
    return (f"are longer (prompt + output) than {r.setup.model.key}'s context of {r.max_model_len:,} tokens: the "
            f"model cannot serve them (shorten the workload's lengths, or pick a model with a longer context)")


def _too_large_for_pool(s, r) -> str:
    pool = f"the whole KV pool ({r.num_blocks * r.setup.block_size:,} tokens"
    if s.kv_blocks is not None:
        return f"need more KV than {pool}, the kv_blocks you set): raise kv_blocks or leave it unset"
    return (f"need more KV than {pool}): free memory for the KV cache (more GPUs, gpu_memory_utilization, "
            f"kv_cache_dtype fp8) or lower max_model_len so the engine refuses them up front")


def _too_long_for_budget(s, r) -> str:
    whose = "which you set" if s.token_budget is not None else "the default"
    return (f"are longer than the token budget {r.token_budget:,} ({whose}) and {s.scheduler} does not chunk "
            f"prefills: raise token_budget or pick a chunked-prefill scheduler")


def _max_seqs_lowered(result) -> str | None:
    """max_seqs below the engine's default because the model's per-sequence state would leave no KV cache
    (deployment._pools)."""
    s, r = getattr(result, "scenario", None), result.resolved
    if s is None or s.max_seqs is not None:
        return None
    default = max_seqs_of(s)
    if r.max_seqs >= default:
        return None
    return (f"max_seqs: {s.engine}'s default of {default:,} sequences would reserve {r.setup.model.key}'s windowed "
            f"and linear-attention state for that many and leave no KV cache, so the run holds at most "
            f"{r.max_seqs:,} at once (vLLM takes each running request's state from the pool instead); set max_seqs "
            f"to choose")


def run_warnings(result) -> list[str]:
    """Every warning about a run (a Result), or about the seeds of a SeedRuns: requests rejected first."""
    setup = result.resolved.setup
    runs = getattr(result, "results", [result])
    rejection = next((w for w in (rejection_warning(r) for r in runs) if w), None)
    out = [rejection] if rejection else []
    out += coverage_warnings(setup.gpu.key, setup.model.key, setup.quantization,
                            getattr(getattr(result, "scenario", None), "engine", None))
    simplified = setup.kv_simplification()
    if simplified:
        out.append(simplified)
    lowered = _max_seqs_lowered(result)
    if lowered:
        out.append(lowered)
    saturated = [w for w in (saturation_warning(r) for r in runs) if w]
    if saturated:
        out.append(saturated[0] + (f" (in {len(saturated)} of {len(runs)} seeds)" if len(runs) > 1 else ""))
    return out
