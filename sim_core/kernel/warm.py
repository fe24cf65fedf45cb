"""A cold warm-up on two cores: the engine's kernels compile in two processes that share numba's on-disk cache.

`simulate` calls everything else, so one process compiles the whole tree bottom-up, one kernel after another.
But a subtree whose argument types are known before any run (the engine record, state.ENGINE; the inputs
Python hands `new_engine`) can be compiled on its own with an explicit signature: a helper process compiles the
scheduler's subtree (`schedule`: the largest, ~40% of the compile) while this one compiles the prefix-cache hasher,
engine construction and the step's other phases; then this one compiles `simulate` (the step inlined), loading
what the helper wrote from the cache instead of compiling it. Nothing changes when the cache is already warm
(the helper is not started), under NUMBA_DISABLE_JIT, without a writable cache, or on one core.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from numba import config as numba_config

from ..policies import SCHEDULER_NAMES
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
HERE = (("content_hash", "block_hashes"), ("build", "new_engine"), ("engine", "admit_arrivals"), ("engine", "run_batch"), ("engine", "land_tokens"),
        ("attribution", "attribute_step"), ("policies.ordering", "_rekey_by_cached_prefix"),
        ("policies.ordering", "_rekey_on_step_time_drift"), ("logs", "take_frames"), ("build", "outcome"),
        ("engine", "release_finished"), ("policies.static_batching", "end_static_batch"), ("logs", "_grow_logs"))


def _kernel(module: str, name: str):
    import importlib

    # Kernels live in sim_core.kernel, but for two policies' kernels.
    package = "sim_core" if module.startswith("policies.") else __package__
    return getattr(importlib.import_module(f"{package}.{module}"), name)


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


def start_helper() -> subprocess.Popen | None:
    """Start the helper process if it would help: a cold cache that can be shared, and a second core."""
    return _compile_elsewhere(HELPER + HERE, "from {package}.warm import HELPER, compile_part; compile_part(HELPER)")


def _compile_elsewhere(kernels, statement: str, niceness: int = 0) -> subprocess.Popen | None:
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
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return None


def compile_in_two() -> None:
    """Compile the engine's subtrees on two cores (a no-op when the cache is warm); the caller then runs the
    engine, which compiles `simulate` over what is cached. If the helper fails, the engine compiles
    what it left undone itself."""
    helper = start_helper()
    if helper is None:
        return
    try:
        compile_part(HERE)
    finally:
        try:
            helper.wait(timeout=900)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()


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


def stop_fleet_compiler(process: subprocess.Popen | None) -> None:
    """End the compiler if it is still running (a short session may end first): what it cached stays cached."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()


def warm_up() -> None:
    """Compile (or load from numba's on-disk cache) every engine code path with tiny runs (a cold cache: on two
    cores, compile_in_two)."""
    compile_in_two()
    for name in SCHEDULER_NAMES:
        run(Scenario(scheduler=name, hardware="rtx3050", num_requests=4, seed=1, max_model_len=8192),
            record_events=True)
