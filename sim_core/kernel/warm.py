"""A cold warm-up on two cores: the engine's kernels compile in two processes that share numba's on-disk cache.

`simulate` calls everything else, so one process compiles the whole tree bottom-up, one kernel after another.
But a subtree whose argument types are known before any run (the engine record, state.ENGINE; the inputs
Python hands `new_engine`) can be compiled on its own with an explicit signature: a helper process compiles the
scheduler's subtree (`schedule`: the largest, ~40% of the compile) while this one compiles the prefix-cache hasher,
engine construction and the step's other phases; then this one compiles `simulate` (the step inlined), loading
what the helper wrote from the cache instead of compiling it, while the helper goes on to the entries a run calls
after the simulation (the bounds its metrics report). Nothing changes when the cache is already warm (the helper
is not started), under NUMBA_DISABLE_JIT, without a writable cache, or on one core.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from numba import config as numba_config

from ..policies import SCHEDULER_NAMES
from ..pool_autoscale import most_engines
from ..runner import (
    DEFAULT_MAX_STEP_RECORDS,
    class_slos,
    engine_config,
    frame_spec,
    make_requests,
    request_table,
    resolve,
    run,
)
from ..scenario import Scenario
from . import jit
from .state import ENGINE

# What the helper process compiles, and what this one compiles meanwhile (module, kernel) — each a subtree of
# `simulate` whose argument types do not depend on a run. Split by measured compile time (bench/bench_startup.py).
HELPER = (("scheduler", "schedule"),)
# What the helper compiles next, once this process may go on to `simulate`: entries a run calls after simulating
# (its bounds: sim_core/bounds.py).
HELPER_THEN = (("..request_floors", "request_floors_s"), ("..bounds", "relaxed_server"))
HERE = (("content_hash", "block_hashes"), ("build", "new_engine"), ("engine", "admit_arrivals"), ("engine", "run_batch"), ("engine", "land_tokens"),
        ("attribution", "attribute_step"), ("policies.ordering", "_rekey_by_cached_prefix"),
        ("policies.ordering", "_rekey_on_step_time_drift"), ("logs", "take_frames"), ("build", "outcome"),
        ("engine", "release_finished"), ("policies.static_batching", "end_static_batch"), ("logs", "_grow_logs"))


def _kernel(module: str, name: str):
    import importlib

    # Kernels live in sim_core.kernel, but for two policies' kernels and the bounds' entries ("..": in sim_core).
    package = "sim_core" if module.startswith("policies.") else __package__
    return getattr(importlib.import_module(module if module.startswith("..") else f"{package}.{module}", package), name)


def signatures(module: str, name: str) -> list[tuple]:
    """The argument types the engine calls this kernel with."""
    from numba import typeof, types

    if (module, name) == ("build", "new_engine"):
        return [tuple(typeof(a) for a in _engine_inputs())]
    if (module, name) == ("content_hash", "block_hashes"):
        return [(types.int64[::1], types.int64[::1], types.int64[::1], types.boolean[::1], types.int64)]
    if (module, name) == ("logs", "take_frames"):
        return [(ENGINE, types.boolean)]
    if (module, name) == ("logs", "_grow_logs"):
        return [(ENGINE, types.boolean, types.boolean)]
    if (module, name) == ("..request_floors", "request_floors_s"):  # two pools' cost params, uncached and cached tokens
        return [(types.float64[::1], types.float64[::1], types.int64[::1], types.int64[::1])]
    if (module, name) == ("..bounds", "relaxed_server"):  # problem, release, work, deadline
        return [(types.int64, types.float64[::1], types.float64[::1], types.float64[::1])]
    return [(ENGINE,)]


def _engine_inputs() -> tuple:
    """(Config, RequestTable, FrameSpec) of a tiny run, as runner.simulate_requests builds them."""
    s = Scenario(scheduler="fcfs", hardware="rtx3050", num_requests=4, seed=1, max_model_len=8192)
    r = resolve(s)
    reqs = make_requests(s, r)
    cfg = engine_config(s, r, class_slos(s, r, reqs), record_events=True, max_step_records=DEFAULT_MAX_STEP_RECORDS,
                        debug_checks=False)
    return cfg, request_table(reqs, cfg), frame_spec(reqs)


def compile_part(part) -> None:
    for module, name in part:
        for sig in signatures(module, name):
            _kernel(module, name).compile(sig)


def cached_signatures(module: str, name: str) -> list:
    """The signatures numba's cache holds for this kernel (none if its source changed since)."""
    cache_file = getattr(getattr(_kernel(module, name), "_cache", None), "_cache_file", None)
    return [key[0] for key in cache_file._load_index()] if cache_file is not None else []


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# What the helper prints once HELPER is in the cache (and it goes on to HELPER_THEN).
HELPER_READY = b"ready\n"


def start_helper() -> subprocess.Popen | None:
    """Start the helper process if it would help: its kernels not all cached, a cache it can share, a second
    core. It prints HELPER_READY between its two parts."""
    return _compile_elsewhere(HELPER + HELPER_THEN,
                              "from {package}.warm import HELPER, HELPER_READY, HELPER_THEN, compile_part; "
                              "import sys; compile_part(HELPER); sys.stdout.buffer.write(HELPER_READY); "
                              "sys.stdout.flush(); compile_part(HELPER_THEN)", stdout=subprocess.PIPE)


def _compile_elsewhere(kernels, statement: str, niceness: int = 0, stdout=subprocess.DEVNULL) -> subprocess.Popen | None:
    """Run `statement` (`{package}`: this package) in a new Python process that shares this one's numba cache, if
    it would help: some of `kernels` ((module, name) pairs) not cached yet, jitting on, a cache it can write to, a
    second core. None otherwise."""
    if numba_config.DISABLE_JIT or jit.CACHE_DIR is None or jit.CACHE_WRITE_ERROR is not None or _cores() < 2:
        return None
    if all(cached_signatures(m, n) for m, n in kernels):
        return None
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, NUMBA_CACHE_DIR=jit.CACHE_DIR,
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS threads would spin on the cores both processes use
    try:
        # A process that can write no cache (not even jit.FALLBACK_DIR) is of no use, this one would compile its
        # part again: it ends then (jit.EXIT_ON_CACHE_WRITE_FAILURE) instead of taking a core to the end.
        return subprocess.Popen([sys.executable, "-c", f"import os; os.nice({niceness}); "
                                                       f"from {__package__} import jit; "
                                                       "jit.EXIT_ON_CACHE_WRITE_FAILURE = True; "
                                                       f"{statement.format(package=__package__)}; os._exit(0)"],
                                env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def compile_in_two() -> subprocess.Popen | None:
    """Compile the engine's subtrees on two cores (a no-op when the cache is warm: None); the caller then runs the
    engine, which compiles `simulate` over what is cached, while the helper, still running, compiles HELPER_THEN;
    the caller ends it with stop_compiler. If the helper fails, the engine compiles what it left undone itself."""
    helper = start_helper()
    if helper is None:
        return None
    try:
        compile_part(HERE)
        with _killed_after(HELPER_TIMEOUT_S, helper):
            helper.stdout.readline()  # HELPER_READY once HELPER is cached; b"" if the helper ended
    except BaseException:
        stop_compiler(helper)
        raise
    return helper


@contextlib.contextmanager
def compiled_on_two_cores(scenario: Scenario):
    """Around a face's runs of `scenario` (the CLI's run and compare): a cold cache and a single-engine deployment
    compile the engine's subtrees on two cores first (compile_in_two), and the helper is ended after the runs. A
    cold `sched-sim run` of 10 requests took 31 s on one core of this 2-core machine and 21 s so. Nothing happens
    when the engine's entry is cached (its cache index, which the run opens anyway: a warm run opens no other
    kernel's) or for replicas, pools and autoscaling, whose entry (fleet.simulate_fleet) inlines the engine's step
    and so compiles it again whatever is cached."""
    # (With jitting off the entry has no cache, and compile_in_two starts nothing.)
    cold = most_engines(scenario) == 1 and not cached_signatures("engine", "simulate")
    helper = compile_in_two() if cold else None
    try:
        yield
    finally:
        stop_compiler(helper)


# The longest this process waits for the helper's first part (~15 CPU-s): past it, the helper is ended and this
# process compiles what is missing itself.
HELPER_TIMEOUT_S = 900


@contextlib.contextmanager
def _killed_after(seconds: float, process: subprocess.Popen):
    timer = threading.Timer(seconds, process.kill)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def stop_compiler(process: subprocess.Popen | None) -> None:
    """End a compiling process (the helper, the fleet compiler) if it is still running (the work it was started
    for may be done without it): what it cached stays cached; numba writes each file under a temporary name."""
    if process is not None and process.poll() is None:
        process.kill()
    if process is not None:
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


# ---------------------------------------------------------------------------------------------------------
# The fleet's kernels, compiled in the background
# ---------------------------------------------------------------------------------------------------------
# Replicas behind a router, prefill/decode pools and an autoscaled fleet all run through one entry kernel,
# fleet.simulate_fleet, that compiles the engine's step again, inlined into its loop: ~25 s on one core of this
# project's 2-core machine. A process that will run it later (the test session) can have a low-priority process
# compile it meanwhile on the core it leaves idle; it then loads it from numba's cache. Tiny scenarios, one per
# deployment shape (each loads what the first compiled).
FLEET_SCENARIOS = (
    dict(replicas=2, router="least_outstanding"),
    dict(prefill_replicas=1, decode_replicas=1),
    dict(autoscaler="utilization", autoscale_metric="running", autoscale_target=8, max_replicas=2),
)
FLEET_ENTRIES = (("fleet", "simulate_fleet"),)
FLEET_NICENESS = 10  # below the process it works for: it takes a core only when that one leaves it idle


def compile_fleet() -> None:
    """Compile (or load) the fleet's entry kernels with a tiny run of each."""
    for fleet in FLEET_SCENARIOS:
        run(Scenario(hardware="rtx3050", num_requests=4, seed=1, max_model_len=8192, **fleet))


def start_fleet_compiler() -> subprocess.Popen | None:
    """Start compile_fleet in a low-priority process if the fleet's kernels are not all cached and it can share
    the cache (the conditions of start_helper); the caller ends it with stop_fleet_compiler."""
    return _compile_elsewhere(FLEET_ENTRIES, "from {package}.warm import compile_fleet; compile_fleet()",
                              FLEET_NICENESS)


def warm_up(progress: Callable[[int, int, str], None] | None = None) -> None:
    """Compile (or load from numba's on-disk cache) every engine code path with tiny runs, and the entries a run
    calls after simulating (a cold cache: on two cores, compile_in_two). `progress(done, total, what)` hears of
    each of warm_up_steps() before it starts, and once all are done (done == total, what "done")."""
    steps = warm_up_steps()
    say = progress or (lambda done, total, what: None)
    say(0, len(steps), steps[0])
    helper = compile_in_two()
    try:
        for k, name in enumerate(SCHEDULER_NAMES, start=1):
            say(k, len(steps), steps[k])
            run(Scenario(scheduler=name, **TINY_RUN), record_events=True)
        if helper is not None:
            say(len(steps) - 2, len(steps), steps[-2])
            with contextlib.suppress(subprocess.TimeoutExpired):
                helper.wait(timeout=HELPER_TIMEOUT_S)  # HELPER_THEN cached: the run below loads it
    finally:
        stop_compiler(helper)
    say(len(steps) - 1, len(steps), steps[-1])
    run(Scenario(**TINY_RUN), record_events=True, bounds=True)
    say(len(steps), len(steps), "done")


def warm_up_steps() -> tuple[str, ...]:
    """warm_up's steps in order, as its progress names them (the second process's only with a cold cache)."""
    return ("the engine's parts (on two cores when the cache is cold)",
            *(f"the engine's loop with the {name} scheduler" for name in SCHEDULER_NAMES),
            "what runs after a simulation (in the second process)", "the run's bounds and metrics")


TINY_RUN = dict(hardware="rtx3050", num_requests=4, seed=1, max_model_len=8192)
