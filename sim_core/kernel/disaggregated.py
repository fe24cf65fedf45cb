"""Disaggregated serving, Python's side: a prefill pool hands each prompt's KV over a link to a decode pool.

The router sends requests to the prefill pool (policies/routing.py); a prefill engine computes the prompt and
samples the first token, and the prompt's KV queues on that engine's link for the decode engine with the least
work, which pulls it when it has the blocks (back-pressure: handover.py) and decodes the rest. Both pools run in
the fleet loop (fleet.py); this builds their tables and the link, and merges what they did.
"""

from __future__ import annotations

import numpy as np

from ..links import KvLink
from ..metrics import distribution_ms
from ..policies.routing import RouterSettings
from .cluster import NO_FRAMES, PER_REQUEST, pooled_logs, routed_table
from .fleet import run_fleet
from .handover import pool_link
from .state import FrameSpec, Outcome


def simulate_pools(cfgs, table, scalings: tuple, lockstep: tuple[int, int], router: RouterSettings,
                   kv_bytes_per_token: float, link: KvLink, frames: FrameSpec = NO_FRAMES):
    """Run a disaggregated deployment (`cfgs`: the prefill pool's Config, the decode pool's; `scalings`: each
    pool's policies.autoscaling.Scaling, fleet.static_pools for pools of fixed sizes; `lockstep`: each pool's
    lock-step group, its attention-DP ranks); returns (one Outcome for the whole of it, each engine's Outcome
    (prefill pool first), the KV-transfer figures, the engine that finished each request, the PoolTrace, the
    FleetRun: each pool's engines, lives and leaks)."""
    slots = tuple(scaling.max_replicas * size for scaling, size in zip(scalings, lockstep, strict=True))
    n = len(table.arrival_s)
    decode_table = routed_table(table)
    # A prefill engine computes the prompt and samples the first token; listing each request as its own
    # follow-up (think time 0) hands it back to the fleet loop the moment it is done.
    prefill_table = decode_table._replace(arrival_s=decode_table.arrival_s.copy(),
                                          output_tokens=np.ones(n, np.int64), child=np.arange(n),
                                          think_s=np.zeros(n))
    # Random routers draw over the most prefill engines there can be; choose_serving takes each draw modulo those
    # serving.
    routing = router.routing(table, slots[0], independent=False)
    joined = pool_link(table, kv_bytes_per_token, link.bytes_per_s, link.latency_s, slots, cfgs[0].num_blocks)
    trace = joined.trace
    ran = run_fleet(cfgs, (prefill_table, decode_table), frames, routing, scalings, lockstep, joined)
    outs = ran.outs[0] + ran.outs[1]
    # One per-request state followed each request from its prefill engine to its decode engine: it holds the
    # whole story (first token from the prefill side, the rest from the decode side, preemptions on both).
    merged = {f: getattr(outs[0], f) for f in PER_REQUEST}
    merged["arrival_s"] = trace.arrived
    decoded = trace.to_decode >= 0
    # The wait for a busy link, or for the decode engine to have blocks, counts in the transfer time: prefill end
    # -> KV delivered; kv_wait_ms is that wait alone (prefill end -> transfer start).
    transfer = {
        "kv_transfer_ms": distribution_ms(trace.delivered[decoded] - trace.prefill_end[decoded]),
        "kv_wait_ms": distribution_ms(trace.transfer_start[decoded] - trace.prefill_end[decoded]),
        "kv_transfer_bytes": float(table.prompt_tokens[decoded].sum() * kv_bytes_per_token),
        "kv_transfers": int(decoded.sum()),
        "kv_link_busy_s": float((trace.delivered[decoded] - link.latency_s - trace.transfer_start[decoded]).sum()),
    }
    finished_on = np.where(decoded, len(ran.outs[0]) + trace.to_decode, trace.to_prefill)
    return Outcome(**merged, **pooled_logs(outs)), outs, transfer, finished_on, trace, ran
