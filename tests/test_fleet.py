"""The fleet loop (sim_core/kernel/fleet.py): one loop steps every deployment of several engines, and a pool's
expert parallelism is its own (prefill_ep, decode_ep: attention-DP ranks in lock-step inside a P/D pool)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main as cli_main
from sim_core import Scenario, ScenarioError, parse_scenario, run
from sim_core.catalog import SetupError
from sim_core.policies.routers import ROUTER_NAMES
from sim_core.views import columns_of_steps

ROOT = Path(__file__).resolve().parent.parent
R1_PD = dict(hardware="h200", model="deepseek-r1", quantization="fp8", workload="random", isl=1024, osl=48,
             rate=30, seed=1, max_model_len=8192)


def _lockstep_violations(logs, group: int) -> int:
    """Steps of two ranks of one lock-step group that overlap without being the same step (a rank stepping on its
    own). Every step a rank logs is one of its group's: same start and same end on each rank that had a batch."""
    bad = 0
    for lo in range(0, len(logs), group):
        spans = set()
        for log in logs[lo:lo + group]:
            cols = columns_of_steps(log.steps)
            spans |= set(zip(cols["start_s"].tolist(), (cols["start_s"] + cols["duration_s"]).tolist(),
                             strict=True))
        ordered = sorted(spans)
        bad += sum(b[0] < a[1] for a, b in zip(ordered, ordered[1:], strict=False))
    return bad


def test_a_1p3d_deployment_with_wide_ep_attention_dp_decode_runs():
    """DeepSeek-R1, one TP8 prefill engine and three decode replicas of ep 8 attention-DP ranks (tp 1): 8 + 24
    GPUs, 25 engines; every request finishes, its KV crossing to one of the 24 ranks, and each replica's ranks
    step in lock-step."""
    res = run(Scenario(tp=8, prefill_replicas=1, decode_replicas=3, decode_tp=1, decode_ep=8, attention_dp=True,
                       num_requests=120, **R1_PD))
    m = res.metrics
    assert m["completed"] == 120 and m["rejected"] == 0 and m["kv_transfers"] == 120
    assert m["gpus"] == 8 + 3 * 8
    names = [log.name for log in res.engine_logs]
    assert names == ["prefill 0"] + [f"decode {k}" for k in range(24)]
    decoders = res.engine_logs[1:]
    assert sum(len(log.steps) > 0 for log in decoders) >= 12  # the hand-over spreads prompts over the ranks
    assert _lockstep_violations(decoders, 8) == 0


def test_the_lockstep_check_sees_engines_that_step_on_their_own():
    """Two independent replicas' steps overlap without being the same: the check above would tell."""
    res = run(Scenario(hardware="rtx3050", replicas=2, rate=40, num_requests=60, seed=1, max_model_len=8192))
    assert _lockstep_violations(res.engine_logs, 2) > 0


def test_both_pools_may_run_attention_dp_ranks():
    """prefill_ep too: a prefill replica of 8 ranks hands over to a decode replica of 8 (16 engines, 16 GPUs)."""
    res = run(Scenario(tp=1, prefill_replicas=1, decode_replicas=1, prefill_ep=8, decode_ep=8, attention_dp=True,
                       num_requests=80, **R1_PD))
    assert res.metrics["completed"] == 80 and res.metrics["gpus"] == 16 and len(res.engine_logs) == 16
    assert _lockstep_violations(res.engine_logs[:8], 8) == 0 and _lockstep_violations(res.engine_logs[8:], 8) == 0


@pytest.mark.parametrize(("fields", "named", "says"), [
    (dict(prefill_ep=2), "prefill_ep", "needs prefill_replicas and decode_replicas"),
    (dict(prefill_replicas=1, decode_replicas=1, ep=2, tp=2), "ep", "prefill_ep, decode_ep"),
    (dict(prefill_replicas=1, decode_replicas=1, decode_ep=8, decode_tp=1), "decode_ep", "attention_dp"),
    (dict(prefill_replicas=1, decode_replicas=1, decode_ep=6, decode_tp=4, attention_dp=True), "decode_ep",
     "multiple of tp=4"),
    (dict(prefill_replicas=1, decode_replicas=1, attention_dp=True), "attention_dp", "prefill_ep or decode_ep"),
    (dict(prefill_replicas=1, decode_replicas=1, decode_ep=0), "decode_ep", "between 1 and 72"),
])
def test_a_pools_ep_that_makes_no_deployment_is_refused_naming_its_field(fields, named, says):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(fields)
    text = str(e.value)
    assert named in text and says in text, text


def test_a_pools_ep_on_a_dense_model_is_refused_naming_the_pools_field():
    s = Scenario(model="llama-3-8b", hardware="a100", prefill_replicas=1, decode_replicas=1, decode_tp=2,
                 decode_ep=2, num_requests=3)
    with pytest.raises(SetupError) as e:
        run(s)
    assert e.value.field == "decode_ep" and "dense" in str(e.value)


def test_a_pools_ep_round_trips_through_the_query_string():
    s = Scenario(tp=8, prefill_replicas=1, decode_replicas=3, decode_tp=1, decode_ep=8, attention_dp=True, **R1_PD)
    assert Scenario.from_query(s.to_query()) == s and "decode_ep=8" in s.to_query()
    assert s.engines == 1 + 24


# The engine's step, and what calls it: the engine's own loop and the fleet loop's stepping helpers.
STEP = {"step", "_step", "begin_step", "step_together"}
STEPPERS = {("sim_core.kernel.engine", "run_to_end"), ("sim_core.kernel.engine", "step"),
            ("sim_core.kernel.engine", "_step"), ("sim_core.kernel.pool_steps", "advance"),
            ("sim_core.kernel.pool_steps", "step_together"), ("sim_core.kernel.pool_steps", "step_group")}
# The loops: the engine's own (one engine) and the fleet loop's step_pool, which calls the helpers.
LOOP_HELPERS = {"run_to_end", "advance", "step_group"}


def _calls(names: set[str]) -> set[tuple[str, str]]:
    """(module, function) of every function in sim_core that calls one of `names`."""
    callers = set()
    for path in sorted((ROOT / "sim_core").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef) and any(
                    isinstance(c, ast.Call) and getattr(c.func, "id", None) in names for c in ast.walk(fn)):
                callers.add((module, fn.name))
    return callers


def test_one_loop_steps_the_engines():
    """Only the engine's own loop (one engine) and the fleet loop step an engine: a deployment shape with a loop
    of its own would call the step, or the stepping helpers, from elsewhere."""
    assert _calls(STEP) <= STEPPERS, _calls(STEP) - STEPPERS
    assert _calls(LOOP_HELPERS) == {("sim_core.kernel.engine", "simulate"), ("sim_core.kernel.fleet", "step_pool"),
                                   ("sim_core.kernel.fleet", "step_replica")}


def test_every_shape_runs_through_one_compiled_signature():
    """Replicas, P/D pools (with lock-step ranks) and an autoscaled pool compile the fleet entry once: the kernel
    takes pairs of one type whatever the shape."""
    from sim_core.kernel.fleet import simulate_fleet

    if not hasattr(simulate_fleet, "signatures"):
        pytest.skip("NUMBA_DISABLE_JIT: nothing compiles")
    tiny = dict(hardware="rtx3050", num_requests=6, seed=1, max_model_len=8192)
    for shape in (dict(replicas=2), dict(prefill_replicas=1, decode_replicas=2),
                  dict(autoscaler="utilization", autoscale_target=2, max_replicas=2)):
        assert run(Scenario(**tiny, **shape)).metrics["completed"] == 6
    assert len(simulate_fleet.signatures) == 1


def test_the_cli_runs_a_wide_ep_decode_pool_from_its_flags(capsys):
    """`--decode-ep 8 --attention-dp` from the command line: the Setup names the ranks and counts their GPUs."""
    code = cli_main(["run", "--hardware", "h200", "--model", "deepseek-r1", "--quantization", "fp8", "--tp", "8",
                     "--prefill-replicas", "1", "--decode-replicas", "3", "--decode-tp", "1", "--decode-ep", "8",
                     "--attention-dp", "--workload", "random", "--isl", "1024", "--osl", "32", "--num-requests", "40",
                     "--rate", "20", "--seed", "1", "--max-model-len", "8192"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 prefill + 3 decode engines (32 GPUs, decode replicas of 8 attention-DP ranks (EP8)" in out


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(router=st.sampled_from(ROUTER_NAMES), pools=st.sampled_from([(1, 1), (2, 1), (1, 2)]),
       eps=st.sampled_from([(None, 2), (None, 4), (2, 2), (4, None)]), workload=st.sampled_from(["chat", "rag"]),
       preemption=st.sampled_from(["recompute", "swap"]), kv_blocks=st.integers(300, 1500),
       prefix_cache=st.booleans())
def test_pools_of_lockstep_ranks_lose_no_request_and_leak_no_block(router, pools, eps, workload, preemption,
                                                                   kv_blocks, prefix_cache):
    """Qwen3-30B-A3B, either pool as attention-DP ranks of ep 2 or 4: every request finishes or is rejected once,
    every engine gives back every KV block, each request decodes after its KV crossed, and each group of ranks
    steps in lock-step."""
    (p, d), (p_ep, d_ep) = pools, eps
    s = Scenario(hardware="h100", model="qwen3-30b-a3b", tp=1, prefill_replicas=p, decode_replicas=d,
                 prefill_ep=p_ep, decode_ep=d_ep, attention_dp=True, workload=workload, num_requests=40, rate=8,
                 seed=3, router=router, preemption=preemption, kv_blocks=kv_blocks, prefix_cache=prefix_cache,
                 max_model_len=8192)
    res = run(s)
    assert (res.finished ^ res.rejected).all()
    first, second = res.resolved.pools
    assert (first.engines, second.engines) == (p * (p_ep or 1), d * (d_ep or 1))
    assert res.free_blocks_at_end == first.engines * first.num_blocks + second.engines * second.num_blocks
    assert (res.ref_counts_at_end == 0).all()
    done = res.finished
    assert (res.generated[done] == res.requests.output_tokens[done]).all()
    moved = res.handover.to_decode >= 0
    assert (res.handover.delivered[moved & done] < res.finish_s[moved & done]).all()
    logs = res.engine_logs
    assert _lockstep_violations(logs[:first.engines], first.lockstep) == 0
    assert _lockstep_violations(logs[first.engines:], second.lockstep) == 0
