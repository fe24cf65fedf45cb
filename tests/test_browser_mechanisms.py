"""The form's Advanced sections in a real browser (Debian's chromium through Playwright), issue #41 item 2, at
1440x900 and on a 390x844 phone: speculative decoding is reachable from the landing page in three actions (open
Advanced, switch it on, pick EAGLE) and the run and the URL follow each; switched off, its fields fold away and
the scenario drops them, and on again it runs with EAGLE once more; every section shows its one-line explanation and a docs link that opens its part of the
docs; a section without a switch (the engine's) unfolds on a click; nothing overflows the phone. Screenshots go
to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from sim_core.field_groups import MECHANISMS  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
VIEWPORTS = [(1440, 900), (390, 844)]
RUN_MS = 30_000  # a run on this shared machine can wait its turn in line


def scenario_shown(page) -> dict:
    """The scenario the results region shows (its canonical query) as field -> value."""
    query = page.locator("#results").get_attribute("data-scenario-query") or ""
    return {k: v[0] for k, v in parse_qs(query).items()}


def wait_for_scenario(page, check) -> dict:
    page.wait_for_function(
        """() => { const r = document.getElementById('results');
                   return r && !r.classList.contains('htmx-request') && r.querySelector('#card-metrics'); }""",
        timeout=RUN_MS)
    expect(page.locator("#results")).to_have_attribute("data-scenario-query", _matching(check), timeout=RUN_MS)
    return scenario_shown(page)


def _matching(check):
    import re

    return re.compile(check)


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_spec_decoding_in_three_actions_and_off_again(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=RUN_MS)
    page.goto(page.base + "/")
    expect(page.locator("#card-metrics")).to_be_visible(timeout=RUN_MS)
    assert "spec_method" not in scenario_shown(page)
    spec = page.locator('section.mechanism[data-mechanism="spec"]')
    page.locator("details.advanced > summary").click()  # action 1
    expect(spec.locator(".mech-why")).to_be_visible()
    expect(spec.locator(".mech-fields")).to_be_hidden()  # off: folded
    spec.get_by_role("checkbox", name="Speculative decoding").check()  # action 2: on, with its first proposer
    shown = wait_for_scenario(page, r"spec_method=ngram")
    assert shown["spec_method"] == "ngram"
    page.select_option("#f-spec_method", "eagle")  # action 3
    shown = wait_for_scenario(page, r"spec_method=eagle")
    assert parse_qs(urlsplit(page.url).query)["spec_method"] == ["eagle"]
    page.screenshot(path=SHOTS / f"mechanisms-spec-on-{width}.png", full_page=False)
    spec.get_by_role("checkbox", name="Speculative decoding").uncheck()
    expect(spec.locator(".mech-fields")).to_be_hidden()
    wait_for_scenario(page, r"^(?!.*spec_method)")
    assert "spec_method" not in parse_qs(urlsplit(page.url).query)
    spec.get_by_role("checkbox", name="Speculative decoding").check()  # on again: with the proposer it had
    wait_for_scenario(page, r"spec_method=eagle")
    assert not page.errors, page.errors
    context.close()


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_every_section_explains_itself_links_its_docs_and_fits(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=RUN_MS)
    page.goto(page.base + "/")
    page.locator("details.advanced > summary").click()
    sections = page.locator("section.mechanism")
    assert sections.evaluate_all("s => s.map(e => e.dataset.mechanism)") == [m.key for m in MECHANISMS]
    for m in MECHANISMS:
        section = page.locator(f'section.mechanism[data-mechanism="{m.key}"]')
        expect(section.locator(".mech-title")).to_have_text(m.title)
        expect(section.locator(".mech-why")).to_have_text(m.explanation)
        expect(section.locator(".mech-fields")).to_be_hidden()  # the landing page sets none of them
        box = section.locator(".mech-doc").bounding_box()
        assert box and box["x"] + box["width"] <= width, (m.key, box)
    engine = page.locator('section.mechanism[data-mechanism="engine"]')
    engine.locator("button.mech-fold").click()
    expect(engine.locator("#f-token_budget")).to_be_visible()
    expect(engine.locator("button.mech-fold")).to_have_attribute("aria-expanded", "true")
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, overflow
    page.screenshot(path=SHOTS / f"mechanisms-sections-{width}.png", full_page=True)
    with context.expect_page() as opened:
        page.locator('section.mechanism[data-mechanism="spec"] .mech-doc').click()
    doc = opened.value
    doc.wait_for_load_state()
    assert doc.url.endswith("/guide/model#speculative-decoding")
    expect(doc.locator("#speculative-decoding")).to_be_in_viewport()
    assert not page.errors, page.errors
    context.close()
