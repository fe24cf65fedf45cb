"""Per-request energy (sim_core/energy.py request_energy, issue #40 item 2: who paid for whom) and its place in the
request-level A/B (sim_core/request_diff.py, `sched-sim diff`): each step's energy split among its batch by tokens,
summing to the run's busy energy on every topology; idle energy no request's; a diff with energy on both sides shows
each request's change, and says why where it cannot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from sim_core import Scenario, run
from sim_core.energy import request_energy
from sim_core.request_diff import diff_document, request_diff

BASE = dict(hardware="l4", model="llama-3.2-1b", max_model_len=4096, num_requests=40, rate=20, seed=1)
SHAPES = {
    "one engine": {},
    "replicas": {"replicas": 2},
    "P/D pools": {"prefill_replicas": 1, "decode_replicas": 1},
    "autoscaled": {"autoscaler": "predictive", "autoscale_replica_rate": 2, "provision_delay_s": 30},
    "preempting": {"kv_blocks": 60},
    "swapping": {"kv_blocks": 60, "preemption": "swap"},
    "speculative": {"spec_method": "ngram"},
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_per_request_energies_sum_to_the_busy_energy(shape):
    r = run(Scenario(energy=True, **BASE, **shape), record_events=True)
    e, q = r.metrics["energy"], request_energy(r)
    busy = e["gpu_energy_j"] - e["idle_energy_j"]
    assert q.unattributed_j == 0.0
    assert q.joules.sum() == pytest.approx(busy, rel=1e-9)
    assert q.idle_j == pytest.approx(e["idle_energy_j"], abs=1e-6)
    served = r.generated > 0
    assert np.all(q.joules[served] > 0) and np.all(q.joules[~served] == 0)


def test_a_lone_request_pays_every_step_and_no_idle_time():
    r = run(Scenario(energy=True, **{**BASE, "num_requests": 1}), record_events=True)
    q = request_energy(r)
    assert q.joules[0] == pytest.approx(q.busy_j, rel=1e-12)


def test_a_longer_output_pays_more_in_the_same_batch():
    r = run(Scenario(energy=True, **BASE), record_events=True)
    q = request_energy(r).joules
    out = r.requests.output_tokens
    assert np.corrcoef(out, q)[0, 1] > 0.5  # decode steps are most of the energy: more of them, more joules


def test_a_run_without_its_event_log_says_what_per_request_energy_needs():
    with pytest.raises(ValueError, match="event log"):
        request_energy(run(Scenario(energy=True, **BASE)))


@pytest.fixture(scope="module")
def capped_ab():
    a = run(Scenario(energy=True, **BASE), record_events=True)
    b = run(Scenario(energy=True, power_cap_w=45, **BASE), record_events=True)
    return a, b


def test_a_diff_with_energy_on_both_sides_shows_each_requests_change(capped_ab):
    a, b = capped_ab
    doc, d = diff_document(a, b, top=3)
    ea, eb = request_energy(a).joules[d.ids], request_energy(b).joules[d.ids]
    np.testing.assert_allclose(d.energy_b - d.energy_a, eb - ea)
    e = doc["energy"]
    assert e["change_j"]["gpu_energy_j"] == pytest.approx(
        b.metrics["energy"]["gpu_energy_j"] - a.metrics["energy"]["gpu_energy_j"]
    )
    assert e["requests"]["mean_change_j"] == pytest.approx(float((eb - ea).mean()))
    assert e["requests"]["paid_less"] == len(d)  # a capped clock: every request drew less
    assert doc["most_paid_more_energy"] == []
    row = doc["requests"][0]
    assert row["energy_j"]["change"] == pytest.approx(row["energy_j"]["b"] - row["energy_j"]["a"])
    text = json.loads("[" + d.requests_text() + "]")
    flat = [[r["energy_j"][k] for k in ("a", "b", "change")] for r in doc["requests"]]
    np.testing.assert_allclose([[t["energy_j"][k] for k in ("a", "b", "change")] for t in text], flat, atol=1e-6)
    back = diff_document(b, a, top=3)[0]  # the other way round: every request paid more, the most listed first
    assert len(back["most_paid_more_energy"]) == 3
    changes = [r["energy_j"]["change"] for r in back["requests"] if r["id"] in back["most_paid_more_energy"]]
    assert min(changes) > 0


def test_energy_off_adds_no_key_and_on_one_side_only_says_so(capped_ab):
    a, _ = capped_ab
    plain = run(Scenario(**BASE), record_events=True)
    d = request_diff(plain, plain)
    assert "energy" not in d.summary_json() and "energy_j" not in d.request_json(0)
    one = request_diff(plain, a).summary_json()["energy"]
    assert "on in B only" in one["note"] and "a" not in one


def test_cli_diff_prints_who_paid_more(capsys):
    q = "hardware=l4&model=llama-3.2-1b&max_model_len=4096&energy=true&num_requests=40&rate=20&seed=1"
    assert main(["diff", "--a", q + "&power_cap_w=45", "--b", q, "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "Energy, GPU boards (J)" in out and "paid the most more under B:" in out
    assert main(["diff", "--a", q, "--b", q, "--no-timelines"]) == 0
    assert "no per-request energy: run A" in capsys.readouterr().out
