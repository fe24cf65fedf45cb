"""What a request-level A/B (sim_core/request_diff.py, `sched-sim diff`) costs on top of its two runs: two
10k-request runs (fcfs and chunked on the same requests) as `sched-sim compare` makes them, against what the A/B
adds to them:

  the A/B itself       request_diff (every request's changes and their parts) and the summary the tables, the
                       page and the JSON open with (means, cause totals, the most hurt and most helped)
  timelines            the most-hurt requests' timelines need each run's event log: the runs made with it
                       (`sched-sim diff` and /diff do; `sched-sim diff --no-timelines` does not)
  every request, JSON  `--json` / /api/diff list every request (~35 numbers each): building and serialising it

Prints figures; asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_diff.py [--requests 10000] [--repeats 5]

Each figure is the median of `repeats` rounds (a first round, which loads the kernels, is not counted); each round
times every part once, so a machine other work shares slows them alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from sim_core import Scenario, run, warm_up
from sim_core.request_diff import diff_document


def scenarios(n: int) -> tuple[Scenario, Scenario]:
    base = dict(workload="chat", hardware="h100", model="llama-3-8b", rate=40.0, num_requests=n, seed=1)
    return Scenario(scheduler="fcfs", **base), Scenario(scheduler="chunked", **base)


def one_round(sa: Scenario, sb: Scenario) -> tuple[dict[str, float], int, int]:
    t = {}
    start = time.perf_counter()
    ra, rb = run(sa), run(sb)
    t["runs"] = time.perf_counter() - start
    start = time.perf_counter()
    doc, d = diff_document(ra, rb, top=10, with_requests=False)  # no event logs: no timelines
    t["ab"] = time.perf_counter() - start
    start = time.perf_counter()
    ea, eb = run(sa, record_events=True), run(sb, record_events=True)
    t["runs_events"] = time.perf_counter() - start
    start = time.perf_counter()
    doc, d = diff_document(ea, eb, top=10, with_requests=False)
    t["ab_timelines"] = time.perf_counter() - start
    start = time.perf_counter()
    text = json.dumps({**doc, "requests": d.requests_json()})
    t["json"] = time.perf_counter() - start
    return t, len(d), len(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    warm_up()
    sa, sb = scenarios(args.requests)
    rounds = [one_round(sa, sb) for _ in range(args.repeats + 1)][1:]
    med = {k: statistics.median(r[0][k] for r in rounds) for k in rounds[0][0]}
    compared, size = rounds[0][1], rounds[0][2]
    runs = med["runs"]
    print(f"{args.requests:,} requests per run, fcfs vs chunked (chat, h100, llama-3-8b, 40 req/s), {compared:,} "
          f"compared; medians of {args.repeats} rounds")
    print(f"  two runs, as compare makes them               {runs:7.3f} s")
    print(f"  the A/B itself (request_diff, summary, top 10) {med['ab'] * 1e3:6.1f} ms  {med['ab'] / runs:+7.1%}")
    extra = med["runs_events"] - runs + med["ab_timelines"] - med["ab"]
    print(f"  timelines: runs with event logs + extraction   {extra * 1e3:6.1f} ms  {extra / runs:+7.1%}")
    print(f"  every request as JSON ({size / 1e6:.1f} MB)             {med['json'] * 1e3:6.1f} ms  "
          f"{med['json'] / runs:+7.1%}")
    print(f"  sched-sim diff --no-timelines (tables): {med['ab'] / runs:+.1%};  sched-sim diff: "
          f"{(med['ab'] + extra) / runs:+.1%};  sched-sim diff --json: {(med['ab'] + extra + med['json']) / runs:+.1%}"
          " over the two runs")


if __name__ == "__main__":
    main()
