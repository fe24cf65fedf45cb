"""The seeds' acceptance, checked on realistic runs.

Seed 004, experiment 1 (`sched-sim compare --schedulers fcfs,chunked --workload rag --hardware rtx3050
--duration 10`): FCFS prefills 3-4k-token retrieval prompts atomically, so running streams stall for hundreds of
ms (the seed's "TPOT p99 > 400 ms" is the inter-token gap: a per-request mean TPOT averages the stall away, so
ITL p99 is what we check), while chunked prefill keeps every step near a decode step (ITL p99 < 60 ms).
Seed 000: SPF lowers mean TTFT against FCFS once a queue forms; preemption lets a tight KV pool make progress
where reserving whole sequences (preemption="none") cannot; continuous batching beats static batching 2-4x.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import seed_scenario

from sim_core import Scenario, run
from sim_core.kernel import state as E
from sim_core.runner import resolve, simulate_requests
from sim_core.workload import Requests

ADMIT = {"admission": "admit"} if "admission" in Scenario.model_fields else {}


# -------------------------------------------------------------------------------------------------------------
# Seed 004: head-of-line blocking of decodes by atomic prefills
# -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rag_fcfs_stalls_streams_and_chunked_prefill_keeps_itl_bounded(rag_results, seed):
    fcfs, chunked = rag_results[seed]["fcfs"].metrics, rag_results[seed]["chunked"].metrics
    assert fcfs["completed"] == fcfs["num_requests"] and chunked["completed"] == chunked["num_requests"]
    assert fcfs["itl_ms"]["p99"] > 400
    # Chunked's ITL is bounded by a full 512-token budget step: 62 ms of prefill on this GPU (GEMMs at 60% of
    # 36 TFLOPS, norms, lm head, CPU) plus its decodes' KV reads and per-sequence CPU work, under 100 ms at the
    # ~60 streams rag keeps running. (The kernel-sum cost model moved this from the seed's "< 60 ms", which an
    # atomic-roofline step of ~48 ms allowed.)
    assert chunked["itl_ms"]["p99"] < min(100, fcfs["itl_ms"]["p99"] / 4)
    # The stall is the retrieval prefill itself: FCFS has steps of over 400 ms; chunked's longest step is a full
    # 512-token budget step.
    assert rag_results[seed]["fcfs"].steps[:, E.S_DURATION].max() > 0.4
    assert rag_results[seed]["chunked"].steps[:, E.S_DURATION].max() < 0.11


def test_seed_004_experiment_1_command():
    """`sched-sim compare --schedulers fcfs,chunked --workload rag --hardware rtx3050 --duration 10`, with the settings
    the seed was written with (`--max-model-len 8192 --token-budget 512` for chunked)."""
    m = {s: run(seed_scenario(s, workload="rag", duration=10)).metrics
         for s in ("fcfs", "chunked")}
    assert m["fcfs"]["num_requests"] == m["chunked"]["num_requests"] > 20
    assert m["fcfs"]["itl_ms"]["p99"] > 400
    assert m["chunked"]["itl_ms"]["p99"] < 100  # a full budget step and its decodes (see above)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunked_steps_stay_within_the_512_token_budget(rag_results, seed):
    chunked, fcfs = rag_results[seed]["chunked"], rag_results[seed]["fcfs"]
    assert chunked.resolved.token_budget == 512 and chunked.step_stride == 1
    tokens = chunked.steps[:, E.S_PREFILL_TOKENS] + chunked.steps[:, E.S_DECODE_SEQS]
    assert (tokens <= 512).all()
    assert (tokens == 512).sum() > 10  # the budget is what limits the steps that carry a retrieval prompt
    # ... where FCFS puts whole 3-4k-token prompts in one step.
    assert (fcfs.steps[:, E.S_PREFILL_TOKENS] > 2500).sum() > 10


# -------------------------------------------------------------------------------------------------------------
# Seed 000: scheduling policy and preemption
# -------------------------------------------------------------------------------------------------------------
def test_spf_lowers_mean_ttft_against_fcfs_once_a_queue_forms():
    # Chat on an RTX 3050 at 10 req/s: above what it serves (~6 req/s), so the KV pool fills and a queue forms;
    # prompts range from a few tokens to 4-8k (first turns and follow-ups with history).
    ratios = []
    for seed in range(4):
        m = {s: run(Scenario(scheduler=s, workload="chat", hardware="rtx3050", max_model_len=8192, rate=10, duration=60,
                             seed=seed)).metrics for s in ("fcfs", "spf")}
        assert m["fcfs"]["waiting"]["peak"] > 10  # a queue did form
        assert m["spf"]["ttft_ms"]["mean"] < m["fcfs"]["ttft_ms"]["mean"], seed
        ratios.append(m["spf"]["ttft_ms"]["mean"] / m["fcfs"]["ttft_ms"]["mean"])
    assert np.mean(ratios) < 0.8


def _tight_pool_runs(scheduler: str, preemption: str) -> list[dict]:
    # 150 chat requests at 8 req/s into 300 KV blocks (4,800 tokens; a tenth of what the GPU has).
    return [run(Scenario(scheduler=scheduler, preemption=preemption, workload="chat", hardware="rtx3050", max_model_len=8192,
                         rate=8, num_requests=150, seed=seed, kv_blocks=300, **ADMIT)).metrics for seed in range(3)]


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
@pytest.mark.parametrize("scheduler", ["fcfs", "spf"])
def test_preemption_lets_a_tight_pool_make_progress(scheduler, preemption):
    """preemption="none" must reserve each request's whole KV at admission and so runs fewer at once;
    preempting instead admits on the prompt's blocks and evicts when the pool runs out."""
    for eager, reserved in zip(_tight_pool_runs(scheduler, preemption), _tight_pool_runs(scheduler, "none"),
                               strict=True):
        assert eager["preemptions"] > 0 and reserved["preemptions"] == 0
        assert eager["completed"] == reserved["completed"]
        assert eager["request_throughput"] > reserved["request_throughput"]
        assert eager["ttft_ms"]["mean"] < reserved["ttft_ms"]["mean"]


def test_preemption_lets_a_tight_pool_make_progress_with_chunked_prefill():
    """Regression: chunked prefill + recompute thrashed (1,000-1,900 evictions a run, 20-45% less throughput than
    preemption='none'); see test_engine.py::test_chunked_recompute_does_not_recompute_a_prompt_over_and_over."""
    for eager, reserved in zip(_tight_pool_runs("chunked", "recompute"), _tight_pool_runs("chunked", "none"),
                               strict=True):
        assert eager["request_throughput"] > reserved["request_throughput"]
        assert eager["ttft_ms"]["mean"] < reserved["ttft_ms"]["mean"]


def test_swap_with_chunked_prefill_beats_reserving_whole_sequences():
    for eager, reserved in zip(_tight_pool_runs("chunked", "swap"), _tight_pool_runs("chunked", "none"),
                               strict=True):
        assert eager["preemptions"] > 0
        assert eager["request_throughput"] > reserved["request_throughput"]
        assert eager["ttft_ms"]["mean"] < reserved["ttft_ms"]["mean"]


def _seed_000_lesson_workload(seed: int, n: int = 100) -> Requests:
    """The previous lesson's generate_workload: lognormal prompts (median ~43) and outputs (median ~30), both
    clipped to 10..512, all arriving within ~50 engine steps (here: the first second), so the server saturates."""
    rng = np.random.default_rng(seed)
    prompt = np.clip(rng.lognormal(3.5, 1.0, n).astype(int) + 10, 10, 512)
    output = np.clip(rng.lognormal(3.0, 0.8, n).astype(int) + 10, 10, 512)
    arrival = np.sort(rng.uniform(0.0, 1.0, n))
    return Requests(arrival - arrival[0], prompt.astype(np.int64), output.astype(np.int64), np.zeros(n, np.int64),
                    ("chat",))


@pytest.mark.parametrize("max_seqs", [16, 256])
def test_continuous_batching_beats_static_batching_2_to_4x(max_seqs):
    for seed in range(4):
        reqs = _seed_000_lesson_workload(seed)
        tput = {}
        for sched in ("static", "fcfs", "chunked"):
            s = Scenario(scheduler=sched, hardware="rtx3050", max_model_len=8192, max_seqs=max_seqs)
            res = simulate_requests(s, resolve(s), reqs)
            assert res.metrics["completed"] == len(reqs)
            tput[sched] = res.metrics["output_throughput"]
        for sched in ("fcfs", "chunked"):
            assert 2.0 <= tput[sched] / tput["static"] <= 4.0, (seed, tput)
