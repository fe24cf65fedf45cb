"""sim_core.fields: one reader of the Scenario model's choices and bounds, and the faces that describe fields with
it (parse_scenario's messages, the dashboard's form)."""

from __future__ import annotations

import pytest

from app.web.inputs import web_range_text
from app.web.present import build_form
from sim_core import Scenario, ScenarioError, parse_scenario
from sim_core.engines import SCENARIO_FIELDS
from sim_core.fields import bounds_text, field_info, number_text, range_text
from sim_core.tensor_parallel import ALLOWED_TP_TEXT, MAX_TP


def test_bounds_of_an_int_field():
    tp = field_info("tp")
    assert (tp.lo, tp.lo_exclusive, tp.hi, tp.hi_exclusive) == (1, False, MAX_TP, False)
    assert tp.is_int and not tp.is_bool and tp.choices is None and not tp.optional
    assert bounds_text("tp") == ">= 1, <= 64" and range_text("tp") == "between 1 and 64"


def test_exclusive_lower_bound_and_optional_float():
    duration = field_info("duration")
    assert (duration.lo, duration.lo_exclusive) == (0, True)
    assert bounds_text("duration").startswith("> 0, <= ")
    rate = field_info("rate")
    assert (rate.lo, rate.lo_exclusive, rate.hi) == (1e-6, False, 10_000)
    assert rate.optional and not rate.is_int
    assert bounds_text("rate") == ">= 1e-06, <= 10000"
    assert range_text("rate") == "between 1e-06 and 10000"


def test_choices_flags_and_unbounded_fields():
    admission = field_info("admission")
    assert admission.choices == ("admit", "reject", "degrade") and admission.optional
    assert field_info("preemption").choices == ("recompute", "swap", "none")
    cache = field_info("prefix_cache")
    assert cache.is_bool and not cache.is_int and cache.choices is None
    assert bounds_text("scheduler") == "" and range_text("prefix_cache") == ""


def test_bounds_read_as_people_write_them():
    assert number_text(604800.0) == "604800" and number_text(0.05) == "0.05" and number_text(1e9) == "1000000000"
    assert range_text("duration") == "greater than 0 and at most 604800"


def test_every_bounded_field_is_described_in_its_error():
    """parse_scenario's message for an out-of-range value is the field's range_text, for every bounded field; a
    tensor-parallel degree, whose allowed values are fewer than its range, names them instead."""
    for name in Scenario.model_fields:
        info = field_info(name)
        if info.hi is None or info.is_bool:
            continue
        too_big = info.hi * 2 + 1
        with pytest.raises(ScenarioError) as caught:
            parse_scenario({name: int(too_big) if info.is_int else float(too_big)})
        [(field, message)] = caught.value.problems
        allowed = ALLOWED_TP_TEXT if name in ("tp", "prefill_tp", "decode_tp") else range_text(name)
        assert field == name and message.startswith(f"must be {allowed} (got "), message


def test_dashboard_form_takes_choices_and_bounds_from_the_model():
    form = build_form({}, {}, page_defaults={})
    fields = {f.name: f for _, group in form.groups for f in group} | {f.name: f for f in form.advanced}
    for name, f in fields.items():
        info = field_info(name)
        if name in ("hardware", "model", "workload"):  # labelled from the catalog (GPU names, sizes)
            continue
        if info.choices:
            values = [v for v, _ in f.options if v != ""]
            assert values == [str(c) for c in info.choices], name
            assert (f.options[0] == ("", "default")) == info.optional, name
        elif info.is_bool:  # an engine's field starts blank: the engine's default (sim_core/engines.py)
            blank = [""] if name in SCENARIO_FIELDS else []
            assert [v for v, _ in f.options] == blank + ["false", "true"], name
        elif name in ("hardware_profile", "rate_schedule", "lora_targets"):  # free-text fields: no numeric keyboard
            assert f.inputmode == "text"
        else:
            assert f.inputmode == ("numeric" if info.is_int else "decimal"), name
        allowed = web_range_text(name) or range_text(name)  # the web's own bound where it is tighter
        assert f.help.startswith(info.description) and allowed in f.help, name


def test_the_engine_mechanisms_have_labelled_controls_in_the_advanced_section():
    """Speculative decoding, KV offload and LoRA (issue #23): their fields sit in the form's Advanced section,
    each with a label of its own rather than its field name."""
    advanced = {f.name: f for f in build_form({}, {}, page_defaults={}).advanced}
    for name in ("spec_method", "spec_tokens", "spec_k_policy", "spec_disable_above", "kv_offload_cpu_gb",
                 "kv_offload_disk_gb", "kv_offload_policy", "lora_adapters", "max_loras", "max_cpu_loras",
                 "lora_order"):
        assert name in advanced, name
        assert advanced[name].label != name.replace("_", " ").capitalize(), name
