"""Start-up costs: a cold compile of every engine kernel, and a whole `sched-sim run` of a 1000-request CSV trace
with a warm cache. Prints figures; asserts nothing.

    python bench/bench_startup.py --commands [--against ../main] [--cache-dirs A,B]  # everyday commands

--commands times, per checkout, whole `sched-sim` processes (app.cli:entry, run by this interpreter) with a warm kernel cache (medians of 5 after
one warm-up each, alternating between checkouts): `--help`, `list`, a 10-request `run`, and a `run` of a steady
1000-request trace (Poisson arrivals at 10/s, written here) on a100 / llama-3-8b / chunked at budget 512 with
--json; and the load average, since on a shared machine wall time moves with it.

    .venv/bin/python bench/bench_startup.py                       # this checkout
    .venv/bin/python bench/bench_startup.py --against ../main     # A/B, interleaved, against another checkout
                                                                  # (its own .venv, pip install -e'd)

Each figure is measured in fresh processes: wall-clock seconds and CPU seconds (user + system, the compile's
helper process included). On a machine other work shares, wall time moves with the load; CPU time and the
number of compilations much less, so all are printed, and A/B runs alternate between the checkouts. The count
is the main process's: what warm.py's helper process compiles meanwhile shows in its CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# Run in the checkout's own interpreter: compile the engine into an empty cache, count numba's compilations.
COLD_CHILD = """
import json, resource, time
from numba.core import event
counts = {"all": 0, "sim_core": 0}
class Count(event.Listener):
    def on_start(self, ev):
        counts["all"] += 1
        counts["sim_core"] += ev.data["dispatcher"].py_func.__module__.startswith("sim_core")
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
t = time.perf_counter()
import sim_core
sim_core.warm_up()
wall = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": wall, "cpu_s": me.ru_utime + me.ru_stime, "helper_cpu_s": kids.ru_utime + kids.ru_stime,
                  "compilations": counts["all"], "sim_core_compilations": counts["sim_core"]}))
"""


def python_of(root: Path) -> str:
    return str(root / ".venv" / "bin" / "python")


def cold_compile(root: Path) -> dict:
    cache = tempfile.mkdtemp(prefix="bench-startup-")
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([python_of(root), "-c", COLD_CHILD], cwd=root, env=env, capture_output=True, text=True,
                             check=True, timeout=1800)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def write_trace(path: Path, n: int = 1000) -> None:
    rng = random.Random(1)
    t = 0.0
    lines = ["arrival_s,prompt_tokens,output_tokens"]
    for _ in range(n):
        t += rng.expovariate(10.0)
        lines.append(f"{t:.4f},{rng.randint(50, 2000)},{rng.randint(10, 500)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=600)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command_lines(trace: Path) -> dict[str, list[str]]:
    return {
        "help": ["--help"],
        "list": ["list"],
        "run_10_requests": ["run", "--num-requests", "10"],
        "run_1000_request_trace": ["run", "--trace", str(trace), "--hardware", "a100", "--model", "llama-3-8b",
                                   "--scheduler", "chunked", "--token-budget", "512", "--json"],
    }


# What the `sched-sim` console script runs (app.cli:entry, which exits at once once the output is out).
SCHED_SIM = "import sys; from app.cli import entry; sys.argv[0] = 'sched-sim'; entry()"


def time_commands(roots: list[Path], runs: int, caches: list[str | None]) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        trace = work / "steady.csv"
        write_trace(trace)
        lines = command_lines(trace)
        envs = {}
        for root, cache in zip(roots, caches, strict=True):
            # Each checkout's own warm kernel cache (by default jit.py's directory, keyed on its sources).
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NUMBA_CACHE_DIR")}
            env["PYTHONPATH"] = str(root)
            if cache:
                env["NUMBA_CACHE_DIR"] = cache
            envs[root] = env
            for argv in lines.values():  # warm: the kernel cache and the bytecode
                timed([sys.executable, "-c", SCHED_SIM, *argv], env, root)
        samples = {(root, name): [] for root in roots for name in lines}
        for _ in range(runs):
            for name, argv in lines.items():
                for root in roots:
                    samples[root, name].append(timed([sys.executable, "-c", SCHED_SIM, *argv], envs[root], root))
        for root in roots:
            print(json.dumps({"checkout": str(root), "load_average": [round(x, 2) for x in os.getloadavg()],
                              "wall_s_median": {name: round(statistics.median(w for w, _ in samples[root, name]), 3)
                                                for name in lines},
                              "cpu_s_median": {name: round(statistics.median(c for _, c in samples[root, name]), 3)
                                               for name in lines}}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", type=Path, help="another checkout to measure interleaved with this one")
    ap.add_argument("--cold", type=int, default=1, help="cold compiles per checkout")
    ap.add_argument("--runs", type=int, default=7, help="CLI runs per checkout")
    ap.add_argument("--commands", action="store_true", help="time everyday commands (medians of --runs, default 5)")
    ap.add_argument("--cache-dirs", help="NUMBA_CACHE_DIR of each checkout, comma-separated (default: jit.py's)")
    a = ap.parse_args()
    roots = [HERE] + ([a.against.resolve()] if a.against else [])
    if a.commands:
        print(json.dumps({"load_average_before": [round(x, 2) for x in os.getloadavg()]}), flush=True)
        caches = a.cache_dirs.split(",") if a.cache_dirs else [None] * len(roots)
        time_commands(roots, 5 if a.runs == 7 else a.runs, caches)
        return
    for _ in range(a.cold):
        for root in roots:
            r = cold_compile(root)
            print(json.dumps({"checkout": str(root), "cold_compile": {k: round(v, 2) for k, v in r.items()}}),
                  flush=True)
    if a.runs <= 0:
        return

    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        trace = work / "trace.csv"
        write_trace(trace)
        envs = {}
        for root in roots:
            # Bytecode caching on, as an installed package has it; a warm kernel cache of its own.
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["NUMBA_CACHE_DIR"] = str(work / f"cache-{len(envs)}")
            envs[root] = env
            timed([str(root / ".venv" / "bin" / "sched-sim"), "run", "--trace", str(trace)], env, root)  # warm
        samples: dict[Path, list[tuple[float, float]]] = {root: [] for root in roots}
        for _ in range(a.runs):
            for root in roots:
                samples[root].append(timed([str(root / ".venv" / "bin" / "sched-sim"), "run", "--trace", str(trace)],
                                           envs[root], root))
        for root in roots:
            walls, cpus = zip(*samples[root], strict=True)
            print(json.dumps({"checkout": str(root), "cli_run_1000_request_trace": {
                "runs": a.runs, "wall_s_median": round(statistics.median(walls), 3), "wall_s_min": round(min(walls), 3),
                "cpu_s_median": round(statistics.median(cpus), 3), "cpu_s_min": round(min(cpus), 3)}}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
