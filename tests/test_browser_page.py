"""Issue 26 in a real browser (Debian's chromium through Playwright): the landing scenario's warnings by the
headline, on the saturated schedulers' cards and in an embed's caption; the metrics table fits its card with every
scheduler ticked at 1440x900; a phone's first screen holds the headline; the KV view explains its two shades and
plays at the speed chosen; goodput curves outlive a change of the scenario, marked stale, redrawn in one click.
Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from sim_core import SCHEDULER_NAMES  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
LANDING = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"


@pytest.fixture
def page(site):
    context, page = open_page(site, timeout_ms=60_000)
    errors = page.errors
    yield page
    context.close()
    assert errors == [], errors


def test_the_saturated_landing_scenario_warns_by_its_headline_on_its_cards_and_in_an_embeds_caption(page):
    page.goto(page.base + "/")
    api = page.request.get(page.base + "/api/run?" + LANDING).json()["schedulers"]
    own = {name: w for name, e in api.items() for w in e["warnings"] if w.startswith("saturated")}
    # Only fcfs saturates since chunked takes vLLM's 2048-token budget on this GPU (it saturated too at 512).
    assert list(own) == ["fcfs"], own
    expect(page.locator("#takeaway")).to_contain_text("fcfs runs past saturation")
    summary = page.locator("#run-warnings summary")
    expect(summary).to_contain_text("saturated (fcfs)")
    expect(summary).to_contain_text("hardware rtx3050 is outside the validation set")
    head, warned = page.locator("#takeaway").bounding_box(), summary.bounding_box()
    assert 0 <= warned["y"] - (head["y"] + head["height"]) <= 40 and warned["y"] + warned["height"] <= 900
    summary.click()  # the whole texts, one click away
    for name, text in own.items():
        expect(page.locator(f'#run-warnings li[data-schedulers="{name}"]')).to_have_text(f"{name}: {text}")
        card = page.locator(f"#card-gantt-{name} .card-warning")
        card.scroll_into_view_if_needed()
        expect(card).to_be_visible()
        expect(card).to_have_text("⚠ " + text)
    expect(page.locator("#card-gantt-chunked .card-warning")).to_have_count(0)  # no warning of its own
    page.locator("#takeaway").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "40-landing-warnings-1440x900.png")
    page.goto(page.base + f"/embed/cdf?{LANDING}&caption=1")
    caption = page.locator("#embed-caption .caption-warning")
    expect(caption).to_be_visible()
    expect(caption).to_contain_text("saturated (fcfs)")
    assert own["fcfs"] in caption.get_attribute("title")


def test_the_metrics_table_fits_its_card_with_every_scheduler_ticked(page):
    """Issue 26: at 1440 with slo compared a long metric name made the table 814 px wide in a 489 px column. Over
    two seeds, each value with its "± half-width": nine such columns made it 1,248 px in 1,006."""
    page.goto(page.base + "/?schedulers=" + ",".join(SCHEDULER_NAMES)
              + "&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0&seeds=2")
    card = page.locator("#card-metrics")
    expect(card.locator("tbody th", has_text="shed by admission control")).to_have_count(1)  # slo's long row
    assert card.locator(".half-width").count() > 9 * 20
    sizes = card.evaluate("""c => [c.clientWidth, [...c.querySelectorAll('.table-wrap')].map(w =>
        [w.clientWidth, w.querySelector('table').scrollWidth])]""")
    width, wraps = sizes
    assert wraps and all(table <= wrap <= width for wrap, table in wraps), sizes
    card.screenshot(path=SHOTS / "41-metrics-nine-1440.png")


def test_a_phones_first_screen_shows_the_headline(site):
    context, page = open_page(site, 390, 844, has_touch=True, is_mobile=True)
    page.goto(page.base + "/")
    takeaway = page.locator("#takeaway")
    expect(takeaway).to_contain_text("runs past saturation")
    assert takeaway.bounding_box()["y"] < 844
    page.screenshot(path=SHOTS / "42-phone-first-screen-390x844.png")
    link = page.locator(".to-form")  # and the form is one tap away
    link.tap()
    page.wait_for_function("() => { const top = document.getElementById('scenario-form').getBoundingClientRect().top;"
                           " return top > -4 && top < 844 / 2; }")  # scrolled to it (sub-pixel: -0.4)
    errors = page.errors
    context.close()
    assert errors == [], errors


def frames_in_a_second(page, speed: str) -> int:
    """Play the KV view from its first frame at `speed` for one second of the page's clock (paused, then run:
    every timer fires, however slow this machine paints); the frames it moved on."""
    page.locator("[data-speed]").select_option(speed)
    page.locator("[data-scrub]").fill("0")
    page.locator("[data-play]").click()
    page.clock.run_for(1000)
    page.locator("[data-play]").click()  # pause
    return int(page.locator("#plot-kv").get_attribute("data-frame"))


def test_the_kv_view_explains_its_two_shades_and_plays_at_the_speed_chosen(page):
    page.clock.install()
    page.goto(page.base + "/?t=1")  # a moment: it does not play by itself
    page.wait_for_function(DRAWN, arg="plot-kv")
    expect(page.locator("#kv-shades")).to_be_visible()
    expect(page.locator("#kv-shades")).to_contain_text("same state")
    shades = page.locator(".kv-legend .swatch.two-shades").evaluate_all(
        "ss => ss.map(s => [s.dataset.state, s.style.getPropertyValue('--c'), s.style.getPropertyValue('--c2')])")
    assert {"prefill", "decode"} <= {key for key, _, _ in shades} and all(a != b for _, a, b in shades)
    steps = int(page.locator("[data-scrub]").get_attribute("max")) + 1
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    speeds = {"0.25": 7.5, "1": 30, "2": 60}  # frames a second: 30 at 1x
    assert steps > max(speeds.values())
    for speed, per_second in speeds.items():
        assert abs(frames_in_a_second(page, speed) - per_second) <= 1, speed  # a period of 1000/60 ms: 59 or 60
    assert page.locator("#plot-kv").get_attribute("data-frame-ms") == f"{1000 / 60:.2f}"
    page.locator("#card-kv").screenshot(path=SHOTS / "43-kv-legend-speed.png")


def test_goodput_curves_outlive_a_change_of_the_scenario_marked_stale_and_redraw_in_one_click(page):
    page.goto(page.base + "/")
    card = page.locator("#card-goodput")
    card.scroll_into_view_if_needed()
    for name, value in (("rate_min", "2"), ("rate_max", "4"), ("rate_step", "2")):
        card.locator(f"input[name={name}]").fill(value)
    card.locator("button[type=submit]").click()
    page.wait_for_url("**rate_min=2&rate_max=4&rate_step=2")
    page.wait_for_function(DRAWN, arg="plot-goodput")
    page.locator("#f-seed").fill("1")
    page.locator("#f-seed").press("Tab")  # a change: the results update in place
    page.wait_for_url("**seed=1**")
    stale = page.locator("#goodput-status.stale [data-goodput-stale]")
    expect(stale).to_be_visible()
    expect(stale).to_contain_text("2–4 req/s, step 2")
    assert "rate_min" not in page.url
    expect(page.locator("#card-goodput #plot-goodput .main-svg").first).to_be_visible()  # still drawn
    card.screenshot(path=SHOTS / "44-goodput-stale.png")
    stale.locator("[data-goodput-redraw]").click()
    page.wait_for_url("**seed=1**rate_min=2&rate_max=4&rate_step=2")
    page.wait_for_function("""() => { const s = document.getElementById('goodput-status'), d = s && s.querySelector('#plot-goodput');
        return !!d && !s.classList.contains('stale') && d.dataset.drawn === '1'; }""")
    expect(page.locator("[data-goodput-stale]")).to_have_count(0)
