"""The KV view's states beyond who holds a block (app/web/kvstates.py): shared prefix blocks, cached blocks free to
evict, and what is swapped out to host memory, per frame of the dashboard's KV player."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np

from app.web import service
from app.web.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict
from app.web.kvstates import CELL_CACHED, CELL_PLAIN, CELL_SHARED, cell_states
from sim_core import Scenario
from sim_core.kernel import state as E
from sim_core.runner import run

PREFIX = "schedulers=fcfs,cache_aware&hardware=rtx3050&max_model_len=8192&workload=agent&prefix_cache=true&duration=20"
SWAP = ("schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20&preemption=swap&kv_blocks=700"
        "&swap_space_gb=0.5")


def views(query: str):
    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS, default_schedulers=PAGE_SCHEDULERS)
    return service.compare(req)


def per_cell(runs: list[int]) -> np.ndarray:
    return np.repeat(runs[0::2], runs[1::2])


def test_cell_states_by_majority():
    s = np.array([[E.BLOCK_SHARED, E.BLOCK_USED, E.BLOCK_USED, E.BLOCK_USED,  # 1 of 4 held shared: plain
                   E.BLOCK_SHARED, E.BLOCK_SHARED, E.BLOCK_USED, E.BLOCK_FREE,  # 2 of 3 held shared
                   E.BLOCK_CACHED, E.BLOCK_CACHED, E.BLOCK_FREE, E.BLOCK_FREE,  # nobody holds it, half cached
                   E.BLOCK_CACHED]], np.int8)  # a short last cell, all cached
    assert cell_states(s, 4).tolist() == [[CELL_PLAIN, CELL_SHARED, CELL_CACHED, CELL_CACHED]]


def test_a_prefix_cache_run_shows_shared_and_cached_cells():
    for v in views(PREFIX):
        kv = v.kv
        assert len(kv["states"]) == len(kv["runs"]) == len(kv["frame_s"]) > 30  # a session workload's frames too
        seen = set()
        for runs, states in zip(kv["runs"], kv["states"], strict=True):
            owners = per_cell(runs) // (kv["k"] + 1) - 1
            st = per_cell(states)
            assert len(st) == len(owners) == kv["cells"]
            assert (owners[st == CELL_SHARED] >= 0).all() and (owners[st == CELL_CACHED] < 0).all()
            seen |= set(st.tolist())
        assert {CELL_SHARED, CELL_CACHED} <= seen, v.scheduler


def test_a_swap_run_shows_what_is_swapped_out_and_nowhere_else():
    for v in views(SWAP):
        swap = v.kv["swap"]
        assert swap is not None and len(swap["frames"]) == len(v.kv["frame_s"])
        busy = [f for f, row in enumerate(swap["frames"]) if row]
        assert busy, v.scheduler
        for f in busy:
            row = swap["frames"][f]
            out, blocks = row[0::2], row[1::2]
            assert 0 < sum(blocks) <= swap["capacity"]
            # A request swapped out holds no GPU block (k = 1 here: a cell is a block).
            assert v.kv["k"] == 1
            owners = set((per_cell(v.kv["runs"][f]) // 2 - 1).tolist())
            assert not set(out) & owners
    assert all(v.kv["swap"] is None for v in views(PREFIX))  # no swapping there


def test_a_session_workload_gets_frames_over_the_whole_run():
    """Follow-up turns arrive when their parents end (inf until then): the frames still spread over the run."""
    res = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="agent", duration=20.0, seed=1), kv_frames=40)
    assert len(res.kv_frame_s) >= 40
    assert np.isfinite(res.kv_frame_s).all() and np.diff(res.kv_frame_s).max() < res.end_s / 10


def test_thinned_frames_come_back_in_time_order_ending_at_the_end():
    """A run far longer than its frames' first spacing thins them (every other one kept): only the frames taken
    come back, in time order, the last at the run's end, on one engine and on each of a cluster's."""
    scenario = dict(hardware="rtx3050", max_model_len=8192, workload="chat", rate=3, duration=30.0, seed=1)
    one = run(Scenario(**scenario), kv_frames=3)
    two = run(Scenario(replicas=2, **scenario), kv_frames=3)
    for times, frames in [(one.kv_frame_s, one.kv_frames)] + [(log.kv_frame_s, log.kv_frames)
                                                              for log in two.engine_logs]:
        assert len(times) == len(frames) <= 6 and (np.diff(times) > 0).all()
    assert one.kv_frame_s[-1] == one.end_s
