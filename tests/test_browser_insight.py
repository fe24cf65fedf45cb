"""Issue 12, round 2, in a real browser (Debian's chromium through Playwright): where the time went (a stacked
bar per scheduler, each request's own split in the Gantt hover), the Gantt at scale (zooming draws every request
in the window), the KV view's states, and the preset gallery. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir, wait_until_it_fits  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from sim_core.kernel.attribution import ATTRIBUTION_PARTS  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"



def _page(site, width=1440, height=900, **options):
    return open_page(site, width, height, timeout_ms=30_000, **options)


@pytest.fixture
def page(site):
    context, page = _page(site)
    yield page
    context.close()
    assert page.errors == [], page.errors


def wait_drawn(page, plot_id: str) -> None:
    page.locator("#" + plot_id).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot_id)


def test_where_the_time_went_bars_sum_to_the_mean_e2el(page):
    page.goto(page.base + "/?" + SMALL)
    wait_drawn(page, "plot-attribution")
    plot = page.locator('[data-figure="attribution"]')
    bars = plot.evaluate("d => d.data.map(t => ({name: t.name, y: t.y, x: t.x}))")
    assert len(bars) == len(ATTRIBUTION_PARTS)
    api = page.request.get(page.base + "/api/run?" + SMALL).json()["schedulers"]
    for name, out in api.items():
        k = bars[0]["y"].index(name)
        total = sum(b["x"][k] for b in bars)
        assert total == pytest.approx(out["metrics"]["e2el_ms"]["mean"], rel=0.01)
        assert bars[0]["x"][k] == pytest.approx(out["metrics"]["attribution_ms"]["queue"], abs=0.01)
    page.locator("#card-attribution").screenshot(path=SHOTS / "30-attribution-1440x900.png")
    page.set_viewport_size({"width": 390, "height": 844})
    wait_until_it_fits(page)  # once plotly's responsive resize has run
    page.locator("#card-attribution").scroll_into_view_if_needed()
    page.locator("#card-attribution").screenshot(path=SHOTS / "30-attribution-390x844.png")


def test_gantt_hover_shows_the_requests_own_split(page):
    page.goto(page.base + "/?" + SMALL + "&t=10")
    wait_drawn(page, "plot-gantt-fcfs")
    gantt = page.locator("#plot-gantt-fcfs")
    gantt.scroll_into_view_if_needed()
    # A finished request's row (its decode segment carries the split), hovered mid-axis.
    rid, split = gantt.evaluate("""d => { const t = d.data.find(t => t.name === 'decode');
        const c = t.customdata.find(c => c); return [c[0], c.slice(8, 14)]; }""")
    gx, gy = gantt.evaluate("""(d, id) => { const r = d.getBoundingClientRect(),
        xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        return [r.left + xa._offset + xa._length / 2, r.top + ya._offset + ya.l2p(id)]; }""", rid)
    page.mouse.move(gx, gy)
    label = page.locator("#plot-gantt-fcfs .hoverlayer")
    expect(label).to_contain_text("where its time went")
    expect(label).to_contain_text(f"queue {int(split[0] + 0.5):,}")
    expect(label).to_contain_text(f"decode {int(split[3] + 0.5):,}")
    page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / "31-gantt-hover-split.png")


LONG = "schedulers=fcfs,chunked&hardware=a100&workload=chat&rate=14&duration=75&seed=2"


def _in_flight(query: str, scheduler: str, t0: float, t1: float) -> set[int]:
    """The requests of the page's run with a segment in [t0, t1], from sim_core directly."""
    from urllib.parse import parse_qsl

    from app.web.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict
    from sim_core import timeline
    from sim_core.runner import run

    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS, default_schedulers=PAGE_SCHEDULERS)
    res = run(req.for_scheduler(scheduler), record_events=True)
    return {r for r, _, s, e in timeline.request_segments(res) if s <= t1 and e >= t0}


def _zoom_by_drag(page, plot: str, t0: float, t1: float) -> None:
    """A user's zoom: drag across the plot area from time t0 to t1 (a flat drag zooms the time axis only)."""
    box = page.locator("#" + plot).evaluate("""(d, t) => { const r = d.getBoundingClientRect(),
        xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        return [r.left + xa._offset + xa.l2p(t[0]), r.left + xa._offset + xa.l2p(t[1]),
                r.top + ya._offset + ya._length / 2]; }""", [t0, t1])
    page.mouse.move(box[0], box[2])
    page.mouse.down()
    page.mouse.move((box[0] + box[1]) / 2, box[2] + 2, steps=4)
    page.mouse.move(box[1], box[2] + 2, steps=4)
    page.mouse.up()


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_zooming_a_sampled_gantt_draws_every_request_in_the_window(site, viewport):
    context, page = _page(site, *viewport)
    try:
        page.goto(page.base + "/?" + LONG)
        plot = "plot-gantt-fcfs"
        wait_drawn(page, plot)
        gantt = page.locator("#" + plot)
        total, shown = int(gantt.get_attribute("data-total")), int(gantt.get_attribute("data-rows"))
        assert total > 1000 and shown < total
        expect(page.locator("#card-gantt-fcfs [data-window-note]")).to_contain_text("Zoom in")
        sampled = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
        _zoom_by_drag(page, plot, 30.0, 50.0)
        expect(gantt).to_have_attribute("data-window", re.compile(r"^\d"))
        t0, t1 = (float(x) for x in gantt.get_attribute("data-window").split(","))
        assert 28 < t0 < 32 and 48 < t1 < 52, (t0, t1)
        drawn = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
        expected = _in_flight(LONG, "fcfs", t0, t1)
        assert drawn == expected
        assert len(expected) > 2 * len(sampled & expected)  # far more than the sample showed there
        assert int(gantt.get_attribute("data-rows")) == len(expected)
        xr = gantt.evaluate("d => d.layout.xaxis.range")
        assert xr[0] == pytest.approx(t0, abs=1e-3) and xr[1] == pytest.approx(t1, abs=1e-3)
        expect(page.locator("#card-gantt-fcfs [data-window-note]")).to_contain_text(f"all {len(expected):,} requests")
        w, h = viewport
        page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / f"32-gantt-zoomed-{w}x{h}.png")
        # A double click zooms back out to the whole run: the sample again.
        box = gantt.evaluate("""d => { const r = d.getBoundingClientRect(), xa = d._fullLayout.xaxis,
            ya = d._fullLayout.yaxis; return [r.left + xa._offset + xa._length / 2, r.top + ya._offset + ya._length / 2]; }""")
        page.mouse.dblclick(*box)
        expect(gantt).to_have_attribute("data-rows", str(shown))
        assert gantt.get_attribute("data-window") is None
        assert page.errors == [], page.errors
    finally:
        context.close()


PREFIX = "schedulers=fcfs,cache_aware&hardware=rtx3050&max_model_len=8192&workload=agent&prefix_cache=true&duration=20"
SWAP = ("schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20&preemption=swap&kv_blocks=700"
        "&swap_space_gb=0.5")
# In the page: the frame the KV view painted for `name`, and for one cell of each state present in it, the colour
# it should have (figures/kv.py's KV_STATES by app/web/kvstates.py's cell state and the owner's parity) and the pixel's.
CELL_COLOURS = """(d, name) => {
  const spec = JSON.parse(document.querySelector('[data-kv-frames-for]').textContent);
  const look = JSON.parse(document.querySelector('script[data-figure-for="plot-kv"]').textContent);
  const colours = Object.fromEntries(look.states.map(s => [s.key, s.colors]));
  const s = spec.schedulers.find(x => x.name === name), t = +document.getElementById('plot-kv').dataset.time;
  let f = 0; while (f + 1 < s.frame_s.length && s.frame_s[f + 1] <= t + 1e-9) f++;
  const K = s.k + 1, owners = [], states = [];
  s.runs[f].forEach((v, i, a) => { if (i % 2 === 0) for (let n = 0; n < a[i + 1]; n++) owners.push(Math.floor(v / K) - 1); });
  (s.states[f] || []).forEach((v, i, a) => { if (i % 2 === 0) for (let n = 0; n < a[i + 1]; n++) states.push(v); });
  const canvas = document.querySelector('.kv-panel[data-scheduler="' + name + '"] canvas');
  const ctx = canvas.getContext('2d'), scale = canvas.width / s.cols, out = {};
  const key = (o, st) => st === 2 ? 'cached' : o < 0 ? 'free' : st === 1 ? 'shared'
      : (s.first_token_s[o] == null || s.frame_s[f] < s.first_token_s[o] ? 'prefill' : 'decode');
  owners.forEach((o, c) => {
    const k = key(o, states[c]);
    if (k in out) return;
    const px = ctx.getImageData(Math.floor((c % s.cols + 0.4) * scale), Math.floor((Math.floor(c / s.cols) + 0.4) * scale), 1, 1).data;
    out[k] = [colours[k][o < 0 ? 0 : o & 1], '#' + [px[0], px[1], px[2]].map(v => v.toString(16).padStart(2, '0')).join('')];
  });
  return out;
}"""


def _frame_with(views, name: str, want) -> float:
    """The instant of a frame of scheduler `name` where `want(kv, f)` holds."""
    v = next(v for v in views if v.scheduler == name)
    f = next(f for f in range(len(v.kv["frame_s"])) if want(v.kv, f))
    return v.kv["frame_s"][f]


def test_kv_view_colours_shared_and_cached_prefix_blocks(page):
    from test_kv_states import views as compare_views

    v = compare_views(PREFIX)
    # A frame whose predecessor has both states too: the player seeks to the nearest step of its evenly spaced
    # scrubber, which may paint the frame before the one at t.
    both = lambda kv, f: {1, 2} <= set(kv["states"][f][0::2])  # noqa: E731
    t = _frame_with(v, "fcfs", lambda kv, f: f > 0 and both(kv, f) and both(kv, f - 1))
    page.goto(page.base + "/?" + PREFIX + f"&t={t}")
    wait_drawn(page, "plot-kv")
    legend = page.locator("#card-kv .kv-legend li").all_inner_texts()
    assert len(legend) == 6 and any("shared prefix" in x for x in legend) and any("swapped out" in x for x in legend)
    cells = page.locator("#plot-kv").evaluate(CELL_COLOURS, "fcfs")
    assert {"shared", "cached"} <= set(cells), cells
    for state, (expected, pixel) in cells.items():
        assert pixel == expected, (state, expected, pixel)
    page.locator("#card-kv").screenshot(path=SHOTS / "33-kv-shared-cached-1440x900.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    page.locator("#card-kv").scroll_into_view_if_needed()
    page.locator("#card-kv").screenshot(path=SHOTS / "33-kv-shared-cached-390x844.png")


def test_kv_view_shows_what_is_swapped_out(site):

    for width, height in ((1440, 900), (390, 844)):
        context, page = _page(site, width, height)
        try:
            page.goto(page.base + "/?" + SWAP + "&t=0")
            wait_drawn(page, "plot-kv")
            # Scrub to a moment of the player whose frame has requests swapped out.
            page.locator("[data-scrub]").evaluate("""el => {
              const spec = JSON.parse(document.querySelector('[data-kv-frames-for]').textContent);
              const s = spec.schedulers.find(x => x.name === 'fcfs');
              for (let j = 0; j < spec.steps; j++) {
                const t = spec.horizon * j / (spec.steps - 1);
                let f = 0; while (f + 1 < s.frame_s.length && s.frame_s[f + 1] <= t + 1e-9) f++;
                if (s.swap.frames[f].length) { el.value = String(j); el.dispatchEvent(new Event('input')); return j; }
              }
              throw new Error('no moment with requests swapped out');
            }""")
            panel = page.locator('.kv-panel[data-scheduler="fcfs"]')
            expect(panel).to_contain_text("swapped out to host")
            assert int(panel.get_attribute("data-swapped")) > 0
            pixel = panel.locator("canvas.kv-swap").evaluate("""c => { const d = c.getContext('2d').getImageData(1, 1, 1, 1).data;
                return '#' + [d[0], d[1], d[2]].map(v => v.toString(16).padStart(2, '0')).join(''); }""")
            assert pixel == "#e03131"
            page.locator("#card-kv").screenshot(path=SHOTS / f"34-kv-swapped-{width}x{height}.png")
            assert page.errors == [], page.errors
        finally:
            context.close()


OFFLOAD = ("schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=multiturn&prefix_cache=true&duration=20&kv_blocks=300"
           "&kv_offload_cpu_gb=0.1&kv_offload_disk_gb=1")


def test_kv_view_shows_each_lower_tiers_use_with_offload(page):
    """Issue #23: with KV offload on, a bar per lower tier under the grid says how much of it holds blocks at the
    frame shown (the run's recorded figure), and a caption gives the run's hits and bytes per tier."""
    page.goto(page.base + "/?" + OFFLOAD)
    wait_drawn(page, "plot-kv")
    page.locator("[data-scrub]").evaluate("el => { el.value = el.max; el.dispatchEvent(new Event('input')); }")
    spec = page.locator("[data-kv-frames-for]").evaluate("el => JSON.parse(el.textContent)")
    s = next(x for x in spec["schedulers"] if x["name"] == "fcfs")
    f = max(i for i, t in enumerate(s["frame_s"]) if t <= spec["horizon"] + 1e-9)  # the player's last frame
    panel = page.locator('.kv-panel[data-scheduler="fcfs"]')
    for tier, gb in zip(s["tiers"]["tiers"], (0.1, 1.0), strict=True):  # cpu, then disk
        assert gb - tier["block_gb"] < tier["capacity"] * tier["block_gb"] <= gb  # the scenario's GB, in blocks
        held = tier["frames"][f]
        row = panel.locator('.kv-tier[data-tier="' + tier["key"] + '"]')
        expect(row).to_have_attribute("data-blocks", str(held))
        expect(row).to_contain_text(f"{tier['label']} ")
        expect(row).to_contain_text(f"({held:,} of {tier['capacity']:,} blocks)")
    cpu, disk = s["tiers"]["tiers"]
    assert cpu["frames"][f] == cpu["capacity"] and disk["frames"][f] > 0  # the CPU tier overflowed to disk
    expect(panel.locator(".kv-tier-caption")).to_have_text(s["tiers"]["caption"])
    expect(panel.locator(".kv-tier-caption")).to_contain_text("CPU ")
    expect(page.locator("#card-kv .sub")).to_contain_text("a bar under it per lower tier")
    page.locator("#card-kv").screenshot(path=SHOTS / "35-kv-tiers-1440x900.png")


def test_the_preset_gallery_opens_each_experiment_in_one_click_and_says_whether_it_held(site):
    from sim_core.studies.experiments import EXPERIMENTS

    for width, height in ((1440, 900), (390, 844)):
        context, page = _page(site, width, height)
        try:
            page.goto(page.base + "/")
            links = page.locator("#gallery a[data-experiment]")
            assert links.count() == len(EXPERIMENTS)
            for e in EXPERIMENTS:
                expect(page.locator(f'#gallery a[data-experiment="{e.key}"]')).to_have_text(e.title)
            gallery = page.locator("#gallery")
            gallery.scroll_into_view_if_needed()
            assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            gallery.screenshot(path=SHOTS / f"35-gallery-{width}x{height}.png")
            orca = EXPERIMENTS[0]
            page.locator(f'#gallery a[data-experiment="{orca.key}"]').click()
            verdict = page.locator("#experiment")
            expect(verdict).to_have_attribute("data-held", "true", timeout=60_000)
            expect(verdict).to_contain_text(orca.expect)
            checked = sorted(page.locator('#scenario-form input[name="schedulers"]:checked').evaluate_all(
                "els => els.map(e => e.value)"))
            assert checked == ["fcfs", "static"]
            page.screenshot(path=SHOTS / f"36-experiment-orca-{width}x{height}.png")
            if width > 1000:  # issue #23's speculative-decoding experiment: its claims, and the step-time bands
                page.locator('#gallery a[data-experiment="spec"]').click()
                expect(page.locator("#experiment")).to_have_attribute("data-held", "true", timeout=60_000)
                wait_drawn(page, "plot-step-time")
                names = page.locator('[data-figure="step-time"]').evaluate("d => d.data.map(t => t.name)")
                assert {"verifying drafts", "proposer (drafting)"} <= set(names), names
                page.locator("#card-step-time").screenshot(path=SHOTS / "31-steptime-spec-1440x900.png")
            assert page.errors == [], page.errors
        finally:
            context.close()


def test_a_600_s_run_zoomed_past_the_limit_says_so_and_a_box_zoom_draws_its_rows(page):
    """18,112 requests, thousands queued at once: a time-only zoom has more requests in flight than a Gantt can
    show (the note says how many); a box over fewer rows draws every one of them."""
    query = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=600&rate=30"
    page.goto(page.base + "/?" + query)
    plot = "plot-gantt-fcfs"
    wait_drawn(page, plot)
    gantt = page.locator("#" + plot)
    note = page.locator("#card-gantt-fcfs [data-window-note]")
    _zoom_by_drag(page, plot, 1000.0, 1200.0)  # fcfs drains for over an hour after the last arrival
    expect(note).to_contain_text("requests are in flight between")
    expect(note).to_contain_text("to at most 1,000")
    assert gantt.get_attribute("data-window") is None
    # A box: 1000-1200 s over a band of 800 rows (request indices).
    box = gantt.evaluate("""d => { const r = d.getBoundingClientRect(), xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        const lo = 9000, hi = 9800;
        return [r.left + xa._offset + xa.l2p(1000), r.left + xa._offset + xa.l2p(1200),
                r.top + ya._offset + ya.l2p(lo), r.top + ya._offset + ya.l2p(hi)]; }""")
    page.mouse.move(box[0], box[2])
    page.mouse.down()
    page.mouse.move((box[0] + box[1]) / 2, (box[2] + box[3]) / 2, steps=4)
    page.mouse.move(box[1], box[3], steps=4)
    page.mouse.up()
    expect(gantt).to_have_attribute("data-window", re.compile(r"^[\d.]+,[\d.]+,[\d.]+,[\d.]+$"), timeout=30_000)
    t0, t1, r0, r1 = (float(x) for x in gantt.get_attribute("data-window").split(","))
    drawn = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
    expected = {r for r in _in_flight(query, "fcfs", t0, t1) if r0 <= r <= r1}
    assert drawn == expected and len(drawn) > 100
    page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / "37-gantt-box-zoom-600s.png")


def test_step_time_panel_stacks_the_kernel_groups_to_the_apis_step_time(page):
    """The Step time card draws three panels (prefill, decode, mixed) of stacked kernel groups whose top at each
    batch size is what /api/step-time says that batch costs; the ridge is marked; a phone stacks the panels."""
    page.goto(page.base + "/?" + SMALL)
    wait_drawn(page, "plot-step-time")
    plot = page.locator('[data-figure="step-time"]')
    traces = plot.evaluate("d => d.data.map(t => ({x: t.x, y: t.y, stack: t.stackgroup, name: t.name}))")
    assert len(traces) == 18 and len({t["stack"] for t in traces}) == 3
    # The prefill panel's steps hold no decoding sequence, so its top at any batch is the API's step time for
    # that prompt chunk alone (the other panels depend on the run's typical context).
    prefill = [t for t in traces if t["stack"] == "s0"]
    for k in (0, -1):
        n = prefill[0]["x"][k]
        api = page.request.get(page.base + f"/api/step-time?hardware=rtx3050&prefill_tokens={n}").json()
        assert sum(t["y"][k] for t in prefill) == pytest.approx(api["step_ms"], rel=1e-3)
    assert "ridge" in plot.inner_text()
    page.locator("#card-step-time").screenshot(path=SHOTS / "31-steptime-1440x900.png")


def test_step_time_panels_stack_on_a_phone(site):
    context, phone = _page(site, 390, 844)
    try:
        phone.goto(phone.base + "/?" + SMALL)
        wait_drawn(phone, "plot-step-time")
        plot = phone.locator('[data-figure="step-time"]')
        assert plot.get_attribute("data-stacked") is not None
        domains = plot.evaluate("d => [1, 2, 3].map(i => d._fullLayout['xaxis' + (i > 1 ? i : '')].domain)")
        assert all(d == [0, 1] for d in domains)
        assert phone.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        phone.locator("#card-step-time").screenshot(path=SHOTS / "31-steptime-390x844.png")
        assert phone.errors == [], phone.errors
    finally:
        context.close()
