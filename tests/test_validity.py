"""Validity warnings: deployments the validation set does not measure, and runs whose queue keeps growing."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sim_core import Scenario, run
from sim_core.validity import coverage_warnings, run_warnings, saturation_warning


def test_measured_deployments_have_no_coverage_warning():
    assert coverage_warnings("a100", "llama-3-8b", "fp16") == []
    assert coverage_warnings("h100", "llama-3-70b", "bf16") == []  # bf16 runs at the fp16 rate
    assert coverage_warnings("h100", "llama-3-8b", "fp8") == []


def test_unmeasured_gpu_model_and_format_are_each_named():
    w = coverage_warnings("l4", "qwen2.5-7b", "int8")
    assert len(w) == 3
    assert w[0].startswith("hardware l4 is outside the validation set") and "a100" in w[0]
    assert w[1].startswith("model qwen2.5-7b") and w[2].startswith("quantization int8")


def _predicted_rows():
    """(hardware, model, weight format, engine) of every row `validate` predicts against a measurement: the
    kernel, step and serving files and InferenceX's closed-loop points, as those studies read them."""
    from sim_core.engines import engine_of
    from sim_core.studies.row_names import quantization_for
    from sim_core.studies.validation import (
        VALIDATION_DIR,
        hardware_key,
        model_key,
        quantization_of,
        read_rows,
    )

    for name in ("kernels.csv", "steps.csv", "serving.csv", "tp_fp8.csv"):
        for r in read_rows(VALIDATION_DIR / name):
            engine = engine_of(r["framework"]) if "framework" in r else None
            yield (hardware_key(r["hardware"]), model_key(r.get("model") or r.get("model_or_op", "")),
                   quantization_of(r["dtype"]), engine)
    for r in read_rows(VALIDATION_DIR / "inferencex.csv"):
        hw = hardware_key(r["hardware"])
        yield hw, model_key(r["model"]), quantization_for(r["dtype"], hw)[0], engine_of(r["framework"])


def test_no_warning_calls_a_validated_deployment_unvalidated_and_every_unmeasured_one_is_named():
    """Over the catalogue: a GPU, model, format or engine some predicted row measured is never called outside the
    validation set (DeepSeek-R1 and the B200 are, in InferenceX's rows), and one no row measured always is."""
    from sim_core.catalog import GPUS, MODELS
    from sim_core.engines import ENGINE_NAMES

    rows = {r for r in _predicted_rows() if None not in r[:2]}
    assert {"deepseek-r1", "gpt-oss-120b"} <= {m for _, m, _, _ in rows}
    assert {"b200", "b300", "mi355x"} <= {h for h, _, _, _ in rows}
    for hw, model, quantization, engine in rows:
        assert coverage_warnings(hw, model, quantization, engine) == [], (hw, model, quantization, engine)
    measured = {"hardware": {r[0] for r in rows}, "model": {r[1] for r in rows}}
    for kind, names in (("hardware", GPUS), ("model", MODELS)):
        for name in names:
            args = {"hardware": ("a100", "llama-3-8b"), "model": ("a100", "llama-3-8b")}[kind]
            hw, model = (name, args[1]) if kind == "hardware" else (args[0], name)
            warned = any(w.startswith(f"{kind} {name} is outside") for w in coverage_warnings(hw, model, "fp16"))
            assert warned == (name not in measured[kind]), (kind, name)
    assert all(coverage_warnings("a100", "llama-3-8b", "fp16", e) == [] for e in ENGINE_NAMES)


def test_a_run_past_capacity_is_flagged_saturated_and_a_light_one_is_not():
    over = run(Scenario(hardware="a100", model="llama-3-8b", rate=30, duration=30))
    assert "saturated" in (saturation_warning(over) or "")
    light = run(Scenario(hardware="a100", model="llama-3-8b", rate=1, duration=30))
    assert saturation_warning(light) is None and run_warnings(light) == []


@pytest.mark.parametrize("fleet", [{"replicas": 2}, {"prefill_replicas": 1, "decode_replicas": 1}],
                         ids=["replicas", "pd"])
def test_a_fleet_past_capacity_is_flagged_saturated_as_one_engine_is(fleet):
    """Several engines keep no merged step log; the flag counts the requests that arrived and wait (issue #41: /vs
    flagged a saturated single engine but never a saturated pair of replicas or P/D pools)."""
    over = run(Scenario(hardware="a100", model="llama-3-8b", rate=80, duration=20, **fleet))
    assert len(over.steps) == 0 and "saturated" in (saturation_warning(over) or "")
    light = run(Scenario(hardware="a100", model="llama-3-8b", rate=1, duration=20, **fleet))
    assert saturation_warning(light) is None


def test_json_outputs_add_warnings_beside_the_existing_keys(capsys):
    assert main(["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--duration", "5", "--json"]) == 0
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
