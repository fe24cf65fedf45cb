"""The twin page in a real browser (Debian's chromium through Playwright), issue #39's must-show: a scrape uploaded
through the form is overlaid on the simulation of its load, at 1440x900 and at 390x844, with nothing past the
page's edge and no serious axe-core (WCAG 2 A/AA) violation; a bad file comes back as the form with the problem under the file field. Screenshots go to
test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir, wait_until_it_fits  # noqa: E402
from test_browser_a11y import BLOCKING, axe_summary, run_axe  # noqa: E402
from test_twin import LOAD  # noqa: E402

from sim_core import run  # noqa: E402
from sim_core.prometheus_export import openmetrics_series  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
PLOT = "plot-twin"
TRACES = "d => d.data.map(t => [t.name, (t.xaxis || 'x'), t.y[t.y.length - 1]])"


def submit(page, path, hardware="h100", model="llama-3-8b"):
    page.goto(page.base + "/twin")
    page.set_input_files("#f-scrape", str(path))
    page.select_option("#f-hardware", hardware)
    page.select_option("#f-model", model)
    with page.expect_navigation():
        page.click("#twin-submit")


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_the_scrape_and_its_simulation_are_overlaid(site, tmp_path, width, height):
    scrape = tmp_path / "server.prom"
    scrape.write_text(openmetrics_series(run(LOAD), "vllm", 5.0, 1.7e9), encoding="utf-8")
    # bypass_csp: the page's CSP (script-src 'self') would refuse the injected axe-core, which it never loads
    context, page = open_page(site, width, height, timeout_ms=120_000, bypass_csp=True)
    submit(page, scrape)
    page.locator("#" + PLOT).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=PLOT)
    traces = page.locator("#" + PLOT).evaluate(TRACES)
    axes = ["x", "x2", "x3", "x4", "x5"]  # TTFT, ITL, E2E, prompt and output lengths
    assert [(n, x) for n, x, _ in traces] == [(n, x) for x in axes for n in ("scrape", "simulation")]
    assert all(last == 100 for _, _, last in traces)  # each distribution reaches all of its requests
    assert page.locator("#twin-numbers tr[data-key='ttft_p99'] td").count() == 3
    assert "isl=1024" in page.locator("#twin-load").inner_text()
    wait_until_it_fits(page)
    axe = run_axe(page)
    assert not [v for v in axe["violations"] if v["impact"] in BLOCKING], axe_summary("/twin", axe)
    page.screenshot(path=SHOTS / f"80-twin-{width}.png", full_page=True)
    assert not page.errors, page.errors
    context.close()


def test_a_bad_file_comes_back_as_the_form_with_its_problem(site, tmp_path):
    bad = tmp_path / "bad.prom"
    bad.write_text("node_cpu_seconds_total 5\n", encoding="utf-8")
    context, page = open_page(site, 1440, 900, expected_422=True)
    submit(page, bad)
    error = page.locator("#err-scrape")
    assert "no vLLM or SGLang metrics" in error.inner_text()
    assert page.locator("#f-scrape").get_attribute("aria-invalid") == "true"
    assert page.locator("#f-hardware").input_value() == "h100"  # the form keeps what was chosen
    context.close()
