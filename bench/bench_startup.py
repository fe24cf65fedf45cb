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
    .venv/bin/python bench/bench_startup.py --worker [--blis PATH]  # with and without `sched-sim worker`, and BLIS
    .venv/bin/python bench/bench_startup.py --cold-run              # a 10-request run into an empty kernel cache

--worker times the same four commands with and without a live `sched-sim worker` of this checkout (one started
here, in a private directory of its own, and stopped at the end), alternating, medians of 5. With --blis (a built
BLIS binary: github.com/inference-sim/inference-sim, `go build -o blis main.go`; or $BLIS), it times BLIS on the
comparable runs too, alternating with sched-sim's: a 10-request `blis run` (its synthetic workload at 10/s) and a
`blis replay` of the same 1000-request steady trace (written as its TraceV2 CSV), on A100 / llama-3.1-8b at a
512-token batch budget; without one it says it skipped them. --cold-run times a whole `sched-sim run` of 10
requests into an empty NUMBA_CACHE_DIR (what a fresh install's first run costs), with numba's compilations, the
ten slowest of them by their own compile CPU seconds, and the same run again from the cache it left.
--cold-dashboard PORT times `sched-sim serve` from its start with an empty kernel cache to the landing page's first
result (what a fresh clone's `bash scripts/serve.sh` shows once its install is done).

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
import urllib.error
import urllib.request
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


# ---------------------------------------------------------------------------------------------------------
# With and without the worker, and BLIS side by side
# ---------------------------------------------------------------------------------------------------------
BLIS_MODEL = ["--model", "meta-llama/llama-3.1-8b-instruct", "--hardware", "A100-80", "--tp", "1",
              "--max-num-batched-tokens", "512"]
TRACE_V2_COLUMNS = ("request_id,client_id,tenant_id,slo_class,session_id,round_index,prefix_group,prefix_length,"
                    "streaming,input_tokens,output_tokens,text_tokens,image_tokens,audio_tokens,video_tokens,"
                    "reason_ratio,model,deadline_us,server_input_tokens,arrival_time_us,send_time_us,"
                    "first_chunk_time_us,last_chunk_time_us,num_chunks,status,error_message,finish_reason")


def write_trace_v2(csv_trace: Path, header: Path, data: Path) -> None:
    """The steady trace as BLIS's TraceV2 (a YAML header and a CSV of one request a row): the same arrivals and
    lengths."""
    header.write_text("trace_version: 3\ntime_unit: microseconds\nmode: replay\nwarm_up_requests: 0\n",
                      encoding="utf-8")
    rows = [TRACE_V2_COLUMNS]
    for i, line in enumerate(csv_trace.read_text(encoding="utf-8").splitlines()[1:]):
        arrival, prompt, output = line.split(",")
        us = round(float(arrival) * 1e6)
        rows.append(f"{i},trace,,,,0,,0,false,{prompt},{output},{prompt},0,0,0,0,,0,0,{us},{us},0,0,0,ok,,")
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")


def blis_binary(given: str | None) -> Path | None:
    path = given or os.environ.get("BLIS")
    return Path(path).resolve() if path and os.access(path, os.X_OK) else None


def blis_lines(blis: Path, work: Path, trace: Path) -> dict[str, list[str]]:
    write_trace_v2(trace, work / "steady.yaml", work / "steady-v2.csv")
    return {"run_10_requests": [str(blis), "run", *BLIS_MODEL, "--num-requests", "10", "--rate", "10"],
            "run_1000_request_trace": [str(blis), "replay", *BLIS_MODEL, "--trace-header", str(work / "steady.yaml"),
                                       "--trace-data", str(work / "steady-v2.csv")]}


def commands_cpu(env: dict) -> float:
    """CPU seconds of the commands the worker has run, once none is running (it reaps them as it answers)."""
    while True:
        done = subprocess.run([sys.executable, "-c", SCHED_SIM, "worker", "status", "--json"], env=env, cwd=HERE,
                              capture_output=True, text=True, check=True, timeout=60)
        status = json.loads(done.stdout)
        if status["commands_running"] == 0:
            return status["commands_cpu_s"]
        time.sleep(0.01)


def time_with_worker(runs: int, blis_path: str | None) -> None:
    """This checkout's commands without and with a live worker (and BLIS's, if given), alternating; medians."""
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        trace = work / "steady.csv"
        write_trace(trace)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SCHED_SIM_NO_WORKER")}
        env.update(PYTHONPATH=str(HERE), SCHED_SIM_WORKER_DIR=str(work / "worker"))
        ways = {"without_worker": {**env, "SCHED_SIM_NO_WORKER": "1"}, "with_worker": env}
        commands = {name: [sys.executable, "-c", SCHED_SIM, *argv] for name, argv in command_lines(trace).items()}
        started = subprocess.run([sys.executable, "-c", SCHED_SIM, "worker", "start", "--idle-timeout", "3600"],
                                 env=env, cwd=HERE, capture_output=True, text=True, timeout=1800)
        if started.returncode != 0:
            raise SystemExit(f"the worker did not start: {started.stderr.strip()}")
        blis = blis_binary(blis_path)
        lines = {(way, name): (cmd, ways[way], HERE) for way in ways for name, cmd in commands.items()}
        if blis is None:
            print(json.dumps({"blis": "skipped: no BLIS binary (--blis PATH or $BLIS; build it with the Go "
                                      "toolchain: go build -o blis main.go in inference-sim/inference-sim)"}))
        else:
            # (in its own directory: it reads defaults.yaml and model_configs/ there)
            lines.update({("blis", name): (cmd, dict(os.environ), blis.parent) for name, cmd in
                          blis_lines(blis, work, trace).items()})
        for cmd, e, cwd in lines.values():  # warm: the kernel cache, the bytecode, the worker's first fork
            timed(cmd, e, cwd)
        samples = {key: [] for key in lines}
        for _ in range(runs):
            for key, (cmd, e, cwd) in lines.items():
                before = commands_cpu(env) if key[0] == "with_worker" else 0.0
                wall, cpu = timed(cmd, e, cwd)
                # The command's own CPU is spent in the worker's child: added to the client's.
                samples[key].append((wall, cpu + (commands_cpu(env) - before if key[0] == "with_worker" else 0.0)))
        for way in ("without_worker", "with_worker", "blis"):
            names = [name for w, name in samples if w == way]
            if names:
                print(json.dumps({way: {"load_average": [round(x, 2) for x in os.getloadavg()],
                                        "wall_s_median": {n: round(statistics.median(w for w, _ in samples[way, n]), 3)
                                                          for n in names},
                                        "cpu_s_median": {n: round(statistics.median(c for _, c in samples[way, n]), 3)
                                                         for n in names}}}), flush=True)
        print(json.dumps({"with_worker_cpu": "the client's CPU and the worker's child's, which ran the command"}))
    finally:
        subprocess.run([sys.executable, "-c", SCHED_SIM, "worker", "stop"], env=env, cwd=HERE, capture_output=True,
                       timeout=60)
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# A first run into an empty kernel cache
# ---------------------------------------------------------------------------------------------------------
# sched-sim's own `run` (app.cli.entry), numba's compilations counted and each one's own seconds (its nested
# compilations' taken out) reported at exit.
COLD_RUN_CHILD = """
import atexit, json, os, sys, time
from numba.core import event
stack, own = [], {}
class Times(event.Listener):
    def on_start(self, ev):
        stack.append([ev.data["dispatcher"].py_func.__qualname__, time.process_time(), 0.0])
    def on_end(self, ev):
        name, t0, nested = stack.pop()
        spent = time.process_time() - t0
        if stack:
            stack[-1][2] += spent
        own[name] = own.get(name, 0.0) + spent - nested
event.register("numba:compile", Times())
def report():
    slowest = sorted(own.items(), key=lambda kv: -kv[1])[:10]
    print(json.dumps({"compilations_s": round(sum(own.values()), 2), "kernels": len(own),
                      "slowest_s": {k: round(v, 2) for k, v in slowest}}), file=sys.stderr)
from app.cli import main
code = main(sys.argv[1:])
report()
sys.stdout.flush()
os._exit(code)
"""


def cold_run(runs: int) -> None:
    for _ in range(runs):
        cache = Path(tempfile.mkdtemp(prefix="bench-startup-cache-"))
        try:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(HERE), SCHED_SIM_NO_WORKER="1")
            argv = [sys.executable, "-c", COLD_RUN_CHILD, "run", "--num-requests", "10"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            done = subprocess.run(argv, env=env, cwd=HERE, capture_output=True, text=True, check=True, timeout=1800)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            warm_wall, warm_cpu = timed(argv, env, HERE)
            print(json.dumps({"cold_run_10_requests": {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                                                       **json.loads(done.stderr.strip().splitlines()[-1]),
                                                       "then_warm_wall_s": round(warm_wall, 2),
                                                       "then_warm_cpu_s": round(warm_cpu, 2)},
                              "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)


def process_cpu_s(pid: int) -> float | None:
    """A live process's CPU seconds, its finished children's included (Linux's /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return round(sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK"), 2)  # utime stime cutime cstime


def cold_dashboard(port: int) -> None:
    """Seconds from `sched-sim serve` starting, with an empty kernel cache, to the landing page's first result
    (/api/run without parameters, which answers 503 while the kernels compile); /healthz's warm-up seconds; the
    server's CPU seconds by then (its compile helpers' included)."""
    cache = Path(tempfile.mkdtemp(prefix="bench-startup-cache-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(HERE))
    t = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-c", SCHED_SIM, "serve", "--port", str(port)], env=env, cwd=HERE,
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
        first = time.perf_counter() - t
        cpu = process_cpu_s(server.pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=60) as answer:
            health = json.loads(answer.read())
        print(json.dumps({"cold_dashboard": {"first_result_s": round(first, 2), "warm_up_s": health.get("warm_up_s"),
                                             "server_cpu_s": cpu},
                          "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", type=Path, help="another checkout to measure interleaved with this one")
    ap.add_argument("--cold", type=int, default=1, help="cold compiles per checkout")
    ap.add_argument("--runs", type=int, default=7, help="CLI runs per checkout")
    ap.add_argument("--commands", action="store_true", help="time everyday commands (medians of --runs, default 5)")
    ap.add_argument("--cache-dirs", help="NUMBA_CACHE_DIR of each checkout, comma-separated (default: jit.py's)")
    ap.add_argument("--worker", action="store_true", help="time the commands with and without a worker (and BLIS)")
    ap.add_argument("--blis", help="with --worker: a built BLIS binary to time side by side (default: $BLIS)")
    ap.add_argument("--cold-run", action="store_true", help="a 10-request run into an empty kernel cache (x --cold)")
    ap.add_argument("--cold-dashboard", type=int, metavar="PORT",
                    help="seconds from `sched-sim serve` on PORT, with an empty kernel cache, to its first result")
    a = ap.parse_args()
    if a.cold_dashboard:
        cold_dashboard(a.cold_dashboard)
        return
    if a.worker:
        print(json.dumps({"load_average_before": [round(x, 2) for x in os.getloadavg()]}), flush=True)
        time_with_worker(5 if a.runs == 7 else a.runs, a.blis)
        return
    if a.cold_run:
        cold_run(a.cold)
        return
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
