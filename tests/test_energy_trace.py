"""The power counter track of the Perfetto trace (sim_core/trace_export.py power_events, issue #40 item 2): on each
engine's process when energy is on, integrating to that engine's GPU energy in metrics.energy, for every topology
(autoscaled included, whose released replicas draw nothing); absent with energy off."""

from __future__ import annotations

import numpy as np
import pytest

from sim_core import Scenario, run
from sim_core.trace_export import POWER_TRACK, chrome_trace

SMALL = dict(hardware="l4", model="llama-3.2-1b", max_model_len=4096, num_requests=60, rate=8, seed=1)
TOPOLOGIES = {
    "one engine": {},
    "replicas": {"replicas": 2},
    "P/D pools": {"prefill_replicas": 1, "decode_replicas": 1},
    "autoscaled": {"autoscaler": "predictive", "autoscale_replica_rate": 2, "provision_delay_s": 30},
}


def _power_tracks(trace: dict) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """pid -> (times s, watts) of its power counter, in the trace's order."""
    samples: dict[int, list] = {}
    for ev in trace["traceEvents"]:
        if ev.get("name") == POWER_TRACK:
            assert ev["ph"] == "C"
            samples.setdefault(ev["pid"], []).append((ev["ts"] * 1e-6, ev["args"]["watts"]))
    return {pid: tuple(np.array(col) for col in zip(*rows, strict=True)) for pid, rows in samples.items()}


@pytest.mark.parametrize("shape", TOPOLOGIES.values(), ids=TOPOLOGIES.keys())
def test_each_engines_power_track_integrates_to_its_gpu_energy(shape):
    r = run(Scenario(energy=True, **SMALL, **shape), record_events=True)
    energy = r.metrics["energy"]
    per_engine = [e["energy_j"] for e in energy["engines"]] if "engines" in energy else [energy["gpu_energy_j"]]
    tracks = _power_tracks(chrome_trace(r))
    assert len(tracks) == len(per_engine)
    for (times, watts), joules in zip(tracks.values(), per_engine, strict=True):
        assert np.all(np.diff(times) > 0)  # one sample per microsecond at most
        # Counters hold their value until the next sample; times are whole microseconds, hence the tolerance.
        assert float((watts[:-1] * np.diff(times)).sum()) == pytest.approx(joules, rel=1e-6)
        assert watts[-1] == 0.0
        board = r.resolved.deployment[0].setup.gpu.board_power_w * r.resolved.deployment[0].setup.tp
        assert watts.max() <= board


def test_a_released_replica_draws_nothing_and_a_held_one_idle_power():
    r = run(Scenario(energy=True, **SMALL, **TOPOLOGIES["autoscaled"]), record_events=True)
    idle = r.resolved.deployment[0].setup.gpu.idle_power_w
    tracks = list(_power_tracks(chrome_trace(r)).values())
    later = tracks[1]  # the second slot is asked for after the start: nothing before, idle while it loads
    assert later[1][0] == pytest.approx(idle)
    assert later[0][0] > r.end_s - r.metrics["duration_s"]


def test_no_power_track_with_energy_off_and_a_note_when_the_trace_is_a_sample():
    off = chrome_trace(run(Scenario(**SMALL), record_events=True))
    assert not _power_tracks(off)
    on = chrome_trace(run(Scenario(energy=True, **SMALL), record_events=True), max_steps=10)
    assert not _power_tracks(on)
    assert any("power track is left out" in n for n in on["metadata"]["notes"])
