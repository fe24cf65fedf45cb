"""Where the time went adds up under every mechanism (issue #35): for every finished request, the attribution's
parts (kernel/attribution.py) sum to its device-side TTFT (Result.attr_first) and E2EL (Result.attribution), none
negative, whatever combination of speculative decoding, LoRA adapter loads, KV-tier loads, preemption (recompute
or swap), admission control, asynchronous scheduling, closed-loop load and cluster shape (one engine, replicas
behind a router, prefill/decode pools with their KV transfers; and, not drawn, an autoscaled fleet) the run has.
Hypothesis draws the combinations, a few per shape; the long campaign: `bench/fuzz.py attribution N`
(ATTRIBUTION_EXAMPLES=N per shape)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import SCHEDULER_NAMES, Scenario
from sim_core.request_diff import request_values_ms
from sim_core.runner import run

# Float slack: each part is a sum of step times, the latency a difference of clock readings.
ATOL_S = 1e-9
EXAMPLES = int(os.environ.get("ATTRIBUTION_EXAMPLES", "6"))
# A dense model with every proposer but MTP, and an MoE one with its MTP module.
DEPLOYMENTS = (dict(hardware="a100", model="llama-3-8b"),
               dict(hardware="b200", model="deepseek-r1", tp=8, quantization="fp8"))


def assert_parts_add_up(res) -> None:
    """Every finished request's parts sum to its TTFT (at its first token) and to its E2EL, none negative: on the
    device, and as the client sees them (the transport overhead in `transport`), the split `sched-sim diff` reads."""
    done = res.finished
    arrival = res.requests.arrival_s[done]
    for parts, latency in ((res.attr_first[done], res.first_token_s[done] - arrival),
                           (res.attribution[done], res.finish_s[done] - arrival)):
        assert np.allclose(parts.sum(axis=1), latency, rtol=1e-12, atol=ATOL_S), \
            np.abs(parts.sum(axis=1) - latency).max()
        assert (parts >= -ATOL_S).all(), parts.min()
    values, splits, served = request_values_ms(res)
    for metric in ("ttft_ms", "e2el_ms"):
        assert np.allclose(splits[metric][served].sum(axis=1), values[metric][served], rtol=1e-12, atol=ATOL_S * 1e3)


@st.composite
def mechanisms(draw, shape: str) -> dict:
    """A scenario's fields with a drawn combination of mechanisms on `shape`'s deployment."""
    scheduler = draw(st.sampled_from(SCHEDULER_NAMES))
    deployment = draw(st.sampled_from(DEPLOYMENTS))
    dense = deployment["model"] == "llama-3-8b"
    kw = dict(scheduler=scheduler, **deployment, seed=draw(st.integers(0, 99)),
              workload=draw(st.sampled_from(["chat", "rag", "multiturn", "agent", "mixed"])),
              num_requests=draw(st.sampled_from([12, 30])), engine=draw(st.sampled_from(["vllm", "sglang", "trtllm"])),
              transport_overhead_ms=draw(st.sampled_from([0.0, 5.0])))
    if draw(st.booleans()):
        kw["concurrency"] = draw(st.sampled_from([2, 8]))
    else:
        kw["rate"] = draw(st.sampled_from([2.0, 20.0, 80.0]))
    if draw(st.booleans()):
        methods = ["eagle", "ngram", "draft"] if dense else ["mtp", "eagle", "ngram"]
        kw.update(spec_method=draw(st.sampled_from(methods)), spec_tokens=draw(st.integers(1, 5)),
                  spec_k_policy=draw(st.sampled_from(["fixed", "goodput"])))
    preemption = draw(st.sampled_from(["recompute", "swap", "none"]))
    kw.update(preemption=preemption, kv_blocks=draw(st.sampled_from([None, 300, 900])), swap_space_gb=0.1)
    if scheduler != "static" and draw(st.booleans()):
        kw.update(prefix_cache=True, kv_offload_cpu_gb=draw(st.sampled_from([0.3, 2.0])),
                  kv_offload_disk_gb=draw(st.sampled_from([0.0, 4.0])),
                  kv_offload_policy=draw(st.sampled_from(["evict", "store"])), kv_offload_overlap=draw(st.booleans()))
    if shape == "one engine" and dense and scheduler != "static" and preemption != "swap" and draw(st.booleans()):
        kw.update(lora_adapters=draw(st.sampled_from([4, 16])), max_loras=draw(st.sampled_from([1, 2])))
    if shape == "replicas":
        kw.update(replicas=draw(st.integers(2, 3)),
                  router=draw(st.sampled_from(["round_robin", "least_outstanding", "prefix_affinity"])))
    elif shape == "prefill/decode pools":
        kw.update(prefill_replicas=draw(st.integers(1, 2)), decode_replicas=draw(st.integers(1, 2)),
                  prefill_hardware=draw(st.sampled_from([None, "h200"])))
    if shape != "prefill/decode pools" and draw(st.booleans()):
        kw["async_scheduling"] = True
    kw["admission"] = draw(st.sampled_from([None, "reject", "degrade"]))
    return {k: v for k, v in kw.items() if v is not None}


@settings(max_examples=EXAMPLES, deadline=None)
@given(mechanisms("one engine"))
def test_parts_add_up_on_one_engine(fields):
    assert_parts_add_up(run(Scenario(**fields)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(mechanisms("replicas"))
def test_parts_add_up_on_replicas(fields):
    assert_parts_add_up(run(Scenario(**fields)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(mechanisms("prefill/decode pools"))
def test_parts_add_up_on_prefill_decode_pools(fields):
    assert_parts_add_up(run(Scenario(**fields)))


def test_every_mechanism_at_once_adds_up_and_shows_where_it_acts():
    """One tight run with speculation, LoRA loads, KV-tier loads and recompute preemption together: the sums
    hold, and the parts the mechanisms feed are at work (the property tests alone could pass on runs where a
    mechanism never acted)."""
    res = run(Scenario(scheduler="chunked", hardware="a100", model="llama-3-8b", workload="rag", rate=4.0,
                       num_requests=60, seed=3, spec_method="eagle", lora_adapters=8, max_loras=2,
                       prefix_cache=True, kv_offload_cpu_gb=2.0, preemption="recompute", kv_blocks=120))
    assert_parts_add_up(res)
    m = res.metrics
    assert m["preemptions"] > 0 and m["spec_decode"]["accepted_tokens"] > 0
    assert m["lora"]["loads_host"] + m["lora"]["loads_disk"] > 0 and m["kv_tiers"]["cpu"]["hit_tokens"] > 0
    parts = m["attribution_ms"]
    assert parts["preemption"] > 0 and parts["decode"] > 0 and parts["prefill_stall"] > 0 and parts["queue"] > 0


@pytest.mark.parametrize("autoscaler", ["utilization", "predictive"])
def test_parts_add_up_on_an_autoscaled_fleet(autoscaler):
    """Replicas that come and go (kernel/autoscaled.py), with speculation and rejections (a tight KV pool)."""
    res = run(Scenario(hardware="a100", model="llama-3-8b", workload="rag", rate=20.0, num_requests=40, seed=3,
                       kv_blocks=150, spec_method="eagle", autoscaler=autoscaler, min_replicas=1, max_replicas=3,
                       autoscale_interval_s=1.0, provision_delay_s=0.5))
    assert res.metrics["rejected"] > 0
    assert_parts_add_up(res)
