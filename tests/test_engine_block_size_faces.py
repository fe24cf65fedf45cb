"""With hybrid_blocks, the engine pages a hybrid model's KV in vLLM's larger blocks (sim_core/hybrid_blocks.py); what
the faces show and what the memory estimate counts must be that block size, not the scenario's block_size field
(16): the run view's setup, the KV player's swapped blocks, the memory estimate; and the form labels the two fields issue #39 added (hybrid_blocks, replay)."""

from __future__ import annotations

import numpy as np

from app.web import service
from app.web.form import build_form
from app.web.inputs import PAGE_DEFAULTS, parse_request
from app.web.runview import build_view, pick_frames
from sim_core import Scenario, resolve, run
from sim_core.run_cost import FRAME_BYTES_PER_BLOCK, I64, POOL_BYTES_PER_BLOCK, run_cost
from sim_core.runner import make_requests

HYBRID = Scenario(model="qwen3-next-80b-a3b", hardware="h200", tp=2, hybrid_blocks=True, workload="chat",
                  num_requests=20, seed=1)


def test_the_run_view_shows_the_engines_block_size():
    res = run(HYBRID)
    assert res.resolved.setup.block_size == 544 != HYBRID.block_size
    view = build_view(res, *pick_frames(res))
    assert view.setup["block_size"] == 544


def test_the_kv_players_swapped_blocks_are_the_engines_blocks():
    query = {"schedulers": "fcfs", "hardware": "h200", "model": "qwen3-next-80b-a3b", "tp": "2", "hybrid_blocks": "true",
             "workload": "rag", "duration": "20", "preemption": "swap", "kv_blocks": "40", "swap_space_gb": "4",
             "seed": "1"}
    req = parse_request(query, defaults=PAGE_DEFAULTS)
    view = service.compare(req)[0]
    swap = view.kv["swap"]
    swapped = [blocks for row in swap["frames"] for blocks in row[1::2]]
    assert view.setup["block_size"] == 544 and swapped  # the run swapped
    reqs = make_requests(req.scenario, resolve(req.scenario))
    longest = int((reqs.prompt_tokens + reqs.output_tokens).max())
    assert max(swapped) <= -(-longest // 544)  # counted in 544-token blocks (in 16-token ones: up to 34 times more)


def test_the_memory_estimate_counts_block_tables_in_the_engines_blocks():
    resolved = resolve(HYBRID)
    reqs = make_requests(HYBRID, resolved)
    kv = next(t for t in run_cost(HYBRID, resolved, reqs, kv_frames=0).terms if t.field == "kv_blocks")
    blocks = resolved.deployment[0].num_blocks
    longest = int((reqs.prompt_tokens + reqs.output_tokens).max())
    table = 2 * 2 ** int(np.ceil(np.log2(max(2, 2 * blocks)))) * I64 if resolved.prefix_cache else 0
    fixed = blocks * POOL_BYTES_PER_BLOCK + table + 0 * FRAME_BYTES_PER_BLOCK
    width = int(round((kv.bytes - fixed) / (resolved.max_seqs * I64)))
    assert width == -(-longest // 544)  # in 544-token blocks, not 16-token ones (34 times as many entries)


def test_the_form_labels_the_replay_and_hybrid_block_fields():
    form = build_form({}, {}, page_defaults=PAGE_DEFAULTS)
    fields = {f.name: f for _, group in form.groups for f in group} | {f.name: f for f in form.advanced}
    assert fields["hybrid_blocks"].label == "Hybrid-model blocks (vLLM's rule)"
    assert fields["replay"].label == "Trace replay"
    assert fields["replay"].help and fields["hybrid_blocks"].help  # the scenario's descriptions, on hover
