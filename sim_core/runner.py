"""`run(scenario) -> Result`: the one entry point every face (CLI, web, API, benchmarks) uses."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import lora
from .bounds import bounds as run_bounds
from .cluster_over_time import over_time_metrics, run_autoscaled, serving_seconds
from .deployment import Resolved, resolve
from .energy import add_energy_metrics
from .engine_cost import engine_cost_params
from .kernel import engine
from .kernel.cluster import (
    PER_REQUEST,
    first_steps,
    pooled_efficiency,
    pooled_logs,
    replica_metrics,
    simulate_replicas,
)
from .kernel.content_hash import content_hashes
from .kernel.cost_constants import PEAK_BW, PEAK_FLOPS
from .kernel.disaggregated import simulate_pools
from .kernel.fleet import static_pools
from .kernel.handover import PoolTrace
from .kernel.state import (
    A_END_S,
    FINISHED,
    NEXT_IN_QUEUE,
    PREEMPT_NONE,
    PREEMPT_RECOMPUTE,
    PREEMPT_SWAP,
    REJECTED,
    STEP_LOG_COLUMNS,
    Config,
    FrameSpec,
    Outcome,
    RequestTable,
)
from .kv_offload import offload_on, tier_metrics, tier_params
from .links import KV_LINKS
from .metrics import summarize
from .policies.options import policy_params
from .policies.orders import ORDER_TENANT_SHARE
from .policies.routing import RouterSettings, conversations
from .pool_autoscale import ScaledPools, most_engines, pool_scalings, pools_over_time_metrics
from .scenario import Scenario, ScenarioError
from .simulation_error import SimulationError
from .statistics import aggregate
from .traces import at_rate, read_trace, read_trace_file
from .workload import QUEUED, Requests, closed_loop, synthesize

# The step log keeps every step up to this many, then samples (the summary metrics stay exact).
DEFAULT_MAX_STEP_RECORDS = 1 << 20
# The event log's bound: 4M events of 32 bytes (128 MB). Past it the log stops (Result.events_complete is False)
# and the per-request timeline is not drawn; a run that long has more requests than a Gantt can show anyway.
DEFAULT_MAX_EVENTS = 1 << 22
# Each engine of a cluster keeps this many step records (a sample past it), what its row of the cluster view draws.
# A run that records events (a timeline needs every step) gives each engine at least this many and otherwise a
# share of the single engine's bound (max_step_records / engines), so many replicas cost what one engine's log
# would. Logging every step of 4 replicas costs ~4.5% of a 100k-request run (1.050 vs 1.004 s, best of 5).
CLUSTER_STEP_RECORDS = 1024
MAX_TRACE_ROWS = 10_000_000


@dataclass(frozen=True)
class RunOptions:
    """How simulate_requests runs and what it records, beside the scenario and its requests (run() builds one from
    its keyword arguments: these names)."""

    kv_frame_times: np.ndarray | None = None  # KV-pool snapshots at these simulated times (seconds) ...
    kv_frames: int = 0  # ... or kv_frames to 2 x kv_frames of them evenly spaced over the run
    record_events: bool = False  # the per-request event log (timelines, per-request energy)
    max_step_records: int = DEFAULT_MAX_STEP_RECORDS
    max_events: int = DEFAULT_MAX_EVENTS
    debug_checks: bool = False  # verify every block-pool invariant after each step's scheduling (slow; for tests)
    # An int64 array of one element another thread sets to 1 to stop the run (Cancelled); None: the thread's
    # cancel_scope's, or none.
    cancel: np.ndarray | None = None
    bounds: bool = False  # add metrics.bounds: what a clairvoyant scheduler could reach (sim_core/bounds.py)


class Cancelled(RuntimeError):
    """The caller set the run's cancel flag (a web client that went away) and the engine stopped early."""


_scope = threading.local()


@contextmanager
def cancel_scope(cancel: np.ndarray) -> Iterator[None]:
    """Every run this thread starts inside the block that is given no cancel flag of its own uses `cancel`: a
    study (a sweep, a capacity plan) runs many simulations deep inside functions that take no flag, and setting
    this one from another thread stops whichever of them is running (Cancelled) within milliseconds."""
    outer = getattr(_scope, "cancel", None)
    _scope.cancel = cancel
    try:
        yield
    finally:
        _scope.cancel = outer


def _scoped_cancel() -> np.ndarray:
    found = getattr(_scope, "cancel", None)
    return np.zeros(1, np.int64) if found is None else found


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


def least_engine_steps(reqs: Requests, token_budget: int) -> int:
    """A lower bound on a run's engine steps: a step computes at most token_budget tokens (prompt or output), so
    the work is at least (prompt + output tokens) / token_budget steps. What the web's limits and the CLI's
    large-run note estimate a run's cost by."""
    tokens = int(reqs.prompt_tokens.sum() + reqs.output_tokens.sum())
    return -(-tokens // int(token_budget))


def make_requests(s: Scenario, r: Resolved, trace_text: str | None = None) -> Requests:
    """The scenario's requests: an uploaded trace's text, the trace file it names, or the preset."""
    if trace_text is not None or s.trace is not None:
        # A file is streamed, never read whole (a 1 GB trace took 6.25 GB as text and lists)
        fmt = (s.trace_format, s.trace_block_tokens, s.replay)
        reqs = read_trace(trace_text, MAX_TRACE_ROWS, *fmt) if trace_text is not None else \
            read_trace_file(s.trace, MAX_TRACE_ROWS, *fmt)
        reqs = reqs if s.num_requests is None else reqs.take(s.num_requests)
        reqs = reqs if s.rate is None else at_rate(reqs, s.rate)  # rate set: the recorded gaps, scaled to it
    else:
        reqs = synthesize(r.preset, r.schedule or r.rate, r.burstiness, s.num_requests, s.duration, s.seed,
                          s.system_prompt_tokens)
        reqs = reqs if s.num_requests is None else reqs.take(s.num_requests)
    # A closed loop sends the same requests (those the open-loop run would draw), each when a user is free.
    return reqs if s.concurrency is None else closed_loop(reqs, s.concurrency, s.think_time_s or 0.0,
                                                          s.concurrency_mode == "semaphore")


PREEMPTION_MODES = {"none": PREEMPT_NONE, "recompute": PREEMPT_RECOMPUTE, "swap": PREEMPT_SWAP}


class EngineLog(NamedTuple):
    """One engine of a cluster: its step log and KV snapshots. Its events are in Result.events, which numbers the
    cluster's steps one after another: this engine's step k is step first_step + k there."""

    name: str  # "replica 2", "prefill 0", "decode 1"
    pool: str  # "replicas", "prefill", "decode"
    steps: np.ndarray  # its step log (columns state.S_*), every step_stride-th step
    step_stride: int
    num_blocks: int  # its KV pool
    first_step: int = 0
    kv_frames: np.ndarray | None = None  # [frame, block] -> a request holding it, or -1 (as Result.kv_frames)
    kv_frame_state: np.ndarray | None = None
    kv_frame_s: np.ndarray | None = None


@dataclass
class Result:
    """One run: the scenario, its resolved defaults and requests, what happened to each request, the logs."""

    scenario: Scenario
    resolved: Resolved
    requests: Requests  # arrival_s includes follow-up turns' arrivals, known once their parents ended
    class_ttft_s: np.ndarray  # per request class, seconds
    class_tpot_s: np.ndarray
    # per request
    status: np.ndarray  # state.FINISHED / state.REJECTED
    reject_reason: np.ndarray  # index into state.REJECT_REASONS
    generated: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    max_itl_s: np.ndarray
    preemptions: np.ndarray
    degraded: np.ndarray  # admitted with a relaxed TTFT target (admission=degrade)
    on_time_tokens: np.ndarray  # tokens each request received by their per-token deadline
    cached_prefix: np.ndarray  # prompt tokens served from the prefix cache at first admission (-1: never admitted)
    # logs
    steps: np.ndarray  # step log, columns state.S_*; every `step_stride`-th step
    tenant_service: np.ndarray  # [logged step, tenant] weighted service so far (fair), beside the step log
    step_stride: int
    events: np.ndarray  # event log, columns state.E_*; empty unless recorded
    events_complete: bool  # False: the event log reached max_events and stopped there
    accumulators: np.ndarray  # state.A_*
    itl_fine: np.ndarray
    itl_coarse: np.ndarray
    kv_frames: np.ndarray  # [frame, block] -> a request holding it, or -1
    kv_frame_state: np.ndarray  # [frame, block] -> state.BLOCK_FREE / _USED / _SHARED / _CACHED
    kv_frame_s: np.ndarray
    # the pool at the end (tests check nothing leaked)
    free_blocks_at_end: int
    swap_free_at_end: int
    ref_counts_at_end: np.ndarray
    metrics: dict = field(default_factory=dict)
    replica_of: np.ndarray | None = None  # the replica that served each request (all 0 for one engine)
    # [request, attribution.AT_*]: seconds of each request's latency per part (queue, prefill, ...), device side
    attribution: np.ndarray | None = None
    # The same as it stood at each request's first token: where its TTFT went (device side; request_diff.py)
    attr_first: np.ndarray | None = None
    # Several engines: each one's name, pool and step log (the merged step log above is empty); disaggregated
    # serving: each request's hand-over (disaggregated.PoolTrace: prefill engine, decode engine, KV transfer times).
    engine_logs: list[EngineLog] | None = None
    handover: PoolTrace | None = None
    kv_tiers: np.ndarray | None = None  # kernel.kv_tiers.tier_stats summed over engines (all 0 without offload)
    # [frame, 0 = CPU / 1 = disk]: blocks each lower KV tier held at each kv_frame_s (one engine; all 0: off)
    kv_frame_tiers: np.ndarray | None = None
    # An autoscaler's replicas: [life, kernel.autoscaled.LIFE_*] (slot, asked for, serving, draining, released)
    replica_lives: np.ndarray | None = None
    # Autoscaled prefill and decode pools: each pool's lives, the same columns (pool_autoscale.py)
    pool_lives: list | None = None

    @property
    def end_s(self) -> float:
        """Simulated time when the last request finished."""
        return float(self.accumulators[A_END_S])

    def step_column(self, name: str) -> np.ndarray:
        """One column of the step log by name (state.STEP_LOG_COLUMNS: start_s, duration_s, prefill_tokens,
        decode_seqs, waiting, kv_blocks, ...)."""
        return self.steps[:, STEP_LOG_COLUMNS[name]]

    @property
    def finished(self) -> np.ndarray:
        return self.status == FINISHED

    @property
    def rejected(self) -> np.ndarray:
        return self.status == REJECTED

    def summary(self) -> dict:
        return {"scheduler": self.scenario.scheduler, "metrics": self.metrics}


def run(scenario: Scenario, *, trace_text: str | None = None, **options) -> Result:
    """Simulate a scenario: its requests made (from `trace_text`, an uploaded trace's text, or as the scenario
    says), then simulate_requests with `options`, RunOptions' fields by name."""
    r = resolve(scenario)
    return simulate_requests(scenario, r, make_requests(scenario, r, trace_text), RunOptions(**options))


@dataclass
class SeedRuns:
    """A scenario run over `scenario.seeds` seeds: each seed's Result, each metric's mean and its 95% interval."""

    results: list[Result]
    metrics: dict  # means; the same keys as one run's metrics
    ci95: dict  # [low, high] beside each numeric metric (empty for a single seed)

    @property
    def resolved(self) -> Resolved:
        return self.results[0].resolved

    @property
    def requests(self) -> Requests:
        """The first seed's requests."""
        return self.results[0].requests

    @property
    def seeds(self) -> list[int]:
        return [r.scenario.seed for r in self.results]


def run_seeds(scenario: Scenario, **options) -> SeedRuns:
    """`run` for seeds scenario.seed .. scenario.seed + scenario.seeds - 1 (options as for `run`)."""
    if scenario.seed + scenario.seeds - 1 > 2**32 - 1:
        raise ScenarioError([("seeds", f"seed + seeds - 1 must stay at most {2**32 - 1}")])
    results = [run(scenario.model_copy(update={"seed": scenario.seed + k, "seeds": 1}), **options)
               for k in range(scenario.seeds)]
    if len(results) == 1:
        return SeedRuns(results, results[0].metrics, {})
    means, ci95 = aggregate([r.metrics for r in results])
    return SeedRuns(results, means, ci95)


def engine_config(scenario: Scenario, r: Resolved, class_slo: tuple, *, record_events: bool, max_step_records: int,
                  debug_checks: bool, cancel: np.ndarray | None = None, max_events: int = DEFAULT_MAX_EVENTS) -> Config:
    class_ttft_s, class_tpot_s, class_weight = class_slo
    sched = r.scheduler
    cost = np.ascontiguousarray(engine_cost_params(scenario, r.setup, r.step_time_scale))
    return Config(
        order=sched.order, chunked_prefill=sched.chunked_prefill, static_batching=sched.static_batching,
        preempts_for_priority=sched.preempts_for_priority, preempt_mode=PREEMPTION_MODES[scenario.preemption],
        token_budget=int(r.token_budget), max_num_seqs=int(r.max_seqs), block_size=int(r.setup.block_size),
        num_blocks=int(r.num_blocks), swap_blocks=int(r.swap_blocks), max_model_len=int(r.max_model_len),
        prefix_caching=bool(r.prefix_cache), record_events=bool(record_events), max_events=int(max_events),
        max_step_records=int(max_step_records), debug_checks=bool(debug_checks),
        cost=cost,
        pol=policy_params(scenario, r, class_tpot_s), class_ttft_s=class_ttft_s, class_tpot_s=class_tpot_s,
        class_weight=class_weight, cancel=np.zeros(1, np.int64) if cancel is None else cancel,
        kv_tiers=tier_params(scenario, r.setup, bool(r.prefix_cache)), **_lora_config(scenario, r, cost))


def _lora_config(scenario: Scenario, r: Resolved, cost: np.ndarray) -> dict:
    """Config's LoRA fields (sim_core/lora.py): empty when the scenario has no adapters."""
    p = lora.params(scenario, r.setup, cost)
    return {"lora": p, "lora_state": lora.state(p)}


def request_table(reqs: Requests, cfg: Config, adapters: np.ndarray | None = None) -> RequestTable:
    """`adapters`: each request's LoRA adapter (sim_core/lora.py adapters), None for none."""
    parents = reqs.parents()
    n = len(reqs)
    child = np.full(n, -1, np.int64)
    has_parent = parents >= 0
    child[parents[has_parent]] = np.nonzero(has_parent)[0]
    queued = parents == QUEUED  # a closed loop's semaphore: each goes out when any slot frees, in order
    if queued.any():
        child[child == -1] = NEXT_IN_QUEUE  # a request that ends its chain frees its slot
    arrival_s = np.where(parents == -1, reqs.arrival_s, np.inf)  # a follow-up arrives when its parent ends
    if cfg.prefix_caching:
        hashes, hash_off = content_hashes(*reqs.content(), cfg.block_size)
    else:
        hashes, hash_off = np.zeros(0, np.int64), np.zeros(n + 1, np.int64)
    fair = cfg.order == ORDER_TENANT_SHARE
    return RequestTable(
        arrival_s=arrival_s, prompt_tokens=_i64(reqs.prompt_tokens), output_tokens=_i64(reqs.output_tokens),
        request_class=_i64(reqs.request_class),
        tenant=reqs.request_class.astype(np.int64) if fair else np.zeros(n, np.int64), child=child,
        think_s=np.ascontiguousarray(reqs.think_times(), np.float64), hashes=_i64(hashes), hash_off=_i64(hash_off),
        open_ids=np.nonzero(parents == -1)[0].astype(np.int64), queue=np.flatnonzero(queued).astype(np.int64),
        queue_next=np.zeros(1, np.int64),
        adapter=np.full(n, -1, np.int64) if adapters is None else _i64(adapters),
        lora_skipped=np.zeros(n if cfg.lora.shape[0] else 0, np.int64))


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def frame_spec(reqs: Requests, kv_frame_times=None, kv_frames: int = 0) -> FrameSpec:
    if kv_frame_times is not None:
        return FrameSpec(np.ascontiguousarray(kv_frame_times, np.float64), 0, 0.0)
    if kv_frames <= 0:
        return FrameSpec(np.zeros(0), 0, 0.0)
    # The run lasts at least the arrival window: spread the first 2 x kv_frames snapshots over it. A session's
    # follow-up turns arrive when their parents end (inf until then): the window is the open arrivals'.
    finite = reqs.arrival_s[np.isfinite(reqs.arrival_s)]
    window = float(finite.max()) if len(finite) else 0.0
    return FrameSpec(np.zeros(0), 2 * kv_frames, max(window, 1e-3) / (2 * kv_frames))


class PoolsRun(NamedTuple):
    """What a deployment's engines did: one merged Outcome, each engine's (pool by pool, as Resolved.deployment
    lists them), the engine each request finished on, and for disaggregated serving the hand-overs."""

    merged: Outcome
    outs: list
    served_by: np.ndarray
    handover: PoolTrace | None = None
    transfer: dict | None = None  # the KV link's figures (simulate_pools)
    autoscaled: tuple | None = None  # an autoscaler's (lives log, KV blocks leaked, Scaling): cluster_over_time.py
    scaled_pools: ScaledPools | None = None  # autoscaled prefill and decode pools: pool_autoscale.py


def run_pools(scenario: Scenario, r: Resolved, cfgs: list[Config], table: RequestTable,
              frames: FrameSpec, sessions: np.ndarray | None = None) -> PoolsRun:
    """Run every engine of the deployment: one engine, replicas behind the router, or a prefill pool feeding a
    decode pool (`cfgs`: each pool's Config; `sessions`: each request's conversation, for session routing, when
    the table's follow-up chains are not only conversations)."""
    pools = r.deployment
    if scenario.autoscaler is not None and len(pools) == 1:
        outs, served_by, lives, leaked, scaling = run_autoscaled(scenario, r, cfgs[0], table, frames, run, sessions)
        merged = Outcome(**{f: getattr(outs[0], f) for f in PER_REQUEST}, **pooled_logs(outs))
        return PoolsRun(merged, outs, served_by, autoscaled=(lives, leaked, scaling))
    router = RouterSettings(scenario.router, scenario.router_staleness_ms / 1e3, scenario.seed,
                            scenario.router_cache_weight, sessions)
    if len(pools) == 2:  # prefill pool -> decode pool
        # Each GPU's link carries its shard of the prompt's KV; with different TP the larger shard (the pool with
        # fewer ranks) sets the bytes per link.
        link_bytes = max(p.setup.kv_bytes_per_token_per_gpu for p in pools)
        lockstep = (pools[0].lockstep, pools[1].lockstep)
        scaled = scenario.autoscaler is not None
        scalings = pool_scalings(scenario, r, run) if scaled else static_pools(
            (pools[0].engines, pools[1].engines), lockstep)
        merged, outs, transfer, served_by, handover, fleet = simulate_pools(
            tuple(cfgs), table, scalings, lockstep, router, link_bytes, KV_LINKS[scenario.kv_link], frames)
        scaled = ScaledPools(fleet.lives, fleet.leaked, scalings, tuple(len(o) for o in fleet.outs)) if scaled \
            else None
        return PoolsRun(merged, outs, served_by, handover, transfer, scaled_pools=scaled)
    if pools[0].engines > 1:
        merged, outs, served_by = simulate_replicas(cfgs[0], table, pools[0].engines, router, frames,
                                                      pools[0].lockstep)
        return PoolsRun(merged, list(outs), served_by)
    out = engine.simulate(cfgs[0], table, frames)
    return PoolsRun(out, [out], np.zeros(len(table.arrival_s), np.int64))


def simulate_requests(scenario: Scenario, r: Resolved, reqs: Requests, options: RunOptions = RunOptions()
                      ) -> Result:
    """Run the deployment on given requests (as plain Python under NUMBA_DISABLE_JIT=1), as `options` says."""
    class_slo = class_slos(scenario, r, reqs)
    engines = most_engines(scenario)
    record_events, max_step_records, max_events = options.record_events, options.max_step_records, options.max_events
    if engines > 1 and record_events:  # timelines need every engine's every step: one engine's bounds
        max_step_records = max(CLUSTER_STEP_RECORDS, max_step_records // engines)
        max_events = max(CLUSTER_STEP_RECORDS, max_events // engines)
    elif engines > 1:  # a sample of each engine's steps is all the cluster view draws
        max_step_records = min(max_step_records, CLUSTER_STEP_RECORDS)
    cancel = _scoped_cancel() if options.cancel is None else options.cancel
    cfgs = [engine_config(scenario, r.on_pool(k), class_slo, record_events=record_events,
                          max_step_records=max_step_records, max_events=max_events, debug_checks=options.debug_checks,
                          cancel=cancel) for k in range(len(r.deployment))]
    table = request_table(reqs, cfgs[0], lora.adapters(scenario, reqs.conversation_parents())
                          if scenario.lora_adapters else None)
    # A closed loop chains each user's requests: session routing follows conversations, not users.
    sessions = None if reqs.loop_link is None else conversations(reqs.conversation_parents())
    ran = run_pools(scenario, r, cfgs, table, frame_spec(reqs, options.kv_frame_times, options.kv_frames), sessions)
    out = ran.merged
    result = Result(scenario=scenario, resolved=r, requests=dataclasses.replace(reqs, arrival_s=out.arrival_s),
                    class_ttft_s=class_slo[0], class_tpot_s=class_slo[1],
                    replica_of=ran.served_by, **{f: getattr(out, f) for f in Outcome._fields if f != "arrival_s"})
    unfinished = int((~result.finished & ~result.rejected).sum())
    if unfinished and cancel[0] != 0:
        raise Cancelled(f"cancelled with {unfinished} requests still in flight")
    if unfinished:
        raise SimulationError(f"{unfinished} requests neither finished nor were rejected")
    result.metrics = summarize(result)
    if offload_on(scenario):  # the key exists only when a lower tier does: output without offload is unchanged
        result.metrics["kv_tiers"] = tier_metrics(result.kv_tiers, result.metrics["duration_s"] * scenario.engines,
                                                  r.setup.tp)
    if scenario.lora_adapters:
        result.metrics["lora"] = lora.counters(cfgs[0].lora_state, cfgs[0].lora)
    if len(ran.outs) > 1 or ran.autoscaled is not None:  # (autoscaled pools are two)
        _add_engines(result, ran, cfgs)
    if ran.autoscaled is not None:
        result.replica_lives = ran.autoscaled[0]
        result.metrics.update(over_time_metrics(result, *ran.autoscaled))
    if ran.scaled_pools is not None:
        result.pool_lives = ran.scaled_pools.lives
        result.metrics.update(pools_over_time_metrics(result, ran.scaled_pools))
    if scenario.energy:  # the key exists only when asked for: output without it is unchanged
        add_energy_metrics(result)
    if options.bounds:
        result.metrics["bounds"] = run_bounds(result)
    return result


def _add_engines(result: Result, ran: PoolsRun, cfgs: list[Config]) -> None:
    """Several engines: each one's log (Result.engine_logs) and share of the work, and the cluster's figures that
    one engine's metrics cannot say (pooled MBU/MFU over different GPUs, the KV link's use)."""
    scenario, pools = result.scenario, result.resolved.deployment
    if ran.autoscaled is not None:  # one engine per slot the autoscaler used
        pools = (dataclasses.replace(pools[0], engines=len(ran.outs)),)
    if ran.scaled_pools is not None:  # each pool's engine slots its autoscaler used
        pools = tuple(dataclasses.replace(p, engines=n) for p, n in zip(pools, ran.scaled_pools.engines, strict=True))
    each = [(pool, name, cfg) for pool, cfg in zip(pools, cfgs, strict=True) for name in pool.engine_names]
    blocks = [pool.num_blocks for pool, _, _ in each]
    # Each engine's requests as indices, not a mask per engine (64 masks of a day's 8.6M requests: 550 MB).
    if ran.handover is None:
        members = [np.flatnonzero(ran.served_by == e) for e in range(len(ran.outs))]
    else:
        members = ([np.flatnonzero(ran.handover.to_prefill == e) for e in range(pools[0].engines)]
                   + [np.flatnonzero(ran.handover.to_decode == e) for e in range(pools[1].engines)])
    result.metrics.update(replica_metrics(ran.outs, members, [pool.role for pool, _, _ in each],
                                          result.metrics["duration_s"], blocks))
    result.engine_logs = [EngineLog(name, pool.role, o.steps, int(o.step_stride), int(pool.num_blocks), int(first),
                                    o.kv_frames, o.kv_frame_state, o.kv_frame_s)
                          for (pool, name, _), o, first in zip(each, ran.outs, first_steps(ran.outs), strict=True)]
    result.handover = ran.handover
    if scenario.heterogeneous:
        peaks = [(cfg.cost[PEAK_BW], cfg.cost[PEAK_FLOPS]) for _, _, cfg in each]
        result.metrics.update(pooled_efficiency(ran.outs, peaks, blocks))
    if ran.transfer:
        extra = dict(ran.transfer)
        makespan = result.metrics["duration_s"]
        link_busy = extra.pop("kv_link_busy_s")
        # The prefill engines' link-seconds: every engine the whole run, or, autoscaled, each replica's ranks while
        # it was serving (dividing by the slots used, as before, counted a replica added late as idle all along).
        senders_s = (makespan * pools[0].engines if ran.scaled_pools is None else
                     serving_seconds(ran.scaled_pools.lives[0], float(result.end_s)) * pools[0].lockstep)
        extra["kv_link_utilization"] = link_busy / senders_s if senders_s > 0 else 0.0
        result.metrics.update(extra)
