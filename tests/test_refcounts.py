"""Kernels run without numba's reference counting (jit.py, record_type.py): nothing they read may leak or be
freed twice. Counted by numba's own allocation statistics, in a child process (they are switched on at import),
over runs that grow their logs, preempt, swap, hit the prefix cache and step several engines side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import gc, json
from numba.core.runtime import rtsys
from sim_core import Scenario, run
cases = [
    dict(scheduler="static"),
    dict(scheduler="chunked", prefix_cache=True, workload="rag"),
    dict(scheduler="fcfs", preemption="swap", kv_blocks=600),
    dict(scheduler="chunked", replicas=3),
    dict(scheduler="chunked", prefill_replicas=1, decode_replicas=2),
    dict(scheduler="chunked", workload="multiturn", num_requests=300),
]
out = []
for case in cases:
    s = Scenario(**{"hardware": "rtx3050", "max_model_len": 8192, "num_requests": 500, "rate": 8.0, "seed": 3, **case})
    run(s)  # compiled or loaded, so the counts below are the runs' own
    gc.collect()
    before = rtsys.get_allocation_stats()
    steps = [run(s).metrics["steps"] for _ in range(2)]
    gc.collect()
    after = rtsys.get_allocation_stats()
    out.append({"case": case, "steps": steps, "alloc": after.alloc - before.alloc, "free": after.free - before.free,
                "mi_alloc": after.mi_alloc - before.mi_alloc, "mi_free": after.mi_free - before.mi_free})
print(json.dumps(out))
"""


def test_every_allocation_of_a_run_is_freed_once():
    env = dict(os.environ, NUMBA_NRT_STATS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        assert row["alloc"] > 0, row  # the statistics are on
        assert min(row["steps"]) > 1024, row  # the step log grew (its first size is 1024 rows)
        assert row["alloc"] == row["free"] and row["mi_alloc"] == row["mi_free"], row
