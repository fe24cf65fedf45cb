"""One web run's host memory and CPU against the web's limits, as sim_core.run_cost estimates them (issue #37).

inputs.work_problems asks this for every run the web is about to simulate (a page, the API, a sweep's largest
point, a plan), and budget.request_work_problems for a whole request's CPU; nothing is allocated before the
estimate says it fits, so a request that would exhaust the server is a 422 naming the field and the most it may be.
"""

from __future__ import annotations

from sim_core import resolve
from sim_core.run_cost import RunCost, over_limit, run_cost

from .runview import FRAME_BUDGET, recorded_frames

# One simulation's host memory, estimated: the server runs MAX_SIMULATIONS (2) at once beside its caches (a few
# hundred MB), and the 4-core / 8 GB machines it is sized for must keep both runs in memory.
MAX_RUN_BYTES = 2_000_000_000
# One request's CPU seconds, estimated over every scheduler and seed: half of REQUEST_TIME_LIMIT_S (120 s), since
# the estimate is within 2x of what runs take (bench/bench_run_cost.py) and the box's cores are shared.
MAX_REQUEST_CPU_S = 60.0
# What a run that still runs out of memory past the estimate answers (service: a 503, a sweep's 422).
OUT_OF_MEMORY = (f"the server ran out of memory for this simulation (its limit max_run_bytes is "
                 f"{MAX_RUN_BYTES / 1e9:g} GB per run, and other runs share the machine); retry later, or ask for less")


def engine_blocks(resolved, scenario=None) -> list[int]:
    """Each engine's KV pool in blocks (one engine: its pool); an autoscaled fleet's every slot (max_replicas),
    each of which records its own KV frames once provisioned."""
    if scenario is not None and scenario.autoscaler is not None:
        return [resolved.deployment[0].num_blocks] * scenario.scaling_bounds[1]
    return [pool.num_blocks for pool in resolved.deployment for _ in range(pool.engines)]


def recorded_frames_for(resolved, scenario=None) -> int:
    """How many KV frames each engine records (runview.recorded_frames): a cluster's engines share what one
    engine may record, by their blocks together, so that frames x blocks stay within runview.FRAME_BUDGET. Past
    the fewest frames a single engine gets (8) a very large cluster records fewer, none where even one pair of
    frames per engine would not fit. `scenario`: counts an autoscaled fleet's slots (without it, 64 slots each
    recorded one engine's share: 5 GB of frames for a predictive fleet of 64, issue #37's N5)."""
    blocks = engine_blocks(resolved, scenario)
    if len(blocks) == 1:
        return recorded_frames(blocks[0])
    return min(recorded_frames(sum(blocks)), FRAME_BUDGET // (2 * sum(blocks)))


def web_run_cost(s, reqs, resolved=None) -> RunCost:
    """What one web run of `s` over `reqs` costs: with its event log and the KV frames the web records."""
    r = resolved or resolve(s)
    return run_cost(s, r, reqs, record_events=True, kv_frames=recorded_frames_for(r, s))


def memory_problem(s, reqs, resolved=None) -> tuple[str, str] | None:
    """(field, message) when one run of `s` needs more host memory than MAX_RUN_BYTES."""
    problem = over_limit(web_run_cost(s, reqs, resolved), MAX_RUN_BYTES)
    return None if problem is None else (problem[0], f"{problem[1]} (the web's limit max_run_bytes; the CLI's is "
                                                     "the machine's available memory)")
