"""The long campaign of tests/test_no_hang.py: many more idle-engine runs per engine profile, with figures.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/no_hang.py [EXAMPLES]

Draws EXAMPLES runs (default 300) per engine in engines.json from the test's strategies (replicas 1-4,
attention-DP ranks, prefill/decode pools, autoscaled fleets; 0-3 requests open-loop, late, closed-loop or on a rate
schedule), runs each under the test's watchdog and checks it the same way. Prints, per engine and deployment kind,
the runs, requests finished and rejected, and the longest run's wall time; exits non-zero at the first failure
(hypothesis's shrunk example and the scenario's query are printed)."""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_no_hang import (  # noqa: E402
    BASE,
    FINISHED,
    REJECTED,
    arrivals,
    check_each_request_ended_once,
    deployments,
    run_with_watchdog,
)

from sim_core import Scenario  # noqa: E402
from sim_core.engines import ENGINE_NAMES  # noqa: E402


def kind_of(deployment: dict) -> str:
    if "autoscaler" in deployment:
        return f"autoscaled ({deployment['autoscaler']})"
    if "prefill_replicas" in deployment:
        return "prefill/decode pools"
    if deployment.get("attention_dp"):
        return "attention-DP ranks"
    return "replicas"


def campaign(engine: str, examples: int, figures: dict) -> None:
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(deployment=deployments(), arrival=arrivals())
    def one(deployment, arrival):
        fields, requests = arrival
        scenario = Scenario(**{**BASE, **deployment, **fields, "engine": engine})
        start = time.perf_counter()
        result, reqs = run_with_watchdog(scenario, requests)
        wall = time.perf_counter() - start
        check_each_request_ended_once(result, reqs)
        row = figures[(engine, kind_of(deployment))]
        row["runs"] += 1
        row["requests"] += len(reqs)
        row["finished"] += int((result.status == FINISHED).sum())
        row["rejected"] += int((result.status == REJECTED).sum())
        row["longest_s"] = max(row["longest_s"], wall)

    one()


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    figures: dict = defaultdict(lambda: dict(runs=0, requests=0, finished=0, rejected=0, longest_s=0.0))
    start = time.perf_counter()
    for engine in ENGINE_NAMES:
        print(f"== {engine}: {examples} examples", flush=True)
        campaign(engine, examples, figures)
    print(f"\n{'engine':8} {'deployment':24} {'runs':>5} {'requests':>8} {'finished':>8} {'rejected':>8} "
          f"{'longest run':>11}")
    for (engine, kind), row in sorted(figures.items()):
        print(f"{engine:8} {kind:24} {row['runs']:5d} {row['requests']:8d} {row['finished']:8d} "
              f"{row['rejected']:8d} {row['longest_s'] * 1e3:9.0f} ms")
    print(f"\nall ended, every request once; {time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
