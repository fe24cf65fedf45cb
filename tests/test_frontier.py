"""The throughput-per-GPU vs tokens/s-per-user frontier (sim_core/studies/frontier.py) and `sched-sim frontier`:
InferenceX's axes from a run's metrics, the concurrency grid, each GPU's viable configurations (tp, ep, attention
data-parallel, speculative decoding) and its envelope over them, the cheapest point at a tokens/s-per-user floor,
and the command's JSON and one-line errors."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sim_core import Scenario, ScenarioError, SetupError, resolve
from sim_core.prices import GPU_PRICES
from sim_core.studies.frontier import (
    TP_CHOICES,
    Config,
    ConfigSearch,
    cheapest_at,
    concurrency_grid,
    envelope,
    frontier,
    parallel_configs,
    pareto_front,
    point_metrics,
    simulate_point,
)
from sim_core.workload import RANDOM_ISL, RANDOM_OSL

# A small model at short lengths: a point is a few hundredths of a second.
SMALL = dict(model="qwen2.5-0.5b", workload="random", isl=128, osl=32)
GRID = [1, 4, 16]


def test_the_grid_doubles_up_to_its_maximum_which_it_includes():
    assert concurrency_grid(1, 8) == [1, 2, 4, 8]
    assert concurrency_grid(3, 20) == [3, 6, 12, 20]
    assert concurrency_grid(5, 5) == [5]


@pytest.mark.parametrize(("lo", "hi", "field"), [(0, 8, "min_concurrency"), (1, 0, "max_concurrency"),
                                                  (8, 4, "max_concurrency"), (1.5, 8, "min_concurrency"),
                                                  (True, 8, "min_concurrency"), (1, 10**9, "max_concurrency")])
def test_a_bad_grid_names_its_input(lo, hi, field):
    with pytest.raises(ScenarioError) as e:
        concurrency_grid(lo, hi)
    assert e.value.problems[0][0] == field


def _metrics(**over) -> dict:
    m = {"gpus": 4, "total_token_throughput": 8000.0, "output_throughput": 2000.0, "cost_per_hour": 10.0,
         "tpot_ms": {"p50": 20.0}, "ttft_ms": {"p50": 100.0}, "e2el_ms": {"p50": 1000.0}, "completed": 10,
         "rejected": 0}
    m.update(over)
    return m


def test_inferencex_axes_from_a_runs_metrics():
    total = point_metrics(_metrics())
    assert total["tokens_per_s_per_user"] == pytest.approx(1000 / 20)  # InferenceX: intvty = 1000 / tpot_ms
    assert total["throughput_per_gpu"] == pytest.approx(8000 / 4)  # tput_per_gpu: total tokens / GPUs
    assert total["output_throughput_per_gpu"] == pytest.approx(2000 / 4)
    # $/Mtok: $2.5 per GPU-hour over 2000 tok/s per GPU (7.2M tokens an hour)
    assert total["cost_per_mtok"] == pytest.approx(2.5 / 7.2)
    output = point_metrics(_metrics(), basis="output")
    assert output["throughput_per_gpu"] == pytest.approx(500)
    assert output["cost_per_mtok"] == pytest.approx(4 * total["cost_per_mtok"])
    assert point_metrics(_metrics(cost_per_hour=None))["cost_per_mtok"] is None
    assert point_metrics(_metrics(tpot_ms={"p50": None}))["tokens_per_s_per_user"] is None
    with pytest.raises(ValueError, match="basis"):
        point_metrics(_metrics(), basis="input")


def _p(hw: str, per_user: float | None, per_gpu: float, cost: float | None = 1.0) -> dict:
    return {"hardware": hw, "tokens_per_s_per_user": per_user, "throughput_per_gpu": per_gpu, "cost_per_mtok": cost}


def test_the_pareto_front_keeps_the_points_nothing_beats_on_both_axes():
    pts = [_p("a", 100, 10), _p("a", 80, 50), _p("a", 70, 40), _p("a", 50, 90), _p("a", 50, 80), _p("a", None, 5)]
    front = pareto_front(pts)
    assert [(p["tokens_per_s_per_user"], p["throughput_per_gpu"]) for p in front] == [(50, 90), (80, 50), (100, 10)]


def test_the_envelope_draws_a_tie_once_the_first_configurations():
    tie = [{**_p("a", 50, 90), "config": "tp2"}, {**_p("a", 50, 90), "config": "tp2 ep2"},
           {**_p("a", 80, 50), "config": "tp4"}, {**_p("a", 40, 40), "config": "tp4"}]
    assert len(pareto_front(tie)) == 3  # neither of the tie beats the other
    assert [p["config"] for p in envelope(tie)] == ["tp2", "tp4"]


def test_the_cheapest_point_at_a_floor_of_tokens_per_user():
    pts = [_p("a", 100, 10, 5.0), _p("b", 60, 50, 1.0), _p("c", 40, 90, 0.5), _p("d", 90, 60, None)]
    assert cheapest_at(pts, 50)["hardware"] == "b"  # c is cheaper but too slow per user; d has no price
    assert cheapest_at(pts, 95)["hardware"] == "a"
    assert cheapest_at(pts, 200) is None


@pytest.fixture(scope="module")
def swept():  # one configuration per GPU (--tp 1): a curve per GPU
    return frontier(Scenario(**SMALL), ["a100", "h100", "rtx3050"], GRID, search=ConfigSearch(tps=[1]))


def test_a_frontier_has_a_point_per_gpu_and_concurrency_and_trades_users_for_throughput(swept):
    assert [(p["hardware"], p["concurrency"]) for p in swept.points] == [
        (hw, c) for hw in ("a100", "h100", "rtx3050") for c in GRID]
    for hw in ("a100", "h100"):
        pts = [p for p in swept.points if p["hardware"] == hw]
        per_gpu = [p["throughput_per_gpu"] for p in pts]
        per_user = [p["tokens_per_s_per_user"] for p in pts]
        assert per_gpu == sorted(per_gpu) and per_gpu[0] < per_gpu[-1] / 4  # more users: more tokens per GPU
        assert per_user == sorted(per_user, reverse=True)  # ... and fewer per user
        assert all(p["completed"] == p["concurrency"] * 10 for p in pts)  # InferenceX: 10 prompts per user
        assert all(p["pareto"] for p in pts)  # a monotone trade-off is all front
        assert all(Scenario.from_query(p["scenario"]).concurrency == p["concurrency"] for p in pts)
    h100 = {p["concurrency"]: p for p in swept.points if p["hardware"] == "h100"}
    a100 = {p["concurrency"]: p for p in swept.points if p["hardware"] == "a100"}
    assert h100[16]["throughput_per_gpu"] > a100[16]["throughput_per_gpu"]  # the faster GPU
    for p in swept.points:
        assert (p["cost_per_mtok"] is None) == (GPU_PRICES[p["hardware"]] is None)


def test_long_requests_get_room_up_to_the_models_context_and_the_rest_are_counted_rejected():
    from sim_core.studies.frontier import frontier_scenario

    long = dict(workload="random", isl=8192, osl=8192, length_range=0.5)
    assert frontier_scenario(Scenario(model="qwen2.5-7b", **long), "h100", 4).max_model_len == 24576
    assert frontier_scenario(Scenario(model="qwen2.5-7b", **long, max_model_len=4096), "h100", 4).max_model_len == 4096
    default = frontier_scenario(Scenario(model="qwen2.5-7b", workload="random"), "h100", 4)
    assert default.max_model_len == RANDOM_ISL + RANDOM_OSL  # InferenceX's --max-model-len ISL + OSL
    below = Scenario(model="qwen2.5-7b", workload="random", isl=1000, osl=100, length_range=0.8,
                     length_range_mode="inferencex")
    assert frontier_scenario(below, "h100", 4).max_model_len == 1100  # [0.8 L, L]: L at most
    point = simulate_point("llama-3-8b", "h100", 1, 8000, 1000, 2)  # over llama-3-8b's 8192-token context
    assert point["rejected"] == 20 and point["completed"] == 0 and point["tokens_per_s_per_user"] is None
    assert pareto_front([{**point, "hardware": "h100"}]) == []


def test_a_gpu_the_model_does_not_fit_is_ruled_out_with_the_reason():
    result = frontier(Scenario(model="llama-3-70b", workload="random", isl=128, osl=32), ["rtx3050"], [1])
    assert result.points == [] and "rtx3050 has 8 GB" in result.infeasible["rtx3050"]
    assert [r["config"] for r in result.ruled_out] == [f"tp{t}" for t in TP_CHOICES]  # each with its reason
    assert all("rtx3050 has 8 GB" in r["reason"] for r in result.ruled_out)


def test_the_configurations_tried_dense_and_mixture_of_experts():
    assert parallel_configs(False) == [Config(t) for t in TP_CHOICES]
    moe = parallel_configs(True)
    for c in moe:  # every one a shape the scenario accepts: ep 1, ep = tp, or attention-DP over a multiple of tp
        assert c.ep == 1 or (c.ep == c.tp and not c.attention_dp) or (c.attention_dp and c.ep % c.tp == 0 < c.ep - c.tp)
        assert max(c.tp, c.ep) <= max(TP_CHOICES)  # one node
    assert Config(1, 8, True) in moe and Config(4, 4) in moe and Config(8, 8) in moe
    assert [c.label for c in parallel_configs(True, [2], [2, 8])] == ["tp2 ep2", "tp2 ep8 dp-attn"]
    assert [c.label for c in parallel_configs(False, [4], spec_method="mtp")] == ["tp4", "tp4 +mtp"]
    for tps, eps, named in (([0], None, "tp"), ([2, 16], None, "tp"), (None, [2], "ep"), ([True], None, "tp")):
        with pytest.raises(ScenarioError) as e:
            parallel_configs(False, tps, eps)
        assert e.value.problems[0][0] == named


@pytest.fixture(scope="module")
def llama70b():  # the example, at short lengths: llama-3-70b on three GPUs
    return frontier(Scenario(model="llama-3-70b", workload="random", isl=256, osl=32), ["h100", "h200", "b200"],
                    [1, 8, 64])


def test_each_gpu_sweeps_the_configurations_that_fit_it(llama70b):
    for hw in ("h100", "h200", "b200"):
        fits = []
        for tp in TP_CHOICES:  # the catalogue's own fit check decides
            try:
                resolve(Scenario(model="llama-3-70b", hardware=hw, tp=tp, workload="random", isl=256, osl=32,
                                 max_model_len=288, concurrency=64, num_requests=640))
                fits.append(f"tp{tp}")
            except SetupError:
                pass
        assert [c["config"] for c in llama70b.configs if c["hardware"] == hw] == fits and fits
        assert [r["config"] for r in llama70b.ruled_out if r["hardware"] == hw] == [
            f"tp{t}" for t in TP_CHOICES if f"tp{t}" not in fits]
    # 70B in 16 bits fits one B200 but neither one H100 nor one H200: the frontier still draws all three
    assert "tp1" not in {c["config"] for c in llama70b.configs if c["hardware"] in ("h100", "h200")}
    assert {"tp1", "tp8"} <= {c["config"] for c in llama70b.configs if c["hardware"] == "b200"}
    assert llama70b.infeasible == {}


def test_each_gpus_envelope_is_the_front_of_all_its_configurations(llama70b):
    envelope = llama70b.envelope()
    assert list(envelope) == ["h100", "h200", "b200"]
    for hw, front in envelope.items():
        mine = [p for p in llama70b.points if p["hardware"] == hw]
        on = {(p["config"], p["concurrency"]) for p in mine if p["pareto"]}
        assert {(e["config"], e["concurrency"]) for e in front} <= on
        for p in mine:  # off the envelope: some point of the GPU, of any configuration, beats it on both axes
            beaten = any(q["tokens_per_s_per_user"] >= p["tokens_per_s_per_user"] and
                         q["throughput_per_gpu"] >= p["throughput_per_gpu"] and q is not p for q in mine)
            assert p["pareto"] != beaten
        xs = [e["tokens_per_s_per_user"] for e in front]
        ys = [e["throughput_per_gpu"] for e in front]
        assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # a trade-off: more per user, less per GPU
        assert len({e["config"] for e in front}) >= 2  # several configurations make it up
    for curve in llama70b.curves():  # each configuration's own curve and its own front
        mine = [p for p in llama70b.points if p["hardware"] == curve["hardware"] and p["config"] == curve["config"]]
        assert curve["front"] == [p["config_pareto"] for p in mine] and any(curve["front"])
        assert all(p["gpus"] == p["tp"] for p in mine)


def test_a_mixture_of_experts_model_tries_expert_and_attention_data_parallel_configurations():
    base = Scenario(model="qwen3-30b-a3b", workload="random", isl=128, osl=16, spec_method="eagle")
    result = frontier(base, ["h100"], [1, 8], search=ConfigSearch([1, 2], [1, 2]))
    assert [c["config"] for c in result.configs] == [
        "tp1", "tp1 +eagle", "tp1 ep2 dp-attn", "tp1 ep2 dp-attn +eagle", "tp2", "tp2 +eagle", "tp2 ep2",
        "tp2 ep2 +eagle"]
    for p in result.points:
        s = Scenario.from_query(p["scenario"])
        assert (s.tp, s.ep, s.attention_dp, s.spec_method) == (p["tp"], p["ep"], p["attention_dp"], p["spec_method"])
        assert p["gpus"] == (p["ep"] if p["attention_dp"] else p["tp"])  # per GPU: over every GPU it holds
    assert all(c["gpus"] == (c["ep"] if c["attention_dp"] else c["tp"]) for c in result.configs)
    eagle = {p["concurrency"]: p for p in result.points if p["config"] == "tp1 +eagle"}
    plain = {p["concurrency"]: p for p in result.points if p["config"] == "tp1"}
    assert eagle[1]["tokens_per_s_per_user"] > plain[1]["tokens_per_s_per_user"]  # drafts speed up one user


def test_simulate_point_is_the_frontiers_point(swept):
    one = simulate_point("qwen2.5-0.5b", "h100", 1, 128, 32, 4)
    same = next(p for p in swept.points if p["hardware"] == "h100" and p["concurrency"] == 4)
    for key in ("throughput_per_gpu", "tokens_per_s_per_user", "cost_per_mtok", "output_throughput_per_gpu"):
        assert one[key] == same[key]
    with pytest.raises(ScenarioError) as e:
        simulate_point("qwen2.5-0.5b", "h100", 9, 128, 32, 4)
    assert e.value.problems[0][0] == "tp"
    with pytest.raises(SetupError) as e:
        simulate_point("qwen2.5-0.5b", "h100", 3, 128, 32, 4)
    assert e.value.field == "tp"


# ----- the command -----
def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_prints_inferencex_points_as_json(capsys):
    code, out, err = _cli(capsys, ["frontier", "--model", "qwen2.5-0.5b", "--hardware", "h100,a100", "--isl", 128,
                                   "--osl", 32, "--max-concurrency", 4, "--workers", 1, "--basis", "output",
                                   "--min-tokens-per-s-per-user", 10, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["concurrencies"] == [1, 2, 4] and doc["basis"] == "output"
    viable = [(c["hardware"], c["config"]) for c in doc["configs"]]
    assert len(doc["points"]) == 3 * len(viable) and len(viable) >= 2
    for p in doc["points"]:
        assert {"hardware", "scenario", "concurrency", "tokens_per_s_per_user", "throughput_per_gpu",
                "cost_per_mtok", "pareto", "config", "tp", "ep", "attention_dp", "config_pareto"} <= set(p)
        assert p["throughput_per_gpu"] == p["output_throughput_per_gpu"]
        assert Scenario.from_query(p["scenario"]).tp == p["tp"]
    assert [(c["hardware"], c["config"]) for c in doc["curves"]] == viable
    assert all(c["concurrencies"] == [1, 2, 4] for c in doc["curves"])
    for hw in ("h100", "a100"):
        assert doc["envelope"][hw] == [{k: p[k] for k in doc["envelope"][hw][0]}
                                       for p in pareto_front([p for p in doc["points"] if p["hardware"] == hw])]
    cheapest = min((p for p in doc["points"] if p["tokens_per_s_per_user"] >= 10), key=lambda p: p["cost_per_mtok"])
    assert doc["cheapest"] == cheapest


def test_the_commands_table_marks_each_gpus_front(capsys):
    code, out, _ = _cli(capsys, ["frontier", "--model", "qwen2.5-0.5b", "--hardware", "h100", "--isl", 128,
                                 "--osl", 32, "--max-concurrency", 2, "--workers", 1, "--tp", 1])
    assert code == 0
    assert "h100" in out and "tok/s/user" in out and out.count("\n*") == 2 and "tp1" in out


@pytest.mark.parametrize(("argv", "says"), [
    (["--max-concurrency", "0"], "--max-concurrency: must be an integer from 1"),
    (["--min-concurrency", "8", "--max-concurrency", "4"], "--max-concurrency: must be at least --min-concurrency"),
    (["--requests-per-user", "0"], "--requests-per-user: must be from 1"),
    (["--hardware", "h100,nope"], "unknown GPU 'nope'"),
    (["--workload", "chat", "--isl", "5"], "--isl: sets the random workload's request lengths"),
    (["--model", "llama-3-70b", "--hardware", "rtx3050", "--max-model-len", "8192"], "--hardware: the model fits none of the GPUs"),
    (["--tp", "9"], "--tp: each value must be an integer between 1 and 8 (got 9)"),
    (["--tp", "2,x"], "--tp: must be an integer"),
    (["--ep", "2"], "--ep: no configuration has ep in 2"),
    (["--ep", "0"], "--ep: each value must be an integer between 1"),
])
def test_bad_input_gets_one_line_naming_the_flag(capsys, argv, says):
    base = {"--model": "qwen2.5-0.5b", "--hardware": "h100"}
    for k in range(0, len(argv), 2):
        base[argv[k]] = argv[k + 1]
    code, _, err = _cli(capsys, ["frontier", *[w for kv in base.items() for w in kv], "--workers", "1"])
    assert code == 2 and says in err.splitlines()[-1], err


def test_a_frontier_needs_one_model(capsys):
    code, _, err = _cli(capsys, ["frontier", "--hardware", "h100"])
    assert code == 2 and "--model: a frontier compares GPUs serving one model" in err


# ----- the planner at a floor of tokens/s per user -----
def test_a_floor_of_tokens_per_user_tightens_the_tpot_target_never_loosens_it():
    from sim_core.studies.planner import tokens_floor
    from sim_core.workload import PRESETS

    chat = Scenario(workload="chat")
    assert tokens_floor(chat, None) is chat
    preset_tpot = PRESETS["chat"].slo_tpot_ms
    fast = 2 * 1000 / preset_tpot  # twice the tokens/s the preset's target allows
    assert tokens_floor(chat, fast).slo_tpot_ms == pytest.approx(preset_tpot / 2)
    assert tokens_floor(chat, fast / 4).slo_tpot_ms == preset_tpot  # looser than the preset's: it stays
    assert tokens_floor(Scenario(workload="chat", slo_tpot_ms=5), 10).slo_tpot_ms == 5


def test_the_plan_searches_at_the_floors_tpot_target(monkeypatch):
    import sim_core.studies.planner as planner
    from sim_core import SetupError as Refused
    from sim_core.studies.plan_space import parse_plan_inputs

    inputs = parse_plan_inputs({"gpus": "h100", "min_tokens_per_s_per_user": "50"})
    assert inputs.space().min_tokens_per_s_per_user == 50
    seen = []

    def refuse(s):  # record the candidate's scenario, then rule it out before any simulation
        seen.append(s.slo_tpot_ms)
        raise Refused("no room", "hardware")

    monkeypatch.setattr(planner, "resolve", refuse)
    result = planner.plan(Scenario(model="llama-3-8b", workload="chat", rate=2), 2, inputs.space())
    assert seen == [pytest.approx(20.0)] and result.infeasible[0].kind == "fit"
    with pytest.raises(ScenarioError) as e:
        parse_plan_inputs({"min_tokens_per_s_per_user": "0"})
    assert e.value.problems[0][0] == "min_tokens_per_s_per_user"


def test_a_points_scenario_reruns_to_the_same_point(swept):
    from sim_core import run

    p = next(p for p in swept.points if p["hardware"] == "a100" and p["concurrency"] == 4)
    again = point_metrics(run(Scenario.from_query(p["scenario"])).metrics)
    assert again["throughput_per_gpu"] == p["throughput_per_gpu"]
    assert again["tokens_per_s_per_user"] == p["tokens_per_s_per_user"]


def test_the_plan_command_names_a_bad_floor(capsys):
    code, _, err = _cli(capsys, ["plan", "--model", "llama-3-8b", "--gpus", "h100", "--rate", "1",
                                 "--min-tokens-per-s-per-user", "-3"])
    assert code == 2 and "--min-tokens-per-s-per-user" in err.splitlines()[-1], err
