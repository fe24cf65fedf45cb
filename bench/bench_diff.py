"""What a request-level A/B (sim_core/request_diff.py, `sched-sim diff`) costs on top of its two runs: two
10k-request runs (fcfs and chunked on the same requests) as `sched-sim compare` makes them, against what the A/B
adds to them:

  the A/B itself       request_diff (every request's changes and their parts) and the summary the tables, the
                       page and the JSON open with (means, cause totals, the most hurt and most helped)
  timelines            the most-hurt requests' timelines need each run's event log: the runs made with it
                       (`sched-sim diff` and /diff do; `sched-sim diff --no-timelines` does not)
  tables               the text `sched-sim diff` prints (report_lines)
  every request, JSON  `--json` / /api/diff list every request (~35 numbers each): the CLI's document as
                       print_document writes it (RequestDiff.requests_texts), and beside it, for comparison, the
                       same list through dicts and json.dumps (RequestDiff.requests_json), as it was written before

Prints figures; asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_diff.py [--requests 10000] [--repeats 5]

Each figure is the median of `repeats` rounds (a first round, which loads the kernels, is not counted); each round
times every part once, so a machine other work shares slows them alike, and the runs with and without event logs
go first in turn (whichever runs second is often faster); what the event logs cost is the median of each round's
own difference. Wall time, and beside it this process's CPU time, which
other work on a shared machine inflates less.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time

from app.cli.commands.diff import ab_document, print_document, report_lines
from sim_core import Scenario, run, warm_up
from sim_core.request_diff import diff_document


def scenarios(n: int) -> tuple[Scenario, Scenario]:
    base = dict(workload="chat", hardware="h100", model="llama-3-8b", rate=40.0, num_requests=n, seed=1)
    return Scenario(scheduler="fcfs", **base), Scenario(scheduler="chunked", **base)


def _timed(t: dict, key: str, fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    t[key] = (time.perf_counter() - wall, time.process_time() - cpu)
    return out


def one_round(sa: Scenario, sb: Scenario, events_first: bool) -> tuple[dict[str, tuple[float, float]], int, int]:
    t: dict = {}
    for events in (events_first, not events_first):
        if events:
            ea, eb = _timed(t, "runs_events", lambda: (run(sa, record_events=True), run(sb, record_events=True)))
        else:
            ra, rb = _timed(t, "runs", lambda: (run(sa), run(sb)))
    _timed(t, "ab", lambda: diff_document(ra, rb, top=10, with_requests=False))  # no event logs: no timelines
    doc, d = _timed(t, "ab_timelines", lambda: ab_document(sa, sb, ea, eb, 10, "e2el_ms"))
    _timed(t, "tables", lambda: report_lines(doc, d))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _timed(t, "json", lambda: print_document(doc, d))
    _timed(t, "json_before", lambda: json.dumps(d.requests_json()))
    return t, len(d), len(out.getvalue())


def _line(label: str, med: dict, key: str, runs: dict) -> str:
    if isinstance(key, str):
        wall, cpu = med[key]
    else:
        wall, cpu = key
    return (f"  {label:44s} {wall * 1e3:7.1f} ms {wall / runs[0]:+7.1%}   cpu {cpu * 1e3:7.1f} ms "
            f"{cpu / runs[1]:+7.1%}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    warm_up()
    sa, sb = scenarios(args.requests)
    rounds = [one_round(sa, sb, i % 2 == 1) for i in range(args.repeats + 1)][1:]
    med = {k: tuple(statistics.median(r[0][k][i] for r in rounds) for i in (0, 1)) for k in rounds[0][0]}
    compared, size = rounds[0][1], rounds[0][2]
    runs = med["runs"]

    def sums(*keys, minus=()):
        return tuple(sum(med[k][i] for k in keys) - sum(med[k][i] for k in minus) for i in (0, 1))

    print(f"{args.requests:,} requests per run, fcfs vs chunked (chat, h100, llama-3-8b, 40 req/s), {compared:,} "
          f"compared; medians of {args.repeats} rounds; each part, and its share of the two runs' time")
    print(f"  two runs, as compare makes them               {runs[0]:7.3f} s              cpu {runs[1]:7.3f} s")
    print(_line("the A/B itself (request_diff, summary, top 10)", med, "ab", runs))
    # The event logs' cost: the median of each round's own difference (a difference of two medians of ~0.3 s
    # runs swings by +-20% on a shared machine; paired in a round, both runs see the same load).
    timelines = tuple(statistics.median(r[0]["runs_events"][i] + r[0]["ab_timelines"][i] - r[0]["runs"][i]
                                        - r[0]["ab"][i] for r in rounds) for i in (0, 1))
    print(_line("timelines: runs with event logs + extraction", med, timelines, runs))
    print(_line("the tables (report_lines)", med, "tables", runs))
    print(_line(f"every request as JSON ({size / 1e6:.1f} MB)", med, "json", runs))
    print(_line("  the same through dicts and json.dumps (before)", med, "json_before", runs))
    for label, keys in (("sched-sim diff --no-timelines", ("ab", "tables")),
                        ("sched-sim diff", ("ab", "tables")), ("sched-sim diff --json", ("ab", "json"))):
        total = sums(*keys)
        if label != "sched-sim diff --no-timelines":  # a negative difference (noise) counted as nothing
            total = tuple(x + max(0.0, y) for x, y in zip(total, timelines, strict=True))
        print(_line(label, med, total, runs))


if __name__ == "__main__":
    main()
