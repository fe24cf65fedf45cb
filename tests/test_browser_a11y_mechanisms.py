"""axe-core on the pages issue #41's grouped form and Accuracy page touched (axe vendored under
static/vendor/axe-core/, injected by the test as tests/test_browser_a11y.py does): no serious or critical WCAG 2
A/AA violation on the dashboard with Advanced open and a mechanism switched on, on /accuracy with its tables, on
/guide/model, on a finished plan whose rows carry the optimistic badge and on /vs with B's whole form, at 1440x900
and 390x844, in the light and the dark theme. Run with -s to read axe's summaries."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import open_page  # noqa: E402
from test_browser_a11y import BLOCKING, axe_summary, run_axe  # noqa: E402

pytestmark = pytest.mark.browser
SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"
PAGES = {
    # a mechanism set: Advanced opens with its section on (its switch, explanation, docs link and fields)
    "index": ("/?" + SCENARIO + "&spec_method=eagle", "#card-metrics"),
    "accuracy": ("/accuracy?model=deepseek-r1", "#acc-rows"),
    # spec decoding off against on: B's form with every field, folded by group and mechanism
    "vs": ("/vs?" + urlencode({"a": SCENARIO, "b": SCENARIO + "&spec_method=eagle"}), "#vs-summary"),
    "guide": ("/guide/model", "#speculative-decoding"),
    # a finished plan whose rows carry their validated error and the optimistic badge (llama-3-8b on the H100)
    "plan": ("/plan?model=llama-3-8b&workload=chat&rate=4&duration=10&gpus=h100&tp=1&schedulers=chunked",
             "td.plan-accuracy .badge-optimistic"),
}
VIEWPORTS = {"laptop": (1440, 900), "phone": (390, 844)}
READY_MS = 180_000  # the plan's simulations on this shared machine (tests/test_browser_a11y.py's plan waits as long)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("name", PAGES)
def test_axe_finds_no_serious_violation(site, name, viewport, theme):
    path, ready = PAGES[name]
    width, height = VIEWPORTS[viewport]
    context, page = open_page(site, width, height, timeout_ms=READY_MS, bypass_csp=True, color_scheme=theme)
    page.goto(page.base + path)
    page.wait_for_selector(ready, state="attached")
    if name == "index":
        assert page.locator("details.advanced").evaluate("d => d.open")
        assert page.locator('section.mechanism[data-mechanism="spec"] .mech-fields').is_visible()
    result = run_axe(page)
    print("\n" + axe_summary(f"{path} at {width}x{height}, {theme}", result))
    blocking = [v for v in result["violations"] if v["impact"] in BLOCKING]
    assert not blocking, axe_summary(f"{path} ({theme})", result)
    assert page.errors == [], page.errors
    context.close()
