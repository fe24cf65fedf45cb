"""Issue 26: a shared link to an uploaded trace and an uploaded model config still works after the server restarts
(the upload store on disk), in a real browser."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, REPO_ROOT, launch_chromium, live_server  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from app.web import model_uploads, service  # noqa: E402
from app.web.server import create_app  # noqa: E402
from app.web.settings import Settings  # noqa: E402

pytestmark = pytest.mark.browser


def test_a_link_to_an_upload_works_after_a_restart(tmp_path):
    import sim_core

    sim_core.warm_up()
    trace = tmp_path / "shared-trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{k * 0.25:.2f},{200 + 37 * k % 900},{30 + k % 40}\n" for k in range(40)), encoding="utf-8")
    config = tmp_path / "Qwen3-8B.json"
    config.write_bytes((REPO_ROOT / "sim_core" / "data" / "hf_configs" / "qwen3-8b.json").read_bytes())
    settings = Settings(allowed_hosts=(), store_dir=str(tmp_path / "store"), store_max_mb=16, max_connections=100)
    before = service._store
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                with live_server(create_app(settings), startup_timeout=120) as base:
                    page = browser.new_page()
                    page.goto(base + "/?schedulers=fcfs,chunked&hardware=a100&workload=chat&duration=10.0")
                    page.set_input_files("#f-trace", str(trace))
                    page.wait_for_url("**upload=*")
                    expect(page.locator(".summary")).to_contain_text("trace shared-trace.csv: 40 requests")
                    page.set_input_files("#f-model-config", str(config))
                    page.wait_for_url("**model_file=*")
                    expect(page.locator(".summary")).to_contain_text("Qwen3-8B")
                    link = page.url
                    assert "upload=" in link
                    page.close()
                port = int(base.rsplit(":", 1)[1])
                # The restarted server: a new application on the same store folder and port, nothing in memory.
                with live_server(create_app(settings), startup_timeout=120, port=port):
                    assert not service._uploads._items and not model_uploads._items._items
                    page = browser.new_page()
                    errors = []
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    page.goto(link)
                    expect(page.locator(".summary")).to_contain_text("trace shared-trace.csv: 40 requests")
                    expect(page.locator(".summary")).to_contain_text("Qwen3-8B")
                    expect(page.locator("#model-config-status")).to_contain_text("Simulating Qwen3-8B")
                    page.wait_for_function(DRAWN, arg="plot-cdf")
                    assert page.locator("#err-upload, #err-model_file").count() == 0 and not errors
                    page.close()
            finally:
                browser.close()
    finally:
        service.use_store(before)
