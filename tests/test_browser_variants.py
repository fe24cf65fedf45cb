"""Two variants of one scenario, spec decoding off (A) and on (B), made in forms only (issue #41 item 3, its
two-variant case, /vs), in a real browser at 1440x900 and 390x844: from the results page's "Compare with a
variant", B's form holds every scenario field (speculative decoding folded in its own section), picking EAGLE
there and comparing gives the pair whose changes name spec_method alone, drawn on shared axes with the KV grids at
one scale (cells as large, the same blocks a cell on both sides); its goodput card, drawn from its form, puts both
variants' curves on one plot over one rate grid, and its URL then holds that grid. Screenshots go to
test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402
from test_browser_vs import SNAPSHOT, A, draw_all  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_spec_off_against_spec_on_made_in_the_forms(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=90_000)
    page.goto(page.base + "/?" + A)
    page.locator("#vs-open").click()
    page.wait_for_url("**/vs?**")
    spec = page.locator('details.vs-quick-group[data-group="spec"]')
    expect(spec.locator("summary")).to_contain_text("Speculative decoding")
    spec.locator("summary").click()
    page.select_option("#vs-b-spec_method", "eagle")
    page.fill("#vs-a_name", "spec off")  # the variants' names, for the plots
    page.fill("#vs-b_name", "spec on")
    page.locator("#vs-submit").click()
    page.wait_for_url("**/vs?a=*&b=*")
    query = parse_qs(urlsplit(page.url).query)
    assert query["a_name"] == ["spec off"] and query["b_name"] == ["spec on"]
    sides = {k: parse_qs(query[k][0]) for k in ("a", "b")}
    assert "spec_method" not in sides["a"] and sides["b"]["spec_method"] == ["eagle"]
    changes = page.locator("#vs-changes tbody tr").all_inner_texts()
    assert [c.split() for c in changes] == [["spec_method", "default", "eagle"]], changes
    ids = draw_all(page)
    shot = page.evaluate(SNAPSHOT)
    for plot_a in (p for p in ids if p.startswith("plot-a-") and p != "plot-a-kv"):
        plot_b = "plot-b-" + plot_a[len("plot-a-"):]
        assert shot["plots"][plot_a]["axes"] == shot["plots"][plot_b]["axes"], plot_a
    cells = page.evaluate("""() => ['a', 'b'].map(s => Array.from(document.querySelectorAll(
        '#plot-' + s + '-kv canvas')).map(c => c.width))""")
    assert all(cells) and len(set(cells[0] + cells[1])) == 1, cells
    scales = page.locator(".vs-kv-k").all_inner_texts()
    assert len(scales) == 2 and scales[0] == scales[1], scales
    page.screenshot(path=SHOTS / f"variants-spec-{width}.png")
    both_goodput_curves_on_one_plot(page, width)
    assert not page.errors, page.errors
    context.close()


def both_goodput_curves_on_one_plot(page, width: int) -> None:
    """/vs's goodput card: a small shared rate grid typed in its form, both variants' curves on the one plot, each
    named by its variant's name, on the same axes, and the grid in the pushed URL (the names kept)."""
    card = page.locator("#vs-card-goodput")
    card.scroll_into_view_if_needed()
    for name, value in (("rate_min", "2"), ("rate_max", "6"), ("rate_step", "2")):
        card.locator(f"#vs-{name}").fill(value)
    card.locator("#vs-goodput-submit").click()
    page.wait_for_function(DRAWN, arg="plot-vs-goodput", timeout=120_000)
    traces = page.evaluate("""() => document.getElementById('plot-vs-goodput').data
        .filter(t => t.mode === 'lines+markers').map(t => [t.name, t.xaxis || 'x', t.yaxis || 'y', t.x])""")
    on_goodput = {name: x for name, xa, ya, x in traces if ya == "y"}
    assert set(on_goodput) == {f"spec {v} · {s}" for v in ("off", "on") for s in ("fcfs", "chunked")}, traces
    assert all(x == [2, 4, 6] for x in on_goodput.values()), on_goodput
    assert {(xa, ya) for _, xa, ya, _ in traces} == {("x", "y"), ("x2", "y2")}  # one pair of panels for all
    query = parse_qs(urlsplit(page.url).query)
    assert query["rate_min"] == ["2"] and query["rate_step"] == ["2"] and "spec_method=eagle" in query["b"][0]
    assert query["b_name"] == ["spec on"]
    card.screenshot(path=SHOTS / f"variants-goodput-{width}.png")
