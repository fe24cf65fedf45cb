"""Cluster experiments and speed: routers, disaggregated pools, and what several engines cost to simulate.
Prints figures; asserts nothing.

    .venv/bin/python bench/bench_cluster.py [--quick]

1. prefix_affinity vs round_robin: agent sessions with the prefix cache, 4 x A100 + Llama-3-8B near 70% load.
2. Routers under bursty arrivals (burstiness 4), same load: TTFT p99 per router.
3. Disaggregated vs colocated at equal GPU count on rag with a strict TPOT SLO, P:D swept 1:3 .. 3:1, over a fast
   and a slow link, and on short prompts (chat).
4. Speed: simulated tokens/s of 8 replicas against one engine; peak memory of a 1M-request, 16-replica run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run, warm_up  # noqa: E402
from sim_core.runner import make_requests, resolve, simulate_requests  # noqa: E402


def row(name: str, m: dict, *keys: str) -> str:
    parts = []
    for k in keys:
        v = m
        for part in k.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        parts.append(f"{k}={v:.4g}" if isinstance(v, int | float) else f"{k}={v}")
    return f"  {name:34s} " + "  ".join(parts)


def capacity_rate(base: dict, replicas: int, target_busy: float = 0.7) -> float:
    """The arrival rate at which one engine of this set-up is ~`target_busy` busy, times the replicas (a short
    bisection on the GPU-busy fraction of a single engine)."""
    lo, hi = 0.05, 50.0
    for _ in range(12):
        mid = (lo * hi) ** 0.5
        m = run(Scenario(**{**base, "rate": mid, "replicas": 1})).metrics
        lo, hi = (mid, hi) if m["gpu_busy_fraction"] < target_busy else (lo, mid)
    return lo * replicas


def ideal_hit_rate(res, replica_of=None) -> float:
    """The prefix-cache hit rate with caches that never evict: one for the whole cluster (replica_of None), or one
    per replica under the given routing. Requests in arrival order; a prompt's leading blocks hit while some
    earlier request (prompt or answer) on the same cache had them; one token is always computed."""
    reqs, block = res.requests, res.scenario.block_size
    hashes, off = reqs.block_hashes(block)
    where = np.zeros(len(reqs), np.int64) if replica_of is None else replica_of
    seen: dict[int, set] = {}
    hit = 0
    for i in np.argsort(reqs.arrival_s, kind="stable"):
        cache = seen.setdefault(int(where[i]), set())
        for j in range((int(reqs.prompt_tokens[i]) - 1) // block):
            if int(hashes[off[i] + j]) not in cache:
                break
            hit += block
        cache.update(hashes[off[i]:off[i + 1]].tolist())
    return hit / int(reqs.prompt_tokens.sum())


def routers_prefix(quick: bool) -> None:
    base = dict(hardware="a100", model="llama-3-8b", workload="agent", prefix_cache=True, seed=1,
                duration=120 if quick else 600)
    rate = capacity_rate(base, 4)
    print(f"1. agent sessions, prefix cache, 4 x A100 + Llama-3-8B at {rate:.3g} sessions/s (~70% busy each):")
    rr = run(Scenario(**base, rate=rate, replicas=4, router="round_robin"))
    print(row("round_robin", rr.metrics, "prefix_cache_hit_rate", "ttft_ms.mean", "ttft_ms.p99", "load_imbalance",
              "gpu_busy_fraction"))
    print(f"  {'':34s} never-evicting caches: one for the cluster {ideal_hit_rate(rr):.4f}, one per replica "
          f"under round robin's routing {ideal_hit_rate(rr, rr.replica_of):.4f}")
    for weight in (1.0, 2.0, 4.0, 8.0):
        res = run(Scenario(**base, rate=rate, replicas=4, router="prefix_affinity", router_cache_weight=weight))
        print(row(f"prefix_affinity, cache weight {weight:g}", res.metrics, "prefix_cache_hit_rate", "ttft_ms.mean",
                  "ttft_ms.p99", "load_imbalance", "gpu_busy_fraction"))
    m = run(Scenario(**base, rate=rate, replicas=4, router="session")).metrics
    print(row("session", m, "prefix_cache_hit_rate", "ttft_ms.mean", "ttft_ms.p99", "load_imbalance",
              "gpu_busy_fraction"))


def routers_bursty(quick: bool) -> None:
    base = dict(hardware="a100", model="llama-3-8b", workload="chat", burstiness=4.0, seed=1,
                duration=120 if quick else 600)
    rate = capacity_rate({**base, "burstiness": 1.0}, 4)
    print(f"2. chat, burstiness 4, 4 x A100 + Llama-3-8B at {rate:.3g} req/s (~70% busy each):")
    for router in ("round_robin", "least_outstanding", "power_of_two", "session"):
        m = run(Scenario(**base, rate=rate, replicas=4, router=router)).metrics
        print(row(router, m, "ttft_ms.p50", "ttft_ms.p99", "load_imbalance"))


def disaggregation(quick: bool) -> None:
    print("3. disaggregated vs colocated, 4 GPUs (A100 + Llama-3-8B); goodput under TTFT and TPOT SLOs:")
    for workload, tpot in (("rag", 40.0), ("chat", 40.0)):
        base = dict(hardware="a100", model="llama-3-8b", workload=workload, slo_tpot_ms=tpot, seed=1,
                    duration=60 if quick else 300)
        rate = capacity_rate(base, 4)
        print(f"  {workload} at {rate:.3g} req/s, TPOT SLO {tpot:g} ms:")
        for sched in ("fcfs", "chunked"):
            m = run(Scenario(**base, rate=rate, replicas=4, router="least_outstanding", scheduler=sched)).metrics
            print(row(f"colocated 4 x {sched}", m, "goodput", "slo_attainment", "ttft_ms.p99", "itl_ms.p99"))
        for link in ("ib400", "pcie4") if workload == "rag" else ("ib400",):
            for p, d in ((1, 3), (2, 2), (3, 1)):
                s = Scenario(**base, rate=rate, prefill_replicas=p, decode_replicas=d, kv_link=link,
                             router="least_outstanding")
                m = run(s).metrics
                print(row(f"P:D {p}:{d} over {link}", m, "goodput", "slo_attainment", "ttft_ms.p99", "itl_ms.p99",
                          "kv_transfer_ms.p99"))


def speed(quick: bool) -> None:
    n = 20_000 if quick else 100_000
    print(f"4. simulation speed, {n:,} chat requests on H100 + Llama-3-8B at ~the same load per engine:")
    for replicas in (1, 8):
        s = Scenario(hardware="h100", workload="chat", num_requests=n, rate=30.0 * replicas, seed=7,
                     replicas=replicas, router="least_outstanding")
        r = resolve(s)
        reqs = make_requests(s, r)
        best = float("inf")
        for _ in range(2):
            t = time.perf_counter()
            res = simulate_requests(s, r, reqs)
            best = min(best, time.perf_counter() - t)
        served = res.finished
        tokens = int(reqs.prompt_tokens[served].sum() + reqs.output_tokens[served].sum())
        print(f"  {replicas} engine(s): {best:.2f} s, {tokens / best:,.0f} simulated tokens/s, "
              f"{res.metrics['steps']:,} steps")
    if not quick:
        out = subprocess.run([sys.executable, __file__, "--memory-child"], capture_output=True, text=True, check=True)
        print("  " + out.stdout.strip())


def memory_child() -> None:
    t = time.perf_counter()
    s = Scenario(hardware="h100", workload="chat", num_requests=1_000_000, rate=480.0, seed=7, replicas=16,
                 router="least_outstanding")
    res = run(s)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"requests": 1_000_000, "replicas": 16, "seconds": round(time.perf_counter() - t, 1),
                      "peak_rss_mb": round(peak), "completed": res.metrics["completed"]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", choices=("prefix", "bursty", "pd", "speed"))
    a = ap.parse_args()
    if a.memory_child:
        memory_child()
        return
    warm_up()
    steps = {"prefix": routers_prefix, "bursty": routers_bursty, "pd": disaggregation, "speed": speed}
    for name, fn in steps.items():
        if a.only in (None, name):
            fn(a.quick)


if __name__ == "__main__":
    main()
