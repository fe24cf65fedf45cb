"""What a run will cost before it starts: host memory and CPU seconds, mechanism by mechanism (issue #37).

Every face asks this one model before it simulates (the web's budget, the CLI's memory guard, the job queue): each
mechanism declares its share as a `Term` — the scenario field that sizes it, its bytes and its CPU seconds — as a
function of the resolved scenario and its requests, so a refusal can name the field and the most it may be.

Bytes are counted from the arrays the engine allocates (sim_core/kernel: build.py, kv_pool.py, kv_tiers.py,
logs.py, fleet.py, autoscaled.py, handover.py), element sizes times counts; what a run keeps per request and per step
beyond those arrays (the Result, its metrics and bounds) and the CPU seconds per step, token, request and adapter
are measured on this project's runs by bench/bench_run_cost.py, which prints the estimate against the measured peak
RSS and CPU time of 30+ scenarios spanning every mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .catalog import GPUS
from .cluster_over_time import PROBE_S, probe_scenario
from .fields import field_info
from .kernel.state import ITL_COARSE_BINS, ITL_FINE_BINS, N_EVENT_COLS, N_STEP_COLS
from .policies.autoscalers import AUTOSCALERS, SCALE_PREDICTIVE
from .pool_autoscale import POOLS, pool_probe
from .run_cost_load import (
    autoscaled_slots,
    batch_cap,
    loaded_step_s,
    searched_rates,
    step_inputs,
    throughput_ceiling,
)
from .runner import CLUSTER_STEP_RECORDS, DEFAULT_MAX_EVENTS, DEFAULT_MAX_STEP_RECORDS
from .scenario import Scenario

GB = 1e9
I64, F64, I32, I8 = 8, 8, 4, 1
# Engine arrays per GPU KV block: the free list's four int64 rows (kv_pool.new_kv_cache links).
POOL_BYTES_PER_BLOCK = 4 * I64
# A KV frame (logs.new_logs): each block's request (int32) and state (int8).
FRAME_BYTES_PER_BLOCK = I32 + I8
# The per-request state (build.new_request_state: 3 int8, 9 int64/float64 columns, two N_ATTR=6 float rows), the
# request table's copies, the KV rows (4 int64) and the Result's copies and metrics: measured, bench_run_cost.py
# (20,000 chat requests on llama-3.2-1b: ~1.2 KB each above the run's fixed arrays).
BYTES_PER_REQUEST = 1200
STEP_LOG_COLS = N_STEP_COLS + 1  # float64 columns, plus the service log's one tenant
EVENT_BYTES = N_EVENT_COLS * I64
EVENTS_PER_REQUEST = 6  # arrival, scheduled, first token, finished, ... (a preemption adds two)
ITL_HISTOGRAM_BYTES = (ITL_FINE_BINS + ITL_COARSE_BINS) * I64  # one pair per run (a cluster's engines share it)
# Log arrays grow by doubling (logs._grown): up to twice the rows used, and the old copy while the new one fills.
GROWTH_SLACK = 2.0
# CPU seconds, measured by bench/bench_run_cost.py on this project's 2-core build box (numba-compiled engine): per
# engine step, per output token, per request, per adapter a LoRA step walks (kernel/lora.py), per
# autoscaler evaluation and replica (policies/autoscaling.py reads every replica's metric), per byte first written.
CPU_S_PER_STEP = 1e-6
CPU_S_PER_OUTPUT_TOKEN = 1e-8  # a running request's decode work in each step (a prompt is one chunk a step)
CPU_S_PER_REQUEST = 5e-6
# Per adapter a LoRA step walks: the slope of CPU per step between 20,000 and 68,391 adapters at the same load
# (duration=10&rate=33: 1.84e-5 and 4.65e-5 s a step), 5.8e-10 (it was 1e-9, an upper round: lora-68391 then sat at
# 1.96-2.04x its measured CPU).
CPU_S_PER_ADAPTER_STEP = 6e-10
CPU_S_PER_LORA_STEP = 4e-6  # a LoRA step's own work beyond the walk: residency, loads, the grouped kernels
CPU_S_PER_EVAL_REPLICA = 1e-8  # 1.28M evaluation-replicas took under 0.04 s in all (bench)
# The autoscalers' capacity searches (cluster_over_time.replica_capacity and running_target, over
# studies/rate_search.search_rate) are counted by running search_rate itself against a replica whose attainment falls at
# the rate its engine's throughput allows (throughput_ceiling): the search's own doublings and bisections, each
# trial rate PROBE_S seconds of requests. Predictive searches 1, 2, 4, ... replicas up to what the peak needs.
CPU_S_PER_BYTE = 0.7e-9  # page faults and zeroing on first touch: about 1.4 GB/s


@dataclass(frozen=True)
class Term:
    """One mechanism's share of a run: `field`, the scenario field that sizes it (what a refusal names), its value,
    and the bytes and CPU seconds it adds; `per_unit_bytes`: bytes per unit of the field (0: not linear in it)."""

    field: str
    what: str
    bytes: float
    cpu_s: float
    value: float = 0.0
    per_unit_bytes: float = 0.0


@dataclass(frozen=True)
class RunCost:
    terms: tuple[Term, ...]
    steps: float  # engine steps, estimated (summed over engines)

    @property
    def bytes(self) -> float:
        return sum(t.bytes for t in self.terms)

    @property
    def cpu_s(self) -> float:
        return sum(t.cpu_s for t in self.terms)

    def largest(self, key: str) -> Term:
        return max(self.terms, key=lambda t: getattr(t, key))


def run_cost(scenario, resolved, reqs, *, record_events: bool = True, kv_frames: int = 0) -> RunCost:
    """The run's host memory and CPU time, term by term (see the module's docstring). `kv_frames`: the KV
    snapshots asked for (the engine keeps up to twice as many)."""
    engines = _engine_counts(scenario, resolved, reqs)
    n = len(reqs)
    out_tokens = float(reqs.output_tokens.sum()) if n else 0.0
    # An autoscaled fleet's memory is that of the slots it provisions (autoscaled_slots), its steps those of the
    # replicas it starts with: it adds replicas only when they are busy.
    serving = engines if scenario.autoscaler is None else [max(1, scenario.replicas, scenario.scaling_bounds[0])]
    if scenario.autoscaler is not None and scenario.disaggregated:  # each pool's starting engines
        serving = [pool.engines for pool in resolved.deployment]
    steps = sum(_pool_steps(scenario, resolved, k, reqs, count) for k, count in enumerate(serving))
    total_engines = sum(engines)
    terms = [_request_term(scenario, n, n * CPU_S_PER_REQUEST + out_tokens * CPU_S_PER_OUTPUT_TOKEN +
                           steps * CPU_S_PER_STEP)]
    terms += _kv_terms(scenario, resolved, reqs, engines, kv_frames)
    terms.append(_log_term(scenario, n, steps, total_engines, record_events))
    terms += [t for t in (_lora_term(scenario, steps), _autoscaler_term(scenario, resolved),
                          _handover_term(scenario, resolved)) if t is not None]
    probes = _probe_term(scenario, resolved, reqs)
    return RunCost(tuple(_with_touch_time(t) for t in terms + probes), steps)


def _request_term(scenario, n: int, cpu_s: float) -> Term:
    """The per-request arrays and the steps' work, sized by num_requests (or the duration's arrivals)."""
    size = n * BYTES_PER_REQUEST + ITL_HISTOGRAM_BYTES
    if scenario.num_requests is not None:
        return Term("num_requests", f"{n:,} requests", size, cpu_s, scenario.num_requests, BYTES_PER_REQUEST)
    per_s = n * BYTES_PER_REQUEST / scenario.duration if scenario.trace is None else 0.0
    return Term("duration", f"{n:,} requests", size, cpu_s, scenario.duration, per_s)


def _with_touch_time(t: Term) -> Term:
    return Term(t.field, t.what, t.bytes, t.cpu_s + t.bytes * CPU_S_PER_BYTE, t.value, t.per_unit_bytes)


def _engine_counts(scenario, resolved, reqs) -> list[int]:
    """Engines per pool, as the run allocates them (an autoscaler: the slots it provisions, autoscaled_slots)."""
    if scenario.autoscaler is not None and scenario.disaggregated:  # every slot of each pool: an upper bound
        return [scenario.scaling_bounds[1] * pool.lockstep for pool in resolved.deployment]
    if scenario.autoscaler is not None:
        return [autoscaled_slots(scenario, resolved, reqs)]
    return [pool.engines for pool in resolved.deployment]


def _pool_steps(scenario, resolved, k: int, reqs, count: int, probe_rate: float | None = None) -> float:
    """The pool's engine steps, estimated by Little's law: a loaded engine's step carries the decode tokens of
    the requests running (out/s x step time) and the prompt tokens arriving meanwhile (prompt/s x step time, at
    most the token budget), and takes the cost model's floor for that many tokens (bounds.step_floor_s) plus the
    decode attention's context reads; the engine steps for the arrival span and the last request's output, one
    running request's token a step at least, and never fewer steps than the tokens over the token budget.
    `probe_rate`: a capacity search's run instead, PROBE_S seconds of these requests at that rate."""
    if len(reqs) == 0:
        return 0.0
    scale = 1.0 if probe_rate is None else probe_rate * PROBE_S / len(reqs)
    n = len(reqs) * scale
    pool = resolved.deployment[k]
    decode, prefill = pool.role != "prefill", pool.role != "decode"
    prompt, out = float(reqs.prompt_tokens.sum()) * scale, float(reqs.output_tokens.sum()) * scale
    least = ((out if decode else 0.0) + (prompt if prefill else 0.0)) / resolved.token_budget
    finite = reqs.arrival_s[np.isfinite(reqs.arrival_s)]  # agent turns arrive once their parent ends (inf now)
    span = max(float(finite.max() - finite.min()) if len(finite) else 0.0, scenario.duration, 1e-3)
    span = span if probe_rate is None else PROBE_S
    p, read_s = step_inputs(scenario, pool.setup, reqs)
    out_rate = (out if decode else n) / count / span
    prompt_rate = (prompt if prefill else 0.0) / count / span
    cap = batch_cap(scenario, resolved, reqs)
    t = loaded_step_s(p, read_s, out_rate, prompt_rate, cap, resolved.token_budget)
    busy = span + float(reqs.output_tokens.max() if decode else 1) * t
    # Past what the batch cap lets it serve, an engine works through the backlog at cap tokens a step.
    work = (out if decode else n) / count
    per_engine = min(work + n / count, max(busy / t, work / cap))
    return max(least, per_engine * count)


def _kv_terms(scenario, resolved, reqs, engines: list[int], kv_frames: int) -> list[Term]:
    out = []
    for k, count in enumerate(engines):
        pool = resolved.deployment[k]
        blocks = pool.num_blocks
        table = 2 * _pow2_at_least(2 * blocks) * I64 if resolved.prefix_cache else 0
        frames = 2 * kv_frames * blocks * FRAME_BYTES_PER_BLOCK
        # The engine's block size (a hybrid model's may be vLLM's larger one: hybrid_blocks), not the field's.
        width = _block_table_width(reqs, pool.setup.block_size, blocks, resolved.max_model_len)
        per_engine = blocks * POOL_BYTES_PER_BLOCK + table + frames + resolved.max_seqs * width * I64
        out.append(Term("kv_blocks", f"{count} engine(s) x {blocks:,} GPU KV blocks", per_engine * count, 0.0,
                        blocks, (per_engine / max(1, blocks)) * count))
        out += _tier_terms(scenario, pool, count)
    return out


def _tier_terms(scenario, pool, count: int) -> list[Term]:
    """The lower KV tiers (kernel/kv_tiers.new_tiers): a hash table at most half full over both tiers' blocks
    (two int64 rows) and a ring of twice each tier's blocks (two int64 rows, the larger tier's width)."""
    if scenario.kv_offload_cpu_gb <= 0 and scenario.kv_offload_disk_gb <= 0:
        return []
    block = pool.setup.kv_bytes_per_block
    gib = float(1 << 30)
    cpu, disk = int(scenario.kv_offload_cpu_gb * gib // block), int(scenario.kv_offload_disk_gb * gib // block)
    table = 2 * _pow2_at_least(2 * (cpu + disk)) * I64
    ring = 2 * 2 * max(cpu, disk) * I64
    out = []
    for field, blocks in (("kv_offload_cpu_gb", cpu), ("kv_offload_disk_gb", disk)):
        if blocks:
            share = (table + ring) * blocks / (cpu + disk)
            # Per GB of the field: its blocks' table entries (at most 4 slots each, the power of two) and ring.
            per_gb = (gib / block) * (2 * 4 * I64 + 2 * 2 * I64)
            out.append(Term(field, f"{count} engine(s) x {blocks:,} offloaded KV blocks", share * count, 0.0,
                            getattr(scenario, field), per_gb * count))
    return out


def _log_term(scenario, n: int, steps: float, engines: int, record_events: bool) -> Term:
    """Step and event logs (logs.new_logs), bounded per engine as runner.simulate_requests bounds them."""
    max_steps, max_events = DEFAULT_MAX_STEP_RECORDS, DEFAULT_MAX_EVENTS
    if engines > 1 and record_events:
        max_steps = max(CLUSTER_STEP_RECORDS, max_steps // engines) * engines
        max_events = max(CLUSTER_STEP_RECORDS, max_events // engines) * engines
    elif engines > 1:
        max_steps = CLUSTER_STEP_RECORDS * engines
    rows = min(steps, max_steps)
    events = min(EVENTS_PER_REQUEST * n, max_events) if record_events else 0
    size = (rows * STEP_LOG_COLS * F64 + events * EVENT_BYTES) * GROWTH_SLACK
    return Term("duration", f"about {steps:,.0f} engine steps logged", size, 0.0)


def _lora_term(scenario, steps: float) -> Term | None:
    """Each LoRA step walks every adapter (kernel/lora.py), and the residency state is 4 numbers an adapter."""
    if not scenario.lora_adapters:
        return None
    a = scenario.lora_adapters
    return Term("lora_adapters", f"{a:,} adapters walked each of ~{steps:,.0f} steps", 4 * a * F64,
                steps * (a * CPU_S_PER_ADAPTER_STEP + CPU_S_PER_LORA_STEP), a)


def _autoscaler_term(scenario, resolved) -> Term | None:
    """Every evaluation reads each replica slot's metric; a rate schedule's forecast holds FORECAST_POINTS rates
    per evaluation while it is built (cluster_over_time.schedule_forecast)."""
    if scenario.autoscaler is None:
        return None
    interval = scenario.autoscale_interval_s or 15.0
    evals = math.ceil(scenario.duration / interval) + 2
    replicas = scenario.scaling_bounds[1] * len(resolved.deployment)  # each pool's, autoscaled pools
    forecast = evals * 16 * F64 * 3 if resolved.schedule is not None else 0.0
    return Term("autoscale_interval_s", f"{evals:,} autoscaler evaluations x {replicas} replicas", forecast + evals * F64,
                evals * replicas * CPU_S_PER_EVAL_REPLICA, interval)


def _probe_term(scenario, resolved, reqs) -> list[Term]:
    """An autoscaler's default from its capacity search (cluster_over_time): predictive without
    autoscale_replica_rate searches what one replica serves, then 2, 4, ... replicas up to what the peak needs;
    utilization without autoscale_target searches one replica's rate and runs once at it (running_target). Each
    search's trial rates are studies/rate_search.search_rate's own, against replicas that serve up to their
    throughput ceiling; each trial simulates PROBE_S seconds. Cached per process: this is a cold run's cost."""
    if scenario.autoscaler is None:
        return []
    predictive = AUTOSCALERS[scenario.autoscaler][0] == SCALE_PREDICTIVE
    field = "autoscale_replica_rate" if predictive else "autoscale_target"
    if getattr(scenario, field) is not None:
        return []
    if scenario.disaggregated:
        return _pool_probe_terms(scenario, resolved, reqs)
    probe = probe_scenario(scenario)
    ceiling = throughput_ceiling(scenario, resolved, reqs)
    alone, rates = searched_rates(probe, ceiling)
    runs = [(rate, 1) for rate in rates]
    if alone is not None and predictive:
        need = min(scenario.scaling_bounds[1], max(1, math.ceil(probe.rate * max(1, scenario.replicas) / alone)))
        k = 1
        while k < need:  # cluster_over_time._capacity_curve's levels
            k = min(2 * k, need)
            level = searched_rates(probe.model_copy(update={"replicas": k, "rate": alone * k}), ceiling * k)[1]
            runs += [(rate, k) for rate in level]
    elif alone is not None:
        runs.append((alone, 1))  # running_target's run at the rate found
    probed = PROBE_S * sum(rate for rate, _ in runs)
    per_request = CPU_S_PER_REQUEST + float(reqs.output_tokens.mean()) * CPU_S_PER_OUTPUT_TOKEN if len(reqs) else 0.0
    steps = sum(_pool_steps(scenario, resolved, 0, reqs, k, rate) for rate, k in runs)
    largest = PROBE_S * max(rate for rate, _ in runs) * BYTES_PER_REQUEST  # the largest run's requests
    return [Term(field, f"~{probed:,.0f} requests in {len(runs)} runs simulated by the {scenario.autoscaler} "
                        "autoscaler's capacity search", largest, probed * per_request + steps * CPU_S_PER_STEP)]


def _handover_term(scenario, resolved) -> Term | None:
    """Disaggregated serving: each prefill replica's pull marks over its blocks (disaggregated.Pulls), int64."""
    pools = resolved.deployment
    if len(pools) < 2 or pools[0].role != "prefill":
        return None
    size = pools[0].engines * pools[0].num_blocks * I64
    return Term("prefill_replicas", f"{pools[0].engines} prefill replica(s) x {pools[0].num_blocks:,} blocks of "
                                    "hand-over marks", size, 0.0, pools[0].engines, pools[0].num_blocks * I64)


def _block_table_width(reqs, block_size: int, num_blocks: int, max_model_len: int) -> int:
    if not len(reqs):
        return 1
    full = reqs.prompt_tokens + reqs.output_tokens
    need = -(-full // block_size)
    ok = (need <= num_blocks) & (full <= max_model_len)
    return int(need[ok].max()) if ok.any() else 1


def _pow2_at_least(n: int) -> int:
    size = 2
    while size < n:
        size *= 2
    return size


def over_limit(cost: RunCost, limit_bytes: float, limit_text: str = "the limit is {gb} GB") -> tuple[str, str] | None:
    """(field, message) when the run needs more host memory than `limit_bytes`: the term that weighs most, with
    the most its field may be where the term is linear in it. `limit_text`: how the message states the limit
    ({gb}: it in GB)."""
    if cost.bytes <= limit_bytes:
        return None
    t = cost.largest("bytes")
    room = limit_bytes - (cost.bytes - t.bytes)
    most = f": at most {_most(t, room)}" if t.per_unit_bytes > 0 and room > 0 else " — lower it, or simulate less"
    return t.field, (f"{_value_text(t)} ({t.what}) needs ~{cost.bytes / GB:.2f} GB of host memory for the "
                     f"simulation; {limit_text.format(gb=f'{limit_bytes / GB:.2f}')}{most}")


def _value_text(t: Term) -> str:
    return f"{t.field}={t.value:g}" if t.value else t.field


def _most(t: Term, room_bytes: float) -> str:
    most = room_bytes / t.per_unit_bytes
    return f"{math.floor(most):,}" if most >= 10 else f"{most:.3g}"



# The most KV blocks one engine's pool may hold: the scenario's own bound on kv_blocks (50M blocks, ~100 bytes of
# host arrays each: 5 GB), which a run that sets no kv_blocks must not pass either.
MAX_KV_BLOCKS = int(field_info("kv_blocks").hi)
DEFAULT_BLOCK_SIZE = Scenario.model_fields["block_size"].default


def tiny_kv_problem(model) -> tuple[str, str] | None:
    """(config key, why) for a model whose KV cache is so small per token that its ordinary run — tp=1 on the
    catalogue's largest GPU, the default block size, an 8-bit KV cache — would hold more than MAX_KV_BLOCKS blocks
    (a 1-wide config: 4 bytes a token, a billion blocks); None for every real model (the smallest catalogue
    model, llama-3.2-1b, keeps 32 KB a token in 16 bits). A model without attention layers has no pool to size."""
    per_token = model.attn_layers * model.kv_bytes_per_token_per_layer(model.kv_heads, 1.0)
    if per_token <= 0:
        return None
    gpu = max(GPUS.values(), key=lambda g: g.mem_gib)
    least = gpu.mem_gib * (1 << 30) / (MAX_KV_BLOCKS * DEFAULT_BLOCK_SIZE)
    if per_token >= least:
        return None
    key = "kv_lora_rank" if model.is_mla else "head_dim"
    return key, (f"this model's KV cache is {per_token:g} bytes a token per GPU (8-bit, tp=1): one {gpu.name} would "
                 f"hold {gpu.mem_gib * (1 << 30) / (per_token * DEFAULT_BLOCK_SIZE):,.0f} KV blocks, more than the "
                 f"simulator's {MAX_KV_BLOCKS:,} (the bound on kv_blocks); a model needs at least {least:,.0f} "
                 "bytes a token (num_hidden_layers x num_key_value_heads x head_dim x 2; real models keep 20 KB or "
                 "more)")


def _pool_probe_terms(scenario, resolved, reqs) -> list[Term]:
    """Autoscaled prefill and decode pools search one replica's rate per pool (pool_autoscale.pool_replica_rate),
    the other pool at max_replicas: every engine of both pools steps in each trial (an upper bound)."""
    ceiling = throughput_ceiling(scenario, resolved, reqs)
    rates = [rate for pool in POOLS for rate in searched_rates(pool_probe(scenario, pool), ceiling)[1]]
    probed = PROBE_S * sum(rates)
    per_request = CPU_S_PER_REQUEST + float(reqs.output_tokens.mean()) * CPU_S_PER_OUTPUT_TOKEN if len(reqs) else 0.0
    hi = scenario.scaling_bounds[1]
    steps = sum(_pool_steps(scenario, resolved, k, reqs, hi * pool.lockstep, rate)
                for rate in rates for k, pool in enumerate(resolved.deployment))
    return [Term("autoscale_replica_rate", f"~{probed:,.0f} requests in {len(rates)} runs simulated by the capacity "
                                           "searches of the prefill and decode pools", PROBE_S * max(rates) *
                 BYTES_PER_REQUEST, probed * per_request + steps * CPU_S_PER_STEP)]
