"""`run(scenario) -> Result`: the one entry point every face (CLI, web, API, benchmarks) uses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import engine as E
from .catalog import GIB, GPUS, MODELS, Setup, SetupError, resolve_setup
from .cost_model import PEAK_BW, PEAK_FLOPS, cost_params
from .metrics import summarize
from .policies import BY_NAME, SCHEDULERS, Scheduler
from .scenario import MAX_REQUESTS, Scenario, ScenarioError
from .workload import PRESETS, Preset, Requests, TraceError, read_trace, synthesize

DEFAULT_MAX_MODEL_LEN = 8192
# The step log keeps every step up to this many, then samples (the summary metrics stay exact).
DEFAULT_MAX_STEP_RECORDS = 1 << 20
MAX_TRACE_ROWS = 10_000_000


class SimulationError(RuntimeError):
    """The engine ended with requests neither finished nor rejected: a bug, never a valid outcome."""


@dataclass(frozen=True)
class Resolved:
    """The scenario with every default filled in."""

    scheduler: Scheduler
    preset: Preset
    setup: Setup
    num_blocks: int
    swap_blocks: int
    max_model_len: int
    token_budget: int
    rate: float
    burstiness: float
    slo_ttft_ms: float  # the preset's (or the scenario's) default target
    slo_tpot_ms: float
    admission: str
    prefix_cache: bool


def resolve(s: Scenario) -> Resolved:
    """Fill defaults and check the deployment is possible (raises SetupError with a message saying why not)."""
    sched = BY_NAME[s.scheduler]
    preset = PRESETS[s.workload]
    model = MODELS[s.model or GPUS[s.hardware].default_model]
    max_model_len = s.max_model_len or min(model.max_context, DEFAULT_MAX_MODEL_LEN)
    if max_model_len > model.max_context:
        raise SetupError(f"max_model_len must be at most {model.max_context} for {model.key} (got {max_model_len})",
                         "max_model_len")
    token_budget = s.token_budget or sched.default_token_budget or max_model_len
    setup = resolve_setup(s.hardware, model.key, s.quantization, s.tp, s.gpu_memory_utilization, s.block_size,
                          token_budget, s.max_seqs)
    capacity = setup.num_kv_blocks
    if s.kv_blocks is not None and s.kv_blocks > capacity:
        raise SetupError(f"kv_blocks must be at most {capacity}, what {model.key} on {s.hardware} leaves for the KV "
                         f"cache (got {s.kv_blocks})", "kv_blocks")
    num_blocks = s.kv_blocks or capacity
    if s.adaptive_budget and not sched.chunked_prefill:
        # Without chunking a prompt is prefilled whole: the token budget cannot bound the step time.
        chunking = ", ".join(x.name for x in SCHEDULERS if x.chunked_prefill)
        raise ScenarioError([("adaptive_budget", f"needs a chunked-prefill scheduler ({chunking}); "
                                                 f"{s.scheduler} prefills each prompt whole")])
    rate = s.rate or preset.rate
    if s.trace is None and s.num_requests is None and rate * s.duration > MAX_REQUESTS:
        raise ScenarioError([("duration", f"rate x duration must stay under {MAX_REQUESTS:,} requests (got "
                                          f"{rate:g}/s x {s.duration:g} s); shorten it or set num_requests")])
    swap_blocks = int(s.swap_space_gb * GIB // setup.kv_bytes_per_block)
    return Resolved(sched, preset, setup, num_blocks, swap_blocks, max_model_len, token_budget,
                    rate, s.burstiness or preset.burstiness,
                    s.slo_ttft_ms or preset.slo_ttft_ms, s.slo_tpot_ms or preset.slo_tpot_ms,
                    s.admission or sched.default_admission,
                    (s.prefix_cache or sched.needs_prefix_cache) and not sched.static_batching)


def class_slos(s: Scenario, r: Resolved, reqs: Requests) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class TTFT and TPOT targets (seconds) and fair-share weights. A scenario-level SLO overrides every
    class; otherwise a class's own SLO, else the preset's."""
    by_name = {c.name: c for c in r.preset.classes}
    ttft, tpot, weight = [], [], []
    for name in reqs.class_names:
        c = by_name.get(name)
        ttft.append(s.slo_ttft_ms or (c and c.slo_ttft_ms) or r.slo_ttft_ms)
        tpot.append(s.slo_tpot_ms or (c and c.slo_tpot_ms) or r.slo_tpot_ms)
        weight.append(c.weight if c else 1.0)
    return np.array(ttft) / 1e3, np.array(tpot) / 1e3, np.array(weight, np.float64)


def policy_params(s: Scenario, r: Resolved, class_tpot_s: np.ndarray) -> np.ndarray:
    p = np.zeros(E.N_POLICY_PARAMS)
    p[E.P_AGING] = s.aging_rate
    p[E.P_ADMISSION] = {"admit": E.ADMIT, "reject": E.SHED, "degrade": E.DEGRADE}[r.admission]
    p[E.P_DEGRADE_FACTOR] = s.degrade_factor
    p[E.P_TRANSPORT_S] = s.transport_overhead_ms / 1e3
    p[E.P_ADAPTIVE] = 1.0 if s.adaptive_budget else 0.0
    p[E.P_HEADROOM] = s.controller_headroom
    p[E.P_ITL_TARGET_S] = float(class_tpot_s.min())  # the tightest class sets the bound
    # The controller never goes below one decode token per sequence slot (or the configured budget, if
    # smaller), nor above one max-length prompt per step.
    p[E.P_BUDGET_MIN] = min(r.token_budget, s.max_seqs)
    p[E.P_BUDGET_MAX] = max(r.token_budget, r.max_model_len)
    p[E.P_BUDGET_INCREASE] = 32
    # Virtual Token Counter costs: an output token counts double an input token (VTC's default w_q = 2 w_p).
    p[E.P_FAIR_INPUT_COST] = 1.0
    p[E.P_FAIR_OUTPUT_COST] = 2.0
    return p


def make_requests(s: Scenario, r: Resolved, trace_text: str | None = None) -> Requests:
    """The scenario's requests: an uploaded trace's text, the trace file it names, or the preset."""
    if trace_text is None and s.trace is not None:
        path = Path(s.trace)
        if not path.is_file():
            raise TraceError(f"trace: no such file {s.trace!r}")
        trace_text = path.read_text(encoding="utf-8", errors="replace")
    if trace_text is not None:
        reqs = read_trace(trace_text, MAX_TRACE_ROWS)
        return reqs if s.num_requests is None else reqs.take(s.num_requests)
    reqs = synthesize(r.preset, r.rate, r.burstiness, s.num_requests, s.duration, s.seed, s.system_prompt_tokens)
    return reqs if s.num_requests is None else reqs.take(s.num_requests)


@dataclass
class Result:
    scenario: Scenario
    resolved: Resolved
    requests: Requests
    status: np.ndarray
    reject_reason: np.ndarray
    generated: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    max_itl_s: np.ndarray
    preemptions: np.ndarray
    degraded: np.ndarray  # admitted with a relaxed TTFT target (admission=degrade)
    on_time_tokens: np.ndarray  # tokens each request received by their per-token deadline
    cached_prefix: np.ndarray  # prompt tokens served from the prefix cache at first admission (-1: never admitted)
    steps: np.ndarray  # step log, columns engine.S_*; every `step_stride`-th step
    tenant_service: np.ndarray  # [logged step, tenant] weighted service so far (fair), beside the step log
    step_stride: int
    events: np.ndarray  # event log, columns engine.E_*; empty unless recorded
    accumulators: np.ndarray
    itl_fine: np.ndarray
    itl_coarse: np.ndarray
    kv_frames: np.ndarray  # [frame, block] -> owning request id or -1
    kv_frame_state: np.ndarray  # [frame, block] -> engine.BLOCK_FREE / _USED / _SHARED / _CACHED
    kv_frame_s: np.ndarray
    free_blocks_at_end: int
    swap_free_at_end: int
    ref_counts_at_end: np.ndarray
    metrics: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {"scheduler": self.scenario.scheduler, "metrics": self.metrics}


def run(scenario: Scenario, *, trace_text: str | None = None, kv_frame_times: np.ndarray | None = None,
        record_events: bool = False, max_step_records: int = DEFAULT_MAX_STEP_RECORDS,
        debug_checks: bool = False) -> Result:
    r = resolve(scenario)
    reqs = make_requests(scenario, r, trace_text)
    return simulate_requests(scenario, r, reqs, kv_frame_times=kv_frame_times, record_events=record_events,
                             max_step_records=max_step_records, debug_checks=debug_checks)


def simulate_requests(scenario: Scenario, r: Resolved, reqs: Requests, *, kv_frame_times=None,
                      record_events=False, max_step_records=DEFAULT_MAX_STEP_RECORDS, kernel=None,
                      debug_checks=False) -> Result:
    """Run the engine on given requests. `kernel` may be `engine.simulate.py_func` to run it as plain Python;
    `debug_checks` verifies every block-pool invariant after each step's scheduling (slow; for tests)."""
    cost = cost_params(r.setup)
    class_ttft_s, class_tpot_s, class_weight = class_slos(scenario, r, reqs)
    pol = policy_params(scenario, r, class_tpot_s)
    frames_at = np.zeros(0) if kv_frame_times is None else np.asarray(kv_frame_times, np.float64)
    preempt_mode = {"none": E.PREEMPT_NONE, "recompute": E.PREEMPT_RECOMPUTE, "swap": E.PREEMPT_SWAP}
    sched = r.scheduler
    if r.prefix_cache:
        hashes, hash_off = reqs.block_hashes(scenario.block_size)
    else:
        hashes, hash_off = np.zeros(0, np.int64), np.zeros(len(reqs) + 1, np.int64)
    out = (kernel or E.simulate)(
        reqs.arrival_s, reqs.prompt_tokens, reqs.output_tokens, reqs.request_class, reqs.parents(),
        reqs.think_times(), hashes, hash_off,
        sched.order, sched.chunked_prefill, sched.static_batching, sched.preempts_for_priority,
        preempt_mode[scenario.preemption], r.token_budget, scenario.max_seqs, scenario.block_size,
        r.num_blocks, r.swap_blocks, r.max_model_len, cost, pol, class_ttft_s, class_tpot_s, class_weight,
        frames_at, record_events, max_step_records, debug_checks,
    )
    arrival_s, *rest = out
    reqs = dataclasses.replace(reqs, arrival_s=arrival_s)  # follow-up turns' arrivals are known now
    result = Result(scenario, r, reqs, *rest)
    unfinished = int(((result.status != E.FINISHED) & (result.status != E.REJECTED)).sum())
    if unfinished:
        raise SimulationError(f"{unfinished} requests neither finished nor were rejected")
    result.metrics = summarize(
        reqs=reqs, status=result.status, reject_reason=result.reject_reason, first_token_s=result.first_token_s,
        finish_s=result.finish_s, max_itl_s=result.max_itl_s, preemptions=result.preemptions,
        degraded=result.degraded, on_time_tokens=result.on_time_tokens, cached_prefix=result.cached_prefix,
        prefix_cache=r.prefix_cache, acc=result.accumulators,
        itl_fine=result.itl_fine, itl_coarse=result.itl_coarse, num_blocks=r.num_blocks,
        peak_bytes_per_s=cost[PEAK_BW], peak_flops_per_s=cost[PEAK_FLOPS], class_ttft_s=class_ttft_s,
        class_tpot_s=class_tpot_s, transport_s=scenario.transport_overhead_ms / 1e3,
    )
    return result


def warm_up() -> None:
    """Compile (or load from numba's on-disk cache) every engine code path with tiny runs."""
    from .policies import SCHEDULER_NAMES

    for name in SCHEDULER_NAMES:
        run(Scenario(scheduler=name, hardware="rtx3050", num_requests=4, seed=1), record_events=True)
