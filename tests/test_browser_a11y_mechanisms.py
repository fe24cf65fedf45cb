"""axe-core on every page of the dashboard (issue #41: "0 serious or critical violations on every page (/, /plan, /vs,
/diff, /cluster-time, frontier, accuracy, an embed) at both sizes, both themes"; axe vendored under
static/vendor/axe-core/, injected by the test as tests/test_browser_a11y.py does): no serious or critical WCAG 2
A/AA violation on the dashboard with Advanced open and a mechanism switched on, on /accuracy with its tables, on
/guide/model, on a finished plan whose rows carry the optimistic badge, on /vs with B's whole form, on /diff, on
/cluster-time, on a frontier's page and on a page's embed (/embed/vs), each with its figures drawn, at 1440x900
and 390x844, in the light and the dark theme. One list of pages, one page load per page and size: the dark theme is
the system's setting switched while the page is open (theme.js recolours what is drawn), then axe runs again in full.
Run with -s to read axe's summaries."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import DARK_PAPER, LIGHT_PAPER, THEME_DRAWN, open_page  # noqa: E402
from test_browser_a11y import BLOCKING, axe_summary, run_axe  # noqa: E402

pytestmark = pytest.mark.browser
SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"
ONE = "hardware=rtx3050&max_model_len=8192&workload=rag&duration=10.0&scheduler="
CLUSTER_TIME = ("schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&duration=60.0&max_replicas=2"
                "&autoscalers=utilization,static")
FRONTIER = ("schedulers=chunked&hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=rag&duration=10.0"
            "&frontier_gpus=rtx3050&frontier_isl=64&frontier_osl=16&frontier_max_concurrency=2")
PAGES = {
    # a mechanism set: Advanced opens with its section on (its switch, explanation, docs link and fields)
    "index": ("/?" + SCENARIO + "&spec_method=eagle", "#card-metrics"),
    "accuracy": ("/accuracy?model=deepseek-r1", "#acc-rows"),
    # spec decoding off against on: B's form with every field, folded by group and mechanism, and both variants'
    # goodput curves on one plot (its curve card, drawn from the URL's rate grid)
    "vs": ("/vs?" + urlencode({"a": SCENARIO, "b": SCENARIO + "&spec_method=eagle"}) + "&rate_min=1&rate_max=2"
           "&rate_step=1", "#plot-vs-goodput[data-drawn='1']"),
    "guide": ("/guide/model", "#speculative-decoding"),
    # a finished plan whose rows carry their validated error and the optimistic badge (llama-3-8b on the H100)
    "plan": ("/plan?model=llama-3-8b&workload=chat&rate=4&duration=10&gpus=h100&tp=1&schedulers=chunked",
             "td.plan-accuracy .badge-optimistic"),
    # one request picked: its table and timelines under A and B beside the scatter
    "diff": ("/diff?" + urlencode({"a": ONE + "fcfs", "b": ONE + "chunked", "request": 3}),
             "#plot-diff-picked[data-drawn='1']"),
    "cluster-time": ("/cluster-time?" + CLUSTER_TIME, "#plot-cluster-time[data-drawn='1']"),
    "frontier": ("/frontier?" + FRONTIER, "#plot-frontier[data-drawn='1']"),
    # a page's embed: /vs's latency distributions, A's above B's (the results page's embeds: test_browser_a11y)
    "embed": ("/embed/vs?" + urlencode({"a": SCENARIO, "b": SCENARIO + "&max_seqs=16"}) + "&caption=1",
              "#plot-b-cdf[data-drawn='1']"),
}
VIEWPORTS = {"laptop": (1440, 900), "phone": (390, 844)}
READY_MS = 180_000  # the plan's simulations on this shared machine (tests/test_browser_a11y.py's plan waits as long)


@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("name", PAGES)
def test_axe_finds_no_serious_violation_in_either_theme(site, name, viewport):
    path, ready = PAGES[name]
    width, height = VIEWPORTS[viewport]
    context, page = open_page(site, width, height, timeout_ms=READY_MS, bypass_csp=True, color_scheme="light")
    page.goto(page.base + path)
    page.wait_for_selector(ready, state="attached")
    if name == "index":
        assert page.locator("details.advanced").evaluate("d => d.open")
        assert page.locator('section.mechanism[data-mechanism="spec"] .mech-fields').is_visible()
    for theme, paper in (("light", LIGHT_PAPER), ("dark", DARK_PAPER)):
        page.emulate_media(color_scheme=theme)
        page.wait_for_function(THEME_DRAWN, arg=paper, polling=100)
        result = run_axe(page)
        print("\n" + axe_summary(f"{path} at {width}x{height}, {theme}", result))
        blocking = [v for v in result["violations"] if v["impact"] in BLOCKING]
        assert not blocking, axe_summary(f"{path} ({theme})", result)
    assert page.errors == [], page.errors
    context.close()
