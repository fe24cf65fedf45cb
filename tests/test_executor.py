"""Executors (sim_core/studies/executor.py): sweeps, capacity searches and plans give the same JSON on local processes
and on a Ray cluster (a local one the test starts, 2 CPUs), and Ray workers load the compiled kernels from the
numba cache instead of compiling them."""

from __future__ import annotations

import json

import pytest
import ray  # the test command installs the `ray` extra, so these tests always run there

from app.cli import main
from sim_core.kernel import jit
from sim_core.studies.executor import LocalExecutor, RayExecutor, kernel_cache_stats, ray_init_options

SWEEP = ["sweep", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "chat", "--duration", "8",
         "--min-rate", "0.5", "--max-rate", "2", "--step", "0.5", "--json"]
CAPACITY = ["capacity", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "chat", "--duration", "5", "--seeds", "2", "--json"]
# V0's budgets, as written: with vLLM's own (2,048 tokens) one GPU of either serves 12 req/s and the search is 4 runs
PLAN = ["plan", "--model", "llama-3-8b", "--workload", "chat", "--rate", "12", "--duration", "10",
        "--gpus", "l40s,a100", "--tp", "1", "--token-budget", "512", "--max-seqs", "256", "--json"]


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(**ray_init_options(num_cpus=2))
    yield
    ray.shutdown()


def _cli_json(capsys, argv) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_sweep_capacity_and_plan_on_ray_give_the_local_executors_json(ray_cluster, capsys):
    for argv in (SWEEP, CAPACITY, PLAN):
        local = _cli_json(capsys, argv + ["--executor", "local", "--workers", "2"])
        on_ray = _cli_json(capsys, argv + ["--executor", "ray"])
        assert on_ray == local
    assert local["plans"] and local["simulations"] > 5  # the plan searched: not two empty documents


def test_ray_workers_load_the_kernels_from_the_numba_cache(ray_cluster):
    LocalExecutor(1).map(kernel_cache_stats, [None])  # the cache holds every kernel once this has run here
    executor = RayExecutor()
    assert executor.workers == 2
    worker = executor.map(kernel_cache_stats, [None])[0]
    assert worker["cache_dir"] == jit.CACHE_DIR
    assert worker["hits"] > 0 and worker["misses"] == 0, worker


def test_executors_keep_the_tasks_order_and_report_progress(ray_cluster):
    seen = []
    for ex in (LocalExecutor(2), RayExecutor()):
        with ex:
            assert ex.map(abs, [-3, 2, -1, 0], lambda d, n, name=ex.name: seen.append((name, d, n))) == [3, 2, 1, 0]
    assert [d for name, d, n in seen if name == "ray"] == [1, 2, 3, 4]
    assert sorted(d for name, d, n in seen if name == "local") == [1, 2, 3, 4]
    assert ray.is_initialized()  # an executor that joined a running cluster leaves it running


def test_executor_flags_are_checked(capsys):
    assert main(SWEEP + ["--ray-address", "auto"]) == 2
    assert "--executor ray" in capsys.readouterr().err
    assert main(SWEEP + ["--executor", "spark"]) == 2
    assert "--executor" in capsys.readouterr().err
