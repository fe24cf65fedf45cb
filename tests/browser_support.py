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
