"""Tiered KV offload (issue #23): mean TTFT without and with a host-memory tier on `multiturn`, over GPUs, loads
and GPU cache sizes; all requests and follow-up turns only (the prompts that can hit: what vLLM's 2-22x for
cached prompts measures, sim_core/data/kv_tiers.json). Also the load-or-recompute crossover over disk read
bandwidths (tests/test_kv_tiers.py's returning prefix, by the cost model).

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_kv_offload.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run  # noqa: E402

CPU_GB = 16.0


def mean_ttft_ms(res, mask=None) -> float:
    keep = res.finished if mask is None else res.finished & mask
    return float((res.first_token_s - res.requests.arrival_s)[keep].mean() * 1e3)


def main() -> None:
    print(f"multiturn, 1000 requests, fcfs, prefix cache; host tier {CPU_GB:g} GB/GPU (evict policy)")
    print(f"{'gpu':6} {'conv/s':>6} {'blocks':>6} {'all off':>9} {'all on':>9} {'x':>5} {'follow-up x':>11} "
          f"{'cpu hit tok':>11} {'load s':>7}")
    for hw in ("a100", "h100"):
        for rate in (2.0, 8.0, 16.0):
            for blocks in (1000, 2000, 4000):
                base = dict(scheduler="fcfs", hardware=hw, workload="multiturn", rate=rate, num_requests=1000,
                            seed=1, prefix_cache=True, kv_blocks=blocks)
                off, on = run(Scenario(**base)), run(Scenario(**base, kv_offload_cpu_gb=CPU_GB))
                follow = on.requests.parents() >= 0
                tiers = on.metrics["kv_tiers"]
                print(f"{hw:6} {rate:6g} {blocks:6} {mean_ttft_ms(off):9.1f} {mean_ttft_ms(on):9.1f} "
                      f"{mean_ttft_ms(off) / mean_ttft_ms(on):5.2f} "
                      f"{mean_ttft_ms(off, follow) / mean_ttft_ms(on, follow):11.2f} "
                      f"{tiers['cpu']['hit_tokens']:11} {tiers['cpu']['load_s']:7.3f}")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_kv_tiers import predicted_crossover, recompute_ttft, returning_ttft

    lengths = list(range(32, 7680 + 1, 128))
    print("\nload-or-recompute crossover, h100 llama-3-8b, one returning prefix (tokens; -1: loading never wins)")
    for read_gbs in (13.0, 6.5, 5.5, 5.0, 4.0):
        wins = [returning_ttft(n, kv_offload_disk_read_gbs=read_gbs)[0] < recompute_ttft(n) for n in lengths]
        simulated = lengths[wins.index(True)] if True in wins else -1
        print(f"  disk read {read_gbs:5.1f} GB/s: simulated {simulated:6}, cost model {predicted_crossover(read_gbs, lengths):6}")


if __name__ == "__main__":
    main()
