"""Executors: the speed-up from 1 to 2 workers on a search of >= 200 simulations, on Ray and on local processes.
Prints figures; asserts nothing.

    .venv/bin/python bench/bench_executor.py [--sims 200] [--rounds 2] [--only ray|local]

The search is a sweep of one scenario (llama-3-8b on an A100, chat, 20 s of arrivals) over `--sims` arrival rates
from 1 to 20 req/s: independent simulations of similar size, as a capacity search or a plan hands an executor.
Each configuration is timed after a warm-up that starts its workers and loads the kernels (Ray: the cluster's
start, ~10 s, is not counted); 1- and 2-worker runs alternate `--rounds` times (A/B interleaved, as the machine
may be shared) and the best of each is compared. On a 2-core machine the ideal is 2x. With 2 workers it also
prints how many simulations ran at once on average (task time over wall time), which shows the workers overlap
even when other load on the machine hides the speed-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario  # noqa: E402
from sim_core.studies.executor import LocalExecutor, RayExecutor, kernel_cache_stats  # noqa: E402
from sim_core.studies.sweep import sweep  # noqa: E402

BASE = Scenario(model="llama-3-8b", hardware="a100", workload="chat", duration=20)


def rates(n: int) -> list[float]:
    return [round(1 + 19 * k / (n - 1), 6) for k in range(n)]


def timed(executor, n: int) -> float:
    start = time.perf_counter()
    sweep(BASE, ["chunked"], rates(n), executor=executor)
    return time.perf_counter() - start


def one_timed(rate: float) -> tuple[float, float, int]:
    """One simulation, with when it ran and where (pickled by value to Ray workers: this is __main__)."""
    from sim_core import run

    t0 = time.time()
    run(BASE.model_copy(update={"rate": rate}))
    return t0, time.time(), os.getpid()


def concurrency(executor, n: int) -> str:
    """Task time summed over the wall time it took (2.0: two simulations always running at once), and the worker
    processes used: whether the workers overlap, which a busy machine slows but does not hide."""
    start = time.time()
    spans = executor.map(one_timed, rates(n))
    wall = time.time() - start
    busy = sum(t1 - t0 for t0, t1, _ in spans)
    return f"{busy / wall:.2f} simulations running on average, on {len({p for *_, p in spans})} processes"


def bench(kind: str, n: int, rounds: int) -> None:
    best = {1: float("inf"), 2: float("inf")}
    for r in range(rounds):
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            if kind == "ray":
                import ray

                ex = RayExecutor(num_cpus=workers)
                ex.map(kernel_cache_stats, [None] * workers)  # start the workers, load the kernels
            else:
                ex = LocalExecutor(workers)
                ex.map(abs, [0, 0])  # fork the pool (warm_up in the parent first)
            with ex:
                t = timed(ex, n)
                overlap = concurrency(ex, n // 4) if workers == 2 else ""
            if kind == "ray":
                assert not ray.is_initialized()
            best[workers] = min(best[workers], t)
            print(f"  {kind:5s} {workers} worker{'s' * (workers > 1)}: {n} simulations in {t:6.2f} s "
                  f"({n / t:5.1f}/s){'; ' + overlap if overlap else ''}", flush=True)
    print(f"{kind}: speed-up 1 -> 2 workers {best[1] / best[2]:.2f}x (best of {rounds}: {best[1]:.2f} s -> "
          f"{best[2]:.2f} s, {n} simulations)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sims", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", choices=("ray", "local"))
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    for kind in ("ray", "local"):
        if args.only in (None, kind):
            bench(kind, args.sims, args.rounds)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
