"""Issue #22's models on the dashboard, in a real browser (Debian's chromium through Playwright) at 1440x900 and
390x844: the picker's badges (MoE, MLA, sliding window, chunked, hybrid, FP8/MXFP4 weights), a Qwen3-8B config.json
uploaded in place of a catalogue model giving the same results as model=qwen3-8b, its link opened in a fresh
browser context, and a bad config's error naming the key. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from sim_core import MODELS  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SCENARIO = "schedulers=chunked&hardware=h100&workload=chat&duration=3.0"
QWEN3_8B = (Path(__file__).resolve().parent.parent / "sim_core" / "data" / "hf_configs" / "qwen3-8b.json").read_text(
    encoding="utf-8")
VIEWPORTS = pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])


def labels(key: str) -> list[str]:
    return [b.label for b in MODELS[key].badges]


def metrics_text(page) -> str:
    table = page.locator("[data-figure=metrics]")
    table.scroll_into_view_if_needed()
    return table.inner_text()


@VIEWPORTS
def test_the_picker_shows_each_models_badges(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=120_000)
    page.goto(f"{page.base}/?{SCENARIO}")
    expect(page.locator("#model-badges")).to_be_hidden()  # the GPU's default model: a dense, full-attention one
    for key in ("deepseek-r1", "qwen3-next-80b-a3b", "llama-4-scout"):  # every option says its badges
        assert all(b in page.locator(f'#f-model option[value="{key}"]').inner_text() for b in labels(key))
    page.select_option("#f-model", "gpt-oss-20b")
    badges = page.locator("#model-badges .badge")
    expect(badges).to_have_text(labels("gpt-oss-20b"))  # MoE, sliding window, MXFP4 weights
    page.wait_for_url("**model=gpt-oss-20b**")
    for k in range(badges.count()):
        box = badges.nth(k).bounding_box()
        assert box["width"] > 0 and box["x"] + box["width"] <= width, box
    page.locator("#f-model").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / f"60-model-badges-{width}x{height}.png")
    page.select_option("#f-model", "llama-3-8b")
    expect(page.locator("#model-badges")).to_be_hidden()
    context.close()
    assert page.errors == [], page.errors


@VIEWPORTS
def test_an_uploaded_config_runs_as_its_bundled_model_and_its_link_opens_anywhere(site, tmp_path, width, height):
    config = tmp_path / "Qwen3-8B.json"
    config.write_text(QWEN3_8B, encoding="utf-8")
    context, page = open_page(site, width, height, timeout_ms=120_000)
    page.goto(f"{page.base}/?{SCENARIO}&model=qwen3-8b")
    by_name = metrics_text(page)
    page.set_input_files("#f-model-config", str(config))
    page.wait_for_url("**model_file=*")
    assert "model=" not in page.url.replace("model_file=", "")  # the upload replaced the catalogue model
    expect(page.locator("#model-config-status")).to_contain_text("Simulating Qwen3-8B from Qwen3-8B.json")
    expect(page.locator("#f-model option:checked")).to_have_text("Qwen3-8B (uploaded config.json)")
    expect(page.locator(".summary")).to_contain_text("Qwen3-8B")  # the results are the upload's run
    assert metrics_text(page) == by_name
    page.locator("#model-config-field").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / f"61-model-config-{width}x{height}.png")
    link = page.url
    context.close()
    assert page.errors == [], page.errors

    fresh, again = open_page(site, width, height, timeout_ms=120_000)  # no state shared with the first
    again.goto(link)
    expect(again.locator("#model-config-status")).to_contain_text("Simulating Qwen3-8B")
    expect(again.locator("#f-model option:checked")).to_have_text("Qwen3-8B (uploaded config.json)")
    assert metrics_text(again) == by_name
    again.select_option("#f-model", "llama-3-8b")  # a catalogue model drops the upload
    again.wait_for_url("**model=llama-3-8b**")
    assert "model_file" not in again.url
    expect(again.locator("#model-config-status")).to_be_empty()
    fresh.close()
    assert again.errors == [], again.errors


def test_a_bad_config_names_the_key_and_keeps_the_model_in_use(site, tmp_path):
    doc = json.loads(QWEN3_8B)
    del doc["num_attention_heads"]
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    context, page = open_page(site, 390, 844, timeout_ms=120_000, expected_422=True)
    page.goto(f"{page.base}/?{SCENARIO}&model=qwen3-8b")
    page.set_input_files("#f-model-config", str(bad))
    expect(page.locator("#err-model-config")).to_contain_text("num_attention_heads: missing")
    assert "model=qwen3-8b" in page.url and "model_file" not in page.url
    expect(page.locator("#f-model")).to_have_value("qwen3-8b")
    context.close()
    assert page.errors == [], page.errors
