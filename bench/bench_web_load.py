"""Long work against the dashboard server (issue 26), measured from outside a real server process (uvicorn, as
`sched-sim serve` runs it):

  1. 8 long synchronous sweeps (/api/sweep) sent at once: how many queue and how many are told 503 +
     Retry-After, and meanwhile the latency of a cached page and of /static/js/app.js;
  2. those sweeps' clients leave: seconds until the server's CPU is idle (nobody else wants the sweeps);
  3. the 9-scheduler x 10-seed x 600 s x 33 req/s /api/run request: status and seconds to the answer (and the
     same with 1 seed, which the budget accepts);
  4. an embed whose client leaves mid-simulation: seconds from the disconnect until the server is idle;
  5. a sweep started from the page, then its Cancel (POST /goodput/<id>/cancel): seconds until idle;
  6. a load test (load.py's mixed load: pages, cached and fresh runs, embeds; then distinct large runs, each
     page rendered once), then the server's RSS at rest (and its peak) and what its caches hold.

"Idle": the server process's CPU time (/proc/<pid>/stat, utime + stime) grows by less than one clock tick over
a tenth of a second; the share of a core it used just before the disconnect or Cancel is printed beside it (on a
machine busy with other work that share is small, and so is what the figure can show). Prints figures; asserts
nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_web_load.py [--runs 24] [--clients 4]
        [--mixed-seconds 30]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import mixed_load, rss_mb, served  # noqa: E402 - bench/ is not a package

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
CACHED_PAGE = "/?hardware=rtx3050&workload=chat&duration=10"
# 16 rates of up to 19,200 requests each at a small token budget: many seconds of one core per sweep.
LONG_SWEEP = ("schedulers=chunked&hardware=a100&workload=chat&duration=600&token_budget=32"
              "&rate_min=2&rate_max=32&rate_step=2")
HUGE_RUN = ("/api/run?schedulers=static,fcfs,spf,chunked,slo,fair,cache_aware,edf,mlfq&seeds=10&duration=600"
            "&rate=33")
LONG_EMBED = ("/embed/kv?schedulers=static,fcfs,spf,chunked,slo,fair,cache_aware,edf,mlfq&hardware=a100"
              "&workload=chat&duration=600&rate=30&seed=77")  # 9 runs of 18,000 requests: seconds of a core
IDLE_WINDOW_S = 0.1


def cpu_s(pid: int) -> float:
    """The process's CPU time so far (all threads), seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    after = stat[stat.rindex(")") + 2:].split()
    return (int(after[11]) + int(after[12])) * TICK_S  # utime, stime (fields 14 and 15)


def seconds_to_idle(pid: int, since: float, limit_s: float = 60.0) -> float:
    """Seconds from `since` (time.monotonic) until the process uses no CPU over IDLE_WINDOW_S (the start of the
    first such window)."""
    while time.monotonic() - since < limit_s:
        start, used = time.monotonic(), cpu_s(pid)
        time.sleep(IDLE_WINDOW_S)
        if cpu_s(pid) - used < TICK_S / 2:
            return start - since
    return float("inf")


def core_share(pid: int, seconds: float = 0.5) -> str:
    used = cpu_s(pid)
    time.sleep(seconds)
    return f"{(cpu_s(pid) - used) / seconds:.0%} of a core"


class Raw:
    """A GET on its own socket, so that the client can leave mid-request (close) at a moment of our choosing."""

    def __init__(self, port: int, path: str, method: str = "GET", headers: str = ""):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: 0\r\n"
                          f"Connection: close\r\n\r\n".encode())

    def answer(self, timeout: float) -> str | None:
        """The response's head and body so far, or None if nothing came within `timeout`."""
        self.sock.settimeout(timeout)
        chunks = []
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
        except TimeoutError:
            if not chunks:
                return None
        return b"".join(chunks).decode("utf-8", "replace")

    def close(self) -> None:
        self.sock.close()


def timed_get(c: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    r = c.get(path)
    assert r.status_code == 200, (path, r.status_code)
    return time.perf_counter() - start


def queue_and_latency(port: int, pid: int, c: httpx.Client) -> None:
    print("1. 8 long sweeps sent at once (/api/sweep):")
    c.get(CACHED_PAGE)
    held, refused = [], []
    sent = [Raw(port, f"/api/sweep?{LONG_SWEEP}&seed={900 + seed}") for seed in range(8)]
    time.sleep(1.0)  # each is checked (a workload generated) and queued or refused within milliseconds
    for raw in sent:
        text = raw.answer(timeout=0.05)
        if text is None:
            held.append(raw)
        else:
            status = text.split(" ", 2)[1]
            retry = re.search(r"(?im)^retry-after: *(\d+)", text)
            refused.append((status, retry.group(1) if retry else None, text.split("\r\n\r\n", 1)[-1]))
            raw.close()
    print(f"  queued and waiting: {len(held)}; answered at once: {len(refused)} "
          f"(status, Retry-After s: {', '.join(f'{s} {r}' for s, r, _ in refused)})")
    if refused:
        print(f"  the first refusal's JSON: {refused[0][2][:300]}")
    page = [timed_get(c, CACHED_PAGE) for _ in range(5)]
    script = [timed_get(c, "/static/js/app.js") for _ in range(5)]
    health = [timed_get(c, "/healthz") for _ in range(5)]
    print(f"  meanwhile (5 each, median / max): cached page {statistics.median(page):.3f} / {max(page):.3f} s; "
          f"app.js {statistics.median(script):.3f} / {max(script):.3f} s; "
          f"/healthz {statistics.median(health):.3f} / {max(health):.3f} s")
    print(f"  sweeps running or queued on the server: {c.get('/healthz').json()['cache'].get('sweeps_running')}")
    print(f"2. the sweeps' clients leave (the server was using {core_share(pid)}):")
    left = time.monotonic()
    for raw in held:
        raw.close()
    print(f"  server idle {seconds_to_idle(pid, left):.2f} s after the disconnects; sweeps still running: "
          f"{c.get('/healthz').json()['cache'].get('sweeps_running')}")


def refusal(c: httpx.Client) -> None:
    print("3. 9 schedulers x 10 seeds x 600 s x 33 req/s (/api/run):")
    start = time.perf_counter()
    r = c.get(HUGE_RUN, timeout=300)
    took = time.perf_counter() - start
    detail = r.json().get("detail")
    if isinstance(detail, list):
        detail = "; ".join(f"{d['loc'][-1]}: {d['msg']}" for d in detail)
    print(f"  {r.status_code} after {took:.3f} s: {str(detail)[:400]}")
    one_seed = HUGE_RUN.replace("&seeds=10", "")
    start = time.perf_counter()
    r = c.get(one_seed, timeout=600)
    print(f"  the same with 1 seed (179k requests, within the budget): {r.status_code} after "
          f"{time.perf_counter() - start:.1f} s (the server's time limit: "
          f"{c.get('/api/catalog').json()['limits']['request_time_limit_s']:g} s)")


def embed_disconnect(port: int, pid: int) -> None:
    print("4. an embed whose client leaves mid-simulation:")
    raw = Raw(port, LONG_EMBED)
    time.sleep(0.5)
    print(f"  before the disconnect the server used {core_share(pid)}")
    left = time.monotonic()
    raw.close()
    print(f"  server idle {seconds_to_idle(pid, left):.2f} s after the disconnect")


def cancel_sweep(port: int, pid: int, c: httpx.Client) -> None:
    print("5. a sweep started from the page, then Cancel:")
    html = c.get(f"/goodput?{LONG_SWEEP}&seed=950", headers={"HX-Request": "true"}).text
    found = re.search(r'hx-post="(/goodput/[0-9a-f]+/cancel)"', html)
    if not found:
        print("  no Cancel button in the sweep's status:", html[:300])
        return
    time.sleep(0.5)
    print(f"  before Cancel the server used {core_share(pid)}")
    r = c.post(found.group(1), headers={"HX-Request": "true"})
    cancelled = time.monotonic()
    print(f"  Cancel answered {r.status_code} ({'cancelled' if 'cancelled' in r.text else r.text[:100]}); server "
          f"idle {seconds_to_idle(pid, cancelled):.2f} s after it")


def memory_load(base: str, pid: int, runs: int, clients: int) -> None:
    print(f"6b. {runs} distinct large runs ({clients} clients at once, each retrying its 503s after Retry-After, "
          "then its page), then at rest:")
    names = ["static", "fcfs", "spf", "chunked", "slo", "fair", "cache_aware", "edf", "mlfq"]
    queries = [f"/api/run?schedulers={','.join(names[(k + j) % 9] for j in range(3))}&hardware=a100&workload=chat"
               f"&duration=600&rate={20 + k % 13}&seed={k}" for k in range(runs)]
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def worker(mine: list[str]) -> None:
        with httpx.Client(base_url=base, timeout=600) as wc:
            for q in mine:
                while (r := wc.get(q)).status_code == 503 and "retry-after" in r.headers:
                    time.sleep(int(r.headers["retry-after"]))
                code = r.status_code
                wc.get(q.replace("/api/run?", "/?"))  # its page, rendered from the cached runs (and kept)
                with lock:
                    statuses[code] = statuses.get(code, 0) + 1

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(queries[k::clients],)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"  answers {dict(sorted(statuses.items()))} in {time.monotonic() - start:.0f} s; "
          f"peak RSS {rss_mb(pid)[1]:.0f} MB")
    seconds_to_idle(pid, time.monotonic())
    time.sleep(2.0)
    with httpx.Client(base_url=base, timeout=10) as c:
        cache = c.get("/healthz").json()["cache"]
    now, peak = rss_mb(pid)
    pages = cache.get("pages") or {}
    print(f"  at rest: RSS {now:.0f} MB (peak {peak:.0f} MB); cached views {cache.get('entries')} holding "
          f"{cache.get('bytes', 0) / 2**20:.0f} MB of {cache.get('max_bytes', 0) / 2**20:.0f} MB; rendered pages "
          f"{pages.get('entries')} holding {pages.get('bytes', 0) / 2**20:.0f} MB of "
          f"{pages.get('max_bytes', 0) / 2**20:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24, help="distinct large runs of the memory load")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--mixed-seconds", type=float, default=30, help="seconds of load.py's mixed load (32 clients)")
    ap.add_argument("--no-memory", action="store_true", help="only parts 1-5 (skip the memory load)")
    args = ap.parse_args()
    with served() as (base, port, pid):
        with httpx.Client(base_url=base, timeout=60) as c:
            queue_and_latency(port, pid, c)
            refusal(c)
            embed_disconnect(port, pid)
            cancel_sweep(port, pid, c)
        if not args.no_memory:
            print(f"6a. load.py's mixed load, 32 clients for {args.mixed_seconds:g} s:")
            mixed_load(base, 32, args.mixed_seconds)
            memory_load(base, pid, args.runs, args.clients)


if __name__ == "__main__":
    main()
