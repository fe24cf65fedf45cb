"""The scenario's fields grouped by mechanism (sim_core/field_groups.py) and the form's Advanced sections built
from them (app/web/form.py, templates/_form.html), issue #41 item 2: every field in exactly one place, each
mechanism's fields read off its own definitions, a section on (and shown) exactly when one of its fields is set,
a switch's on value one its field accepts, each docs link landing on a heading of the served docs, and "Weights:
checkpoint default"."""

from __future__ import annotations

import re
from html import unescape
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from app.web import app
from app.web.form import GROUPS, LABELS, NOT_IN_FORM, build_form
from app.web.guide import render, slug
from app.web.present import scenario_details
from sim_core import Scenario, parse_scenario
from sim_core.energy_fields import EnergyFields
from sim_core.field_groups import BY_KEY, CORE_FIELDS, MECHANISMS, group_of
from sim_core.kv_offload_fields import KVOffloadFields
from sim_core.scenario import AUTOSCALE_FIELDS, POOL_FIELDS

LANDING = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        yield c


def test_every_field_in_the_form_has_a_label_of_its_own():
    """A label made from the field's name read "Power cap w", "Prefill ep", "Isl" on the form and in every exported
    figure's caption (present.scenario_details): each field the form shows names itself in words."""
    assert [n for n in Scenario.model_fields if n not in LABELS and n not in NOT_IN_FORM] == []
    capped = SimpleNamespace(scenario=parse_scenario({"energy": "on", "power_cap_w": "500", "hardware": "h100"}))
    assert "power cap 500 W / GPU" in scenario_details(capped)
    form = build_form({"energy": "on"}, {}, page_defaults={})
    shown = [f for _, fields in form.groups for f in fields] + form.advanced + [f for sec in form.sections
                                                                                 for f in sec.fields]
    labels = {f.name: f.label for f in shown}
    assert labels["power_cap_w"] == "Power cap" and labels["isl"] == "Input length"


def test_every_scenario_field_has_one_group():
    for name in Scenario.model_fields:
        owners = [m.key for m in MECHANISMS if name in m.fields] + (["core"] if name in CORE_FIELDS else [])
        assert len(owners) == 1, (name, owners)
        assert group_of(name) == owners[0]
    with pytest.raises(KeyError):
        group_of("no_such_field")


def test_a_mechanisms_fields_come_from_its_own_definitions():
    assert BY_KEY["kv_tiers"].fields == tuple(KVOffloadFields.model_fields)
    assert BY_KEY["power"].fields == tuple(EnergyFields.model_fields)
    assert set(AUTOSCALE_FIELDS) < set(BY_KEY["autoscaling"].fields)
    assert set(POOL_FIELDS) < set(BY_KEY["cluster"].fields)
    assert {n for n in Scenario.model_fields if n.startswith("spec_")} == set(BY_KEY["spec"].fields)


def test_the_form_shows_every_field_once():
    form = build_form({}, {}, page_defaults={})
    shown = [f.name for _, group in form.groups for f in group] + [f.name for s in form.sections for f in s.fields]
    assert sorted(shown) == sorted(n for n in Scenario.model_fields if n not in NOT_IN_FORM)
    assert {n for _, names in GROUPS for n in names} | set(NOT_IN_FORM) == set(CORE_FIELDS)
    assert [s.key for s in form.sections] == [m.key for m in MECHANISMS]
    assert [f.name for f in form.advanced] == [f.name for s in form.sections for f in s.fields]


@pytest.mark.parametrize("m", [m for m in MECHANISMS if m.switch], ids=lambda m: m.key)
def test_a_switch_names_a_field_of_its_mechanism_and_its_on_value_runs(m):
    assert m.switch in m.fields
    if m.on_value is not None:  # what the browser sets: a scenario the model accepts (on a GPU it can power)
        parse_scenario({m.switch: m.on_value, "hardware": "h100"})


def test_a_section_is_on_exactly_when_one_of_its_fields_is_set_or_refused():
    sections = {s.key: s for s in build_form({"spec_method": "eagle"}, {}, page_defaults={}).sections}
    assert sections["spec"].on and not any(s.on for k, s in sections.items() if k != "spec")
    off = build_form({}, {}, page_defaults={})
    assert not any(s.on for s in off.sections) and not off.advanced_open
    refused = {s.key: s for s in build_form({"lora_rank": "x"}, {"lora_rank": "bad"}, page_defaults={}).sections}
    assert refused["lora"].on
    engine = {s.key: s for s in build_form({"token_budget": "512"}, {}, page_defaults={}).sections}["engine"]
    assert engine.on and engine.switch is None


def _section_html(html: str, key: str) -> str:
    match = re.search(rf'<section class="mechanism[^"]*" data-mechanism="{key}".*?</section>', html, re.S)
    assert match, key
    return match.group(0)


def test_the_page_folds_the_sections_that_are_off(client):
    html = client.get("/?" + LANDING + "&spec_method=eagle", headers={"HX-Request": "true"}).text
    spec = _section_html(html, "spec")
    assert 'class="mechanism on"' in spec and ' checked' in spec and "hidden" not in spec.split("mech-fields")[1][:40]
    lora = _section_html(html, "lora")
    assert ' checked' not in lora and re.search(r'id="mf-lora" hidden', lora)
    assert 'data-on-value="ngram"' in spec and 'data-switch="spec_method"' in spec
    assert 'id="ms-engine"' not in html  # always on: a fold button, no switch
    assert re.search(r'<button type="button" class="mech-title mech-fold" id="mt-engine" aria-expanded="false"', html)


@pytest.mark.parametrize("m", MECHANISMS, ids=lambda m: m.key)
def test_each_docs_link_lands_on_a_heading(client, m):
    html = client.get("/?" + LANDING, headers={"HX-Request": "true"}).text
    href = unescape(re.search(r'class="mech-doc" href="([^"]+)"', _section_html(html, m.key)).group(1))
    path, _, anchor = href.partition("#")
    page = client.get(path)
    assert page.status_code == 200 and f'id="{anchor}"' in page.text, href


def test_an_unknown_guide_is_a_404_naming_the_guides(client):
    r = client.get("/guide/nope")
    assert r.status_code == 404
    assert "guide: no guide named &#39;nope&#39;; the guides are model, usage" in r.text


def test_the_guide_renders_the_markdown_it_uses():
    html = render("## Speculative decoding, in short\n\nA `k` and **b** [x](#y) [f](other.md)\n\n- one\n  more\n- two\n"
                  "\n```\na < b\n```\n")
    assert '<h3 id="speculative-decoding-in-short">' in html
    assert "<p>A <code>k</code> and <b>b</b> <a href=\"#y\">x</a> f</p>" in html
    assert "<ul><li>one more</li><li>two</li></ul>" in html and '<pre tabindex="0"><code>a &lt; b</code></pre>' in html
    assert slug("Frontiers: throughput per GPU") == "frontiers-throughput-per-gpu"


def test_weights_say_checkpoint_default():
    form = build_form({"hardware": "a100", "model": "llama-3-8b"}, {}, page_defaults={})
    weights = next(f for _, g in form.groups for f in g if f.name == "quantization")
    assert weights.label == "Weights" and dict(weights.options)["auto"].startswith("checkpoint default")
