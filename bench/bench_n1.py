"""Issue #37's N1 against a real server: a 5 s llama-3.2-1b run asking for a disk KV tier of 100,000 GB (and of
the field's schema maximum, 16,384 GB: 100,000 is past it, refused by the field's bounds; the maximum by the
cost model, sim_core/run_cost.py) must be refused before anything is allocated, each within a second, and leave the
server's peak memory (VmHWM) under 1.5 GB. Starts its own server (load.served: uvicorn in a child process on a
free port, its kernels ready), sends each request TRIES times (a different seed each, so no answer comes from a
cache), and prints each try's status, latency and the field refused, and the server's VmRSS / VmHWM after each
series. Asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_n1.py [--tries 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import rss_mb, served  # noqa: E402 - bench/ is not a package

from sim_core.fields import field_info  # noqa: E402

N1 = "schedulers=chunked&model=llama-3.2-1b&duration=5&prefix_cache=true"
SCHEMA_MAX_GB = field_info("kv_offload_disk_gb").hi
TARGET_S, TARGET_HWM_MB = 1.0, 1500.0


def series(client: httpx.Client, disk_gb: float, tries: int) -> list[float]:
    """Sends the N1 run with this disk tier `tries` times; prints and returns each try's latency."""
    latencies = []
    for k in range(tries):
        start = time.perf_counter()
        r = client.get(f"/api/run?{N1}&kv_offload_disk_gb={disk_gb:g}&seed={1000 + k}")
        latencies.append(time.perf_counter() - start)
        detail = r.json().get("detail") if r.headers.get("content-type", "").startswith("application/json") else None
        field = detail[0]["loc"][-1] if isinstance(detail, list) and detail else "-"
        print(f"  kv_offload_disk_gb={disk_gb:g} try {k + 1:2}: {r.status_code} in {latencies[-1] * 1e3:7.1f} ms, "
              f"field {field}", flush=True)
        if k == 0 and field != "-":
            print(f"    {detail[0]['msg'][:160]}")
    return latencies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=10)
    args = ap.parse_args()
    with served() as (base, _, pid), httpx.Client(base_url=base, timeout=120) as client:
        print(f"server pid {pid}: VmRSS {rss_mb(pid)[0]:.0f} MB, VmHWM {rss_mb(pid)[1]:.0f} MB before N1")
        worst = 0.0
        for disk_gb in (100_000, SCHEMA_MAX_GB):
            worst = max(worst, *series(client, disk_gb, args.tries))
            rss, hwm = rss_mb(pid)
            print(f"after kv_offload_disk_gb={disk_gb:g}: VmRSS {rss:.0f} MB, VmHWM {hwm:.0f} MB")
        hwm = rss_mb(pid)[1]
        print(f"slowest try {worst * 1e3:.1f} ms (target < {TARGET_S * 1e3:.0f} ms); server VmHWM {hwm:.0f} MB "
              f"(target < {TARGET_HWM_MB:.0f} MB)")


if __name__ == "__main__":
    main()
