"""Tensor parallelism beyond one NVLink domain (issue #36): DeepSeek-R1 at tp 16 over two 8-GPU nodes runs, its
all-reduces cross the scale-out link hierarchically, and every face names the link; bad degrees are refused with
the allowed ones named."""

from __future__ import annotations

import json

import pytest

from app.cli.dispatch import main
from sim_core import Scenario, run
from sim_core.catalog import ServingSettings, resolve_setup
from sim_core.deployment import resolve
from sim_core.expert_parallel import ExpertParallel
from sim_core.kernel.cost_constants import ALLREDUCE_BUS_BW, ALLREDUCE_LATENCY_S, EP_NETWORK_BW
from sim_core.kernel.cost_model import cost_params, step_time
from sim_core.links import KV_LINKS
from sim_core.metrics import deployment
from sim_core.scenario import ScenarioError, parse_scenario
from sim_core.step_time import parse_step_shape, step_time_doc
from sim_core.studies.plan_space import parse_plan_inputs
from sim_core.studies.planner import SearchSpace, plan
from sim_core.tensor_parallel import (
    NET_HOP_LATENCY_US,
    allreduce_bus_bw,
    hierarchical_allreduce_s,
    network_latency_us,
)

SERVING = ServingSettings(0.9, 16, 8192, 256)


def r1(tp: int, hardware: str = "h200", scale_out: str | None = None):
    return resolve_setup(hardware, "deepseek-r1", "auto", tp, SERVING, scale_out_link=scale_out)


def test_the_hierarchical_all_reduce_matches_a_hand_computed_figure():
    # 1 GB among 16 H100s, 8 a node: NVLink bus bandwidth 450 GB/s x 0.8 = 360 GB/s carries 2 x 7/8 of the bytes
    # (reduce-scatter + all-gather) = 4.8611 ms; ib400 (50 GB/s x 0.95 = 47.5 GB/s) carries each GPU's 1/8 shard
    # all-reduced between 2 nodes, 2 x 1/2 x 1/8 GB = 2.6316 ms; the phases overlap, so the slower one: 4.8611 ms.
    nvlink, ib400, ib200 = 360e9, KV_LINKS["ib400"].bytes_per_s, KV_LINKS["ib200"].bytes_per_s
    assert ib400 == pytest.approx(47.5e9) and ib200 == pytest.approx(23.75e9)
    assert hierarchical_allreduce_s(1e9, 16, 8, nvlink, ib400) == pytest.approx(4.8611e-3, rel=1e-4)
    # Over ib200 (23.75 GB/s) the NIC share is the slower: 1/8 GB / 23.75 GB/s = 5.2632 ms.
    assert hierarchical_allreduce_s(1e9, 16, 8, nvlink, ib200) == pytest.approx(5.2632e-3, rel=1e-4)
    # 4 nodes over ib400: NIC share 2 x 3/4 x 1/8 GB / 47.5 GB/s = 3.9474 ms, NVLink's still 4.8611 ms.
    assert hierarchical_allreduce_s(1e9, 32, 8, nvlink, ib400) == pytest.approx(4.8611e-3, rel=1e-4)
    # As nccl-tests reports it: 2 x 15/16 GB / 4.8611 ms = 385.7 GB/s of bus bandwidth, against 400-450 GB/s measured
    # on two H100/H200 NDR nodes (tensor_parallel.py cites it); within one node NVLink's own figure, untouched.
    assert allreduce_bus_bw(16, 8, nvlink, ib400) == pytest.approx(385.7e9, rel=1e-3)
    assert allreduce_bus_bw(8, 8, nvlink, ib400) == nvlink
    assert network_latency_us(16, 8) == 2 * NET_HOP_LATENCY_US and network_latency_us(8, 8) == 0.0


def test_across_nodes_the_all_reduce_takes_longer_than_within_one_for_the_same_message():
    tp8, tp16 = cost_params(r1(8)), cost_params(r1(16))
    assert tp16[ALLREDUCE_LATENCY_S] == pytest.approx(tp8[ALLREDUCE_LATENCY_S] + 2 * NET_HOP_LATENCY_US * 1e-6)
    def seconds(p, tp, message):
        return p[ALLREDUCE_LATENCY_S] + 2 * (tp - 1) / tp * message / p[ALLREDUCE_BUS_BW]

    for message in (7168 * 2.0, 64 * 7168 * 2.0, 8192 * 7168 * 2.0):  # one token, a decode batch, a prefill chunk
        assert seconds(tp16, 16, message) > seconds(tp8, 8, message)
    # The whole step's communication, the kernel's own sum (decode: vLLM's one-kernel all-reduce within a node,
    # NCCL across): more at tp 16, though each GPU computes half the tokens' share.
    decode16 = step_time(r1(16), 0, 0, 64, 2048).components_s["communication"]
    decode8 = step_time(r1(8), 0, 0, 64, 2048).components_s["communication"]
    assert decode16 > decode8


def test_a_slower_scale_out_link_slows_only_a_group_that_crosses_it():
    assert cost_params(r1(16, scale_out="ib200"))[ALLREDUCE_BUS_BW] < cost_params(r1(16))[ALLREDUCE_BUS_BW]
    assert (cost_params(r1(8, scale_out="ib200")) == cost_params(r1(8))).all()
    # One NVL72 rack holds 16 GPUs in one NVLink domain: no network at all.
    gb = resolve_setup("gb200", "deepseek-r1", "auto", 16, SERVING)
    gb_ib200 = resolve_setup("gb200", "deepseek-r1", "auto", 16, SERVING, scale_out_link="ib200")
    assert (cost_params(gb) == cost_params(gb_ib200)).all()


@pytest.mark.parametrize("hardware", ["h200", "h100"])
def test_deepseek_r1_runs_at_tp16_over_two_nodes_and_counts_16_gpus(hardware):
    s = Scenario(model="deepseek-r1", hardware=hardware, tp=16, num_requests=12, workload="chat")
    res = run(s)
    assert res.metrics["completed"] == 12
    gpus, cost = deployment(s, res.resolved)
    one_node = Scenario(model="deepseek-r1", hardware="h200", tp=8, num_requests=12)
    assert gpus == 16 == res.metrics["gpus"]
    if hardware == "h200":
        assert cost == pytest.approx(2 * deployment(one_node, resolve(one_node))[1])


def test_h100_cannot_hold_deepseek_r1_in_one_node_and_names_tp16():
    with pytest.raises(Exception, match=r"fits at tp=16 \(16 GPUs: 2 nodes of 8\)"):
        resolve(Scenario(model="deepseek-r1", hardware="h100", tp=8))


def test_the_json_and_the_text_name_the_link(capsys):
    args = ["run", "--model", "deepseek-r1", "--hardware", "h200", "--tp", "16", "--num-requests", "4"]
    assert main(args + ["--json"]) == 0
    resolved = next(iter(json.loads(capsys.readouterr().out)["schedulers"].values()))["resolved"]
    assert resolved["tp"] == 16 and resolved["tp_domains"] == 2 and resolved["scale_out_link"] == "ib400"
    assert resolved["tensor_parallel"] == ("tensor parallel 16 over 2 nodes of 8 (NVLink within, "
                                           "InfiniBand NDR / RoCE 400 Gb/s per GPU between)")
    assert main(args + ["--scale-out-link", "ib800"]) == 0
    assert "Tensor par.   tensor parallel 16 over 2 nodes of 8 (NVLink within, InfiniBand XDR / RoCE 800 Gb/s " \
           "per GPU between)" in capsys.readouterr().out


def test_one_node_reports_no_network():
    assert "tensor_parallel" not in step_time_doc(parse_step_shape({"model": "deepseek-r1", "hardware": "h200",
                                                                    "tp": "8", "decode_seqs": "8"}))
    doc = step_time_doc(parse_step_shape({"model": "deepseek-r1", "hardware": "h200", "tp": "16", "decode_seqs": "8"}))
    assert doc["scale_out_link"] == "ib400" and doc["tp_domains"] == 2


def test_the_step_time_text_names_the_link_only_over_nodes(capsys):
    base = ["step-time", "--model", "deepseek-r1", "--hardware", "h200", "--decode-seqs", "8"]
    assert main(base + ["--tp", "16", "--scale-out-link", "ib200"]) == 0
    assert "tensor parallel 16 over 2 nodes of 8 (NVLink within, InfiniBand HDR" in capsys.readouterr().out
    assert main(base + ["--tp", "8"]) == 0
    assert "over" not in capsys.readouterr().out.split("\n")[1]


@pytest.mark.parametrize("tp", ["12", "0", "1024", "24"])
@pytest.mark.parametrize("field", ["tp", "prefill_tp"])
def test_a_degree_not_allowed_is_refused_naming_the_allowed_ones(tp, field):
    pools = {"prefill_replicas": "1", "decode_replicas": "1"} if field != "tp" else {}
    with pytest.raises(ScenarioError) as e:
        parse_scenario({field: tp, **pools})
    assert e.value.problems == [(field, "must be between 1 and 8 (one node), or 16, 32 or 64 (whole nodes, or one "
                                        f"NVL72 domain) (got {tp})")]
    with pytest.raises(ScenarioError, match=r"tp: must be between 1 and 8 \(one node\), or 16, 32 or 64"):
        parse_step_shape({"tp": tp, "decode_seqs": "1"})


def test_the_api_refuses_a_bad_degree_with_a_422(client):
    r = client.get("/api/run", params={"tp": "12"})
    assert r.status_code == 422 and "16, 32 or 64" in r.text and "tp" in r.text


def test_the_api_runs_tp16_and_its_resolved_names_the_link(client):
    r = client.get("/api/run", params={"model": "deepseek-r1", "hardware": "h200", "tp": "16", "num_requests": "4",
                                       "scale_out_link": "ib200"})
    assert r.status_code == 200, r.text[:500]
    [entry] = r.json()["schedulers"].values()
    assert entry["resolved"]["tp"] == 16 and entry["resolved"]["scale_out_link"] == "ib200"
    assert "2 nodes of 8" in entry["resolved"]["tensor_parallel"] and entry["metrics"]["gpus"] == 16


def test_expert_parallelism_beyond_one_node_crosses_the_same_scale_out_link():
    def network_bw(hardware: str, scale_out: str | None) -> float:
        plan = ExpertParallel(16, attention_dp=True)
        s = resolve_setup(hardware, "deepseek-r1", "auto", 1, SERVING, expert_parallel=plan, scale_out_link=scale_out)
        return cost_params(s)[EP_NETWORK_BW]

    assert network_bw("h200", None) == KV_LINKS["ib400"].bytes_per_s
    assert network_bw("h200", "ib200") == KV_LINKS["ib200"].bytes_per_s
    assert network_bw("b300", None) == KV_LINKS["ib800"].bytes_per_s  # ConnectX-8 on B300


def test_a_plan_can_span_two_nodes_and_counts_each_engines_16_gpus():
    assert parse_plan_inputs({"tp": "8,16"}).tp == (8, 16)
    base = Scenario(model="deepseek-r1", hardware="h100", workload="chat", duration=10)
    result = plan(base, 2.0, SearchSpace(["h100"], [8, 16], ["chunked"], max_gpus=32))
    [too_small] = result.infeasible  # 671B of FP8 weights do not fit one node of 80 GB GPUs
    assert too_small.tp == 8 and "fits at tp=16" in too_small.reason
    [first, *_] = result.plans
    assert first.candidate.tp == 16 and first.gpus == 16 * first.scenario.replicas
    assert first.metrics["gpus"] == first.gpus


def test_a_decode_pool_across_nodes_is_named_in_the_json_and_the_text(capsys):
    args = ["run", "--model", "deepseek-r1", "--hardware", "h200", "--prefill-replicas", "1", "--decode-replicas", "1",
            "--prefill-tp", "8", "--decode-tp", "16", "--num-requests", "4"]
    assert main(args + ["--json"]) == 0
    resolved = next(iter(json.loads(capsys.readouterr().out)["schedulers"].values()))["resolved"]
    assert "tensor_parallel" not in resolved  # the first (prefill) pool stays in one node
    assert list(resolved["pools_tensor_parallel"]) == ["decode"]
    assert resolved["pools_tensor_parallel"]["decode"]["tp_domains"] == 2
    assert main(args) == 0
    assert "Tensor par.   decode: tensor parallel 16 over 2 nodes of 8" in capsys.readouterr().out
