"""The dashboard's FastAPI application: `app.web:app` (what `sched-sim serve` runs under uvicorn).

Pages and htmx fragments live in pages.py, the JSON API in api.py, the figures in figures/ (one module each).
Simulation routes are plain `def`s, so they run in the threadpool and the event loop keeps answering. numba's
kernels are compiled (or loaded from the cache) once, in the background: the server answers from the start, and
until the kernels are ready pages say so and poll while the JSON API answers 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

import sim_core

from . import (
    accuracy_page,
    api,
    apidocs,
    cluster_time_page,
    diff_page,
    downloads,
    frontier_page,
    gantt_window,
    guide,
    kv_engine,
    kvgrid,
    page_embeds,
    pages,
    plan_page,
    progress_api,
    service,
    twin_page,
    vs_curves,
    vs_page,
)
from .jobs import cancel_all as cancel_all_jobs
from .middleware import AllowedHostsAndOrigin, GzipOffLoop, SecurityHeadersAndHead
from .settings import Settings
from .store import BlobStore
from .templating import STATIC_DIR, TEST_ONLY_STATIC
from .warm_progress import WarmProgress

log = logging.getLogger("sched_sim.web")


# How long start-up waits for the kernels before it answers anyway: loading them from numba's cache takes about
# a second; compiling them on a fresh machine takes a minute or more, and meanwhile pages show its steps and poll.
WARM_UP_WAIT_S = 3.0
# The event loop (health checks, the in-flight gate, disconnect polling) needs the GIL between request threads
# that render pages in Python; a thread keeps it up to the switch interval at a time, 5 ms by default, so with
# a dozen such threads a health check could wait tens of milliseconds. 1 ms keeps it answering promptly; the
# simulations themselves run without the GIL.
GIL_SWITCH_INTERVAL_S = 0.001
# Request threads doing Python work at once (rendering pages, building answers; simulations run without the GIL).
# More only queue for the GIL: with dozens of runnable threads the event loop waits its turn behind all of them.
# Requests beyond this wait for a thread without using the CPU. bench/load.py, 32 mixed clients on 2 cores:
# /healthz p50/p99 42/148 ms with 12 threads, 25/126 with 6, 16/105 with 4, for the same pages per second.
REQUEST_THREADS = 4


def _warm_up(app: FastAPI) -> None:
    start = time.perf_counter()

    def heard(done: int, total: int, what: str) -> None:  # the engine's steps, then the dashboard's own kernels
        app.state.warm_progress = WarmProgress(done, total + 1, what)

    while True:
        try:
            sim_core.warm_up(heard)  # compile, or load from numba's cache, every engine code path
            steps = len(sim_core.warm_up_steps())
            app.state.warm_progress = WarmProgress(steps, steps + 1, "the dashboard's KV-cache grid")
            kvgrid.warm_up()
            app.state.warm_progress = WarmProgress(steps + 1, steps + 1, "done")
            break
        except OSError as e:  # the machine's state, not the code's: say why, and try again
            app.state.kernels_retrying = f"{type(e).__name__}: {e}"
            log.warning("numba warm-up failed (%s); retrying in %g s", e, api.WARM_UP_RETRY_S)
            if app.state.stopping.wait(api.WARM_UP_RETRY_S):
                return
        except Exception as e:  # the kernels will never be ready: say why (/healthz, the API's 503s, the page)
            app.state.kernels_error = f"{type(e).__name__}: {e}"
            log.exception("numba warm-up failed; simulations cannot run")
            return
    app.state.kernels_retrying = None
    app.state.warmed_up_s = time.perf_counter() - start
    app.state.kernels_ready.set()
    log.info("numba warm-up took %.1f s", app.state.warmed_up_s)


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.kernels_ready = threading.Event()
    app.state.kernels_error = None
    app.state.kernels_retrying = None  # why the last warm-up failed while the next is due (api.WARM_UP_RETRY_S)
    app.state.warm_progress = None  # the warm-up's step (WarmProgress), for the pages that wait on it
    app.state.stopping = threading.Event()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
    threading.Thread(target=_warm_up, args=(app,), name="numba-warm-up", daemon=True).start()
    await asyncio.to_thread(app.state.kernels_ready.wait, WARM_UP_WAIT_S)
    yield
    app.state.stopping.set()
    # A stopping server stops its sweeps, plans and frontiers: their job threads would keep the process alive
    # until each ended (minutes), and a test's next server would queue behind them.
    cancel_all_jobs()


class VersionedStaticFiles(StaticFiles):
    """A URL with `?v=<asset version>` names one version of a file for good: browsers may keep it a year. Without
    it, they revalidate (ETag) on every use. Any page may read them (CORS): the dashboard's scripts are ES
    modules, which browsers fetch in CORS mode, and an embed in a sandboxed iframe has an opaque origin, so
    without Access-Control-Allow-Origin its figures would never draw. They are public and start no work."""

    async def get_response(self, path, scope):
        if (STATIC_DIR / path).resolve().is_relative_to(TEST_ONLY_STATIC):
            raise HTTPException(status_code=404)  # a test tool, not part of the product
        response = await super().get_response(path, scope)
        versioned = b"v=" in scope.get("query_string", b"")
        response.headers["cache-control"] = "public, max-age=31536000, immutable" if versioned else "no-cache"
        response.headers["access-control-allow-origin"] = "*"
        return response


def create_app(settings: Settings | None = None) -> FastAPI:
    """The application, configured by `settings` (default: from the environment, settings.py). Uploads go to the
    settings' store from now on (the store is the process's, like the run caches)."""
    settings = settings or Settings.from_env()
    store = BlobStore(settings.store_dir, settings.store_max_mb * 1024 * 1024)
    service.use_store(store)
    store_problem = store.problem()
    if store_problem:  # uploads still work, from memory: links naming them break at the next restart
        log.warning("uploads cannot be kept on disk (%s): they last until this server stops", store_problem)
    app = FastAPI(
        title="sched-sim",
        summary="Simulate LLM-serving schedulers: latency, goodput and KV-cache behaviour per policy.",
        description="The same scenario model serves the dashboard's URLs, this JSON API and the CLI. "
                    "Scenario fields are query parameters (GET) or a JSON object (POST).",
        version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
    )
    app.add_middleware(GzipOffLoop)
    app.add_middleware(SecurityHeadersAndHead)
    app.add_middleware(AllowedHostsAndOrigin, allowed_hosts=settings.allowed_hosts)  # last added: runs first
    app.mount("/static", VersionedStaticFiles(directory=str(STATIC_DIR)), name="static")
    app.include_router(cluster_time_page.router)  # before pages': its /embed/cluster-time takes `autoscalers`
    app.include_router(page_embeds.router)  # before pages': /embed/vs, /diff, /frontier, /plan are no figures
    app.include_router(pages.router)
    app.include_router(plan_page.router)
    app.include_router(frontier_page.router)
    app.include_router(plan_page.api_router)
    app.include_router(api.router)
    app.include_router(progress_api.router)
    app.include_router(diff_page.router)
    app.include_router(diff_page.api_router)
    app.include_router(vs_page.router)
    app.include_router(vs_curves.router)
    app.include_router(twin_page.router)
    app.include_router(downloads.router)
    app.include_router(gantt_window.router)
    app.include_router(kv_engine.router)
    app.include_router(api.health_router)
    app.include_router(apidocs.router)
    app.include_router(guide.router)
    app.include_router(accuracy_page.router)
    apidocs.install(app)
    app.state.settings = settings
    app.state.store_problem = store_problem
    return app


app = create_app()
