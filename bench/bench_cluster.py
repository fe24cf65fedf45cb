"""Cluster experiments and speed: routers, disaggregated pools, and what several engines cost to simulate.
Prints figures; asserts nothing.

    .venv/bin/python bench/bench_cluster.py [--quick]

1. prefix_affinity vs round_robin with the prefix cache, 4 x A100 + Llama-3-8B near 70% load: multi-turn chat
   conversations (what a turn reuses is its own conversation's history), and agent sessions (which all share one
   1,500-token tool prompt, so any router hits it).
2. Routers under bursty arrivals (burstiness 4), same load: TTFT p99 per router.
3. Disaggregated vs colocated at equal GPU count with a strict TPOT SLO, on rag and on short prompts, P:D swept
   1:3 .. 3:1, over a fast link (InfiniBand 400) and a slow one (25 Gb/s Ethernet, TCP): capacity under SLOs,
   goodput, ITL p99 against a pure decode step. 3b: goodput by arrival rate for each split and link, on A100 and
   H100 (where a slow link binds) and on short prompts.
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
from sim_core.kernel.content_hash import content_hashes  # noqa: E402
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
    hashes, off = content_hashes(*reqs.content(), block)
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


def saturation_rate(base: dict, ttft_ms: float = 1000.0) -> float:
    """The arrival rate one engine of this set-up can sustain: the highest at which its mean TTFT stays under
    `ttft_ms` (past it the queue grows without bound and TTFT jumps by orders of magnitude, so the threshold
    matters little). For closed-loop sessions, whose long think times stretch the run far past the arrival window
    and leave busy fractions that do not measure load."""
    lo, hi = 0.05, 200.0
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        m = run(Scenario(**{**base, "rate": mid, "replicas": 1})).metrics
        lo, hi = (mid, hi) if m["ttft_ms"]["mean"] < ttft_ms else (lo, mid)
    return lo


PREFIX_KEYS = ("prefix_cache_hit_rate", "ttft_ms.mean", "ttft_ms.p99", "load_imbalance", "gpu_busy_fraction")


def routers_multiturn(quick: bool) -> None:
    base = dict(hardware="a100", model="llama-3-8b", workload="multiturn", prefix_cache=True, seed=1,
                duration=120 if quick else 600)
    saturation = saturation_rate(base)
    rate = 0.7 * 4 * saturation
    print(f"1a. multi-turn chat, prefix cache, 4 x A100 + Llama-3-8B at {rate:.3g} conversations/s (70% of 4 x "
          f"{saturation:.3g}, one engine's saturation rate):")
    rr = run(Scenario(**base, rate=rate, replicas=4, router="round_robin"))
    print(row("round_robin", rr.metrics, *PREFIX_KEYS))
    print(f"  {'':34s} never-evicting caches: one for the cluster {ideal_hit_rate(rr):.4f}, one per replica "
          f"under round robin's routing {ideal_hit_rate(rr, rr.replica_of):.4f}")
    for weight in (1.0, 2.0, 4.0, 8.0):
        m = run(Scenario(**base, rate=rate, replicas=4, router="prefix_affinity", router_cache_weight=weight)).metrics
        ratio = m["prefix_cache_hit_rate"] / max(rr.metrics["prefix_cache_hit_rate"], 1e-12)
        print(row(f"prefix_affinity, cache weight {weight:g}", {**m, "hit_ratio_vs_rr": ratio}, *PREFIX_KEYS,
                  "hit_ratio_vs_rr"))
    for router in ("session", "least_outstanding"):
        print(row(router, run(Scenario(**base, rate=rate, replicas=4, router=router)).metrics, *PREFIX_KEYS))


def routers_prefix(quick: bool) -> None:
    routers_multiturn(quick)
    base = dict(hardware="a100", model="llama-3-8b", workload="agent", prefix_cache=True, seed=1,
                duration=120 if quick else 600)
    rate = capacity_rate(base, 4)
    print(f"1b. agent sessions, prefix cache, 4 x A100 + Llama-3-8B at {rate:.3g} sessions/s (~70% busy each):")
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
    # 70% of what four engines sustain (GPU-busy fractions do not measure load here: one decoding request keeps
    # an engine stepping, so an engine is ~100% busy far below its capacity).
    saturation = saturation_rate({**base, "burstiness": 1.0})
    rate = 0.7 * 4 * saturation
    print(f"2. chat, burstiness 4, 4 x A100 + Llama-3-8B at {rate:.3g} req/s (70% of 4 x {saturation:.3g}, one "
          "engine's saturation rate):")
    for seed in (1, 2, 3):
        for router in ("round_robin", "least_outstanding", "power_of_two", "session"):
            m = run(Scenario(**{**base, "seed": seed}, rate=rate, replicas=4, router=router)).metrics
            print(row(f"seed {seed} {router}", m, "ttft_ms.mean", "ttft_ms.p50", "ttft_ms.p99", "load_imbalance"))


def max_itl_attainment(res) -> float:
    """Share of finished multi-token requests whose largest inter-token gap stayed within the TPOT target: a
    stricter reading of the TPOT SLO than the per-request mean TPOT that slo_attainment and goodput count."""
    done = res.finished & (res.requests.output_tokens > 1)
    if not done.any():
        return 0.0
    target = res.class_tpot_s[res.requests.request_class[done]]
    return float((res.max_itl_s[done] <= target).mean())


def pure_decode_step_ms(s: Scenario, res) -> float:
    """The step time of a decode-only batch of the size the decode engines ran (Little's law: decoding
    requests per engine = rate x mean decode time / engines, at most max_seqs) at the mean context, from the
    cost model."""
    from sim_core.step_time import StepShape, step_time_doc

    m, reqs = res.metrics, res.requests
    engines = s.decode_replicas or s.replicas
    decode_s = float(np.nanmean(res.finish_s - res.first_token_s))
    batch = min(s.max_seqs, max(1, round(m["request_throughput"] * decode_s / engines)))
    context = int(reqs.prompt_tokens.mean() + reqs.output_tokens.mean() / 2)
    shape = StepShape(hardware=s.hardware, model=s.model, decode_seqs=batch, decode_context=context)
    return step_time_doc(shape)["step_ms"]


def capacity_at_slo(base: dict, target: float = 0.9) -> float:
    """The highest arrival rate at which the deployment keeps `target` of requests within both SLOs (a
    bisection; goodput's share of the arrival rate, which counts rejected requests as misses)."""
    lo, hi = 0.1, 200.0
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        m = run(Scenario(**base, rate=mid)).metrics
        ok = m["slo_attainment"] * m["completed"] / max(1, m["completed"] + m["rejected"]) >= target
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


PD_CASES = (  # workload, TPOT target (ms), what it is
    ("rag", 20.0, "3-4k-token retrieval prompts among short chats, strict TPOT"),
    ("multitenant", 20.0, "short prompts (ShareGPT first turns, median ~150 tokens), strict TPOT"),
)


def disaggregation(quick: bool) -> None:
    print("3. disaggregated vs colocated at 4 GPUs (A100 + Llama-3-8B). capacity = the highest rate keeping 90% of "
          "requests within TTFT and mean-TPOT targets; the rest at colocated chunked's capacity. max_itl_ok = "
          "share of requests whose largest inter-token gap met the TPOT target; decode_step_ms = a pure decode "
          "step of the decode engines' batch (cost model):")
    for workload, tpot, what in PD_CASES:
        base = dict(hardware="a100", model="llama-3-8b", workload=workload, slo_tpot_ms=tpot, seed=1,
                    duration=60 if quick else 300, router="least_outstanding")
        configs = [(f"colocated 4 x {sched}", dict(replicas=4, scheduler=sched)) for sched in ("fcfs", "chunked")]
        configs += [(f"P:D {p}:{d} over {link}", dict(prefill_replicas=p, decode_replicas=d, kv_link=link))
                    for link in ("ib400", "eth25") for p, d in ((1, 3), (2, 2), (3, 1))]
        reference = capacity_at_slo({**base, **configs[1][1]})
        print(f"  {workload}: {what}; TPOT target {tpot:g} ms; colocated chunked capacity {reference:.3g} req/s")
        for name, fields in configs:
            capacity = capacity_at_slo({**base, **fields})
            s = Scenario(**base, **fields, rate=reference)
            res = run(s)
            m = res.metrics
            print(row(name, {**m, "capacity": capacity, "max_itl_ok": max_itl_attainment(res),
                             "decode_step_ms": pure_decode_step_ms(s, res)},
                      "capacity", "goodput", "slo_attainment", "max_itl_ok", "ttft_ms.p99", "itl_ms.p99",
                      "decode_step_ms", "kv_transfer_ms.p99"))


PD_RATE_CASES = (  # hardware, workload, arrival rates (req/s over the 4 GPUs), what it shows
    ("a100", "rag", (10, 20, 30), "an A100 prefills ~10 rag req/s, less than 25 GbE carries (~19 req/s of rag KV "
                                  "per link): the slow link never binds; P/D wins at 20 req/s on either link"),
    ("h100", "rag", (25, 35, 45, 55), "an H100 prefills ~3x faster: 25 GbE binds (link utilisation -> 1) and P/D "
                                      "over it loses to colocated from ~35 req/s, while over IB400 it keeps up"),
    ("h100", "multitenant", (40, 80, 120), "short prompts: prefill engines idle while decode engines are short; "
                                           "P:D 3:1 loses from 40 req/s, 2:2 from 80, 1:3 at 120"),
)


def disaggregation_rates(quick: bool) -> None:
    """Goodput against the arrival rate, P/D (each split, each link) against colocated at 4 GPUs, Llama-3-8B,
    TPOT target 20 ms: where P/D wins, and where it loses (a slow link, short prompts)."""
    print("3b. goodput (req/s within TTFT and mean-TPOT targets) by arrival rate, 4 GPUs + Llama-3-8B, TPOT target "
          "20 ms; [link utilisation] for P/D:")
    for hardware, workload, rates, what in PD_RATE_CASES:
        base = dict(hardware=hardware, model="llama-3-8b", workload=workload, slo_tpot_ms=20.0, seed=1,
                    duration=60 if quick else 300, router="least_outstanding")
        print(f"  {hardware} {workload}: {what}")
        print(f"    {'':24s}" + "".join(f"{r:>16g}" for r in rates))
        configs = [(f"colocated 4 x {sched}", dict(replicas=4, scheduler=sched)) for sched in ("fcfs", "chunked")]
        configs += [(f"P:D {p}:{d} {link}", dict(prefill_replicas=p, decode_replicas=d, kv_link=link))
                    for link in ("ib400", "eth25") for p, d in ((1, 3), (2, 2), (3, 1))]
        for name, fields in configs:
            cells = []
            for rate in rates:
                m = run(Scenario(**base, **fields, rate=float(rate))).metrics
                link = f" [{m['kv_link_utilization']:.2f}]" if "kv_link_utilization" in m else ""
                cells.append(f"{m['goodput']:.3g}{link}")
            print(f"    {name:24s}" + "".join(f"{c:>16s}" for c in cells))


def speed(quick: bool) -> None:
    """Simulated tokens/s per core of 8 replicas against one engine. Each run's CPU time (time.thread_time: the
    simulation runs on one thread) as well as its wall time, the two set-ups interleaved and the best of several
    kept, so that other processes sharing the machine slow both alike (wall time on a shared machine counts the
    time the thread waited for a core)."""
    n = 20_000 if quick else 100_000
    print(f"4. simulation speed, {n:,} chat requests on H100 + Llama-3-8B at the same arrival rate per engine (30 "
          f"req/s), best of 3 interleaved:")
    cases = {}
    for replicas in (1, 8):
        s = Scenario(hardware="h100", workload="chat", num_requests=n, rate=30.0 * replicas, seed=7,
                     replicas=replicas, router="least_outstanding")
        r = resolve(s)
        cases[replicas] = (s, r, make_requests(s, r))
    cpu, wall, out = {k: float("inf") for k in cases}, {k: float("inf") for k in cases}, {}
    for _ in range(3):
        for replicas, (s, r, reqs) in cases.items():
            c, w = time.thread_time(), time.perf_counter()
            out[replicas] = simulate_requests(s, r, reqs)
            cpu[replicas] = min(cpu[replicas], time.thread_time() - c)
            wall[replicas] = min(wall[replicas], time.perf_counter() - w)
    per_core = {}
    for replicas, (_, _, reqs) in cases.items():
        served = out[replicas].finished
        tokens = int(reqs.prompt_tokens[served].sum() + reqs.output_tokens[served].sum())
        per_core[replicas] = tokens / cpu[replicas]
        print(f"  {replicas} engine(s): {cpu[replicas]:.2f} s CPU ({wall[replicas]:.2f} s wall), "
              f"{per_core[replicas]:,.0f} simulated tokens/s per core, {out[replicas].metrics['steps']:,} steps")
    print(f"  8 replicas / 1 engine, tokens/s per core: {per_core[8] / per_core[1]:.3f} (CPU time), "
          f"{wall[1] / wall[8] * per_core[8] * cpu[8] / (per_core[1] * cpu[1]):.3f} (wall time)")
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
    ap.add_argument("--only", choices=("prefix", "bursty", "pd", "pd-rates", "speed"))
    a = ap.parse_args()
    if a.memory_child:
        memory_child()
        return
    warm_up()
    steps = {"prefix": routers_prefix, "bursty": routers_bursty, "pd": disaggregation, "pd-rates": disaggregation_rates,
             "speed": speed}
    for name, fn in steps.items():
        if a.only in (None, name):
            fn(a.quick)


if __name__ == "__main__":
    main()
