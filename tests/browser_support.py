"""Helpers for real-browser (Playwright) tests. Not a test module.

Playwright cannot download its own browsers on these machines, so the tests drive Debian's
``/usr/bin/chromium`` (``scripts/test.sh`` installs it with apt-get when missing).

Typical use::

    from playwright.sync_api import sync_playwright
    # tests/ has no __init__.py: pytest puts tests/ itself on sys.path
    from browser_support import launch_chromium, live_server, screenshot_dir

    @pytest.mark.browser
    def test_page(app):
        with live_server(app) as base_url, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page()
            page.goto(base_url + "/")
            page.screenshot(path=screenshot_dir() / "index.png")
            browser.close()
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

REPO_ROOT = Path(__file__).resolve().parent.parent


def launch_chromium(playwright: Any, **kwargs: Any) -> Any:
    """Launch Debian's headless chromium through a Playwright instance (sync or async API).

    Extra keyword arguments are passed on to ``playwright.chromium.launch``.
    """
    options: dict[str, Any] = {
        "executable_path": CHROMIUM_PATH,
        "headless": True,
        "args": list(CHROMIUM_ARGS),
    }
    options.update(kwargs)
    return playwright.chromium.launch(**options)


@contextlib.contextmanager
def live_server(app: Any, host: str = "127.0.0.1", startup_timeout: float = 20.0, port: int = 0) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn in a background thread; yield its base URL.

    The listening socket is bound (to a free port, or `port`: a server restarted where links point) before the
    server starts, so there is no race for the port. The server is asked to exit and its thread joined on exit.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="auto",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported to the caller below
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if errors:
                raise RuntimeError("uvicorn failed to start") from errors[0]
            if not thread.is_alive():
                raise RuntimeError("uvicorn exited before it started")
            if time.monotonic() > deadline:
                raise TimeoutError(f"uvicorn did not start within {startup_timeout}s")
            time.sleep(0.02)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
    if thread.is_alive():
        raise RuntimeError("uvicorn server thread did not stop within 15s")


def screenshot_dir() -> Path:
    """``<repo>/test-output/screenshots``, created if missing."""
    path = REPO_ROOT / "test-output" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


# A Plotly figure container the dashboard's script has finished drawing (it sets data-drawn="1").
DRAWN = "id => { const d = document.getElementById(id); return !!d && d.dataset.drawn === '1'; }"

# The page (selector null) or one element scrolls sideways nowhere (nor downwards, with `height`); what reaches
# past its right edge if it does.
FITS = """([sel, tall]) => { const e = sel ? document.querySelector(sel) : document.documentElement;
  return e.scrollWidth <= e.clientWidth && (!tall || e.scrollHeight <= e.clientHeight); }"""
PAST_RIGHT_EDGE = """sel => { const e = sel ? document.querySelector(sel) : document.documentElement;
  const edge = sel ? e.getBoundingClientRect().left + e.clientWidth : e.clientWidth;
  const past = [...e.querySelectorAll('*')].filter(x => x.getBoundingClientRect().right > edge + 0.5)
    .map(x => [x.tagName, x.id, Math.round(x.getBoundingClientRect().right)]);
  return {scrollWidth: e.scrollWidth, clientWidth: e.clientWidth, scrollHeight: e.scrollHeight,
          clientHeight: e.clientHeight, past: past.slice(0, 10)}; }"""


def wait_until_it_fits(page: Any, selector: str | None = None, timeout_ms: int = 15_000, *,
                       height: bool = False) -> None:
    """Wait until the page or frame (or the element at `selector`) needs no sideways scrolling after a resize (nor
    any downwards, with `height`); fail naming what still reaches past the edge. Plotly redraws a figure at its new
    width on a debounced timer, which a loaded machine runs late (a fixed 300 ms pause once saw the 1440 px figures
    still drawn on a 390 px phone)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(FITS, arg=[selector, height], timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(page.evaluate(PAST_RIGHT_EDGE, selector)) from None

# Text drawn inside the plots (ticks, legends, notes), which axe-core leaves "to review" (it cannot tell an SVG
# text's ground): each one's fill, with its opacity, against the figure's paper (or a note's own ground over it),
# where it reads at under 4.5:1. Text inside a bar sits on the bar, not the paper: not measured here.
LOW_CONTRAST_PLOT_TEXT = """() => {
  const cx = document.createElement('canvas').getContext('2d');
  const rgb = c => { cx.fillStyle = '#000'; cx.fillStyle = c; const f = cx.fillStyle;
    return f[0] === '#' ? [1, 3, 5].map(i => parseInt(f.slice(i, i + 2), 16)).concat([1]) : f.match(/[\\d.]+/g).map(Number); };
  const over = (fg, a, bg) => bg.slice(0, 3).map((x, i) => fg[i] * a + x * (1 - a));
  const lum = c => { const l = c.map(x => { x /= 255; return x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
  const ratio = (a, b) => { const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x); return (hi + 0.05) / (lo + 0.05); };
  const low = [];
  document.querySelectorAll('.js-plotly-plot').forEach(div => {
    const paper = rgb(div._fullLayout.paper_bgcolor);
    div.querySelectorAll('.main-svg text').forEach(t => {
      if (!t.textContent.trim() || !t.getBoundingClientRect().width || t.closest('.bartext')) return;
      const cs = getComputedStyle(t), fill = rgb(cs.fill);
      let a = (fill[3] ?? 1) * Number(cs.fillOpacity);
      for (let g = t; g && g.tagName !== 'svg'; g = g.parentElement) a *= Number(getComputedStyle(g).opacity);
      let ground = paper.slice(0, 3);
      const box = t.closest('.annotation') && t.closest('.annotation').querySelector('rect.bg');
      if (box) { const b = rgb(getComputedStyle(box).fill); ground = over(b, (b[3] ?? 1) * Number(getComputedStyle(box).fillOpacity), ground); }
      const r = ratio(over(fill, a, ground), ground);
      if (r < 4.5) low.push({figure: div.id, text: t.textContent.trim().slice(0, 40), fill: cs.fill, ratio: +r.toFixed(2)});
    });
  });
  return low;
}"""

# A theme applied to what is drawn (page.emulate_media switches it): the page's colours at once, each plot's once
# static/js/theme.js has recoloured it to its paper (the argument: LIGHT_PAPER or DARK_PAPER, theme.js's LIGHT.paper, DARK.paper).
THEME_DRAWN = """paper => [...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullLayout.paper_bgcolor === paper)"""
LIGHT_PAPER, DARK_PAPER = "#ffffff", "#161b22"


@contextlib.contextmanager
def browser_site(app: Any) -> Iterator[tuple[str, Any]]:
    """(base URL, chromium) for a module's browser tests: the app served live once the kernels are loaded (which
    may take a while to compile on a fresh numba cache; the server then starts at once)."""
    from playwright.sync_api import sync_playwright

    import sim_core

    sim_core.warm_up()
    with live_server(app, startup_timeout=120) as base, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            yield base, browser
        finally:
            browser.close()


def open_page(site: tuple[str, Any], width: int = 1440, height: int = 900, *, timeout_ms: int | None = None,
              expected_422: bool = False, **options: Any) -> tuple[Any, Any]:
    """(context, page): a new browser context on the live site of `browser_site`, its page collecting uncaught
    errors and console errors in `page.errors`, with `page.base` the site's address. With `expected_422`, the
    console line chromium logs for a 422 answer (an inline form error the test provokes) is not an error.
    `options` go to the context (color_scheme, is_mobile, accept_downloads, ...). The caller closes it."""
    base, browser = site
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    page = context.new_page()
    if timeout_ms is not None:
        page.set_default_timeout(timeout_ms)
    page.base, page.errors = base, []

    def on_console(message) -> None:
        if message.type == "error" and not (expected_422 and "status of 422" in message.text):
            page.errors.append(message.text)

    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", on_console)
    return context, page


def frame_page(page: Any, html: str) -> None:
    """Show `html` (a slide with an iframe, say) as a page of the site's own origin. Written into a blank page it
    would be another site's, whose frames get a Run button instead of running (app/web/cross_site.py)."""
    if not page.url.startswith(page.base):
        page.goto(page.base + "/healthz")
    page.set_content(html)
