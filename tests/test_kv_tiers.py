"""Tiered KV offload (issue #23 item 2): lower tiers (host memory, local NVMe) under the GPU's prefix cache.

What must hold: off is the engine as before (no metrics key, nothing counted); on `multiturn` with a GPU cache too
small for the conversations a CPU tier cuts mean TTFT by a factor within what host-memory KV reuse is published to
give (sim_core/data/kv_tiers.json); it never costs more than the loads it waited for; a slow tier loses to
recomputing a short prefix and wins on a long one, the crossover moving with the tier's bandwidth as the cost
model predicts; and under hypothesis no block leaks from any tier and every request ends once.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import Scenario, ScenarioError
from sim_core.data import read
from sim_core.kernel.cost_constants import KV_BYTES_PER_TOKEN
from sim_core.kernel.cost_model import step_aggregates, step_cost
from sim_core.kernel.state import A_CACHED_TOKENS
from sim_core.kv_offload import GIB, cited_disk_gbs, tier_occupancy, tier_params
from sim_core.runner import RunOptions, engine_config, resolve, run, simulate_requests
from sim_core.workload import UNIQUE, Requests
from tests.test_properties import FRAME_TIMES, check_invariants, explicit_requests, scenario_kwargs

# A GPU cache too small for the conversations: 2,000 blocks (32k tokens) against ~1,000 multi-turn requests.
MULTITURN = dict(scheduler="fcfs", hardware="a100", workload="multiturn", rate=8.0, num_requests=1000, seed=1,
                 prefix_cache=True, kv_blocks=2000)


def mean_ttft_s(res) -> float:
    done = res.finished
    return float((res.first_token_s - res.requests.arrival_s)[done].mean())


def load_s(res) -> float:
    tiers = res.metrics["kv_tiers"]
    return tiers["cpu"]["load_s"] + tiers["disk"]["load_s"]


def published_host_reuse_speedup() -> list[float]:
    """vLLM's OffloadingConnector (CPU DRAM tier): TTFT speed-up for cached prompts, [low, high]."""
    (entry,) = [e for e in read("kv_tiers.json")["entries"]
                if e["source_id"] == "vllm_offload_blog" and "TTFT speed-up" in e["what"]]
    return entry["value"]


def test_off_adds_no_key_and_counts_nothing():
    res = run(Scenario(**{**MULTITURN, "num_requests": 60}))
    assert "kv_tiers" not in res.metrics
    assert not res.kv_tiers.any()
    assert not tier_params(res.scenario, res.resolved.setup, True).any()


def test_a_tier_too_small_for_one_block_is_refused():
    with pytest.raises(ScenarioError, match="kv_offload_cpu_gb"):
        run(Scenario(**{**MULTITURN, "num_requests": 10, "kv_offload_cpu_gb": 1e-6}))


def test_offload_needs_the_prefix_cache():
    s = Scenario(**{**MULTITURN, "num_requests": 10, "prefix_cache": False, "kv_offload_disk_gb": 1.0})
    with pytest.raises(ScenarioError, match="kv_offload_disk_gb"):
        run(s)


def test_disk_defaults_are_the_cited_nvme():
    par = engine_config(Scenario(**{**MULTITURN, "kv_offload_disk_gb": 1.0}), resolve(Scenario(**MULTITURN)),
                        (np.ones(1), np.ones(1), np.ones(1)), record_events=False, max_step_records=10,
                        debug_checks=False).kv_tiers
    from sim_core.kernel.kv_tiers import TP_DISK_READ_BW, TP_DISK_WRITE_BW
    assert par[TP_DISK_READ_BW] == cited_disk_gbs("read") * 1e9 > par[TP_DISK_WRITE_BW] == cited_disk_gbs("write") * 1e9


def test_cpu_offload_cuts_multiturn_ttft_within_the_published_range():
    off = run(Scenario(**MULTITURN))
    on = run(Scenario(**MULTITURN, kv_offload_cpu_gb=16.0))
    tiers = on.metrics["kv_tiers"]
    assert tiers["cpu"]["hit_tokens"] > tiers["gpu"]["hit_tokens"] > 0  # the GPU cache alone is too small
    assert tiers["cpu"]["bytes_out"] > 0 and 0 < tiers["cpu"]["link_utilization"] < 1
    factor = mean_ttft_s(off) / mean_ttft_s(on)
    low, high = published_host_reuse_speedup()
    assert low <= factor <= high, f"mean TTFT cut x{factor:.2f}, published x{low}-{high}"


def test_every_hit_token_is_counted_once_across_tiers():
    res = run(Scenario(**MULTITURN, kv_offload_cpu_gb=0.5, kv_offload_disk_gb=8.0))
    tiers = res.metrics["kv_tiers"]
    assert sum(t["hit_tokens"] for t in tiers.values()) == res.accumulators[A_CACHED_TOKENS]
    assert tiers["disk"]["hit_tokens"] > 0 and tiers["disk"]["bytes_in"] > 0  # the CPU tier overflows to disk
    assert tiers["cpu"]["evicted_blocks"] > 0


@pytest.mark.parametrize("extra", [
    dict(kv_offload_cpu_gb=16.0),
    dict(kv_offload_disk_gb=16.0, kv_offload_disk_read_gbs=0.2),  # a very slow tier: loads cost more than recompute
    dict(kv_offload_cpu_gb=16.0, kv_offload_policy="store"),
])
@pytest.mark.parametrize("rate", [2.0, 8.0])
def test_offload_never_raises_ttft_beyond_its_load_time(extra, rate):
    """The steps waited `load_s` in all for lower-tier loads; TTFT can rise by no more than that."""
    base = {**MULTITURN, "rate": rate, "num_requests": 400}
    off, on = run(Scenario(**base)), run(Scenario(**base, **extra))
    assert mean_ttft_s(on) - mean_ttft_s(off) <= load_s(on)


def test_store_on_compute_writes_every_shared_block_evict_only_what_falls_out():
    evict = run(Scenario(**MULTITURN, kv_offload_cpu_gb=16.0)).metrics["kv_tiers"]["cpu"]
    store = run(Scenario(**MULTITURN, kv_offload_cpu_gb=16.0, kv_offload_policy="store")).metrics["kv_tiers"]["cpu"]
    assert store["bytes_in"] > evict["bytes_in"] > 0


def test_layer_overlap_hides_loads_under_compute():
    base = {**MULTITURN, "kv_offload_disk_gb": 16.0, "kv_offload_disk_read_gbs": 1.0}
    blocking, overlapped = run(Scenario(**base)), run(Scenario(**base, kv_offload_overlap=True))
    assert mean_ttft_s(overlapped) < mean_ttft_s(blocking)


# ----- load or recompute: one request's prefix, evicted from the GPU to disk, comes back -----
SOLO = dict(scheduler="fcfs", hardware="h100", prefix_cache=True, kv_blocks=1200, token_budget=16384,
            max_model_len=8192, kv_offload_disk_gb=8.0)
TAIL = 64  # the returning request's own new tokens


def returning_prefix(prefix: int) -> Requests:
    """A request with `prefix` tokens of content, fillers that push it out of the GPU pool, then a request that
    starts with the same content (its TTFT is the one measured)."""
    fill = 7000
    prompt = [prefix + 16, fill, fill, fill, prefix + TAIL]
    seg_ids = [[1, UNIQUE], [UNIQUE + 1], [UNIQUE + 2], [UNIQUE + 3], [1, UNIQUE + 4]]
    seg_lens = [[prefix, 16], [fill], [fill], [fill], [prefix, TAIL]]
    off = np.cumsum([0] + [len(s) for s in seg_ids])
    return Requests(np.array([0.0, 1.0, 1.0, 1.0, 10.0]), np.array(prompt, np.int64), np.ones(5, np.int64),
                    np.zeros(5, np.int64), ("solo",), None, None, np.array(sum(seg_ids, []), np.int64),
                    np.array(sum(seg_lens, []), np.int64), off.astype(np.int64))


def returning_ttft(prefix: int, **extra) -> tuple[float, float]:
    s = Scenario(**SOLO, **extra)
    res = simulate_requests(s, resolve(s), returning_prefix(prefix))
    assert res.finished.all()
    return float(res.first_token_s[-1] - res.requests.arrival_s[-1]), res.metrics["kv_tiers"]["disk"]["hit_tokens"]


def predicted_crossover(read_gbs: float, lengths) -> int:
    """The shortest prefix whose load (at the tier's read rate) plus the tail's prefill beats recomputing both,
    by the cost model: bandwidth against prefill speed."""
    s = Scenario(**SOLO, kv_offload_disk_read_gbs=read_gbs)
    p = engine_config(s, resolve(s), (np.ones(1), np.ones(1), np.ones(1)), record_events=False,
                      max_step_records=10, debug_checks=False).cost
    for n in lengths:
        load = n * p[KV_BYTES_PER_TOKEN] / (read_gbs * 1e9)
        if load + step_cost(p, *step_aggregates(TAIL, n, 0, 0))[0] < step_cost(p, *step_aggregates(n + TAIL, 0, 0, 0))[0]:
            return n
    return -1


# The PCIe 4.0 datacenter NVMe's cited sequential read (PM9A3, kv_tiers.json) and a slower disk.
@pytest.mark.parametrize("read_gbs", [6.5, 5.0])
def test_slow_tier_loses_on_short_prefixes_wins_on_long_ones(read_gbs):
    lengths = list(range(32, 7680 + 1, 512))
    wins = []
    for n in lengths:
        loaded, hit = returning_ttft(n, kv_offload_disk_read_gbs=read_gbs)
        assert hit == n, "the returning request must find its whole prefix on disk"
        wins.append(loaded < recompute_ttft(n))
    assert not wins[0] and wins[-1]
    crossover = lengths[wins.index(True)]
    assert all(wins[wins.index(True):]), "past the crossover loading keeps winning"
    assert crossover == predicted_crossover(read_gbs, lengths)


def recompute_ttft(prefix: int) -> float:
    s = Scenario(**{**SOLO, "kv_offload_disk_gb": 0.0})
    res = simulate_requests(s, resolve(s), returning_prefix(prefix))
    return float(res.first_token_s[-1] - res.requests.arrival_s[-1])


def test_crossover_moves_with_bandwidth():
    lengths = list(range(32, 7680 + 1, 512))
    fast, slow = predicted_crossover(6.5, lengths), predicted_crossover(5.0, lengths)
    assert 0 < fast < slow


# ----- invariants under hypothesis -----
@st.composite
def returning_requests(draw) -> Requests:
    """Requests over three shared prefixes (up to 300 tokens), arriving over a few seconds: tiny GPU pools evict a
    prefix between its uses, so later ones find it in a lower tier (or in none, the tiers being tiny too)."""
    n = draw(st.integers(2, 30))
    arrival = np.cumsum(draw(st.lists(st.sampled_from([0.0, 0.01, 0.2, 1.0]), min_size=n, max_size=n)))
    prefix = draw(st.lists(st.integers(16, 300), min_size=3, max_size=3))
    which = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    own = draw(st.lists(st.integers(1, 400), min_size=n, max_size=n))
    output = np.asarray(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)), np.int64)
    seg_ids = [x for i in range(n) for x in (1 + which[i], UNIQUE + i)]
    seg_lens = [x for i in range(n) for x in (prefix[which[i]], own[i])]
    prompt = np.array([prefix[which[i]] + own[i] for i in range(n)], np.int64)
    return Requests(arrival - arrival[0], prompt, output, np.zeros(n, np.int64), ("returning",), None, None,
                    np.array(seg_ids, np.int64), np.array(seg_lens, np.int64), np.arange(0, 2 * n + 1, 2))


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_no_block_leaks_from_any_tier(data):
    """Tiny tiers (a few blocks) that overflow all the time, both policies, with and without overlap; the engine
    checks both pools' invariants after every step (debug_checks), then the usual end-of-run invariants."""
    kw = data.draw(scenario_kwargs(data.draw(st.sampled_from(["fcfs", "chunked", "cache_aware", "spf", "slo"])),
                                   data.draw(st.sampled_from(["recompute", "swap"]))))
    kw.update(prefix_cache=True, kv_blocks=data.draw(st.integers(20, 80)))
    block_gb = resolve(Scenario(**kw)).setup.kv_bytes_per_block / GIB
    cpu, disk = data.draw(st.sampled_from([0, 1, 3, 40])), data.draw(st.sampled_from([0, 2, 60]))
    kw.update(kv_offload_cpu_gb=cpu * block_gb * 1.01, kv_offload_disk_gb=max(disk, cpu == 0) * block_gb * 1.01,
              kv_offload_policy=data.draw(st.sampled_from(["evict", "store"])),
              kv_offload_overlap=data.draw(st.booleans()))
    s = Scenario(**kw)
    reqs = data.draw(returning_requests() if data.draw(st.integers(0, 3)) else explicit_requests())
    res = simulate_requests(s, resolve(s), reqs,
                            RunOptions(record_events=True, debug_checks=True, kv_frame_times=FRAME_TIMES))
    check_invariants(res)
    assert sum(t["hit_tokens"] for t in res.metrics["kv_tiers"].values()) == res.accumulators[A_CACHED_TOKENS]


@pytest.mark.parametrize("shape", [dict(replicas=2, router="prefix_affinity"), dict(prefill_replicas=1, decode_replicas=1)])
def test_each_engine_of_a_cluster_has_its_own_tiers(shape):
    # (debug_checks only for replicas: a prefill engine holds KV of requests no longer running while it waits to
    # send it, which check_pool counts as leaked, offload or not.)
    res = run(Scenario(**{**MULTITURN, "num_requests": 200}, kv_offload_cpu_gb=4.0, **shape),
              debug_checks="replicas" in shape)
    assert res.finished.all()
    tiers = res.metrics["kv_tiers"]
    assert tiers["cpu"]["hit_tokens"] > 0
    assert sum(t["hit_tokens"] for t in tiers.values()) == res.accumulators[A_CACHED_TOKENS]


def test_kv_frames_record_each_tiers_occupancy():
    """The KV view's tier bars (issue #23: "the KV view shows the tiers") read Result.kv_frame_tiers: never above a
    tier's capacity, and the frame at the run's end holds what the metrics say went in and was not evicted."""
    res = run(Scenario(**{**MULTITURN, "num_requests": 300, "kv_offload_cpu_gb": 2, "kv_offload_disk_gb": 8}),
              kv_frames=64)
    occ = tier_occupancy(res)
    assert set(occ) == {"cpu", "disk"}
    last = int(np.argmax(res.kv_frame_s))  # the end-of-run frame (spaced frames end with one)
    assert res.kv_frame_s[last] == pytest.approx(res.end_s)
    block, tiers = res.resolved.setup.kv_bytes_per_block, res.metrics["kv_tiers"]
    for name, t in occ.items():
        held = t["frames"][:last + 1]
        assert held.max() <= t["capacity"] and held.min() >= 0
        m = tiers[name]
        assert held[-1] == m["bytes_in"] / res.resolved.setup.tp / block - m["evicted_blocks"] > 0
    assert occ["cpu"]["frames"][last] == occ["cpu"]["capacity"]  # this GPU cache overflows the 2 GB tier
    off = run(Scenario(**{**MULTITURN, "num_requests": 30}), kv_frames=8)
    assert tier_occupancy(off) == {} and not off.kv_frame_tiers.any()
