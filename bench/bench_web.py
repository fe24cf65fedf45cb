"""Dashboard latency: the default scenario's results fragment, a cold page load in chromium, the KV view's playback
rate, and the server under 16 concurrent simulating clients. Prints figures; asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_web.py
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from browser_support import DRAWN, launch_chromium, live_server  # noqa: E402

import sim_core  # noqa: E402
from app.web import app, kvgrid, service  # noqa: E402

HX = {"HX-Request": "true"}


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q / 100 * (len(v) - 1))))]


def ms(values: list[float]) -> str:
    return (f"median {statistics.median(values) * 1e3:7.1f} ms  p90 {pct(values, 90) * 1e3:7.1f} ms  "
            f"max {max(values) * 1e3:7.1f} ms  (n={len(values)})")


def timed_get(client: httpx.Client, url: str, **kw) -> tuple[float, httpx.Response]:
    t = time.perf_counter()
    r = client.get(url, **kw)
    return time.perf_counter() - t, r


def bench_fragment(base: str) -> None:
    with httpx.Client(base_url=base, timeout=120) as c:
        c.get("/", headers=HX)  # first render compiles the templates
        cached = [timed_get(c, "/", headers=HX)[0] for _ in range(30)]
        uncached = []
        for _ in range(10):
            service.clear_caches()
            uncached.append(timed_get(c, "/", headers=HX)[0])
        size = len(c.get("/", headers=HX).content)
        gz = c.get("/", headers={**HX, "Accept-Encoding": "gzip"})
        wire = int(gz.headers.get("content-length", 0) or 0)
    print("Default scenario's results fragment (GET / with HX-Request, 2 schedulers), httpx:")
    print(f"  cached run (LRU hit):          {ms(cached)}")
    print(f"  simulated afresh (cache off):  {ms(uncached)}")
    print(f"  size {size / 1024:.0f} KiB, {wire / 1024:.0f} KiB gzipped on the wire" if wire else
          f"  size {size / 1024:.0f} KiB")


PAGE_TIMING = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(p => [p.name, p.startTime]));
  return {ttfb: nav.responseStart, fcp: paint['first-contentful-paint'], dcl: nav.domContentLoadedEventEnd,
          load: nav.loadEventEnd};
}"""


def bench_page_load(base: str, runs: int = 5) -> None:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        for _ in range(runs):
            context = browser.new_context(viewport={"width": 1440, "height": 900})  # empty cache: a cold load
            page = context.new_page()
            t = time.perf_counter()
            page.goto(base + "/", wait_until="load")
            page.wait_for_selector("#card-metrics td.num")
            timing = page.evaluate(PAGE_TIMING)
            page.wait_for_function("() => document.querySelectorAll('.plot[data-figure]:not([data-drawn=\"1\"])').length === 0",
                                   timeout=60_000)
            timing["figures"] = (time.perf_counter() - t) * 1e3
            rows.append(timing)
            context.close()
        browser.close()

    def col(key: str) -> str:
        values = [r[key] for r in rows if r.get(key) is not None]
        return f"median {statistics.median(values):7.0f} ms  max {max(values):7.0f} ms"

    print(f"Cold page load of / in chromium (fresh context each time, n={runs}; results cached server-side):")
    print(f"  first byte                       {col('ttfb')}")
    print(f"  first contentful paint (table)   {col('fcp')}")
    print(f"  DOMContentLoaded                 {col('dcl')}")
    print(f"  load event                       {col('load')}")
    print(f"  every figure drawn (plotly.js)   {col('figures')}")


def bench_concurrency(base: str, clients: int = 16) -> None:
    queries = [f"schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20&seed={100 + k}"
               for k in range(clients)]
    with httpx.Client(base_url=base, timeout=300) as c:
        expected = {q: c.get("/api/run?" + q).json()["schedulers"] for q in queries}
        c.get("/")  # the page the prober asks for is cached: it measures responsiveness, not simulation
    service.clear_caches()
    c = httpx.Client(base_url=base, timeout=300, limits=httpx.Limits(max_connections=clients + 4))
    c.get("/")
    stop = threading.Event()
    probes: list[float] = []

    def probe() -> None:
        while not stop.is_set():
            dt, r = timed_get(c, "/", headers=HX)
            assert r.status_code == 200
            probes.append(dt)
            time.sleep(0.05)

    shed = []

    def simulate(q: str) -> tuple[float, bool]:
        # As a client honouring Retry-After does: the server sheds what it cannot start soon (503).
        t0 = time.perf_counter()
        while (r := c.get("/api/run?" + q)).status_code == 503:
            shed.append(q)
            time.sleep(0.5)
        return time.perf_counter() - t0, r.status_code == 200 and r.json()["schedulers"] == expected[q]

    prober = threading.Thread(target=probe)
    prober.start()
    t = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(simulate, queries))
    wall = time.perf_counter() - t
    stop.set()
    prober.join()
    c.close()
    latencies = [dt for dt, _ in results]
    print(f"{clients} concurrent clients, each simulating a different seed of the default scenario (GET /api/run):")
    print(f"  all answers correct: {all(ok for _, ok in results)}   wall {wall:.2f} s   "
          f"({len(shed)} answers were 503 + Retry-After, retried)")
    print(f"  simulation requests:             {ms(latencies)}")
    print(f"  page fragment meanwhile (cached): median {statistics.median(probes) * 1e3:.1f} ms  "
          f"p99 {pct(probes, 99) * 1e3:.1f} ms  max {max(probes) * 1e3:.1f} ms  (n={len(probes)})")

def playback_fps(page) -> float:
    """Frames per second the KV view paints while playing from the start, counted from its data-time changes."""
    page.locator("[data-scrub]").fill("0")
    page.evaluate("""() => { const d = document.getElementById('plot-kv'); window.kvTimes = [];
      new MutationObserver(() => window.kvTimes.push(performance.now()))
        .observe(d, {attributes: true, attributeFilter: ['data-time']}); }""")
    page.locator("[data-play]").click()
    page.wait_for_timeout(1500)
    stamps = page.evaluate("window.kvTimes")
    return (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1000)


def bench_kv_playback(base: str, runs: int = 3) -> None:
    """KV playback rate (issue 12's measure: data-time changes per second while playing): the default page
    (two schedulers) and a 600 s / 18k-request run."""
    from playwright.sync_api import sync_playwright

    pages = {"default scenario (2 schedulers)": "/",
             "600 s rag run on rtx3050, 2 schedulers": "/?schedulers=fcfs,chunked&hardware=rtx3050&workload=rag"
                                                       "&duration=600&rate=30"}
    print(f"KV playback in chromium (frames/s, n={runs}):")
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        for name, path in pages.items():
            fps = []
            for _ in range(runs):
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(base + path)
                page.locator("#plot-kv").scroll_into_view_if_needed()
                page.wait_for_function(DRAWN, arg="plot-kv", timeout=300_000)
                frames = int(page.locator("[data-scrub]").get_attribute("max"))
                fps.append(playback_fps(page))
                page.close()
            print(f"  {name:40s} median {statistics.median(fps):5.1f}  min {min(fps):5.1f}  ({frames + 1} frames)")
        browser.close()


def main() -> None:
    t = time.perf_counter()
    sim_core.warm_up()
    kvgrid.warm_up()
    print(f"numba warm-up {time.perf_counter() - t:.1f} s")
    with live_server(app, startup_timeout=300) as base:
        bench_fragment(base)
        bench_page_load(base)
        bench_kv_playback(base)
        bench_concurrency(base)


if __name__ == "__main__":
    main()
