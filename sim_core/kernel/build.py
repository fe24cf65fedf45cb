"""Building an engine's records from what Python hands in (state.Config, state.RequestTable, state.FrameSpec), and
handing back what happened (state.Outcome). Records are built inside compiled code: a StructRef made from
Python would need its constructor compiled in every process."""

from __future__ import annotations

import numpy as np

from ..policies.adaptive_budget import initial_budget
from ..policies.orders import ORDER_TENANT_SHARE
from .attribution import N_ATTR
from .cost_model import step_cost
from .jit import allocating_kernel
from .kv_pool import PL_REF, blocks_for, new_kv_cache
from .kv_tiers import new_tiers
from .logs import new_logs
from .queues import new_queues
from .state import (
    BATCH,
    BUDGET_NOW,
    CONFIG,
    ENGINE,
    KV_BLOCKS,
    KV_SWAP,
    L_EVENTS,
    L_EVENTS_FULL,
    L_LOG_STRIDE,
    L_NEXT_FRAME,
    L_STEPS_LOGGED,
    N_BATCH,
    REQUEST_STATE,
    REQUEST_TABLE,
    Outcome,
    new_record,
)


@allocating_kernel
def new_engine(config, requests, frames):
    """An engine at time 0 with every request pending. `frames` (FrameSpec): when to snapshot the KV pool."""
    req = request_record(requests)
    return engine_over(config, req, new_request_state(req.arrival_s.shape[0]), frames, True)


@allocating_kernel
def engine_over(config, req, st, frames, own_itl):
    """An engine over a request table and per-request state it may share with others (the engines of a cluster:
    a request is on one of them at a time). `own_itl` False: no inter-token-latency histograms of its own (the
    caller hands it the cluster's)."""
    cfg = config_record(config)
    n = req.arrival_s.shape[0]
    max_blocks_per_seq = 1  # block-table width: the longest request that can be admitted at all
    for i in range(n):
        full = req.prompt_tokens[i] + req.output_tokens[i]
        need = blocks_for(full, cfg.block_size)
        if max_blocks_per_seq < need <= cfg.num_blocks and full <= cfg.max_model_len:
            max_blocks_per_seq = need
    return _assemble(cfg, req, st, frames, own_itl, max_blocks_per_seq, n)


@allocating_kernel
def sibling_engine(config, first, frames):
    """Another replica of `first`'s pool (the same Config): its request table, per-request state and per-request
    rows of the KV cache (each request's block-table row, blocks held, blocks hashed, blocks swapped out) are
    first's. A request is on one replica of a pool at a time and those rows are read only for the requests an
    engine holds, so one set serves the pool: 32 bytes a request a replica otherwise, 17 GB for a day's 8.6M
    requests on 64 replicas (bench/bench_day.py). The caller hands it the pool's inter-token histograms."""
    eng = _assemble(config_record(config), first.req, first.st, frames, False, first.kv.block_table.shape[1], 0)
    kv, rows = eng.kv, first.kv
    kv.slot_of, kv.n_blocks, kv.n_hashed, kv.host_blocks = rows.slot_of, rows.n_blocks, rows.n_hashed, rows.host_blocks
    return eng


@allocating_kernel
def _assemble(cfg, req, st, frames, own_itl, max_blocks_per_seq, n_rows):
    """The engine over `req` and `st`; its KV cache's per-request rows `n_rows` long (0: the caller shares a
    sibling's)."""
    n = req.arrival_s.shape[0]
    n_tenants = 1
    if cfg.order == ORDER_TENANT_SHARE and n > 0:
        n_tenants = req.tenant.max() + 1
    eng = new_record(ENGINE)
    eng.cfg, eng.req, eng.st = cfg, req, st
    eng.kv = new_kv_cache(cfg.num_blocks, cfg.max_num_seqs, max_blocks_per_seq, cfg.swap_blocks,
                          cfg.prefix_caching, n_rows)
    new_tiers(eng.kv, cfg.kv_tiers)
    eng.q = new_queues(req.tenant, n_tenants, cfg.max_num_seqs)
    eng.batch = new_batch(cfg.max_num_seqs)
    eng.logs = new_logs(frames.at_s, frames.capacity, frames.first_spacing_s, cfg.num_blocks, n_tenants,
                        cfg.record_events, cfg.max_events, own_itl)
    eng.now, eng.step_start = 0.0, 0.0
    eng.loop = np.zeros(7, np.int64)
    eng.loop[BUDGET_NOW] = initial_budget(cfg)
    # The step-time estimate slack keys start from: a first chunk at the full budget, from the cost model.
    first_chunk = min(cfg.token_budget, cfg.max_model_len)
    eng.step_est = step_cost(cfg.cost, first_chunk, 1, first_chunk * (first_chunk + 1) // 2, 0, 0, 0, 1)[0]
    eng.keyed_step_est = eng.step_est
    return eng


@allocating_kernel
def config_record(c):
    cfg = new_record(CONFIG)
    cfg.order, cfg.chunked_prefill, cfg.static_batching = c.order, c.chunked_prefill, c.static_batching
    cfg.preempts_for_priority, cfg.preempt_mode = c.preempts_for_priority, c.preempt_mode
    cfg.token_budget, cfg.max_num_seqs, cfg.block_size = c.token_budget, c.max_num_seqs, c.block_size
    cfg.num_blocks, cfg.swap_blocks, cfg.max_model_len = c.num_blocks, c.swap_blocks, c.max_model_len
    cfg.prefix_caching, cfg.record_events, cfg.debug_checks = c.prefix_caching, c.record_events, c.debug_checks
    cfg.max_step_records, cfg.max_events, cfg.cost, cfg.pol = c.max_step_records, c.max_events, c.cost, c.pol
    cfg.class_ttft_s, cfg.class_tpot_s, cfg.class_weight = c.class_ttft_s, c.class_tpot_s, c.class_weight
    cfg.cancel = c.cancel  # shared with the caller, who may set it while the run goes on
    cfg.kv_tiers = c.kv_tiers
    cfg.lora, cfg.lora_state = c.lora, c.lora_state  # lora_state: shared, the caller reads its counters
    return cfg


@allocating_kernel
def request_record(t):
    req = new_record(REQUEST_TABLE)
    req.arrival_s = t.arrival_s.copy()  # follow-up turns' arrivals are filled in as their parents end
    req.prompt_tokens, req.output_tokens, req.request_class = t.prompt_tokens, t.output_tokens, t.request_class
    req.tenant, req.child, req.think_s = t.tenant, t.child, t.think_s
    req.hashes, req.hash_off, req.open_ids = t.hashes, t.hash_off, t.open_ids
    req.queue, req.queue_next = t.queue, t.queue_next  # queue_next: one counter for every engine
    req.adapter, req.lora_skipped = t.adapter, t.lora_skipped
    return req


@allocating_kernel
def new_request_state(n):
    st = new_record(REQUEST_STATE)
    st.status, st.reject_reason, st.degraded = np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(n, np.int8)
    st.computed, st.generated, st.on_time_tokens = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    st.first_scheduled_s, st.first_token_s = np.full(n, np.nan), np.full(n, np.nan)
    st.finish_s, st.last_token_s, st.max_itl_s = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    st.preemptions, st.cached_prefix = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    st.attribution, st.attr_mark = np.zeros((n, N_ATTR)), np.full(n, np.nan)
    st.attr_wait, st.attr_lost = np.zeros(n, np.int8), np.zeros(n, np.int64)
    st.attr_first = np.zeros((n, N_ATTR))
    return st


@allocating_kernel
def new_batch(max_num_seqs):
    batch = new_record(BATCH)
    batch.req, batch.tokens = np.zeros(max_num_seqs, np.int64), np.zeros(max_num_seqs, np.int64)
    batch.admitted, batch.n = np.zeros(max_num_seqs, np.bool_), np.zeros(N_BATCH, np.int64)
    batch.swap_s = np.zeros(2)
    return batch


@allocating_kernel
def outcome(eng):
    st, logs, kv = eng.st, eng.logs, eng.kv
    n_logged, n_events = logs.n[L_STEPS_LOGGED], logs.n[L_EVENTS]
    # The frames taken, in time order: after evenly spaced frames were thinned, the rows past the last one taken
    # hold older frames (and, in a short run, none were ever written there).
    n_frames = logs.n[L_NEXT_FRAME]
    return Outcome(
        eng.req.arrival_s, st.status, st.reject_reason, st.generated, st.first_scheduled_s, st.first_token_s,
        st.finish_s, st.max_itl_s, st.preemptions, st.degraded, st.on_time_tokens, st.cached_prefix,
        logs.steps[:n_logged].copy(), logs.service[:n_logged].copy(), logs.n[L_LOG_STRIDE],
        logs.events[:n_events].copy(), logs.n[L_EVENTS_FULL] == 0, logs.acc, logs.itl_fine, logs.itl_coarse, logs.frames[:n_frames],
        logs.frame_state[:n_frames], logs.frame_s[:n_frames], kv.free[KV_BLOCKS], kv.free[KV_SWAP], kv.links[PL_REF, : eng.cfg.num_blocks].copy(),
        st.attribution, st.attr_first, kv.tier_stats.copy(), logs.frame_tiers[:n_frames])
