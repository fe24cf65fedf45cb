"""The fixed scenarios whose full output is kept as golden files (tests/golden/*.json).

A refactor must reproduce them byte for byte (floats included). When a modelling change is intended, regenerate
them deliberately and say so in the commit:  .venv/bin/python tests/golden_cases.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import SCHEDULER_NAMES  # noqa: E402
from sim_core import Scenario as _Scenario  # noqa: E402
from sim_core.deployment import engine_budgets  # noqa: E402
from sim_core.deployment import scenario_model as resolve_model  # noqa: E402
from sim_core.policies import BY_NAME  # noqa: E402
from sim_core.policies.routers import ROUTER_NAMES  # noqa: E402
from sim_core.runner import RunOptions, make_requests, resolve, simulate_requests  # noqa: E402

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
# A small trace replay: bursts of long and short prompts (CSV arrival_s,prompt_tokens,output_tokens).
TRACE_CSV = "arrival_s,prompt_tokens,output_tokens\n" + "\n".join(
    f"{0.05 * i:.2f},{(37 * i) % 1900 + 20},{(53 * i) % 300 + 1}" for i in range(150))
# Every registered scheduler is pinned: a policy added to the registry gets its six cases by itself (generate its
# files deliberately with --write --new), and one dropped from it fails test_every_golden_file_has_a_case.
SCHEDULERS = SCHEDULER_NAMES
# Several engines: replicas behind each router, and prefill/decode pools. They record no event log or KV frames
# (a run of several engines refused both when these were written), so their record has each engine's step log.
CLUSTER_BASE = dict(workload="multiturn", hardware="rtx3050", rate=40.0, num_requests=200, kv_blocks=900, seed=6)


# The defaults these cases were written under, before the engine's own (round 4, issue #35): max_model_len
# min(context, 8192), the chunked schedulers' 512-token budget, 256 sequences. A case pins each one the new defaults
# would change, so its run is the one its golden file records (only the file's scenario line names the pins).
LEGACY_MAX_MODEL_LEN = 8192
LEGACY_MAX_SEQS = 256


def Scenario(**fields) -> _Scenario:  # noqa: N802 (it stands for the model, with the pins)
    plain = _Scenario(**fields)
    sched = BY_NAME[plain.scheduler]
    context = resolve_model(plain).max_context
    budget, seqs = engine_budgets(plain, sched.chunked_prefill)
    pins: dict = {}
    if "max_model_len" not in fields and context > LEGACY_MAX_MODEL_LEN:
        pins["max_model_len"] = LEGACY_MAX_MODEL_LEN
    if "token_budget" not in fields and budget != sched.default_token_budget:
        pins["token_budget"] = sched.default_token_budget
    if "max_seqs" not in fields and seqs != LEGACY_MAX_SEQS:
        pins["max_seqs"] = LEGACY_MAX_SEQS
    return _Scenario(**fields, **pins) if pins else plain


def cases() -> dict[str, tuple[_Scenario, str | None]]:
    """name -> (scenario, trace text). A tight KV pool on a small GPU so that preemption really happens."""
    out: dict[str, tuple[Scenario, str | None]] = {}
    for sched in SCHEDULERS:
        for mode in ("none", "recompute", "swap"):
            for cache in (False, True):
                name = f"{sched}-{mode}-{'cache' if cache else 'nocache'}"
                out[name] = (Scenario(scheduler=sched, preemption=mode, prefix_cache=cache, workload="rag",
                                      hardware="rtx3050", rate=6.0, num_requests=120, kv_blocks=700,
                                      swap_space_gb=0.05, seed=3), None)
    out["trace-chunked"] = (Scenario(scheduler="chunked", hardware="rtx3050", kv_blocks=900), TRACE_CSV)
    out["trace-fcfs-swap"] = (Scenario(scheduler="fcfs", hardware="rtx3050", kv_blocks=600, preemption="swap"),
                              TRACE_CSV)
    out["agent-cache"] = (Scenario(scheduler="chunked", workload="agent", hardware="a100", prefix_cache=True,
                                   rate=3.0, num_requests=150, seed=5), None)
    out["multitenant-fair"] = (Scenario(scheduler="fair", workload="multitenant", hardware="rtx3050", rate=15.0,
                                        num_requests=200, seed=2), None)
    out["mixed-slo-degrade"] = (Scenario(scheduler="slo", workload="mixed", hardware="rtx3050", rate=8.0,
                                         num_requests=150, admission="degrade", aging_rate=0.5, seed=4), None)
    out["spf-aging"] = (Scenario(scheduler="spf", workload="chat", hardware="rtx3050", rate=12.0,
                                 num_requests=200, aging_rate=1000.0, seed=1), None)
    out["chunked-adaptive"] = (Scenario(scheduler="chunked", workload="rag", hardware="rtx3050", rate=5.0,
                                        num_requests=100, token_budget=2048, adaptive_budget=True), None)
    out["code-tp2-bursty"] = (Scenario(scheduler="chunked", workload="code", hardware="a100", tp=2,
                                       model="llama-3-70b", rate=4.0, burstiness=3.0, num_requests=150), None)
    for router in ROUTER_NAMES:  # every registered router is pinned too
        out[f"replicas4-{router}"] = (Scenario(scheduler="chunked", replicas=4, router=router, prefix_cache=True,
                                               router_staleness_ms=20.0, **CLUSTER_BASE), None)
    out["replicas3-rag-fcfs-swap"] = (Scenario(scheduler="fcfs", workload="rag", hardware="rtx3050", replicas=3,
                                               router="least_outstanding", preemption="swap", swap_space_gb=0.05,
                                               kv_blocks=700, rate=14.0, num_requests=150, seed=3), None)
    out["pd-1p3d-rag"] = (Scenario(scheduler="chunked", workload="rag", hardware="a100", prefill_replicas=1,
                                   decode_replicas=3, kv_link="ib400", rate=10.0, num_requests=150, seed=2), None)
    out["pd-2p2d-hetero-multiturn"] = (Scenario(scheduler="chunked", workload="multiturn", hardware="a100",
                                                prefill_replicas=2, decode_replicas=2, prefill_hardware="h100",
                                                router="prefix_affinity", prefix_cache=True, rate=6.0,
                                                num_requests=120, seed=4), None)
    out.update(fleet_cases())
    return out


def fleet_cases() -> dict[str, tuple[_Scenario, str | None]]:
    """Deployments the cases above leave out, pinned when one fleet loop replaced the four (issue #36; written by
    the loops before it): replicas an autoscaler scales (with follow-up turns; and, without, scaled to zero and
    woken), and attention-DP ranks stepping in lock-step."""
    scaled = dict(hardware="rtx3050", max_model_len=8192, autoscale_interval_s=2, provision_delay_s=3,
                  max_replicas=3, kv_blocks=400)
    return {
        "autoscaled-utilization-chat": (Scenario(
            workload="chat", rate_schedule="0:2,10:6,20:1", duration=30, seed=4, autoscaler="utilization",
            autoscale_metric="running", autoscale_target=2, autoscale_cooldown_s=4, replicas=2,
            router="least_outstanding", **scaled), None),
        "autoscaled-predictive-zero-rag": (Scenario(
            workload="rag", rate_schedule="0:2,10:0,25:3", duration=35, seed=5, autoscaler="predictive",
            autoscale_replica_rate=1.5, min_replicas=0, router="power_of_two", **scaled), None),
        "replicas2-attention-dp-r1": (Scenario(
            hardware="h200", model="deepseek-r1", quantization="fp8", workload="random", isl=1024, osl=128,
            concurrency=64, num_requests=96, tp=1, ep=8, attention_dp=True, replicas=2, seed=1), None),
    }


def _digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:32]


def record(scenario: _Scenario, trace_text: str | None) -> dict:
    """Everything a face can read off one run: the metrics, and digests of every per-request and log array."""
    return record_requests(scenario, make_requests(scenario, resolve(scenario), trace_text))


PER_REQUEST = ("status", "reject_reason", "generated", "first_scheduled_s", "first_token_s", "finish_s",
               "max_itl_s", "preemptions", "degraded", "on_time_tokens", "cached_prefix")


def record_requests(scenario: _Scenario, reqs) -> dict:
    r = resolve(scenario)
    if scenario.engines > 1:
        return _record_cluster(scenario, r, reqs)
    end_guess = float(reqs.arrival_s[reqs.parents() < 0].max()) * 3 + 10
    res = simulate_requests(scenario, r, reqs,
                            RunOptions(kv_frame_times=np.linspace(0.0, end_guess, 7), record_events=True))
    arrays = {name: getattr(res, name) for name in PER_REQUEST + (
        "steps", "tenant_service", "events", "itl_fine", "itl_coarse", "kv_frames", "kv_frame_state", "kv_frame_s")}
    arrays["arrival_s"] = res.requests.arrival_s
    return {"scenario": scenario.to_query(), "metrics": res.metrics, "step_stride": int(res.step_stride),
            "digests": {k: _digest(v) for k, v in arrays.items()}}


def _record_cluster(scenario: Scenario, r, reqs) -> dict:
    """Several engines: the merged per-request arrays, the engine each request ended on, each engine's step log
    (every step: the runs are short) and the prefill-to-decode hand-over."""
    res = simulate_requests(scenario, r, reqs)
    arrays = {name: getattr(res, name) for name in PER_REQUEST + ("itl_fine", "itl_coarse")}
    arrays["arrival_s"] = res.requests.arrival_s
    arrays["replica_of"] = res.replica_of
    for log in res.engine_logs:
        arrays[f"steps[{log.name}]"] = log.steps
    for name, a in (res.handover._asdict().items() if res.handover is not None else ()):
        arrays[f"handover.{name}"] = a
    engines = [{"name": log.name, "pool": log.pool, "step_stride": log.step_stride, "num_blocks": log.num_blocks}
               for log in res.engine_logs]
    return {"scenario": scenario.to_query(), "metrics": res.metrics, "engines": engines,
            "digests": {k: _digest(v) for k, v in arrays.items()}}


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main() -> None:
    if "--write" not in sys.argv:
        sys.exit("usage: tests/golden_cases.py --write [--new]   (regenerates every golden file; --new: only the "
                 "cases that have none yet)")
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name, (scenario, trace) in cases().items():
        path = GOLDEN_DIR / f"{name}.json"
        if "--new" in sys.argv and path.exists():
            continue
        path.write_text(dumps(record(scenario, trace)), encoding="utf-8")
        print("wrote", name)


if __name__ == "__main__":
    main()
