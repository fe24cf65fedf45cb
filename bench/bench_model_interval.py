"""The model interval's cost: a 1000-request run alone, then its 16-member model-error ensemble (each member
replays the same requests with every step's time scaled), wall time median and min of 5 after one warm-up,
and the ratio. Also prints the held-out coverage of the serving rows.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_model_interval.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run  # noqa: E402
from sim_core.studies import model_error  # noqa: E402

SCENARIO = Scenario(scheduler="chunked", workload="chat", hardware="a100", model="llama-3-8b", rate=8,
                    num_requests=1000)
REPEATS = 5


def timed(f) -> list[float]:
    f()  # compile and warm caches
    out = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    one = timed(lambda: run(SCENARIO))
    ens = timed(lambda: model_error.ensemble(SCENARIO, members=model_error.MEMBERS))
    print(f"scenario: {SCENARIO.scheduler} on {SCENARIO.workload}, {SCENARIO.num_requests} requests, "
          f"{SCENARIO.hardware}/{SCENARIO.model} at {SCENARIO.rate} req/s")
    print(f"one run:                  median {statistics.median(one):.3f} s, min {min(one):.3f} s")
    print(f"{model_error.MEMBERS}-member ensemble:       median {statistics.median(ens):.3f} s, min {min(ens):.3f} s "
          f"({statistics.median(ens) / statistics.median(one):.1f}x one run)")
    covered, total = model_error.held_out_coverage(model_error.load())
    print(f"held-out coverage of the nominal {model_error.LEVEL:.0%} interval: {covered} of {total} serving rows "
          f"({covered / total:.0%})")


if __name__ == "__main__":
    main()
