"""The engine's state: a few named records of numpy arrays, and the codes stored in them.

An `Engine` is one serving instance (one vLLM-like engine core). Its records:
  cfg     Config        what was asked for: scheduler switches, limits, cost and policy parameter vectors
  req     RequestTable  the requests as given (sorted by arrival; follow-up turns get their arrival when due)
  st      RequestState  per-request progress and timestamps
  kv      KVCache       the block pool, the prefix-cache hash table, block tables (see kv_pool.py)
  q       Queues        running list, per-tenant waiting heaps, swapped heap, follow-up turns (see queues.py)
  batch   Batch         the step being scheduled: who runs, how many tokens, the batch shape
  now, step_est, keyed_step_est, step_start   numbers: simulated time, a recent prefill step's time, the
                        estimate the slack keys used, when the step being run began
  loop    int64[7]      STEP, DONE, NEXT_OPEN, BUDGET_NOW, LPM_KEYED, STATIC_PAD, STALLED
  logs    Logs          step log, event log, accumulators, ITL histogram, KV frames
Records are numba StructRefs: mutable, passed by reference (one pointer, however many arrays they hold), and
their functions cache (a jitclass's cannot); kernels read their fields without reference counting
(record_type.py). Under NUMBA_DISABLE_JIT they are plain namespaces, so the same functions
run as Python. Records are built inside jitted code (`new_record`); what comes from Python arrives as the
NamedTuples `Config` and `RequestTable`. Several engines can live side by side: nothing is global.
"""

from __future__ import annotations

import types as pytypes
from typing import NamedTuple

import numpy as np
from numba import config as numba_config
from numba import types
from numba.experimental import structref

from .record_type import register_record_type

# Request status.
PENDING, WAITING, RUNNING, SWAPPED, FINISHED, REJECTED = 0, 1, 2, 3, 4, 5
# Why a request was rejected.
REJECT_NONE = 0
REJECT_LONGER_THAN_MODEL = 1  # prompt + output exceed max_model_len
REJECT_LARGER_THAN_KV_POOL = 2  # its KV at full length would not fit in the whole block pool
REJECT_LONGER_THAN_BUDGET = 3  # chunking off and prompt + output exceed the per-step token budget
REJECT_SHED = 4  # admission control: its TTFT target could no longer be met
REJECT_REASONS = (
    "",
    "prompt + output tokens exceed max_model_len",
    "prompt + output KV exceeds the whole KV block pool",
    "prompt + output tokens exceed the token budget and chunked prefill is off",
    "shed by admission control: TTFT target already out of reach",
)
# Preemption modes.
PREEMPT_NONE, PREEMPT_RECOMPUTE, PREEMPT_SWAP = 0, 1, 2

# loop[] slots.
STEP, DONE, NEXT_OPEN, BUDGET_NOW, LPM_KEYED, STATIC_PAD, STALLED = range(7)
# Batch.n[] slots: the step's schedule and its shape for the cost model.
(B_SCHEDULED, B_BUDGET_LEFT, B_PREEMPTIONS, B_SHED, B_PRIORITY_PREEMPTED, B_PREFILL_TOKENS, B_PREFILL_PAIRS,
 B_PREFILL_CTX, B_PREFILL_SEQS, B_DECODE_SEQS, B_DECODE_CTX, B_SAMPLES) = range(12)
# Speculative decoding's verification rows (kernel/spec_decode.py): decoding sequences scoring 1 + k tokens, costed
# like prefill chunks over their context (they count in B_DECODE_SEQS too).
B_VERIFY_SEQS, B_VERIFY_TOKENS, B_VERIFY_PAIRS, B_VERIFY_CTX = range(12, 16)
N_BATCH = 16

# Event kinds in the event log, and its columns. EV_CACHE_HIT: a request admitted with tokens found in the prefix
# cache (E_TOKENS: how many), logged at each admission, a readmission after preemption included.
EV_PREFILL, EV_PREEMPT_RECOMPUTE, EV_SWAP_OUT, EV_SWAP_IN, EV_CACHE_HIT = 0, 1, 2, 3, 4
E_REQUEST, E_STEP, E_KIND, E_TOKENS = range(4)
N_EVENT_COLS = 4
# Columns of the step log.
(S_START, S_DURATION, S_PREFILL_TOKENS, S_PREFILL_SEQS, S_DECODE_SEQS, S_KV_BLOCKS, S_WAITING, S_RUNNING,
 S_SWAPPED, S_BYTES, S_FLOPS, S_PREEMPTIONS, S_TOKEN_BUDGET, S_SHED) = range(14)
N_STEP_COLS = 14
# The step log's columns by public name (runner.Result.step_column reads them).
STEP_LOG_COLUMNS = {
    "start_s": S_START, "duration_s": S_DURATION, "prefill_tokens": S_PREFILL_TOKENS,
    "prefill_seqs": S_PREFILL_SEQS, "decode_seqs": S_DECODE_SEQS, "kv_blocks": S_KV_BLOCKS, "waiting": S_WAITING,
    "running": S_RUNNING, "swapped": S_SWAPPED, "bytes": S_BYTES, "flops": S_FLOPS, "preemptions": S_PREEMPTIONS,
    "token_budget": S_TOKEN_BUDGET, "shed": S_SHED,
}
# Summary accumulators (exact, unlike the step log, which is sampled once it is full).
(A_STEPS, A_BUSY_S, A_BYTES, A_FLOPS, A_KV_BLOCK_S, A_KV_PEAK, A_WAITING_S, A_WAITING_PEAK, A_IN_SYSTEM_S,
 A_PREEMPTIONS, A_END_S, A_ITL_SUM, A_ITL_COUNT, A_PREFILL_TOKENS, A_DECODE_TOKENS, A_SHED,
 A_DEGRADED, A_EVICTIONS, A_CACHED_TOKENS) = range(19)
# Speculative decoding: sequence-steps that verified drafts, tokens they emitted, drafts scored and accepted, and the
# seconds of proposer and of verification steps.
A_SPEC_SEQ_STEPS, A_SPEC_EMITTED, A_SPEC_DRAFTED, A_SPEC_ACCEPTED, A_SPEC_DRAFT_S, A_SPEC_VERIFY_S = range(19, 25)
N_ACC = 25
# KVCache.free[] slots.
KV_BLOCKS, KV_SLOTS, KV_SWAP = range(3)
# Queues.size[] slots (N_WAITING counts every tenant's heap together; N_WAITING_TOKENS sums the tokens the waiting
# requests have to compute, kept as they come and go so that a router reads it without scanning the heaps).
N_RUNNING, N_WAITING, N_SWAPPED, N_FOLLOWUPS, N_WAITING_TOKENS = range(5)
# Logs.n[] and Logs.frame_clock[] slots.
# L_EVENTS_FULL: 1 once the event log reached cfg.max_events (it stopped at a step boundary: complete up to there).
L_STEPS_LOGGED, L_LOG_STRIDE, L_EVENTS, L_NEXT_FRAME, L_EVENTS_FULL = range(5)
FRAME_NEXT_S, FRAME_DT = range(2)
# Inter-token-latency histogram: exact microsecond bins below ~1 s, millisecond bins up to 1000 s.
ITL_FINE_BINS = 1 << 20
ITL_COARSE_BINS = 1_000_000
# KV frame cell states, for the dashboard's block grid.
BLOCK_FREE, BLOCK_USED, BLOCK_SHARED, BLOCK_CACHED = 0, 1, 2, 3




# ---------------------------------------------------------------------------------------------------------
# What Python hands the engine
# ---------------------------------------------------------------------------------------------------------
class Config(NamedTuple):
    order: int  # policies.ORDER_*: how the waiting queue is ordered
    chunked_prefill: bool
    static_batching: bool
    preempts_for_priority: bool
    preempt_mode: int  # PREEMPT_*
    token_budget: int
    max_num_seqs: int
    block_size: int
    num_blocks: int
    swap_blocks: int
    max_model_len: int
    prefix_caching: bool
    record_events: bool
    max_events: int  # the event log stops growing here (its memory is bounded: 32 bytes an event)
    max_step_records: int
    debug_checks: bool
    cost: np.ndarray  # cost_model parameter vector
    pol: np.ndarray  # policies parameter vector (policies.P_*)
    class_ttft_s: np.ndarray  # per request class
    class_tpot_s: np.ndarray
    class_weight: np.ndarray
    cancel: np.ndarray  # int64[1]: set [0] to 1 from another thread and the run stops within ~1000 steps
    kv_tiers: np.ndarray  # kv_tiers.TP_* parameter vector of the lower KV tiers (capacities 0: off)
    lora: np.ndarray  # LoRA adapters' parameters (kernel/lora.py LP_*); empty: no adapters
    lora_state: np.ndarray  # their residency and counters, written by the run (kernel/lora.py)


# RequestTable.child of a request whose end frees a closed-loop slot: the next queued request goes out.
NEXT_IN_QUEUE = -2


class RequestTable(NamedTuple):
    arrival_s: np.ndarray  # a follow-up turn's is inf until its parent ends, then parent end + think time
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    request_class: np.ndarray
    tenant: np.ndarray  # which waiting heap it joins (its class under fair sharing, else 0)
    child: np.ndarray  # the next turn of its session, or -1
    think_s: np.ndarray
    hashes: np.ndarray  # chained content hash of each full prompt block (empty without prefix caching)
    hash_off: np.ndarray  # request r's hashes are hashes[hash_off[r]:hash_off[r + 1]]
    open_ids: np.ndarray  # requests that arrive on their own (not follow-ups), in arrival order
    # A closed loop with a semaphore (vLLM bench serve --max-concurrency): a request whose child is NEXT_IN_QUEUE
    # releases, when it ends, the next of `queue` (requests waiting for a free slot, in order; `queue_next[0]`:
    # how many went out, shared by every engine).
    queue: np.ndarray
    queue_next: np.ndarray
    adapter: np.ndarray  # each request's LoRA adapter (-1: the base model)
    lora_skipped: np.ndarray  # room for the requests an admission pass skips (kernel/lora.py); empty without adapters


class FrameSpec(NamedTuple):
    """When to snapshot the KV pool: at the instants `at_s`; or, if that is empty, up to `capacity` snapshots
    evenly spaced over the whole run (starting `first_spacing_s` apart, doubling as needed); none if both are
    empty."""
    at_s: np.ndarray
    capacity: int
    first_spacing_s: float


class Outcome(NamedTuple):
    """What a finished run hands back to Python (runner.Result is built from it by field name)."""
    arrival_s: np.ndarray
    status: np.ndarray
    reject_reason: np.ndarray
    generated: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    max_itl_s: np.ndarray
    preemptions: np.ndarray
    degraded: np.ndarray
    on_time_tokens: np.ndarray
    cached_prefix: np.ndarray
    steps: np.ndarray
    tenant_service: np.ndarray
    step_stride: int
    events: np.ndarray
    events_complete: bool  # False: the log reached max_events and stopped
    accumulators: np.ndarray
    itl_fine: np.ndarray
    itl_coarse: np.ndarray
    kv_frames: np.ndarray
    kv_frame_state: np.ndarray
    kv_frame_s: np.ndarray
    free_blocks_at_end: int
    swap_free_at_end: int
    ref_counts_at_end: np.ndarray
    attribution: np.ndarray  # [request, attribution.AT_*] seconds of its latency in each part
    attr_first: np.ndarray  # the same at its first token: where its TTFT went (device side)
    kv_tiers: np.ndarray  # kv_tiers.tier_stats: per tier (GPU, CPU, disk) hits, bytes, link time (all 0: off)
    kv_frame_tiers: np.ndarray  # [frame, LOW_CPU / LOW_DISK] blocks each lower tier held (all 0: offload off)



# ---------------------------------------------------------------------------------------------------------
# The engine's records (field name -> numba type; the comments say what each holds)
# ---------------------------------------------------------------------------------------------------------
class RecordType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


register_record_type(RecordType)


I64, I32, I8, F64, BOOL = types.int64[::1], types.int32[::1], types.int8[::1], types.float64[::1], types.boolean[::1]
I64_2D, I32_2D, I8_2D, F64_2D = types.int64[:, ::1], types.int32[:, ::1], types.int8[:, ::1], types.float64[:, ::1]

CONFIG = RecordType([
    ("order", types.int64), ("chunked_prefill", types.boolean), ("static_batching", types.boolean),
    ("preempts_for_priority", types.boolean), ("preempt_mode", types.int64), ("token_budget", types.int64),
    ("max_num_seqs", types.int64), ("block_size", types.int64), ("num_blocks", types.int64),
    ("swap_blocks", types.int64), ("max_model_len", types.int64), ("prefix_caching", types.boolean),
    ("record_events", types.boolean), ("max_events", types.int64), ("max_step_records", types.int64), ("debug_checks", types.boolean),
    ("cost", F64), ("pol", F64), ("class_ttft_s", F64), ("class_tpot_s", F64), ("class_weight", F64),
    ("cancel", I64), ("kv_tiers", F64), ("lora", F64), ("lora_state", F64),
])
REQUEST_TABLE = RecordType([
    ("arrival_s", F64), ("prompt_tokens", I64), ("output_tokens", I64), ("request_class", I64), ("tenant", I64),
    ("child", I64), ("think_s", F64), ("hashes", I64), ("hash_off", I64), ("open_ids", I64), ("queue", I64),
    ("queue_next", I64), ("adapter", I64), ("lora_skipped", I64),
])
REQUEST_STATE = RecordType([
    ("status", I8), ("reject_reason", I8),
    ("degraded", I8),  # admitted late with a relaxed TTFT target
    ("computed", I64),  # tokens whose KV is on the GPU
    ("generated", I64),
    ("on_time_tokens", I64),  # tokens delivered by their deadline (token goodput)
    ("first_scheduled_s", F64), ("first_token_s", F64), ("finish_s", F64), ("last_token_s", F64),
    ("max_itl_s", F64), ("preemptions", I64),
    ("cached_prefix", I64),  # prompt tokens found in the prefix cache at first admission (-1: never admitted)
    # Where its time went (attribution.py): seconds per part, settled up to attr_mark; attr_wait: what it does
    # since (W_*); attr_lost: the most KV tokens it lost to a recompute preemption.
    ("attribution", F64_2D), ("attr_mark", F64), ("attr_wait", I8), ("attr_lost", I64),
    ("attr_first", F64_2D),  # attribution's row as it stood at the request's first token (its TTFT's split)
])
KV_CACHE = RecordType([
    ("links", I64_2D),  # [PL_NEXT/PL_PREV/PL_REF/PL_HASH, block]; column num_blocks is the free queue's sentinel
    ("table", I64_2D),  # [0: hash, 1: block] open-addressing hash table of cached full blocks
    ("block_table", I64_2D),  # [slot, j] -> block id of a running request's j-th block
    ("slot_of", I64),  # request -> its block-table row, or -1
    ("free_slots", I64),  # a stack of free block-table rows
    ("n_blocks", I64),  # request -> GPU blocks held
    ("n_hashed", I64),  # request -> how many of its blocks are registered in the prefix cache
    ("host_blocks", I64),  # request -> blocks held in host swap space
    ("found", I64),  # scratch: block ids of a cached prefix
    ("free", I64),  # KV_BLOCKS, KV_SLOTS, KV_SWAP: free GPU blocks, free block-table rows, free swap blocks
    # Lower KV tiers (kv_tiers.py): parameters, content table, rings, ring counters, figures, lookup scratch.
    ("tier_par", F64), ("tier_table", I64_2D), ("tier_ring", I64_2D), ("tier_n", I64), ("tier_stats", F64),
    ("tier_found", I64),
])
QUEUES = RecordType([
    ("running", I64),  # request ids in admission order
    ("wait_keys", F64), ("wait_ids", I64),  # one binary heap per tenant: tenant t's at [q_off[t], q_off[t + 1])
    ("q_off", I64), ("q_size", I64),
    ("vtc", F64),  # weighted service received per tenant (fair sharing); all zero otherwise
    ("swap_keys", F64), ("swap_ids", I64),  # swapped-out requests, a heap on their policy key
    ("followup_keys", F64), ("followup_ids", I64),  # session turns waiting out their think time, on arrival time
    ("size", I64),  # N_RUNNING, N_WAITING, N_SWAPPED, N_FOLLOWUPS, N_WAITING_TOKENS
])
BATCH = RecordType([
    ("req", I64),  # the step's scheduled requests
    ("tokens", I64),  # tokens each computes this step
    ("admitted", BOOL),  # admitted from the waiting queue this step (prefilling, even if 1 token is left)
    ("n", I64),  # B_* slots
    ("swap_s", F64),  # [0]: seconds of swap traffic this step; [1]: of lower-tier KV loads (kv_tiers.py)
])
LOGS = RecordType([
    ("steps", F64_2D),  # [logged step, S_*]; every n[L_LOG_STRIDE]-th step
    ("service", F64_2D),  # [logged step, tenant] weighted service so far, beside the step log
    ("events", I64_2D),  # [event, E_*]; one row unless cfg.record_events
    ("acc", F64),  # A_*
    ("itl_fine", I64), ("itl_coarse", I64),
    ("frame_at", F64),  # when to snapshot the KV pool; empty: every frame_clock[FRAME_DT] s, spacing doubled as needed
    ("frame_clock", F64),  # FRAME_NEXT_S, FRAME_DT: the next evenly spaced snapshot and the spacing
    ("frames", I32_2D),  # [frame, block] -> a request holding it, or -1
    ("frame_state", I8_2D),  # [frame, block] -> BLOCK_*
    ("frame_s", F64),
    ("frame_tiers", I64_2D),  # [frame, lower tier] blocks it held (kv_tiers.py; written only with offload on)
    ("n", I64),  # L_* slots
])
ENGINE = RecordType([
    ("cfg", CONFIG), ("req", REQUEST_TABLE), ("st", REQUEST_STATE), ("kv", KV_CACHE), ("q", QUEUES),
    ("batch", BATCH), ("logs", LOGS),
    ("now", types.float64),  # simulated time, s
    ("step_est", types.float64),  # a recent prefill step's time (slack estimates), s
    ("keyed_step_est", types.float64),  # the step_est the waiting queue's slack keys were computed with
    ("step_start", types.float64),  # when the step being accounted for began
    ("loop", I64),  # STEP, DONE, NEXT_OPEN, BUDGET_NOW, LPM_KEYED, STATIC_PAD, STALLED
])

if numba_config.DISABLE_JIT:
    def new_record(record_type):
        """An empty record whose fields the caller sets (plain Python: a namespace)."""
        return pytypes.SimpleNamespace()
else:
    new_record = structref.new
