"""Each request's floors in the relaxed model of sim_core/bounds.py, compiled: the least time its prompt's first token
and each of its decode steps can take on the deployment's engines, from the step-time model itself
(kernel/cost_model.py `step_components`). A module of its own so that bounds.py stays within the size limit."""

from __future__ import annotations

import numpy as np

from .kernel.cost_constants import (
    ALLREDUCE_BUS_BW,
    ALLREDUCE_BYTES_PER_TOKEN,
    ALLREDUCE_LATENCY_S,
    CPU_OVERLAP,
    CUSTOM_ALLREDUCE_LATENCY_S,
    CUSTOM_AR_MAX_BYTES,
    LAYERS,
    STEP_OVERHEAD_PER_SEQ,
    STEP_OVERHEAD_S,
    STEP_TIME_SCALE,
    TP,
)
from .kernel.cost_model import step_components
from .kernel.jit import entry, inline


@inline
def _allreduce_floor_one(p, tokens):
    """bounds.py `_allreduce_floor` for one count of rows, in compiled code."""
    if p[TP] <= 1.0:
        return 0.0
    latency = p[ALLREDUCE_LATENCY_S]
    if p[CUSTOM_AR_MAX_BYTES] > 0:
        latency = min(latency, CUSTOM_ALLREDUCE_LATENCY_S)
    per_row = 2.0 * (p[TP] - 1.0) / p[TP] * p[ALLREDUCE_BYTES_PER_TOKEN] / p[ALLREDUCE_BUS_BW]
    return 2.0 * p[LAYERS] * (latency + per_row * tokens)


@entry
def request_floors_s(p_prefill, p_decode, uncached, cached):
    """Per request, (prefill floor, decode floor) in seconds.

    Prefill: a lower bound on the time from its arrival to its first token, its `uncached` prompt tokens (after
    `cached` reusable ones) in one step alone on `p_prefill`'s engine. Chunks cost at least this much together:
    the roofline is subadditive, every chunk pays the launch floors, the weight read and CPU time again, and the
    causal pairs sum to the same; only the all-reduce may be cheaper in chunks (one-kernel all-reduce under its
    size limit), so it is taken at its floor. Decode: a lower bound on each step that decodes one of its tokens
    on `p_decode`'s engine, it alone in the batch at the shortest context it decodes at (its prompt and first
    token); a longer context or a fuller batch only adds. The engine costs such a token as a decode row, or as a
    one-token prefill row when it admits the request with only that token to compute (a decode engine taking a
    handed-over prompt's KV; a recomputed request whose prefix the cache kept), a little cheaper on some GPUs
    (no decode-attention floor): the floor is the cheaper of the two."""
    n = uncached.shape[0]
    prefill = np.empty(n, np.float64)
    decode = np.empty(n, np.float64)
    cpu = p_prefill[STEP_OVERHEAD_S] + p_prefill[STEP_OVERHEAD_PER_SEQ]
    for i in range(n):
        u, c = uncached[i], cached[i]
        decode_s = np.inf
        # The three steps go through one call of step_components: numba inlines a copy of the cost model at each
        # call site, and three sites cost ~2.4 CPU-s more of a cold compile than one (bench/bench_cold_compile.py).
        for k in range(3):
            # (cost params, prefill tokens, prefill sequences, causal pairs, context re-read, decodes, their context)
            if k == 0:  # the uncached prompt alone in one step
                p, pf_tokens, pf_seqs, pairs, reread, dec_seqs, dec_ctx = p_prefill, u, 1, u * c + u * (u + 1) // 2, c, 0, 0
            elif k == 1:  # its first decode as a decode row
                p, pf_tokens, pf_seqs, pairs, reread, dec_seqs, dec_ctx = p_decode, 0, 0, 0, 0, 1, u + c + 1
            else:  # ... or as a one-token prefill row
                p, pf_tokens, pf_seqs, pairs, reread, dec_seqs, dec_ctx = p_decode, 1, 1, u + c + 1, u + c, 0, 0
            linear, attention, elementwise, lm_head, communication, overhead, _, _ = step_components(
                p, pf_tokens, pf_seqs, pairs, reread, dec_seqs, dec_ctx, 1)
            if k == 0:
                gpu = linear + attention + elementwise + lm_head + _allreduce_floor_one(p_prefill, u)
                prefill[i] = (max(gpu, cpu) if p_prefill[CPU_OVERLAP] > 0 else gpu + cpu) * p_prefill[STEP_TIME_SCALE]
            else:
                decode_s = min(decode_s, linear + attention + elementwise + lm_head + communication + overhead)
        decode[i] = decode_s * p_decode[STEP_TIME_SCALE]
    return prefill, decode
