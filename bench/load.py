"""The server under load, as its own process (uvicorn, like `sched-sim serve`), measured from outside:

  1. mixed load: 32 clients for 60 s, each looping over a page, a cached result, a fresh simulation and an embed;
  2. a burst of 60 slow simulations at once (the excess must be answered 503 + Retry-After quickly);
  3. the largest scenarios the web accepts, one request each, for the server's peak memory;
  4. (only, with --line N) N clients of slow runs, each retrying when told with its Queue-Ticket, and an invalid
     page every 50 ms: the invalid page's latency, tries per run, each run's wait for its place against the
     Retry-After announced, and the runs admitted before one that came earlier.
Throughout, a probe in its own process asks /healthz every 50 ms. Prints answers by status, latencies, /healthz p50/p99 and the
server's RSS (now and peak, from /proc). Asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/load.py [--clients 32] [--seconds 60] [--burst 60]
    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/load.py --line 40 --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
SMALL = "hardware=rtx3050&workload=chat&duration=10"
SLOW = "schedulers=fcfs,chunked,spf&hardware=h100&workload=agent&duration=600&rate=5"
LARGEST = {  # each within every web limit (20,000 requests, 600 s, 5M steps), at the edge of one of them
    "most requests, every scheduler": "schedulers=static,fcfs,spf,chunked,slo,fair,cache_aware,edf,mlfq"
                                      "&hardware=h100&workload=chat&duration=600&rate=33",
    "largest KV pool (mi300x, qwen2.5-0.5b)": "schedulers=fcfs,chunked&hardware=mi300x&model=qwen2.5-0.5b"
                                             "&workload=rag&duration=600&rate=33",
    "most steps (agent, token budget 16)": "schedulers=chunked&hardware=h100&workload=agent&duration=600"
                                           "&rate=10&token_budget=16",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of a process, MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q / 100 * (len(v) - 1))))] if v else float("nan")


def _probe_loop(base: str, stop, reset, out, path: str = "/healthz", expect: int = 200) -> None:
    """A health checker of its own (as a load balancer's or kubelet's is): `path` every 50 ms, answered `expect`
    or counted failed; on `reset` it sends the times so far to `out` and starts again; on `stop` it sends them and
    ends."""
    times, failures = [], 0
    with httpx.Client(base_url=base, timeout=30) as c:
        while True:
            if reset.is_set() or stop.is_set():
                out.put((times, failures))
                times, failures = [], 0
                reset.clear()
                if stop.is_set():
                    return
            t = time.perf_counter()
            ok = c.get(path).status_code == expect
            times.append(time.perf_counter() - t)
            failures += not ok
            time.sleep(0.05)


class HealthProbe:
    """/healthz latency measured from a separate process. A probe thread inside this process would also time
    its own wait for this process's GIL behind the 32 client threads (which parse every page they get), and
    report the load generator's contention as the server's."""

    def __init__(self, base: str, path: str = "/healthz", expect: int = 200):
        ctx = multiprocessing.get_context("spawn")
        self.path = path
        self.stop_event, self.reset_event, self.out = ctx.Event(), ctx.Event(), ctx.Queue()
        self.process = ctx.Process(target=_probe_loop, daemon=True,
                                   args=(base, self.stop_event, self.reset_event, self.out, path, expect))

    def start(self) -> None:
        self.process.start()

    def _take(self, event) -> tuple[list[float], int]:
        event.set()
        return self.out.get(timeout=60)

    def report_and_reset(self) -> str:
        times, failures = self._take(self.reset_event)
        return (f"{self.path} p50 {pct(times, 50) * 1e3:.1f} ms, p99 {pct(times, 99) * 1e3:.1f} ms, "
                f"max {max(times, default=float('nan')) * 1e3:.1f} ms (n={len(times)}, failed {failures})")

    def close(self) -> None:
        self._take(self.stop_event)
        self.process.join(10)


def mixed_load(base: str, clients: int, seconds: float) -> None:
    seeds = itertools.count(1000)
    urls = {
        "page": lambda: f"/?{SMALL}",
        "cached result": lambda: f"/api/run?{SMALL}&schedulers=fcfs,chunked",
        "fresh simulation": lambda: f"/api/run?{SMALL}&schedulers=chunked&seed={next(seeds)}",
        "embed": lambda: f"/embed/cdf?{SMALL}",
    }
    statuses: dict[str, Counter] = {k: Counter() for k in urls}
    times: dict[str, list[float]] = {k: [] for k in urls}
    deadline = time.monotonic() + seconds

    def client(k: int) -> None:
        kinds = list(urls)
        with httpx.Client(base_url=base, timeout=120) as c:
            for i in itertools.count(k):
                if time.monotonic() > deadline:
                    return
                kind = kinds[i % len(kinds)]
                t = time.perf_counter()
                try:
                    status = c.get(urls[kind]()).status_code
                except httpx.HTTPError as e:
                    status = type(e).__name__
                times[kind].append(time.perf_counter() - t)
                statuses[kind][status] += 1

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    for kind in urls:
        print(f"  {kind:17s} answers {dict(statuses[kind])}, p50 {pct(times[kind], 50) * 1e3:.0f} ms, "
              f"p99 {pct(times[kind], 99) * 1e3:.0f} ms")


def burst(base: str, n: int) -> None:
    # The clients are made first and released together: making an httpx client builds an SSL context (~10 ms of
    # CPU), and 60 of them made at the moment of the burst took the server's two cores from it, which the /healthz
    # probe then timed as the server's slowness. Clients elsewhere cost the server nothing.
    clients = [httpx.Client(base_url=base, timeout=300) for _ in range(n)]
    start = threading.Barrier(n)

    def one(k: int):
        start.wait()
        t = time.perf_counter()
        r = clients[k].get(f"/api/run?{SLOW}&seed={5000 + k}")
        return r.status_code, time.perf_counter() - t, r.headers.get("retry-after")

    try:
        with ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(one, range(n)))
    finally:
        for c in clients:
            c.close()
    by_status = Counter(s for s, _, _ in answers)
    print(f"  answers {dict(by_status)}")
    for status in sorted(by_status):
        took = [t for s, t, _ in answers if s == status]
        retry = {ra for s, _, ra in answers if s == status}
        print(f"  {status}: p50 {pct(took, 50):.2f} s, max {max(took):.2f} s"
              + (f", Retry-After {sorted(retry)}" if status == 503 else ""))


def largest(base: str, pid: int) -> None:
    with httpx.Client(base_url=base, timeout=600) as c:
        for name, query in LARGEST.items():
            t = time.perf_counter()
            r = c.get(f"/api/run?{query}")
            took = time.perf_counter() - t
            detail = "" if r.status_code == 200 else f" {r.text[:160]}"
            now, peak = rss_mb(pid)
            print(f"  {name}: {r.status_code} in {took:.1f} s{detail}; server RSS now {now:.0f} MB, peak {peak:.0f} MB")


INVALID_PAGE = "/?hardware=rtx3050&max_model_len=8192&workload=chat&duration=abc"  # a typo: its 422 names the field


@dataclass
class LineRun:
    """One slow run of line_load, its times on this process's monotonic clock."""

    first_at: float  # its first request sent
    tries: int = 0
    retry_after: float | None = None  # the first 503's Retry-After (None: it never had one)
    told_at: float | None = None  # when that 503 arrived
    position: int | None = None  # and the place in line it announced
    admitted_at: float | None = None  # its last request sent + the server's "line" Server-Timing
    answered_at: float | None = None


def _line_wait_s(response: httpx.Response) -> float | None:
    found = re.search(r"line;dur=([0-9.]+)", response.headers.get("server-timing", ""))
    return float(found.group(1)) / 1e3 if found else None


def line_load(base: str, clients: int, seconds: float, grace_s: float = 60.0) -> None:
    """`clients` clients each asking for slow simulations of their own, one after another, honouring the 503's
    Retry-After and sending its Queue-Ticket back; meanwhile an invalid page every 50 ms. Prints the invalid
    page's latency, and per run: tries, the wait for its place (first try to admission, the admission read from
    the answer's Server-Timing) against the first Retry-After announced, and how many runs that came later were
    admitted first. A client stops asking `grace_s` after the end."""
    deadline = time.monotonic() + seconds
    runs: list[LineRun] = []
    statuses: Counter = Counter()
    busy_first: list[float] = []  # how long each 503 took to arrive: a new request's (its budget checked first)
    busy_retry: list[float] = []  # and one asked again
    seeds = itertools.count(9000)

    def client(k: int) -> None:
        with httpx.Client(base_url=base, timeout=300) as c:
            while time.monotonic() < deadline:
                url, headers, run = f"/api/run?{SLOW}&seed={next(seeds)}", {}, LineRun(time.monotonic())
                while True:
                    sent, asked = time.monotonic(), time.perf_counter()
                    r = c.get(url, headers=headers)
                    run.tries += 1
                    statuses[r.status_code] += 1
                    if r.status_code != 503:
                        break
                    (busy_first if run.tries == 1 else busy_retry).append(time.perf_counter() - asked)
                    retry = float(r.headers.get("retry-after", "1"))
                    if run.retry_after is None:
                        run.retry_after, run.position = retry, (r.json().get("queue") or {}).get("position")
                        run.told_at = time.monotonic()
                    if r.headers.get("queue-ticket"):
                        headers = {"Queue-Ticket": r.headers["queue-ticket"]}
                    if time.monotonic() + retry > deadline + grace_s:  # its turn comes after the bench: stop
                        statuses["gave up"] += 1
                        return
                    time.sleep(retry)
                waited = _line_wait_s(r)
                run.admitted_at = None if waited is None else sent + waited
                run.answered_at = time.monotonic()
                runs.append(run)

    invalid = HealthProbe(base, INVALID_PAGE, 422)  # its own process, as the /healthz probe (see HealthProbe)
    invalid.start()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    print(f"  invalid page (422 expected): {invalid.report_and_reset()}")
    invalid.close()
    line_report(runs, statuses)
    for name, took in (("new request's", busy_first), ("retry's", busy_retry)):
        print(f"  a {name} 503 arrived in p50 {pct(took, 50) * 1e3:.0f} ms, p99 {pct(took, 99) * 1e3:.0f} ms, "
              f"max {max(took, default=float('nan')) * 1e3:.0f} ms (n={len(took)})")


def line_report(runs: list[LineRun], statuses: Counter) -> None:
    """Tries per run; for runs told to come back: from the first 503 to their admission over its Retry-After (the
    announcement kept: at most 1), that ratio up to the answer (the run's own time included), and the runs
    admitted meanwhile past the position it announced (k-th in line: k - 1 places ahead, none from behind)."""
    admitted = [r for r in runs if r.admitted_at is not None]
    told = [r for r in admitted if r.retry_after]
    place = [(r.admitted_at - r.told_at) / r.retry_after for r in told]
    answer = [(r.answered_at - r.told_at) / r.retry_after for r in told]
    # Told once a run had been answered: the line had measured a pace (before, it announces at what the running
    # requests' elapsed time shows, a lower bound).
    paced = [x for x, r in zip(place, told, strict=True)
             if r.told_at > min((o.answered_at for o in admitted), default=float("inf"))]
    past = [sum(1 for o in admitted if r.told_at < o.admitted_at < r.admitted_at) - (r.position or 1) + 1
            for r in told]
    print(f"  slow runs: {len(runs)} answered, statuses {dict(statuses)}; tries p50 {pct([r.tries for r in runs], 50)}, "
          f"max {max((r.tries for r in runs), default=0)}; wait for a place p50 "
          f"{pct([r.admitted_at - r.first_at for r in admitted], 50):.1f} s, max "
          f"{max((r.admitted_at - r.first_at for r in admitted), default=float('nan')):.1f} s")
    print(f"  told to come back: {len(told)} (first position p50 {pct([r.position or 0 for r in told], 50)}, max "
          f"{max((r.position or 0 for r in told), default=0)}); from the 503 to a place / its Retry-After p50 "
          f"{pct(place, 50):.2f}, max {max(place, default=float('nan')):.2f}; to the answer / its "
          f"Retry-After p50 {pct(answer, 50):.2f}, max {max(answer, default=float('nan')):.2f}; runs admitted "
          f"meanwhile past the position announced: {sum(1 for n in past if n > 0)} runs, at most "
          f"{max(past, default=0)} past")
    print(f"  told after the first answer (a pace measured): {len(paced)}; to a place / Retry-After p50 "
          f"{pct(paced, 50):.2f}, max {max(paced, default=float('nan')):.2f}")


@contextlib.contextmanager
def served():
    """A server of its own (uvicorn in a child process, as `sched-sim serve` runs it), its kernels ready:
    yields (base URL, port, pid); stopped on exit."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.web:app", "--port", str(port),
                               "--log-level", "warning"], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        with httpx.Client(base_url=base, timeout=5) as c:
            start = time.monotonic()
            while True:
                try:
                    if c.get("/healthz").json()["kernels_ready"]:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            print(f"server ready (kernels loaded) {time.monotonic() - start:.1f} s after start; "
                  f"RSS {rss_mb(server.pid)[0]:.0f} MB")
        yield base, port, server.pid
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--burst", type=int, default=60)
    ap.add_argument("--line", type=int, default=0, metavar="CLIENTS",
                    help="only phase 4: CLIENTS clients of slow runs in line, for --seconds, and invalid pages")
    args = ap.parse_args()
    with served() as (base, _, pid):
        probe = HealthProbe(base)
        probe.start()
        if args.line:
            print(f"4. {args.line} clients of slow runs ({SLOW}) for {args.seconds:g} s, an invalid page every 50 ms:")
            line_load(base, args.line, args.seconds)
            print(f"  {probe.report_and_reset()}")
            probe.close()
            return

        print(f"1. mixed load, {args.clients} clients for {args.seconds:g} s:")
        mixed_load(base, args.clients, args.seconds)
        now, peak = rss_mb(pid)
        print(f"  {probe.report_and_reset()}; server RSS now {now:.0f} MB, peak {peak:.0f} MB")

        print(f"2. {args.burst} slow simulations at once ({SLOW}):")
        burst(base, args.burst)
        now, peak = rss_mb(pid)
        print(f"  {probe.report_and_reset()}; server RSS now {now:.0f} MB, peak {peak:.0f} MB")

        print("3. the largest accepted scenarios, one at a time:")
        largest(base, pid)
        print(f"  {probe.report_and_reset()}")
        probe.close()


if __name__ == "__main__":
    main()
