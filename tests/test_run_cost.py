"""Issue #37: one cost model for admission (sim_core/run_cost.py); what the web or the CLI accepts never fails later.

Each of the hostile-client probe's reproductions answers as it should: a 422 naming the field and the limit before
anything is simulated, or a 200 within the budget; a degenerate uploaded config is refused at upload; a MemoryError
past the estimate is a 503 naming the limit (API) or one line (CLI), never a 500 or a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli.dispatch import main as cli_main
from app.web import inputs, service
from app.web.run_budget import MAX_REQUEST_CPU_S, MAX_RUN_BYTES, memory_problem, recorded_frames_for
from app.web.runview import FRAME_BUDGET
from app.web.sweep_range import default_sweep
from sim_core import Scenario, resolve
from sim_core.catalog import MODELS
from sim_core.cluster_over_time import running_target
from sim_core.hf_config import model_from_text
from sim_core.run_cost import MAX_KV_BLOCKS, run_cost, tiny_kv_problem
from sim_core.run_cost_load import autoscaled_slots, estimated_running_target, fleet_metric_peaks
from sim_core.runner import make_requests, run
from sim_core.traces import own_rate, read_trace

N1 = "schedulers=chunked&model=llama-3.2-1b&duration=5&prefix_cache=true"
ONE_WIDE = {"model_type": "llama", "hidden_size": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
            "num_hidden_layers": 1, "intermediate_size": 1, "vocab_size": 8, "max_position_embeddings": 4096,
            "tie_word_embeddings": False}


@pytest.fixture
def no_simulation(monkeypatch):
    """Fails the test if anything is simulated: a refusal must come before the engine allocates anything."""
    ran = []
    monkeypatch.setattr(service, "simulate_requests", lambda *a, **k: ran.append(a) or pytest.fail("simulated"))
    return ran


def _problem(response) -> tuple[str, str]:
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    return problem["loc"][-1], problem["msg"]


def test_n1_a_huge_disk_tier_is_refused_before_simulating_naming_the_field_and_the_limit(client, no_simulation):
    field, msg = _problem(client.get(f"/api/run?{N1}&kv_offload_disk_gb=15000"))
    assert field == "kv_offload_disk_gb"
    assert "GB of host memory" in msg and f"the limit is {MAX_RUN_BYTES / 1e9:.2f} GB" in msg and "at most" in msg
    most = float(msg.split("at most ")[1].split()[0].replace(",", ""))
    assert 1000 < most < 15000  # what fits: the estimate, linear in the field, gives the largest value
    assert no_simulation == []


def test_n1_the_most_the_refusal_names_is_accepted_by_the_estimate():
    s = Scenario.from_query(N1.split("&", 1)[1] + "&kv_offload_disk_gb=15000")
    over = run_cost(s, resolve(s), make_requests(s, resolve(s)))
    assert over.bytes > MAX_RUN_BYTES
    msg = memory_problem(s, make_requests(s, resolve(s)))[1]
    most = float(msg.split("at most ")[1].split()[0].replace(",", ""))
    fits = s.model_copy(update={"kv_offload_disk_gb": most})
    assert memory_problem(fits, make_requests(fits, resolve(fits))) is None


def test_n1_the_schema_maximum_is_one_a_machine_can_hold(client):
    field, msg = _problem(client.get(f"/api/run?{N1}&kv_offload_disk_gb=1048576"))
    assert field == "kv_offload_disk_gb" and "16384" in msg.replace(",", "")


def test_n1_a_disk_tier_within_the_budget_runs(client):
    r = client.get(f"/api/run?{N1}&kv_offload_disk_gb=100")
    assert r.status_code == 200, r.text
    assert "kv_tiers" in r.json()["schedulers"]["chunked"]["metrics"]


def test_n1_the_cli_refuses_what_this_machine_cannot_hold_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr("app.cli.simulate.available_memory_bytes", lambda: 1e9)
    code = cli_main(["run", "--model", "llama-3.2-1b", "--duration", "5", "--prefix-cache", "true",
                     "--kv-offload-disk-gb", "16000"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "--kv-offload-disk-gb" in err and "this machine has 1.00 GB available" in err and "at most" in err


def test_a_memory_error_past_the_estimate_is_one_cli_line(capsys, monkeypatch):
    def exhausted(*a, **k):
        raise MemoryError

    monkeypatch.setattr("app.cli.simulate.run", exhausted)
    code = cli_main(["run", "--duration", "1", "--scheduler", "fcfs"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and "out of memory" in err and len(err.strip().splitlines()) == 1


def test_a_memory_error_past_the_estimate_is_a_503_naming_the_limit(client, monkeypatch):
    def exhausted(*a, **k):
        raise MemoryError

    monkeypatch.setattr(service, "simulate_requests", exhausted)
    r = client.get("/api/run?schedulers=fcfs&duration=2&rate=1&seed=777")
    assert r.status_code == 503, r.text
    assert "max_run_bytes" in r.text


def test_n2_a_one_wide_config_is_refused_at_upload_naming_the_key(client):
    r = client.post("/api/model-config", files={"config": ("tiny.json", json.dumps(ONE_WIDE), "application/json")})
    assert r.status_code == 422, r.text
    msg = r.json()["detail"][0]["msg"]
    assert msg.startswith("head_dim:") and f"{MAX_KV_BLOCKS:,}" in msg and "bytes a token" in msg


def test_n2_every_catalogue_model_passes_the_rule():
    assert [k for k, m in MODELS.items() if tiny_kv_problem(m)] == []
    assert tiny_kv_problem(model_from_text(json.dumps(ONE_WIDE))) is not None


def test_a_config_with_a_byte_order_mark_uploads_and_runs(client):
    data = b"\xef\xbb\xbf" + json.dumps({**ONE_WIDE, "hidden_size": 2048, "num_attention_heads": 32,
                                         "num_key_value_heads": 8, "num_hidden_layers": 16,
                                         "intermediate_size": 8192, "vocab_size": 128256}).encode()
    up = client.post("/api/model-config", files={"config": ("bom.json", data, "application/json")})
    assert up.status_code == 200, up.text
    r = client.get(f"/api/run?schedulers=fcfs&duration=2&rate=1&model_file={up.json()['model_file']}")
    assert r.status_code == 200, r.text


def test_n4_many_adapters_are_refused_naming_lora_adapters_and_the_cpu_limit(client, no_simulation):
    # The issue's 120 s of arrivals is now ~35 s of CPU (bench_run_cost.py measures 10 s of them at ~2.9 s) and
    # within the budget (below); five minutes of them is past it.
    field, msg = _problem(client.get("/api/run?schedulers=chunked&lora_adapters=68391&duration=300&rate=33"))
    assert field == "lora_adapters" and f"{MAX_REQUEST_CPU_S:g} s" in msg and "at most" in msg
    assert no_simulation == []


def test_n4_the_issues_reproduction_is_estimated_within_the_budget_at_its_measured_cost():
    s = Scenario.from_query("scheduler=chunked&lora_adapters=68391&duration=120&rate=33")
    cost = run_cost(s, resolve(s), make_requests(s, resolve(s)))
    lora = next(t for t in cost.terms if t.field == "lora_adapters")
    assert 15 < cost.cpu_s < MAX_REQUEST_CPU_S and lora.cpu_s > cost.cpu_s / 2, cost


def test_n4_a_few_adapters_run(client):
    r = client.get("/api/run?schedulers=chunked&lora_adapters=100&duration=10&rate=5")
    assert r.status_code == 200, r.text


def test_n5_an_autoscaler_evaluating_every_millisecond_is_costed():
    """Evaluations x replicas is a term of its own: at 1 ms over 600 s with 64 replicas it is the largest CPU."""
    s = Scenario.from_query("duration=600&rate=1&autoscaler=utilization&max_replicas=64&autoscale_interval_s=0.001")
    cost = run_cost(s, resolve(s), make_requests(s, resolve(s)))
    assert cost.largest("cpu_s").field == "autoscale_interval_s"


def test_the_sweep_accepts_the_range_it_proposes_for_a_dense_trace():
    for gap in (1e-5, 5e-324):
        text = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{k * gap!r},100,10\n" for k in range(200))
        reqs = read_trace(text, 1000)
        info = inputs.TraceInfo(rows=len(reqs), span_s=float(reqs.arrival_s[-1] - reqs.arrival_s[0]),
                                own_rate=own_rate(reqs), longest_tokens=110)
        if info.own_rate is None:  # 5e-324 s gaps: as good as one instant, said so (not "got inf")
            continue
        proposed = default_sweep(Scenario(), info)
        assert all(0 < r <= 10_000 for r in proposed.rates())
        req = inputs.parse_request({"schedulers": "fcfs", "upload": "x" * 16, **dict(proposed.query_pairs())},
                                   uploads=lambda _, info=info: info)
        assert req.sweep == proposed


def test_n2_the_cli_refuses_a_one_wide_config_in_one_line_naming_kv_blocks(capsys, monkeypatch, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(ONE_WIDE))
    monkeypatch.setattr("app.cli.simulate.available_memory_bytes", lambda: 4e9)
    code = cli_main(["run", "--model-config", str(path), "--duration", "1", "--scheduler", "fcfs"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--kv-blocks" in err and "this machine has 4.00 GB available: at most" in err


def test_a_memory_error_in_a_sweep_is_a_422_naming_rate_max(client, monkeypatch):
    def exhausted(*a, **k):
        raise MemoryError

    monkeypatch.setattr(service, "sweep", exhausted)
    r = client.get("/api/sweep?schedulers=fcfs&duration=2&rate_min=1&rate_max=2&rate_step=1&seed=991")
    field, msg = _problem(r)
    assert field == "rate_max" and "max_run_bytes" in msg


def test_n5_an_autoscaled_fleets_kv_frames_count_every_slot():
    """Each of max_replicas slots records its own KV frames once provisioned: counted as one engine, a predictive
    fleet of 64 recorded 64 engines' worth (5 GB estimated; 2.2-3.6 GB measured by the probe)."""
    s = Scenario.from_query("duration=600&rate=5&autoscaler=predictive&max_replicas=64&autoscale_interval_s=0.001")
    r = resolve(s)
    frames = recorded_frames_for(r, s)
    assert 2 * frames * r.deployment[0].num_blocks * 64 <= FRAME_BUDGET
    assert memory_problem(s, make_requests(s, r)) is None


def _slots(query: str) -> int:
    s = Scenario.from_query(query)
    r = resolve(s)
    return autoscaled_slots(s, r, make_requests(s, r))


PREDICTIVE = "autoscaler=predictive&autoscale_replica_rate=2&seed=3"


def test_an_autoscaled_fleets_slots_grow_with_its_load_within_min_and_max_replicas():
    slots = [_slots(f"{PREDICTIVE}&duration=120&max_replicas=16&rate={rate}") for rate in (0.5, 2, 4, 8, 16, 64)]
    assert slots == sorted(slots) and slots[0] < slots[-1]
    assert all(1 <= k <= 16 for k in slots) and slots[-1] == 16  # 64 req/s needs 32 replicas of 2: capped
    assert _slots(f"{PREDICTIVE}&duration=120&max_replicas=16&rate=0.5&min_replicas=5&replicas=5") == 5


def test_the_slots_cover_a_rate_schedules_peak_over_what_one_replica_serves():
    # 30 req/s from t=60 s, at 2 req/s a replica: 15 replicas, whatever the quieter start.
    assert _slots(f"{PREDICTIVE}&duration=120&rate_schedule=0:1,60:30&max_replicas=64") == 15


def test_the_slots_fall_back_to_max_replicas_where_nothing_bounds_the_policy():
    assert _slots("duration=60&rate=1&autoscaler=predictive&max_replicas=40") == 40  # capacity searched in the run
    assert _slots("duration=60&rate=1&autoscaler=utilization&max_replicas=40&autoscale_metric=kv_usage"
                  "&autoscale_target=0.5") == 40


def test_a_utilization_fleet_wants_its_peak_requests_in_flight_over_the_target():
    """by_utilization asks for ceil(running / target): the running requests at an evaluation are at most those in
    the fleet then (peak_present), not all of the run's (a light 1B load of 263 requests needs one replica; the
    bound of ceil(requests / target) gave it 33 slots, 12x its memory)."""
    light = "model=llama-3.2-1b&duration=60&autoscaler=utilization&max_replicas=64"
    assert _slots(f"{light}&rate=5&autoscale_target=8") == 1
    # The same load at ten times the rate keeps ten times the requests in flight: more replicas, never fewer.
    slots = [_slots(f"{light}&autoscale_target=8&rate={rate}") for rate in (5, 20, 50, 100)]
    assert slots == sorted(slots) and slots[-1] > 2 * slots[0]
    assert _slots(f"{light}&rate=5&autoscale_target=1") > _slots(f"{light}&rate=5&autoscale_target=8")
    assert _slots("duration=60&rate=1&autoscaler=utilization&max_replicas=40&autoscale_metric=kv_usage"
                  "&autoscale_target=1") == 1
    # Follow-up turns arrive when their parent finishes: the forecast's arrivals are not known before the run.
    assert _slots("workload=agent&duration=60&rate=1&autoscaler=predictive&max_replicas=40"
                  "&autoscale_replica_rate=2") == 40


def test_the_follow_up_turns_of_a_utilization_fleet_count_as_in_it_throughout():
    s = Scenario.from_query("workload=agent&duration=20&rate=1&autoscaler=utilization&max_replicas=64"
                            "&autoscale_target=1")
    reqs = make_requests(s, resolve(s))
    unknown = int((~np.isfinite(reqs.arrival_s)).sum())
    assert 0 < unknown < 64 and autoscaled_slots(s, resolve(s), reqs) > unknown
    # Without a target, the capacity search's would replay them too: the bound the kernel keeps.
    assert autoscaled_slots(s.model_copy(update={"autoscale_target": None}), resolve(s), reqs) == 64


def test_one_replica_past_its_throughput_runs_max_seqs_and_the_fleet_asks_for_that_over_the_target():
    """Past one replica's throughput the requests wait on the replica they were sent to, which runs at most
    max_seqs of them: until the replicas asked for serve (a provisioning delay), the running requests the
    policy sees are max_seqs, and it asks for max_seqs / target replicas."""
    s = Scenario.from_query("duration=60&rate=20&autoscaler=utilization&max_replicas=64&autoscale_target=16")
    r = resolve(s)
    peaks = list(fleet_metric_peaks(s, r, make_requests(s, r), 1, 64, 16.0))
    assert peaks[0] == r.max_seqs and max(peaks) == r.max_seqs
    assert autoscaled_slots(s, r, make_requests(s, r)) == r.max_seqs // 16
    light = s.model_copy(update={"rate": 2.0})
    rl = resolve(light)
    assert max(fleet_metric_peaks(light, rl, make_requests(light, rl), 1, 64, 16.0)) < r.max_seqs / 4


@pytest.mark.parametrize("query", [
    "duration=120&rate=8&autoscaler=utilization&max_replicas=8",  # the default target: searched in the run
    "duration=120&rate=30&autoscaler=utilization&max_replicas=16",
    "model=llama-3.2-1b&duration=60&rate=100&autoscaler=utilization&max_replicas=64&autoscale_target=64",
    "duration=60&rate=20&autoscaler=utilization&max_replicas=64&autoscale_target=16",  # one replica overloaded
])
def test_a_utilization_fleets_slots_are_within_2x_of_what_it_provisions(query):
    s = Scenario.from_query(query)
    r = resolve(s)
    slots = autoscaled_slots(s, r, make_requests(s, r))
    held = len(run(s).replica_lives)
    assert held / 2 <= slots <= 2 * held, (slots, held)


def test_the_default_running_target_is_estimated_within_2x_of_the_searched_one():
    s = Scenario.from_query("duration=120&rate=8&autoscaler=utilization&max_replicas=8")
    r = resolve(s)
    estimated = estimated_running_target(s, r, make_requests(s, r))
    searched = running_target(s, run)
    assert searched / 2 <= estimated <= 2 * searched, (estimated, searched)


def test_the_slots_bound_what_the_fleet_provisions():
    s = Scenario.from_query(f"{PREDICTIVE}&duration=60&max_replicas=16&rate=6&autoscale_interval_s=5")
    r = resolve(s)
    slots = autoscaled_slots(s, r, make_requests(s, r))
    held = run(s).metrics["gpus"] // r.deployment[0].setup.tp
    assert 1 < held <= slots < 16


def test_an_autoscaled_fleet_too_large_at_its_real_peak_is_refused_and_a_lighter_one_runs(client, no_simulation):
    """4M KV blocks an engine (llama-3.2-1b on 8 MI355X): ~150 MB a slot. At 1 req/s a replica, 40 req/s needs
    20+ slots (over MAX_RUN_BYTES); 2 req/s needs a few, which the fleet's max_replicas of 64 would not fit."""
    base = "schedulers=chunked&model=llama-3.2-1b&hardware=mi355x&tp=8&duration=30&autoscaler=predictive" \
           "&max_replicas=64&autoscale_replica_rate=1"
    field, msg = _problem(client.get(f"/api/run?{base}&rate=40"))
    assert field == "kv_blocks" and "host memory" in msg and no_simulation == []
    light = Scenario.from_query(base.split("&", 1)[1] + "&rate=2")
    assert memory_problem(light, make_requests(light, resolve(light))) is None
