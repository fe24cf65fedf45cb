"""Validity warnings: deployments the validation set does not measure, and runs whose queue keeps growing."""

from __future__ import annotations

import json

from app.cli import main
from sim_core import Scenario, run
from sim_core.validity import coverage_warnings, run_warnings, saturation_warning


def test_measured_deployments_have_no_coverage_warning():
    assert coverage_warnings("a100", "llama-3-8b", "fp16") == []
    assert coverage_warnings("h100", "llama-3-70b", "bf16") == []  # bf16 runs at the fp16 rate
    assert coverage_warnings("h100", "llama-3-8b", "fp8") == []


def test_unmeasured_gpu_model_and_format_are_each_named():
    w = coverage_warnings("l4", "qwen2.5-7b", "int4")
    assert len(w) == 3
    assert w[0].startswith("hardware l4 is outside the validation set") and "a100" in w[0]
    assert w[1].startswith("model qwen2.5-7b") and w[2].startswith("quantization int4")


def test_a_run_past_capacity_is_flagged_saturated_and_a_light_one_is_not():
    over = run(Scenario(hardware="a100", model="llama-3-8b", rate=30, duration=30))
    assert "saturated" in (saturation_warning(over) or "")
    light = run(Scenario(hardware="a100", model="llama-3-8b", rate=1, duration=30))
    assert saturation_warning(light) is None and run_warnings(light) == []


def test_json_outputs_add_warnings_beside_the_existing_keys(capsys):
    assert main(["run", "--hardware", "rtx3050", "--duration", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entry = doc["schedulers"]["chunked"]
    assert {"metrics", "resolved", "warnings"} <= set(entry)
    assert any(w.startswith("hardware rtx3050") for w in entry["warnings"])
    assert main(["step-time", "--hardware", "a100", "--decode-seqs", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def test_step_time_warns_about_a_batch_the_deployment_cannot_hold():
    from sim_core.step_time import parse_step_shape, step_time_doc

    fits = step_time_doc(parse_step_shape({"decode_seqs": 64, "decode_context": 1000}))
    assert fits["warnings"] == []
    huge = step_time_doc(parse_step_shape({"decode_seqs": 4096, "decode_context": 20000}))
    assert any("tokens of KV" in w for w in huge["warnings"])
    assert any("exceeds llama-3-8b's context" in w for w in huge["warnings"])
