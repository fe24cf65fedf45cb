"""Multi-LoRA serving in the engine (issue #23): which adapters a step may batch, which are resident on the GPU,
what loading one costs and what the batched LoRA kernels add to the step.

vLLM's rule: a step's batch holds requests of at most `max_loras` distinct adapters; a waiting request whose
adapter would be one too many is skipped (not blocking the ones behind it). Here the running requests' adapters
count (not only the scheduled ones), so the rule holds for every step even when the token budget leaves a
running request out of one. The GPU holds `max_loras` adapter slots (LRU) and the host `max_cpu_loras` (LRU): a
step whose batch needs an adapter not in a GPU slot loads it first, from host memory (over the host link) or
from disk, and the step waits for it (vLLM loads before the forward pass).

Off (cfg.lora empty) nothing here runs. Parameters: cfg.lora[LP_*] (sim_core/lora.py builds them). State:
cfg.lora_state, float64, per adapter a (A adapters): [a] GPU slot's last use (step + 1; 0: not resident),
[A + a] host copy's last use, [2A + a] step + 1 when its requests run (or are admitted) this step, [3A + a] its
tokens this step; then LS_* counters. req.lora_skipped holds the requests a pass skipped until they go back.
"""

from __future__ import annotations

from ..policies.ordering import waiting_key
from .jit import kernel
from .lora_slots import (
    LP_ADAPTERS,
    LP_AGING_S,
    LP_BYTES_PER_ADAPTER,
    LP_DISK_LOAD_S,
    LP_FLOPS_PER_TOKEN,
    LP_HOST_BW,
    LP_LAUNCH_S,
    LP_LINEAR_RATE,
    LP_MAX_CPU_LORAS,
    LP_MAX_LORAS,
    LP_STREAM_BW,
    LS_GROUPS,
    LS_KERNEL_S,
    LS_LOAD_S,
    LS_LOADS_DISK,
    LS_LOADS_HOST,
    LS_MAX_GROUPS,
    LS_NEXT,
    LS_SKIPPED,
    LS_STEPS,
)
from .queues import to_compute, wait_pop, wait_push
from .state import B_SCHEDULED, N_RUNNING, STEP

# Admission passes: vLLM's limit alone, or the grouped order's first pass (kernel choose_next).
PASS_LIMIT, PASS_GROUPED = 1, 2


@kernel
def counter(cfg, k):
    """Index of counter LS_k in cfg.lora_state."""
    return 4 * int(cfg.lora[LP_ADAPTERS]) + k


@kernel
def mark_running(eng):
    """Marks the running requests' adapters as this step's; returns how many distinct ones."""
    cfg, adapter, running = eng.cfg, eng.req.adapter, eng.q.running
    s, a_n, mark = cfg.lora_state, int(cfg.lora[LP_ADAPTERS]), float(eng.loop[STEP] + 1)
    count = 0
    for k in range(eng.q.size[N_RUNNING]):
        a = adapter[running[k]]
        if a >= 0 and s[2 * a_n + a] != mark:
            s[2 * a_n + a] = mark
            count += 1
    return count


@kernel
def skips(eng, r, in_step, mode):
    """Whether this pass leaves waiting request r for later: its adapter would be one too many for the step, or
    (grouped pass) its adapter is not the one chosen to join the step next and r has not waited past the aging
    limit."""
    cfg = eng.cfg
    a = eng.req.adapter[r]
    if a < 0:
        return False
    a_n = int(cfg.lora[LP_ADAPTERS])
    if cfg.lora_state[2 * a_n + a] == float(eng.loop[STEP] + 1):
        return False  # already in this step's set
    if in_step >= int(cfg.lora[LP_MAX_LORAS]):
        return True
    if mode == PASS_GROUPED:
        return a != int(cfg.lora_state[4 * a_n + LS_NEXT]) and eng.now - eng.req.arrival_s[r] < cfg.lora[LP_AGING_S]
    return False


@kernel
def choose_next(eng):
    """The grouped order's pick of the next adapter to join the step: the one not in it yet with the most waiting
    requests (the larger the group, the fuller the batch the max_loras limit allows), one in a GPU slot or in host
    memory (no disk load) winning a tie; -1 if none waits."""
    cfg, q, adapter = eng.cfg, eng.q, eng.req.adapter
    s, a_n, mark = cfg.lora_state, int(cfg.lora[LP_ADAPTERS]), float(eng.loop[STEP] + 1)
    for a in range(a_n):
        s[3 * a_n + a] = 0.0
    for t in range(q.q_size.shape[0]):
        for j in range(q.q_off[t], q.q_off[t] + q.q_size[t]):
            a = adapter[q.wait_ids[j]]
            if a >= 0:
                s[3 * a_n + a] += 1.0
    for j in range(int(s[4 * a_n + LS_SKIPPED])):
        a = adapter[eng.req.lora_skipped[j]]
        if a >= 0:
            s[3 * a_n + a] += 1.0
    best, best_score = -1, 0.0
    for a in range(a_n):
        score = s[3 * a_n + a] + (0.5 if s[a] > 0.0 or s[a_n + a] > 0.0 else 0.0)
        if s[2 * a_n + a] != mark and s[3 * a_n + a] > 0.0 and score > best_score:
            best, best_score = a, score
    s[4 * a_n + LS_NEXT] = float(best)


@kernel
def note_admitted(eng, r, in_step, mode):
    """r was admitted: its adapter joins this step's set (the grouped pass then picks the next one to join);
    returns the set's new size."""
    a = eng.req.adapter[r]
    if a < 0:
        return in_step
    s, a_n, mark = eng.cfg.lora_state, int(eng.cfg.lora[LP_ADAPTERS]), float(eng.loop[STEP] + 1)
    if s[2 * a_n + a] == mark:
        return in_step
    s[2 * a_n + a] = mark
    if mode == PASS_GROUPED:
        choose_next(eng)
    return in_step + 1


@kernel
def skip(eng, r, t):
    """Takes r off tenant t's heap into the skipped list (it goes back with put_back_skipped)."""
    s = eng.cfg.lora_state
    k = counter(eng.cfg, LS_SKIPPED)
    wait_pop(eng.q, t, to_compute(eng, r))
    eng.req.lora_skipped[int(s[k])] = r
    s[k] += 1.0


@kernel
def put_back_skipped(eng):
    """The skipped requests rejoin their heaps under their keys."""
    s = eng.cfg.lora_state
    k = counter(eng.cfg, LS_SKIPPED)
    for j in range(int(s[k])):
        r = eng.req.lora_skipped[j]
        wait_push(eng.q, eng.req.tenant[r], waiting_key(eng, r), r, to_compute(eng, r))
    s[k] = 0.0


@kernel
def step_seconds(eng):
    """What adapters add to the scheduled step: loading those not in a GPU slot, then the LoRA kernels (a
    launch floor per targeted GEMM, and per adapter group the roofline of reading its weights and of its
    tokens' FLOPs)."""
    cfg, adapter, batch = eng.cfg, eng.req.adapter, eng.batch
    p, s = cfg.lora, cfg.lora_state
    a_n, step = int(p[LP_ADAPTERS]), float(eng.loop[STEP] + 1)
    for a in range(a_n):
        s[3 * a_n + a] = 0.0
    groups = 0
    for k in range(batch.n[B_SCHEDULED]):
        a = adapter[batch.req[k]]
        if a < 0:
            continue
        if s[3 * a_n + a] == 0.0:
            groups += 1
        s[3 * a_n + a] += float(batch.tokens[k])
    if groups == 0:
        return 0.0
    load_s, kernel_s = 0.0, p[LP_LAUNCH_S]
    for a in range(a_n):
        tokens = s[3 * a_n + a]
        if tokens == 0.0:
            continue
        if s[a] == 0.0:
            load_s += _load(p, s, a_n, a, step)
        s[a], s[a_n + a] = step, step  # the host cache holds the GPU's adapters too (vLLM's CPU LRU cache)
        kernel_s += max(p[LP_BYTES_PER_ADAPTER] / p[LP_STREAM_BW], tokens * p[LP_FLOPS_PER_TOKEN] / p[LP_LINEAR_RATE])
    s[counter(cfg, LS_LOAD_S)] += load_s
    s[counter(cfg, LS_KERNEL_S)] += kernel_s
    s[counter(cfg, LS_STEPS)] += 1.0
    s[counter(cfg, LS_GROUPS)] += float(groups)
    s[counter(cfg, LS_MAX_GROUPS)] = max(s[counter(cfg, LS_MAX_GROUPS)], float(groups))
    return load_s + kernel_s


@kernel
def _load(p, s, a_n, a, step):
    """Loads adapter a into a GPU slot (evicting the least recently used one not in this step's batch) from the
    host cache, or from disk into the host cache too; returns the seconds it takes."""
    _evict_lru(s, 0, a_n, int(p[LP_MAX_LORAS]), 3 * a_n)
    if s[a_n + a] > 0.0:
        seconds = p[LP_BYTES_PER_ADAPTER] / p[LP_HOST_BW]
        s[4 * a_n + LS_LOADS_HOST] += 1.0
    else:
        _evict_lru(s, a_n, a_n, int(p[LP_MAX_CPU_LORAS]), -1)
        seconds = p[LP_DISK_LOAD_S] + p[LP_BYTES_PER_ADAPTER] / p[LP_HOST_BW]
        s[4 * a_n + LS_LOADS_DISK] += 1.0
    s[a_n + a] = step
    return seconds


@kernel
def _evict_lru(s, base, a_n, capacity, busy_base):
    """Frees a slot in the cache at s[base:base + a_n] if it holds `capacity` adapters: the least recently used
    one, skipping those with tokens this step (s[busy_base + a] > 0; busy_base < 0: none is busy)."""
    held, victim = 0, -1
    for a in range(a_n):
        if s[base + a] > 0.0:
            held += 1
            if (busy_base < 0 or s[busy_base + a] == 0.0) and (victim < 0 or s[base + a] < s[base + victim]):
                victim = a
    if held >= capacity and victim >= 0:
        s[base + victim] = 0.0
