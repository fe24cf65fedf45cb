"""Speculative decoding (issue #23): where it pays and what it costs the simulator. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_spec_decode.py             # the concurrency sweep and the simulation speed
    .venv/bin/python bench/bench_spec_decode.py --quick     # fewer points, fewer requests

1. Sweep: Llama-3-8B on one H100, 256-token prompts and outputs (random workload), closed loop at concurrency c; TPOT and
   output throughput without speculation and with EAGLE (k = 3, 5) and n-gram (k = 3). Speed-up = plain TPOT /
   spec TPOT. A token budget of 8192 (vLLM's serving default on big GPUs) lets every sequence's k + 1 tokens
   into each step. At c = 1 the step is memory-bound and verifying k + 1 tokens costs about what one does; as c grows
   the step turns compute-bound, the k + 1 query tokens per sequence cost k + 1 times the FLOPs, and the speed-up
   falls below 1: the crossover concurrency is printed.
2. Simulation speed: simulated tokens (prompt + output of served requests) per wall-clock second of the engine
   run, plain vs EAGLE k = 3, on bench_core.py's chat workload (H100, Llama-3-8B, 40 req/s). Noisy on a shared
   machine: best of 3.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run, warm_up  # noqa: E402
from sim_core.runner import make_requests, resolve, simulate_requests  # noqa: E402

SPEC = ((None, 0), ("eagle", 3), ("eagle", 5), ("ngram", 3))


def point(concurrency: int, method: str | None, k: int, per_user: int) -> tuple[float, float]:
    """(mean TPOT ms, output tokens/s) at a concurrency."""
    extra = {} if method is None else {"spec_method": method, "spec_tokens": k}
    s = Scenario(hardware="h100", model="llama-3-8b", workload="random", isl=256, osl=256, concurrency=concurrency,
                 num_requests=concurrency * per_user, max_seqs=max(256, concurrency), token_budget=8192, seed=3,
                 **extra)
    m = run(s).metrics
    return m["tpot_ms"]["mean"], m["output_throughput"]


def sweep(levels: list[int], per_user: int) -> None:
    print("concurrency  " + "  ".join(f"{(m or 'plain') + (f' k={k}' if m else ''):>16}" for m, k in SPEC))
    crossover: dict[str, int | None] = {f"{m} k={k}": None for m, k in SPEC if m}
    for c in levels:
        base_tpot, base_tps = point(c, None, 0, per_user)
        cells = [f"{base_tpot:8.2f} ms      "]
        for m, k in SPEC[1:]:
            tpot, _ = point(c, m, k, per_user)
            speedup = base_tpot / tpot
            cells.append(f"{tpot:8.2f} ms x{speedup:4.2f}")
            if speedup < 1 and crossover[f"{m} k={k}"] is None:
                crossover[f"{m} k={k}"] = c
        print(f"{c:>11}  " + "  ".join(f"{x:>16}" for x in cells))
    for name, c in crossover.items():
        print(f"{name}: {'slower than plain from concurrency ' + str(c) if c else 'never slower in this sweep'}")


def sim_speed(n: int) -> None:
    for method, k in ((None, 0), ("eagle", 3)):
        extra = {} if method is None else {"spec_method": method, "spec_tokens": k}
        s = Scenario(workload="chat", hardware="h100", num_requests=n, rate=40.0, seed=7, **extra)
        r = resolve(s)
        reqs = make_requests(s, r)
        best, result = float("inf"), None
        for _ in range(3):
            t = time.perf_counter()
            result = simulate_requests(s, r, reqs)
            best = min(best, time.perf_counter() - t)
        served = result.status == 4
        tokens = int(reqs.prompt_tokens[served].sum() + reqs.output_tokens[served].sum())
        print(f"{method or 'plain':>6} k={k}: {n} requests, {result.metrics['steps']} steps, {best:.2f} s, "
              f"{tokens / best / 1e6:.2f} M simulated tokens/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    warm_up()
    levels = [1, 8, 64, 256, 512] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512]
    sweep(levels, 2 if args.quick else 4)
    sim_speed(5_000 if args.quick else 50_000)


if __name__ == "__main__":
    main()
