"""`sched-sim worker start|stop|status`: a process that keeps sim_core and its kernels loaded, which later
`sched-sim` commands of this checkout hand their command line to (app/cli/worker.py: how, and what is checked)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from .. import worker
from ..usage import EXIT_INTERNAL, error

NAME = "worker"
DEFAULT_IDLE_S = 1800
IDLE_RANGE_S = (1, 7 * 24 * 3600)
START_WAIT_S = 900  # a cold numba cache compiles every engine kernel first (bench/bench_startup.py: cold compile)
STOP_WAIT_S = 10
# The worker process, importing this checkout's app (sys.path[0]) whatever the directory it starts in.
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from app.cli.worker_server import main; main(sys.argv[1:])"


def idle_seconds(text: str) -> int:
    low, high = IDLE_RANGE_S
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be a whole number of seconds from {low} to {high}, got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("start", "stop", "status"),
                   help="start a worker for this checkout (or say it runs), stop it, or show it (status exits 1 when none runs)")
    p.add_argument("--idle-timeout", type=idle_seconds, default=DEFAULT_IDLE_S, metavar="SECONDS",
                   help=f"start: the worker exits after this many seconds without a command "
                        f"(default {DEFAULT_IDLE_S}; {IDLE_RANGE_S[0]} to {IDLE_RANGE_S[1]})")
    p.add_argument("--json", action="store_true", help="status: print it as a JSON object")


def handle(args: argparse.Namespace) -> int:
    try:
        return {"start": _start, "stop": _stop, "status": _status}[args.action](args)
    except worker.WorkerUnsafe as e:
        return error(f"worker: {e} ({worker.DIR_ENV} names another directory for the worker)", EXIT_INTERNAL)


def _start(args: argparse.Namespace) -> int:
    folder = worker.private_dir(create=True)
    live = worker.ask("status")
    if live is not None and live.get("source_hash") == worker.source_hash():
        print(f"a worker is already running: pid {live['pid']}, socket {live['socket']}")
        return 0
    if live is not None:  # started before the sources changed
        _stop_and_wait()
    path = worker.socket_path()
    log = os.open(folder / f"{path.stem}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    root = str(worker.checkout_roots()[1].parent)
    try:
        process = subprocess.Popen([sys.executable, "-c", BOOT, root, "--idle-timeout", str(args.idle_timeout)],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        os.close(log)
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return error(f"worker: it exited with status {process.returncode} while starting; its log: "
                         f"{folder / f'{path.stem}.log'}", EXIT_INTERNAL)
        live = worker.ask("status")
        if live is not None and live.get("pid") == process.pid:
            print(f"worker started: pid {process.pid}, socket {path} (exits after {args.idle_timeout} s idle)")
            return 0
        time.sleep(0.1)
    process.kill()
    return error(f"worker: not ready after {START_WAIT_S} s; stopped it", EXIT_INTERNAL)


def _stop(args: argparse.Namespace) -> int:
    pid = _stop_and_wait()
    print(f"worker stopped: pid {pid}" if pid is not None else "no worker running")
    return 0


def _stop_and_wait() -> int | None:
    """Tell the live worker to stop and wait until its socket is gone; its pid, or None if none was live."""
    answer = worker.ask("stop")
    if answer is None:
        return None
    deadline = time.monotonic() + STOP_WAIT_S
    while worker.socket_path().exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return answer.get("pid")


def _status(args: argparse.Namespace) -> int:
    live = worker.ask("status")
    if live is None:
        if args.json:
            print(json.dumps({"running": False, "socket": str(worker.socket_path())}))
        else:
            print(f"no worker running (socket {worker.socket_path()})")
        return 1
    live = {"running": True, **live, "current": live.get("source_hash") == worker.source_hash()}
    if args.json:
        print(json.dumps(live))
        return 0
    started = datetime.datetime.fromtimestamp(live["started_at"]).isoformat(timespec="seconds")
    print(f"worker running: pid {live['pid']}, socket {live['socket']}\n"
          f"  started {started}, {live['served']} commands served, {live['commands_running']} running now, "
          f"exits after {live['idle_timeout_s']:g} s idle\n"
          f"  sources: {'the same as this checkout' if live['current'] else 'stale (the next command stops it)'}")
    return 0
