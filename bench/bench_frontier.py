"""How long `sched-sim frontier` takes for one model on three GPUs (issue #22: at most 30 s on a 2-core machine).
Prints figures; asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_frontier.py [--gpus h100,b200,mi300x] [--workers N]

First the whole command as a user types it, in a fresh process (imports, the kernels loaded from the disk cache,
the default concurrency grid 1 .. 256 per GPU, the table printed), best of --repeat; a first, untimed call fills
the kernel cache if it is cold. Then the same frontier in this process, per GPU, to show where the time goes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim_core import Scenario  # noqa: E402
from sim_core.studies.frontier import concurrency_grid, frontier  # noqa: E402

BUDGET_S = 30.0  # the bound for one model on three GPUs
MODEL = ["--model", "llama-3-70b", "--quantization", "fp8", "--tp", "2", "--isl", "1024", "--osl", "1024"]


def command_seconds(gpus: str, workers: int | None) -> float:
    argv = [sys.executable, "-m", "app.cli", "frontier", *MODEL, "--hardware", gpus]
    if workers:
        argv += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="h100,b200,mi300x")
    ap.add_argument("--workers", type=int, default=None, help="the command's --workers (default: one per core)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"frontier: llama-3-70b fp8 tp2, random 1024/1024, {len(concurrency_grid())} concurrencies "
          f"{concurrency_grid()} on {args.gpus}; {os.cpu_count()} CPU cores, load average "
          f"{os.getloadavg()[0]:.1f} (other work on the machine slows these figures)")
    command_seconds(args.gpus, args.workers)  # compiles the kernels into the cache if it is cold
    times = [command_seconds(args.gpus, args.workers) for _ in range(args.repeat)]
    best = min(times)
    print(f"  the command, fresh process: best {best:.1f} s of {', '.join(f'{t:.1f}' for t in times)} "
          f"({'within' if best <= BUDGET_S else 'OVER'} the {BUDGET_S:g} s budget)")
    base = Scenario(model="llama-3-70b", quantization="fp8", tp=2, workload="random", isl=1024, osl=1024)
    for gpu in args.gpus.split(","):
        t = time.perf_counter()
        result = frontier(base, [gpu], concurrency_grid())
        took = time.perf_counter() - t
        top = max(result.points, key=lambda p: p["throughput_per_gpu"]) if result.points else None
        print(f"  {gpu:<8} in this process, one core: {took:5.2f} s"
              + (f"; peak {top['throughput_per_gpu']:,.0f} tok/s/GPU at {top['concurrency']} users" if top else
                 f"; {result.infeasible.get(gpu)}"))


if __name__ == "__main__":
    main()
