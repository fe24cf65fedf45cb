"""`step-time --power-cap W` (GET /api/step-time power_cap_w): the step runs at the clock the cap leaves, as a
capped run's steps do (sim_core/energy.py capped_constants), and a cap outside the GPU's range is refused naming
the field and the range."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.cli.dispatch import main
from app.web import app
from sim_core import GPUS
from sim_core.energy import capped_clock
from sim_core.scenario import ScenarioError
from sim_core.step_time import parse_step_shape, step_time_curves, step_time_doc

H100 = GPUS["h100"]
CAP = 0.6 * H100.board_power_w
PREFILL = {"hardware": "h100", "model": "llama-3-8b", "prefill_tokens": 4096}
DECODE = {"hardware": "h100", "model": "llama-3-8b", "decode_seqs": 8, "decode_context": 1000}


def _doc(shape: dict, cap: float | None = None) -> dict:
    return step_time_doc(parse_step_shape(shape | ({"power_cap_w": cap} if cap else {})))


def test_a_cap_slows_a_compute_bound_step_by_its_clock_and_barely_a_memory_bound_one():
    clock = capped_clock(H100.idle_power_w, H100.board_power_w, CAP)
    free, capped = _doc(PREFILL), _doc(PREFILL, CAP)
    assert capped["power_cap_w"] == CAP and "power_cap_w" not in free
    assert capped["components_ms"]["linear"] == pytest.approx(free["components_ms"]["linear"] / clock, rel=0.02)
    assert capped["step_ms"] > 1.1 * free["step_ms"]
    assert _doc(DECODE, CAP)["step_ms"] == pytest.approx(_doc(DECODE)["step_ms"], rel=0.02)


def test_the_curves_take_the_cap_too():
    free = step_time_curves(parse_step_shape(PREFILL), 4096, points=4)["kinds"]["prefill"]["step_ms"]
    capped = step_time_curves(parse_step_shape(PREFILL | {"power_cap_w": CAP}), 4096, points=4)
    assert capped["kinds"]["prefill"]["step_ms"][-1] > 1.1 * free[-1]


@pytest.mark.parametrize("cap", [H100.idle_power_w, H100.board_power_w + 1])
def test_a_cap_outside_the_gpus_range_is_refused_naming_the_range(cap):
    with pytest.raises(ScenarioError, match="power_cap_w.*above its idle power.*at most its board limit"):
        parse_step_shape(DECODE | {"power_cap_w": cap})


def test_cli_and_api_take_the_cap(capsys):
    assert main(["step-time", "--hardware", "h100", "--model", "llama-3-8b", "--prefill-tokens", "4096",
                 "--power-cap", f"{CAP:g}"]) == 0
    assert f"capped at {CAP:g} W" in capsys.readouterr().out
    refused = main(["step-time", "--hardware", "h100", "--model", "llama-3-8b", "--decode-seqs", "8",
                    "--power-cap", "50"])
    assert refused != 0 and "--power-cap: 50 W is outside h100's range" in capsys.readouterr().err
    client = TestClient(app)
    ok = client.get("/api/step-time", params=PREFILL | {"power_cap_w": CAP})
    assert ok.status_code == 200 and ok.json()["step_ms"] == pytest.approx(_doc(PREFILL, CAP)["step_ms"])
    bad = client.get("/api/step-time", params=DECODE | {"power_cap_w": 50})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "power_cap_w"
