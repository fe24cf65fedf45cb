"""Cold compile: what a fresh install pays before its first result, each in a fresh process with an empty numba
cache (NUMBA_CACHE_DIR in a new temporary directory). Prints figures; asserts nothing.

    .venv/bin/python bench/bench_cold_compile.py                        # this checkout, every case once
    .venv/bin/python bench/bench_cold_compile.py --against ../main      # A/B, alternating, same cases
    .venv/bin/python bench/bench_cold_compile.py --cases run fleet --runs 3

Cases:
  run        `sched-sim run --num-requests 10` (one engine; app.cli's own entry, no worker): the process's wall
             and CPU seconds (it compiles in one process)
  dashboard  `sched-sim serve` on a free port until the landing page's first result (/api/run without
             parameters, which answers 503 while the server's warm-up compiles): wall seconds from the server's
             start, and its CPU seconds by then (its warm-up's helper included)
  fleet      a two-replica run (least_outstanding router), what compiles fleet.simulate_fleet: every replica,
             P/D and autoscaled deployment runs through that one entry

With --profile, the run case also prints numba's ten slowest compilations by their own CPU seconds (nested
compilations taken out; the helper process's are not seen). CPU seconds are the steadier figure on a shared
machine: wall time moves with the load, which is printed beside each line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import COLD_RUN_CHILD, process_cpu_s  # noqa: E402

HERE = Path(__file__).resolve().parent.parent

# In the child with --profile: sched-sim's run, numba's compilations timed by their own CPU seconds (bench_startup's).
SCHED_SIM = "import sys; from app.cli import entry; sys.argv[0] = 'sched-sim'; entry()"
RUN = SCHED_SIM.replace("entry()", "sys.exit(entry())")
PROFILED_RUN = COLD_RUN_CHILD
FLEET = ("from sim_core import Scenario, run\n"
         "run(Scenario(hardware='rtx3050', num_requests=4, seed=1, max_model_len=8192, replicas=2, "
         "router='least_outstanding'))\n")
RUN_ARGS = ["run", "--num-requests", "10"]


def cold_env(root: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(root), SCHED_SIM_NO_WORKER="1")
    return env


def timed_child(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and the children it waited for, its stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_dashboard_result(root: Path, env: dict) -> tuple[float, float]:
    """(wall s from `sched-sim serve` starting to /api/run's first answer, the server's CPU s by then)."""
    port = free_port()
    t = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-c", SCHED_SIM, "serve", "--port", str(port)], env=env, cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/run", timeout=600) as answer:
                    answer.read()
                    break
            except (urllib.error.URLError, ConnectionError) as e:  # not listening yet, or 503 while compiling
                if server.poll() is not None:
                    raise SystemExit(f"the server exited: {e}") from None
                time.sleep(0.2)
        return time.perf_counter() - t, process_cpu_s(server.pid) or float("nan")
    finally:
        server.terminate()
        server.wait(timeout=60)


def measure(root: Path, case: str, profile: bool) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="bench-cold-compile-"))
    try:
        env = cold_env(root, cache)
        extra = {}
        if case == "dashboard":
            wall, cpu = first_dashboard_result(root, env)
        elif case == "fleet":
            wall, cpu, _ = timed_child([sys.executable, "-c", FLEET], env, root)
        else:
            code = PROFILED_RUN if profile else RUN
            wall, cpu, err = timed_child([sys.executable, "-c", code, *RUN_ARGS], env, root)
            if profile:
                extra = json.loads(err.strip().splitlines()[-1])
        return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), **extra}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", type=Path, help="another checkout, measured alternately with this one")
    ap.add_argument("--cases", nargs="+", choices=("run", "dashboard", "fleet"), default=["run", "dashboard", "fleet"])
    ap.add_argument("--runs", type=int, default=1, help="measurements per case and checkout")
    ap.add_argument("--profile", action="store_true", help="the run case's ten slowest compilations")
    a = ap.parse_args()
    roots = [HERE] + ([a.against.resolve()] if a.against else [])
    for case in a.cases:
        for i in range(a.runs):
            for root in roots if i % 2 == 0 else roots[::-1]:
                figures = measure(root, case, a.profile)
                print(json.dumps({"case": case, "checkout": str(root), **figures,
                                  "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)


if __name__ == "__main__":
    main()
