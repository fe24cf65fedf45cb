"""Where many independent simulations run: one abstraction, `map(fn, tasks)` -> results in the tasks' order, with
two implementations.

- `LocalExecutor`: this machine's processes (a forked process pool; in-process with one worker). The default.
- `RayExecutor`: the tasks of a Ray cluster, a local one (`ray.init(num_cpus=N)`) or an existing one by address
  (`ray start` on Slurm nodes, a KubeRay cluster's head). Ray is an optional extra: `pip install sched-sim[ray]`.

Sweeps, capacity searches and plans take an executor and hand it their independent pieces (a (scheduler, rate)
point, one seed's capacity search, one candidate's verification run); the results do not depend on where they
ran: each task is a deterministic function of its scenario.

Compiled kernels: numba caches its machine code on disk (NUMBA_CACHE_DIR). A forked local worker inherits the
parent's loaded kernels; a Ray worker is told the parent's NUMBA_CACHE_DIR through the job's runtime environment,
so on a node that shares the directory it loads the kernels instead of compiling them (on another node the first
task compiles and writes them there, and the node's later workers load them). A Ray worker process runs many
tasks, so it loads them once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..kernel import jit
from ..kernel.warm import warm_up

EXECUTORS = ("local", "ray")


class ExecutorError(RuntimeError):
    """The executor cannot run (Ray not installed, no cluster at the address): a message for the user."""


def map_in_process(fn: Callable[[Any], Any], tasks: Sequence, on_done: Callable[[int, int], None] | None = None
                   ) -> list:
    """fn over tasks in this process, in order, reporting (done, total) after each: an executor's map without one."""
    out = []
    for k, task in enumerate(tasks):
        out.append(fn(task))
        if on_done:
            on_done(k + 1, len(tasks))
    return out


class LocalExecutor:
    """This machine's processes: a pool of `workers` forked processes, kept for the executor's life (close() or a
    `with` block ends it), or the calling process itself with one worker."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool = None

    def map(self, fn: Callable[[Any], Any], tasks: Sequence, on_done: Callable[[int, int], None] | None = None) -> list:
        tasks = list(tasks)
        if self.workers <= 1 or len(tasks) <= 1:
            return map_in_process(fn, tasks, on_done)
        results: list = [None] * len(tasks)
        from concurrent.futures import as_completed

        pool = self._get_pool()
        futures = {pool.submit(fn, task): k for k, task in enumerate(tasks)}
        for done, fut in enumerate(as_completed(futures), start=1):
            results[futures[fut]] = fut.result()
            if on_done:
                on_done(done, len(tasks))
        return results

    def _get_pool(self):
        if self._pool is None:
            # Imported here: a process pool (and multiprocessing behind it) is only needed when running in parallel.
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            warm_up()  # compile (or load) the engine once here, so forked workers inherit it
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=multiprocessing.get_context(method))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ray_init_options(address: str | None = None, num_cpus: int | None = None) -> dict:
    """ray.init's arguments: the workers are told where this process caches compiled kernels (NUMBA_CACHE_DIR, the
    directory sim_core.kernel.jit chose), so that they load them instead of compiling."""
    env = {"NUMBA_CACHE_DIR": jit.CACHE_DIR} if jit.CACHE_DIR else {}
    return {"address": address, "num_cpus": num_cpus if address is None else None,
            "runtime_env": {"env_vars": env} if env else None, "include_dashboard": False, "log_to_driver": False,
            "configure_logging": False}


def _apply(fn, task):
    return fn(task)


class RayExecutor:
    """Ray tasks. `address`: None starts a local cluster of `num_cpus` CPUs (all of them by default); "auto" joins
    the cluster `ray start` made on this node; "ray://host:10001" a remote one through Ray Client. A cluster this
    executor started is shut down by close(); one it joined is left running."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise ExecutorError("--executor ray needs Ray: pip install 'sched-sim[ray]'") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            try:
                ray.init(**ray_init_options(address, num_cpus))
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ExecutorError(f"--ray-address {address}: cannot connect to a Ray cluster there ({e})") from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1)(_apply)

    def map(self, fn: Callable[[Any], Any], tasks: Sequence, on_done: Callable[[int, int], None] | None = None) -> list:
        ray = self._ray
        refs = [self._remote.remote(fn, task) for task in tasks]
        pending, done = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done += len(ready)
            ray.get(ready)  # raises a task's exception here, as the local executor would
            if on_done:
                on_done(done, len(refs))
        return ray.get(refs)

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def kernel_cache_stats(_task=None) -> dict:
    """In the process that runs it (a task, to ask a worker): where numba caches kernels, and how many kernel
    signatures were loaded from that cache (hits) or compiled (misses), after a tiny run of every scheduler."""
    import sys

    from numba.core.registry import CPUDispatcher

    warm_up()
    hits = misses = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("sim_core"):
            for obj in vars(module).values():
                if isinstance(obj, CPUDispatcher):
                    hits += sum(obj.stats.cache_hits.values())
                    misses += sum(obj.stats.cache_misses.values())
    return {"cache_dir": os.environ.get("NUMBA_CACHE_DIR"), "hits": hits, "misses": misses, "pid": os.getpid()}


def make_executor(kind: str = "local", *, workers: int | None = None, address: str | None = None):
    """The executor a command asks for: "local" with `workers` processes, or "ray" at `address` (a local cluster
    of `workers` CPUs when no address is given)."""
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address, workers)
    raise ExecutorError(f"unknown executor {kind!r}; choose from {', '.join(EXECUTORS)}")
