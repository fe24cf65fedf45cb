"""How long `sched-sim frontier --model llama-3-70b --hardware h100,h200,b200` takes (issue #35: at most 30 s for
three GPUs on a 2-core machine), now that it sweeps every configuration that fits each GPU. Prints figures;
asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_frontier.py [--gpus h100,h200,b200] [--workers N]
        [--isl 1024 --osl 1024]

First the whole command as a user types it, in a fresh process (imports, the kernels loaded from the disk cache,
the default concurrency grid 1 .. 256 for each viable configuration, the table printed), best of --repeat, with
the load average beside it (the machine is shared: other work slows these figures); a first, untimed call fills
the kernel cache if it is cold. Then the same frontier in this process, GPU by GPU, to show where the time goes.
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
MODEL = "llama-3-70b"


def command_seconds(gpus: str, workers: int | None, lengths: list[str]) -> float:
    argv = [sys.executable, "-m", "app.cli", "frontier", "--model", MODEL, "--hardware", gpus, *lengths]
    if workers:
        argv += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="h100,h200,b200")
    ap.add_argument("--workers", type=int, default=None, help="the command's --workers (default: one per core)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--isl", type=int, default=None, help="prompt tokens (default: the command's, 1024)")
    ap.add_argument("--osl", type=int, default=None, help="output tokens (default: the command's, 128)")
    args = ap.parse_args()
    lengths = [w for flag, v in (("--isl", args.isl), ("--osl", args.osl)) if v for w in (flag, str(v))]
    base = Scenario(model=MODEL, workload="random", isl=args.isl, osl=args.osl)
    shape = f"ISL {base.isl or 'default'} / OSL {base.osl or 'default'}"
    print(f"frontier: {MODEL}, random {shape}, every configuration that fits, {len(concurrency_grid())} "
          f"concurrencies {concurrency_grid()} on {args.gpus}; {os.cpu_count()} CPU cores")
    command_seconds(args.gpus, args.workers, lengths)  # compiles the kernels into the cache if it is cold
    times, loads = [], []
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        times.append(command_seconds(args.gpus, args.workers, lengths))
    best = min(times)
    print(f"  the command, fresh process: best {best:.1f} s of {', '.join(f'{t:.1f}' for t in times)} "
          f"({'within' if best <= BUDGET_S else 'OVER'} the {BUDGET_S:g} s budget); 1-minute load average "
          f"before each run: {', '.join(f'{x:.1f}' for x in loads)}")
    for gpu in args.gpus.split(","):
        t = time.perf_counter()
        result = frontier(base, [gpu], concurrency_grid())
        took = time.perf_counter() - t
        top = max(result.points, key=lambda p: p["throughput_per_gpu"]) if result.points else None
        print(f"  {gpu:<8} in this process, one core: {took:5.2f} s for {len(result.configs)} configurations "
              f"({', '.join(c['config'] for c in result.configs)}), {len(result.points)} points"
              + (f"; peak {top['throughput_per_gpu']:,.0f} tok/s/GPU at {top['config']}, {top['concurrency']} users"
                 if top else f"; {result.infeasible.get(gpu)}"))


if __name__ == "__main__":
    main()
