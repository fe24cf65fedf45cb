"""Half-open connections against a real server: does a new client still get /healthz?

Starts the dashboard as `sched-sim serve` does (`python -m app.cli serve`, its own process), opens N connections
(default 20,000) that each send part of a request's headers and then nothing, holds them, and times /healthz from
a fresh client while they are being opened and while they are held. One process cannot hold 20,000 sockets where
the open-files limit is 20,000 (as here), so the connections are spread over as many client processes as the
limit needs (each raises its own limit as far as allowed). How many connections were opened is printed, with how
many the server still holds (the rest it dropped) and its open descriptors.

    .venv/bin/python bench/bench_connections.py [--connections N] [--samples K] [--baseline] [--slow-body]

`--slow-body`: each connection sends a whole upload's headers and then one byte of its body (a body that trickles,
rather than headers). `--baseline` starts plain `uvicorn app.web:app` instead (no connection limits: what `serve` ran before), to show
the lockout being measured. Exits 1 if any /healthz failed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import multiprocessing
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Waiting: "  # never finished
SLOW_BODY = (b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
             b"Content-Length: 1000000\r\n\r\n-")  # a body that never arrives
HEALTHZ_TIMEOUT_S = 10.0
PAUSE_S = 0.05  # between /healthz samples: a client checking in, not a second flood
CLIENT_FD_RESERVE = 16  # descriptors each client process keeps for itself (its pipe, a /proc read, ...)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthz(port: int, timeout: float = HEALTHZ_TIMEOUT_S) -> float | None:
    """Seconds for a fresh connection's GET /healthz (200), or None if it failed or timed out."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
    except OSError:
        return None
    finally:
        conn.close()
    return time.perf_counter() - start if ok else None


@contextlib.contextmanager
def server(port: int, baseline: bool):
    store = tempfile.mkdtemp(prefix="bench-connections-store-")
    cmd = ([sys.executable, "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"] if baseline else
           [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--store-dir", store])
    env = dict(os.environ, PYTHONPATH=str(ROOT), SCHED_SIM_STORE_DIR=store)
    # Its log goes to a file: a pipe nobody reads while connections are held would fill and stall the server.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while healthz(port, 1.0) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"the server did not start: {log.read().decode()[-2000:]}")
            time.sleep(0.2)
        yield proc
        log.seek(0)
        errors = log.read().decode(errors="replace").count("Traceback")
        print(f"server log: {errors} tracebacks")
    finally:
        log.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def raise_fd_limit() -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def open_half_open(port: int, n: int, head: bytes = PARTIAL_HEAD) -> tuple[list[socket.socket], str]:
    """Up to n connections, each having sent `head`; and why it stopped short, if it did."""
    socks: list[socket.socket] = []
    for _ in range(n):
        try:
            s = socket.socket()
        except OSError as e:  # the client's own descriptors are used up
            return socks, f"client: {e.strerror}"
        # closed with a reset afterwards: no TIME_WAIT holding the 20,000 local ports after the run
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.settimeout(2.0)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(head)
        except OSError as e:
            s.close()
            return socks, f"connect: {e}"
        socks.append(s)
    return socks, ""


def still_open(socks: list[socket.socket]) -> int:
    """How many of the connections the server has not closed (a closed one reads as EOF or a reset)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def server_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _holder(port: int, n: int, head: bytes, conn) -> None:
    """A client process: opens up to n half-open connections, reports how many (and why it stopped short), holds
    them until told, reports how many the server still holds, and exits (its sockets reset)."""
    raise_fd_limit()
    socks, stopped = open_half_open(port, n, head)
    conn.send((len(socks), stopped))
    conn.recv()
    conn.send(still_open(socks))
    conn.recv()


def per_process() -> int:
    soft, _ = raise_fd_limit()
    return max(1, soft - len(os.listdir("/proc/self/fd")) - CLIENT_FD_RESERVE)


def sample_healthz(port: int, samples: int, stop: threading.Event | None = None, pid: int | None = None,
                   peak: list[int] | None = None) -> list[float | None]:
    """Up to `samples` /healthz timings (None for a failure), PAUSE_S apart; stops early after 3 failures, or when
    `stop` is set. With `pid`, the most descriptors that process had open is kept in peak[0]."""
    times: list[float | None] = []
    while len(times) < samples and not (stop is not None and stop.is_set()):
        times.append(healthz(port))
        if pid is not None and peak is not None:
            peak[0] = max(peak[0], server_fds(pid) or 0)
        if times.count(None) >= 3:
            break
        time.sleep(PAUSE_S)
    return times


def summary(what: str, times: list[float | None]) -> str:
    ok = sorted(t for t in times if t is not None)
    text = f"/healthz {what}: {len(ok)}/{len(times)} answered"
    if ok:
        text += f", median {ok[len(ok) // 2] * 1000:.1f} ms, max {ok[-1] * 1000:.1f} ms"
    if len(ok) < len(times):
        text += f" ({len(times) - len(ok)} failed, timeout {HEALTHZ_TIMEOUT_S:.0f} s)"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20_000)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--baseline", action="store_true")
    ap.add_argument("--slow-body", action="store_true")
    args = ap.parse_args()
    soft, hard = raise_fd_limit()
    share = per_process()
    procs = -(-args.connections // share)
    port = free_port()
    what = "plain uvicorn app.web:app (baseline)" if args.baseline else "python -m app.cli serve"
    print(f"server: {what}; client open-files limit {soft} (hard {hard}): {procs} client process(es)")
    ctx = multiprocessing.get_context("fork")
    with server(port, args.baseline) as proc:
        before = healthz(port)
        start = time.perf_counter()
        pipes, workers = [], []
        for k in range(procs):
            parent, child = ctx.Pipe()
            n = min(share, args.connections - k * share)
            workers.append(ctx.Process(target=_holder, args=(port, n, SLOW_BODY if args.slow_body else PARTIAL_HEAD, child), daemon=True))
            workers[-1].start()
            pipes.append(parent)
        stop = threading.Event()
        during: list[float | None] = []
        peak = [0]
        sampler = threading.Thread(target=lambda: during.extend(sample_healthz(port, 10**6, stop, proc.pid, peak)))
        sampler.start()
        reports = [p.recv() for p in pipes]
        stop.set()
        sampler.join()
        opened_s = time.perf_counter() - start
        opened = sum(n for n, _ in reports)
        stopped = "; ".join(sorted({why for _, why in reports if why}))
        kind = "slow-body" if args.slow_body else "half-open"
        print(f"opened {opened:,} {kind} connections in {opened_s:.1f} s (asked for {args.connections:,})"
              + (f"; stopped: {stopped}" if stopped else ""))
        held_times = sample_healthz(port, args.samples)
        for p in pipes:
            p.send("count")
        held = sum(p.recv() for p in pipes)
        print(f"server holds {held:,} of them; its open descriptors: {server_fds(proc.pid)} "
              f"(at most {peak[0]:,} seen while they were opened)")
        print(f"/healthz before: {before * 1000:.1f} ms" if before else "/healthz before: failed")
        print(summary("while they were opened", during))
        print(summary("while held", held_times))
        for p in pipes:
            p.send("close")
        for w in workers:
            w.join(30)
    failed = any(t is None for t in during + held_times)
    return 1 if failed or not held_times else 0


if __name__ == "__main__":
    sys.exit(main())
