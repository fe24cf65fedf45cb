"""Simulation speed and memory of the core on large chat workloads. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_core.py            # 100k requests, speed (best of 3 after warm-up)
    .venv/bin/python bench/bench_core.py --memory   # also a 1M-request run in a child process: peak RSS

Simulated tokens = prompt tokens + output tokens of the requests the run served (what a real server would
process); output tokens are reported separately. Timings cover the engine run (plus block hashing when the
prefix cache is on), not workload generation.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run, warm_up  # noqa: E402
from sim_core.runner import make_requests, resolve, simulate_requests  # noqa: E402


def scenario(n: int, scheduler: str, prefix_cache: bool = False, workload: str = "chat", replicas: int = 1,
             router: str = "round_robin") -> Scenario:
    # An H100 serving Llama-3-8B near saturation: big batches, the regime that stresses the engine (with
    # replicas, each one at that load).
    return Scenario(scheduler=scheduler, workload=workload, hardware="h100", num_requests=n, rate=40.0 * replicas,
                    seed=7, prefix_cache=prefix_cache, replicas=replicas, router=router)


def speed(n: int, scheduler: str, repeats: int, prefix_cache: bool = False, workload: str = "chat",
          replicas: int = 1, router: str = "round_robin") -> dict:
    s = scenario(n, scheduler, prefix_cache, workload, replicas, router)
    r = resolve(s)
    reqs = make_requests(s, r)
    best = float("inf")
    result = None
    for _ in range(repeats):
        t = time.perf_counter()
        result = simulate_requests(s, r, reqs)
        best = min(best, time.perf_counter() - t)
    m = result.metrics
    served = result.status == 4
    tokens = int(reqs.prompt_tokens[served].sum() + reqs.output_tokens[served].sum())
    out_tokens = int(reqs.output_tokens[served].sum())
    return {
        "scheduler": scheduler, "workload": workload, "prefix_cache": prefix_cache,
        **({"replicas": replicas, "router": router} if replicas > 1 else {}), "requests": n, "seconds": round(best, 3),
        "sim_requests_per_s": round(n / best), "sim_tokens_per_s": round(tokens / best),
        "sim_output_tokens_per_s": round(out_tokens / best), "steps": m["steps"],
        "simulated_s": round(m["duration_s"], 1), "completed": m["completed"], "rejected": m["rejected"],
    }


def memory_child(n: int) -> None:
    t = time.perf_counter()
    res = run(scenario(n, "chunked"))  # the default: no prefix cache
    dt = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"requests": n, "seconds": round(dt, 2), "peak_rss_mb": round(peak_mb),
                      "completed": res.metrics["completed"], "steps": res.metrics["steps"]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="also measure a 1M-request run's peak memory")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.memory_child:
        memory_child(a.memory_child)
        return
    t = time.perf_counter()
    warm_up()
    print(f"warm-up (compile or load cache): {time.perf_counter() - t:.2f} s")
    for sched in ("chunked", "fcfs", "spf", "static"):
        print(json.dumps(speed(a.requests if sched != "static" else a.requests // 10, sched, a.repeats)))
    # The prefix cache's price: hashing every block and looking prefixes up (chat shares nothing; rag shares a
    # system prompt and documents).
    print(json.dumps(speed(a.requests, "chunked", a.repeats, prefix_cache=True)))
    print(json.dumps(speed(a.requests, "chunked", a.repeats, prefix_cache=False, workload="rag")))
    print(json.dumps(speed(a.requests, "chunked", a.repeats, prefix_cache=True, workload="rag")))
    # A cluster: 4 replicas at the same load each, in one compiled loop (routing decisions included).
    print(json.dumps(speed(a.requests, "chunked", a.repeats, replicas=4, router="least_outstanding")))
    print(json.dumps(speed(a.requests, "chunked", a.repeats, prefix_cache=True, workload="rag", replicas=4,
                           router="prefix_affinity")))
    if a.memory:
        out = subprocess.run([sys.executable, __file__, "--memory-child", "1000000"], capture_output=True,
                             text=True, check=True)
        print(out.stdout.strip())


if __name__ == "__main__":
    main()
