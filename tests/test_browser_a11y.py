"""Accessibility of the dashboard in a real browser (issue 26, point 6): axe-core (vendored under
static/vendor/axe-core/, injected by the test, never served to the pages) finds no serious or critical WCAG 2 A/AA
violation on the main page, the Plan page with a finished plan, and an embed, on a laptop and on a phone; each
plot is a named figure with a text summary; plotly's mode-bar buttons are not Tab stops (and its dead "Share
chart..." button is gone) while each figure's own PNG/SVG/Embed buttons are; "Skip to results" is the first Tab
stop; the text inside the plots (which axe cannot judge) reads at 4.5:1. At 1440x900 the same checks again in the
dark theme. One page load per page: the phone's checks run on it resized to 390x844 (the runs are the server's,
cached; what a second load cost was chromium's drawing). Run with -s to read axe's summary."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("playwright")

from browser_support import (  # noqa: E402
    DARK_PAPER,
    LOW_CONTRAST_PLOT_TEXT,
    REPO_ROOT,
    THEME_DRAWN,
    open_page,
    wait_until_it_fits,
)  # noqa: E402

pytestmark = pytest.mark.browser

AXE = REPO_ROOT / "static" / "vendor" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa"]
BLOCKING = ("serious", "critical")
SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"
PAGES = {
    "index": ("/", ["#results"]),
    # a small plan (one GPU, one TP degree, one scheduler): its table and Pareto plot, not only the form
    "plan": ("/plan?model=llama-3-8b&workload=chat&rate=12&duration=10&gpus=a100&tp=1&schedulers=chunked",
             ["#plot-pareto"]),
    "embed": ("/embed/goodput?" + SCENARIO, ["#plot-goodput"]),
}
VIEWPORTS = {"laptop": (1440, 900), "phone": (390, 844)}

# Every figure on the page drawn (the page draws them lazily, when idle; htmx swaps in a sweep's or a plan's), and
# at least one there: a page whose results had not come in yet passed with none (every() of nothing is true).
ALL_DRAWN = """sels => sels.every(s => document.querySelector(s))
  && !!document.querySelector('.plot[data-figure]')
  && [...document.querySelectorAll('.plot[data-figure]')].every(d => d.dataset.drawn === '1')"""

# Each plot container: its role, name and the text of its summary (aria-describedby).
FIGURES = """() => [...document.querySelectorAll('.plot[data-figure]')].map(d => {
  const ids = (d.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
  return {id: d.id, figure: d.dataset.figure, role: d.getAttribute('role'), label: d.getAttribute('aria-label'),
          summary: ids.map(i => (document.getElementById(i) || {}).textContent || '').join(' ').trim(),
          names: d.data ? [...new Set(d.data.filter(t => t.hoverinfo !== 'skip').map(t => t.name).filter(Boolean))] : []};
})"""

MODE_BAR = """() => [...document.querySelectorAll('.modebar-btn')].map(b => ({
  title: b.getAttribute('data-title'), tabbable: b.tabIndex >= 0 }))"""

# What has focus: enough to say where it is.
FOCUSED = """() => { const e = document.activeElement;
  return {tag: e.tagName, id: e.id, text: (e.textContent || '').trim().slice(0, 40),
          inModeBar: !!e.closest('.modebar'), inResults: !!e.closest('.results'),
          export: e.dataset.export ? e.dataset.export + ':' + e.dataset.target : null,
          embed: e.matches('a.tool') ? e.getAttribute('href').split('?')[0] : null,
          top: e.getBoundingClientRect().top, skip: e.classList.contains('skip-link')}; }"""


def run_axe(page, rules: list[str] | None = None) -> dict:
    """axe-core's WCAG 2 A/AA rules on the page as it is (or only `rules`)."""
    if not page.evaluate("() => typeof axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    only = {"type": "rule", "values": rules} if rules else {"type": "tag", "values": AXE_TAGS}
    return page.evaluate("only => axe.run(document, {runOnly: only})", only)


def axe_summary(label: str, result: dict) -> str:
    counts: dict[str, int] = {}
    for v in result["violations"]:
        counts[v["impact"]] = counts.get(v["impact"], 0) + 1
    lines = [f"axe-core {result['testEngine']['version']} ({', '.join(AXE_TAGS)}) on {label}: "
             f"{len(result['violations'])} violations {json.dumps(counts, sort_keys=True)}, "
             f"{len(result['passes'])} rules passed, {len(result['incomplete'])} to review by hand, "
             f"{len(result['inapplicable'])} not applicable"]
    for v in result["violations"]:
        lines.append(f"  [{v['impact']}] {v['id']}: {v['help']} ({len(v['nodes'])} nodes): "
                     + "; ".join(" ".join(n["target"]) for n in v["nodes"][:5]))
    return "\n".join(lines)


# Tab moves on from the top of the page, as on a fresh load: the body focused for a moment (chromium moves on from
# where focus last was, even once it is blurred), then no longer focusable.
FROM_THE_TOP = """() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);
  document.body.tabIndex = -1; document.body.focus(); document.body.removeAttribute('tabindex'); }"""


# Each element that takes focus from now on, as FOCUSED describes it, noted by the page itself: the Tab walk then
# costs one round trip a press, not two (the dashboard's walk, a few hundred stops, was most of this test's time).
NOTE_FOCUS = """() => { const focused = """ + FOCUSED + """;
  window.__stops = []; window.__focused = [];
  if (!window.__noting) document.addEventListener('focusin', e => {
    window.__focused.push(e.target); window.__stops.push(focused()); });
  window.__noting = true; }"""
# The stops up to where focus came round again: to the skip link (a page's first stop) or its first stop.
STOPS_ONCE_ROUND = """() => { const els = window.__focused, stops = window.__stops;
  for (let i = 1; i < stops.length; i++)
    if (stops[i].skip || stops[i].tag === 'BODY' || els[i] === els[0]) return {round: true, stops: stops.slice(0, i)};
  return {round: false, stops: stops}; }"""


def tab_through(page, limit: int = 400, batch: int = 25) -> list[dict]:
    """Every Tab stop from the top of the page, in order, until focus wraps round."""
    page.evaluate(FROM_THE_TOP)
    page.evaluate(NOTE_FOCUS)
    for _ in range(0, limit, batch):
        for _ in range(batch):
            page.keyboard.press("Tab")
        seen = page.evaluate(STOPS_ONCE_ROUND)
        if seen["round"]:
            break
    return seen["stops"][:limit]


def check_figures_and_keyboard(page, name: str, viewport: str, height: int) -> list[dict]:
    """Each figure named and summarised, plotly's mode bar out of the Tab order, "Skip to results" the first Tab
    stop (from the top of the page) and, on a laptop, each figure's own tools reachable by keyboard."""
    figures = page.evaluate(FIGURES)
    assert figures, "no figure on the page"
    for f in figures:
        assert f["role"] == "figure" and f["label"], f
        if f["figure"] != "kv":  # the KV view's captions carry its numbers (each pool's use, as it plays)
            assert f["summary"], f
            for trace_name in f["names"][:3]:  # the summary reads the series the figure draws
                assert trace_name in f["summary"], (trace_name, f)
    buttons = page.evaluate(MODE_BAR)
    assert buttons, "plotly drew no mode bar"
    assert not [b for b in buttons if b["tabbable"]], buttons
    assert not [b for b in buttons if (b["title"] or "").startswith("Share")], buttons
    if name != "embed":  # the skip link: the first Tab stop, on screen when focused; it moves focus to the results
        page.evaluate(FROM_THE_TOP)
        page.keyboard.press("Tab")
        first = page.evaluate(FOCUSED)
        assert first["skip"] and first["text"] == "Skip to results" and 0 <= first["top"] < height, first
        page.keyboard.press("Enter")
        assert page.evaluate("() => document.activeElement.classList.contains('results')")
        page.keyboard.press("Tab")
        assert page.evaluate(FOCUSED)["inResults"]
    if viewport == "laptop" and name != "plan":  # keyboard reaches each figure's own tools, never plotly's
        stops = tab_through(page)
        assert not [s for s in stops if s["inModeBar"]]
        png = {s["export"] for s in stops if s["export"] and s["export"].startswith("png:")}
        drawn = {"png:" + f["id"] for f in figures if f["figure"] != "kv"}
        assert drawn <= png, (drawn - png, stops)
        if name == "embed":
            assert "/embed/goodput" in {s["embed"] for s in stops}
    return figures


def check_axe(page, label: str, rules: list[str] | None = None) -> None:
    """No serious or critical axe violation (of `rules`, or all of WCAG 2 A/AA), and no plot text under 4.5:1."""
    result = run_axe(page, rules)
    print("\n" + axe_summary(label, result))
    blocking = [v for v in result["violations"] if v["impact"] in BLOCKING]
    assert not blocking, axe_summary(label, result)
    assert page.evaluate(LOW_CONTRAST_PLOT_TEXT) == []


@pytest.mark.parametrize("name", PAGES)
def test_axe_finds_no_serious_violation_and_figures_are_named_summarised_and_out_of_the_tab_order(site, name):
    path, ready = PAGES[name]
    # bypass_csp: the page's CSP (script-src 'self') would refuse the injected axe-core, which it never loads
    context, page = open_page(site, *VIEWPORTS["laptop"], timeout_ms=180_000, bypass_csp=True)
    page.goto(page.base + path)
    page.wait_for_function(ALL_DRAWN, arg=ready, polling=200)
    for viewport, (width, height) in VIEWPORTS.items():
        if viewport != "laptop":  # the same page on a phone, in the light theme: resized until it fits
            page.emulate_media(color_scheme="light")
            page.set_viewport_size({"width": width, "height": height})
            wait_until_it_fits(page)
            page.wait_for_function(ALL_DRAWN, arg=ready, polling=200)
        check_figures_and_keyboard(page, name, viewport, height)
        check_axe(page, f"{path} at {width}x{height}")
        if viewport == "laptop":  # the same page in the dark theme (the system's setting, switched while it is open)
            page.emulate_media(color_scheme="dark")
            page.wait_for_function(THEME_DRAWN, arg=DARK_PAPER, polling=100)
            # the one rule a theme changes the answer of
            check_axe(page, f"{path} at {width}x{height}, dark theme, color-contrast only", ["color-contrast"])
    assert page.errors == [], page.errors
    context.close()
