"""The memory-fit readout (issue #41, item 7: "a memory-fit readout on the results page (weights, KV, activations per
GPU; how many tokens and concurrent requests of this workload fit)"): sim_core.memory_fit reads the budget the
engine runs with (its KV blocks are the pool's the engine is given; its parts add up to the usable memory), for
one engine, tensor parallelism, MoE with expert parallelism and P/D pools; the results page shows it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sim_core import Scenario, resolve
from sim_core.catalog import GIB
from sim_core.memory_fit import memory_fit
from sim_core.runner import DEFAULT_MAX_STEP_RECORDS, class_slos, engine_config, make_requests

PARTS = ("weight_bytes", "runtime_reserve_bytes", "activation_bytes", "kv_reserved_bytes", "kv_pool_bytes",
         "free_bytes")
CASES = {
    "one engine": dict(hardware="h100", model="llama-3-8b", workload="chat", num_requests=50),
    "tensor parallel": dict(hardware="h100", model="llama-3-70b", tp=4, workload="rag", num_requests=50),
    "MoE with EP": dict(hardware="h200", model="deepseek-r1", quantization="fp8", ep=8, tp=2, attention_dp=True,
                        workload="chat", num_requests=50),
    "P/D pools": dict(hardware="h100", model="llama-3-8b", prefill_replicas=1, decode_replicas=2, workload="chat",
                      num_requests=50),
}


@pytest.mark.parametrize("case", CASES)
def test_the_readout_is_the_engines_own_budget(case):
    s = Scenario(**CASES[case])
    r = resolve(s)
    requests = make_requests(s, r)
    fits = memory_fit(r, requests)
    assert len(fits) == len(r.deployment)
    for k, (fit, pool) in enumerate(zip(fits, r.deployment, strict=True)):
        config = engine_config(s, r.on_pool(k), class_slos(s, r, requests), record_events=False,
                               max_step_records=DEFAULT_MAX_STEP_RECORDS, debug_checks=False)  # the engine's own
        assert fit.kv_blocks == config.num_blocks == pool.num_blocks > 0
        assert fit.block_size == config.block_size and fit.max_seqs == config.max_num_seqs
        assert fit.kv_tokens == config.num_blocks * config.block_size
        setup = pool.setup
        assert fit.weight_bytes == setup.weight_bytes_per_gpu and fit.activation_bytes == setup.activation_bytes_per_gpu
        assert fit.kv_pool_bytes == pool.num_blocks * setup.kv_bytes_per_block
        assert sum(getattr(fit, p) for p in PARTS) == pytest.approx(fit.usable_bytes, rel=1e-12)
        assert 0 <= fit.free_bytes < setup.kv_bytes_per_block  # the pool takes every whole block left
        assert fit.usable_bytes == pytest.approx(setup.gpu.mem_gib * GIB * s.gpu_memory_utilization)
        # What of the workload fits: its mean context at a request's end (prompt + output; a prefill pool keeps
        # a request until its first token), in whole blocks.
        tokens = requests.prompt_tokens + (1 if pool.role == "prefill" else requests.output_tokens)
        blocks = np.ceil(tokens / fit.block_size) * fit.block_size
        assert fit.tokens_per_request == pytest.approx(blocks.mean())
        assert fit.concurrent_requests == int(fit.kv_tokens // blocks.mean())


def test_weights_per_gpu_are_the_checkpoints_bytes_split_over_the_gpus():
    """A physical check: Llama-3-8B's 8.03 B parameters in bf16 are ~16.1 GB (15.0 GiB); TP 2 halves them."""
    one = memory_fit(resolve(Scenario(hardware="h100", model="llama-3-8b")), _no_requests())[0]
    two = memory_fit(resolve(Scenario(hardware="h100", model="llama-3-8b", tp=2)), _no_requests())[0]
    assert one.weight_bytes == pytest.approx(8.03e9 * 2, rel=0.01)
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2, rel=0.01)
    assert two.kv_tokens > 2 * one.kv_tokens  # the weights' freed half goes to the KV cache
    assert one.concurrent_requests == 0 and one.tokens_per_request == 0.0


def _no_requests():
    class Empty:
        prompt_tokens = np.zeros(0, np.int64)
        output_tokens = np.zeros(0, np.int64)
    return Empty()


def test_the_results_page_shows_each_schedulers_memory_fit(client):
    query = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=20&seed=3"
    html = client.get("/?" + query).text
    card = re.search(r'<section class="card" id="card-memory-fit">.*?</section>', html, re.S).group(0)
    for name in ("fcfs", "chunked"):
        s = Scenario(scheduler=name, hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=20, seed=3)
        r = resolve(s)
        fit = memory_fit(r, make_requests(s, r))[0]
        row = re.search(rf'<tr data-scheduler="{name}".*?</tr>', card, re.S).group(0)
        assert f'data-kv-tokens="{fit.kv_tokens}"' in row and f'data-requests="{fit.concurrent_requests}"' in row
        shown = dict(re.findall(r'data-part="(\w+)">([\d.]+)<', row))
        assert float(shown["weight_bytes"]) == pytest.approx(fit.weight_bytes / GIB, abs=0.005)
        assert float(shown["kv_pool_bytes"]) == pytest.approx(fit.kv_pool_bytes / GIB, abs=0.005)
        assert float(shown["activation_bytes"]) == pytest.approx(fit.activation_bytes / GIB, abs=0.005)
    assert 'class="memory-bar" role="img"' in card
