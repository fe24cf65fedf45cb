"""Cases run both jitted and as plain Python (NUMBA_DISABLE_JIT=1) by tests/test_plain_python.py.

    NUMBA_DISABLE_JIT=1 python tests/plain_python_cases.py OUT.json   # writes {case: record} for every case
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from golden_cases import cases as golden_cases  # noqa: E402
from golden_cases import record, record_requests  # noqa: E402

from sim_core import SCHEDULER_NAMES, Scenario, run  # noqa: E402
from sim_core.workload import Requests  # noqa: E402

# Golden scenarios cheap enough in plain Python (a few seconds each), covering the prefix cache, swap, fair
# sharing, admission control with aging, the adaptive budget and agent sessions.
GOLDEN_SUBSET = ("fair-swap-cache", "mixed-slo-degrade", "chunked-adaptive", "static-none-nocache")


def tight_workload(seed: int, n: int = 10) -> Requests:
    """A pool of 14 blocks for 10 requests of up to ~160 tokens: preemption (or, with "none", queueing) forced."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 0.3, n))
    arrival -= arrival[0]
    return Requests(arrival, rng.integers(1, 120, n).astype(np.int64), rng.integers(1, 40, n).astype(np.int64),
                    np.zeros(n, np.int64), ("explicit",))


def cost_model_cases() -> dict:
    """Every component of the step model on a few batch shapes and deployments (TP, FP8, int4, MoE)."""
    from sim_core.catalog import ServingSettings, resolve_setup
    from sim_core.expert_parallel import NO_EP, ExpertParallel
    from sim_core.kernel.cost_model import cost_params, prefill_pairs, step_breakdown, step_cost, swap_seconds

    out = {}
    for hw, model, quant, tp, overlap, plan in (("a100", "llama-3-8b", "fp16", 1, False, NO_EP),
                                                ("h100", "llama-3-70b", "fp8", 4, False, NO_EP),
                                                ("rtx3050", "llama-3.2-1b", "int4", 1, False, NO_EP),
                                                ("h100", "mixtral-8x7b", "fp8", 2, False, NO_EP),
                                                ("h100", "llama-3-8b", "fp8", 1, True, NO_EP),  # async: CPU under GPU
                                                # expert parallelism, attention DP over two nodes: the all-to-all
                                                ("h200", "deepseek-r1", "fp8", 1, False, ExpertParallel(16, True, 1.3))):
        setup = resolve_setup(hw, model, quant, tp, ServingSettings(0.9, 16, 2048, 256), expert_parallel=plan)
        p = cost_params(setup, cpu_overlap=overlap)
        for shape in ((0, 0, 1, 512), (512, 0, 0, 0), (300, 2000, 40, 900), (2048, 4096, 256, 3000)):
            n, ctx, d, length = shape
            args = (n, 1 if n else 0, prefill_pairs(n, ctx) if n else 0, ctx if n else 0, d, d * length, d + (n > 0))
            out[f"{hw}-{model}-{quant}-tp{tp}{'-async' * overlap}{f'-ep{plan.ep}' * plan.enabled}-{shape}"] = [[float(x) for x in step_breakdown(p, *args)],
                                                           [float(x) for x in step_cost(p, *args)],
                                                           float(swap_seconds(p, 1000))]
    return out


def run_all() -> dict[str, dict]:
    out = {"cost-model": cost_model_cases()}
    for sched in SCHEDULER_NAMES:
        for mode in ("recompute", "swap", "none"):
            for seed in (0, 1):
                s = Scenario(scheduler=sched, preemption=mode, kv_blocks=14, block_size=16, max_seqs=4,
                             swap_space_gb=0.002, hardware="rtx3050", max_model_len=8192, admission="admit")
                out[f"tight-{sched}-{mode}-{seed}"] = record_requests(s, tight_workload(seed))
    for sched in ("chunked", "fcfs"):  # asynchronous scheduling: blocks freed a step late, CPU under the GPU
        s = Scenario(scheduler=sched, kv_blocks=14, block_size=16, max_seqs=4, hardware="rtx3050", max_model_len=8192,
                     async_scheduling=True)
        out[f"tight-{sched}-async"] = record_requests(s, tight_workload(2))
    for policy, overlap in (("evict", False), ("store", True)):  # lower KV tiers: tiny, so both overflow
        s = Scenario(hardware="rtx3050", max_model_len=8192, workload="multiturn", num_requests=40, rate=4, kv_blocks=60,
                     prefix_cache=True, kv_offload_cpu_gb=0.004, kv_offload_disk_gb=0.02, kv_offload_policy=policy,
                     kv_offload_overlap=overlap, seed=3)
        out[f"kv-tiers-{policy}"] = record(s, None)
    for method, mode in (("eagle", "recompute"), ("ngram", "swap"), ("draft", "recompute")):  # speculative decoding
        s = Scenario(kv_blocks=14, block_size=16, max_seqs=4, swap_space_gb=0.002, hardware="rtx3050", max_model_len=8192,
                     preemption=mode, spec_method=method, spec_tokens=3, admission="admit")
        out[f"tight-spec-{method}-{mode}"] = record_requests(s, tight_workload(3))
    s = Scenario(kv_blocks=14, block_size=16, max_seqs=4, hardware="rtx3050", max_model_len=8192, spec_method="eagle", spec_tokens=3,
                 spec_k_policy="goodput", admission="admit")  # each step's k from the goodput estimate
    out["tight-spec-eagle-goodput"] = record_requests(s, tight_workload(3))
    for order in ("fcfs", "grouped"):  # LoRA adapters: the max_loras limit, host and disk loads, the grouped order
        s = Scenario(kv_blocks=14, block_size=16, max_seqs=4, hardware="rtx3050", max_model_len=8192, lora_adapters=3, max_loras=1,
                     max_cpu_loras=2, lora_order=order, lora_aging_s=1e5, seed=7)  # seed 7: the orders differ
        out[f"tight-lora-{order}"] = record_requests(s, tight_workload(3, 16))
    golden = golden_cases()
    for name in GOLDEN_SUBSET:
        out[name] = record(*golden[name])
    for router in ("prefix_affinity", "power_of_two"):  # replicas behind a router: the cluster loop
        s = Scenario(hardware="rtx3050", max_model_len=8192, workload="agent", num_requests=40, rate=2, replicas=3, router=router,
                     prefix_cache=True, router_staleness_ms=50, seed=5)
        res = run(s)
        out[f"cluster-{router}"] = {"metrics": res.metrics, "replica_of": res.replica_of.tolist(),
                                    "finish_s": res.finish_s.tolist()}
    # Replicas come and go; utilization scales to zero in the quiet piece and a request wakes one.
    for policy, settings in (("utilization", {"autoscale_metric": "running", "autoscale_target": 2,
                                              "autoscale_cooldown_s": 4, "min_replicas": 0,
                                              "rate_schedule": "0:1,10:6,25:0,34:1"}),
                             ("predictive", {"autoscale_replica_rate": 1.5, "rate_schedule": "0:1,10:6,25:1"})):
        s = Scenario(hardware="rtx3050", max_model_len=8192, workload="agent", duration=40, seed=5,
                     autoscaler=policy, autoscale_interval_s=2, provision_delay_s=3, max_replicas=4,
                     router="power_of_two", prefix_cache=True, **settings)
        res = run(s)
        out[f"autoscaled-{policy}"] = {"metrics": res.metrics, "replica_of": res.replica_of.tolist(),
                                       "finish_s": res.finish_s.tolist(), "lives": res.replica_lives.tolist()}
    s = Scenario(hardware="rtx3050", max_model_len=8192, workload="agent", num_requests=40, rate=2, prefill_replicas=2, decode_replicas=1,
                 kv_blocks=300, seed=5)  # disaggregated, a tight decode pool
    res = run(s)
    out["prefill-decode"] = {"metrics": res.metrics, "replica_of": res.replica_of.tolist(),
                             "finish_s": res.finish_s.tolist()}
    return out


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(run_all(), sort_keys=True), encoding="utf-8")
