"""Simulation work for the web: uploaded traces, cached runs, background rate sweeps.

Results are deterministic, so a run is cached under its canonical query (`WebRequest.run_key`) in an LRU bounded
by bytes (a view's size varies a hundredfold with the run's length, so a count of entries bounds nothing);
concurrent requests for the same run wait for one computation ("single flight"). At most SIM_SLOTS runs
simulate at once, which bounds memory (a run allocates tens of MB) while other requests keep being answered.
A request's whole work (every scheduler and seed) is checked against the web's budget before anything runs
(budget.request_work_problems). Sweeps run in a background thread (jobs.JobBoard); pages poll their progress.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass

import numpy as np

from sim_core import ScenarioError, SetupError, resolve
from sim_core.runner import Cancelled, Result, RunOptions, make_requests, simulate_requests
from sim_core.statistics import aggregate
from sim_core.studies.sweep import knee_interval, knee_rate, sweep
from sim_core.traces import TraceError, own_rate, read_trace

from ..write_problems import describe
from . import figures, model_uploads, rendered
from .budget import request_work_problems
from .cache import UPLOAD_CACHE_BYTES, VIEW_CACHE_BYTES, SingleFlightLRU, release_memory
from .clusterview import cluster_view
from .inputs import (
    MAX_QUEUED_SWEEPS,
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_ROWS,
    PAGE_SCHEDULERS,
    RateRange,
    TraceInfo,
    WebRequest,
    page_defaults,
    parse_request,
    query_to_dict,
    sweep_work_problems,
    work_problems,
)
from .jobs import JobBoard, JobRecord, job_id
from .lanes import MAX_SIMULATIONS
from .run_budget import MAX_RUN_BYTES, OUT_OF_MEMORY, recorded_frames_for
from .run_progress import reported_as
from .runview import RunView, build_view, cell_blocks, pick_frames
from .store import BlobStore, content_id
from .sweep_range import default_sweep

log = logging.getLogger("sched_sim.web")

SIM_SLOTS = threading.BoundedSemaphore(MAX_SIMULATIONS)
# A request waits this long for a free slot, then gets "busy" (503 / a page that retries) instead of holding a
# request thread while it queues: threads held by queued simulations would starve every other route.
SIM_WAIT_S = 2.0
# A request whose turn is further away than this is answered at once (503, Retry-After: its estimated wait) and
# keeps its place with a ticket, rather than holding its connection open (proxies time out idle ones).
LINE_HOLD_S = 15.0
KNEE_TARGET = 0.9  # SLO attainment that defines the saturation knee


class BusyError(RuntimeError):
    """Too many simulations running or sweeps queued: the caller should retry in `retry_after` seconds. `limit`:
    the limit reached, as /api/catalog's `limits` name it, and its value (the 503's JSON carries both)."""

    def __init__(self, message: str, retry_after: int = 5, limit: tuple[str, float] | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.limit = limit


def slots_busy() -> BusyError:
    """Every simulation slot stayed taken for SIM_WAIT_S."""
    return BusyError(f"the server runs at most {MAX_SIMULATIONS} simulations at once (its limit max_simulations) "
                     f"and is already running its {MAX_SIMULATIONS} simulations; retry in a few seconds",
                     limit=("max_simulations", MAX_SIMULATIONS))


# ----- uploaded traces -----
@dataclass(frozen=True)
class Upload:
    id: str
    filename: str
    text: str
    info: TraceInfo


class UploadError(ValueError):
    """An upload that cannot be used; the message says why."""


# The parsed uploads in use, bounded by bytes (str: up to 2 bytes a character here); the store below keeps their
# bytes on disk.
_uploads = SingleFlightLRU(maxsize=32, max_bytes=UPLOAD_CACHE_BYTES, sizeof=lambda up: 2 * len(up.text) + 1024)
_store: BlobStore | None = None  # set by server.create_app (use_store); None: uploads live in memory only
TRACE_KIND = "trace"


def use_store(store: BlobStore | None) -> None:
    """Keep uploads in `store` from now on (what server.create_app sets up from its settings)."""
    global _store
    _store = store
    _uploads.clear()
    rendered.clear()  # pages naming uploads are rendered again from the new store
    model_uploads.use_store(store)


def _check_trace(data: bytes, name: str) -> Upload:
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadError(f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB (the web's limit)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UploadError("the file is not UTF-8 text; expected a CSV with header "
                          "arrival_s,prompt_tokens,output_tokens (or an Azure CSV / Mooncake JSONL trace)") from None
    try:
        reqs = read_trace(text, MAX_UPLOAD_ROWS)
    except TraceError as e:
        raise UploadError(str(e)) from None
    info = TraceInfo(rows=len(reqs), span_s=float(reqs.arrival_s[-1] - reqs.arrival_s[0]), own_rate=own_rate(reqs),
                     longest_tokens=int((reqs.prompt_tokens + reqs.output_tokens).max()))
    return Upload(content_id(data, name), name, text, info)


def add_upload(data: bytes, filename: str) -> Upload:
    """Check and keep an uploaded trace (any format the core reads: our CSV, Azure's CSV, Mooncake's JSONL);
    its id is a hash of its content and its name (store.content_id), and it is kept in the store on disk, so a
    link naming it works after a restart."""
    name = (filename or "trace.csv")[:120]
    up = _check_trace(data, name)
    if _store is not None:
        try:
            _store.put(TRACE_KIND, data, {"filename": name, "info": asdict(up.info)}, name)
        except ValueError as e:
            raise UploadError(str(e)) from None
        except OSError as e:  # a full or read-only disk: the upload still works until this server stops
            log.warning("upload %s kept in memory only: %s", up.id, describe(e, _store.root))
    return _uploads.get_or_compute(up.id, lambda: up)


def get_upload(uid: str) -> Upload | None:
    """The upload, from memory or else from the store (checked again as when it was uploaded)."""
    up = _uploads.get(uid)
    if up is not None or _store is None:
        return up
    item = _store.get(TRACE_KIND, uid)
    if item is None:
        return None
    try:
        up = _check_trace(item.data, str(item.meta.get("filename", "")))
    except UploadError:
        return None
    return _uploads.get_or_compute(uid, lambda: up) if up.id == uid else None


def upload_info(uid: str) -> TraceInfo | None:
    """What the input checks need: from memory, or the stored item's meta alone (no trace parsed: this is called
    on the event loop)."""
    up = _uploads.get(uid)
    if up is not None:
        return up.info
    meta = _store.meta(TRACE_KIND, uid) if _store is not None else None
    if meta is None:
        return None
    try:
        return TraceInfo(**meta["info"])
    except (KeyError, TypeError):  # stored by a version whose TraceInfo differed: parse the trace again
        up = get_upload(uid)
        return up.info if up else None


def page_request(pairs: list[tuple[str, str]]) -> WebRequest:
    """A page's comparison from its query's scenario parameters (the page's defaults; uploads from this server's
    store). Raises ScenarioError with every problem."""
    data = query_to_dict(pairs)
    return parse_request(data, defaults=page_defaults(data), default_schedulers=PAGE_SCHEDULERS,
                         uploads=upload_info)


def is_cached_query(pairs: list[tuple[str, str]]) -> bool:
    """Whether a page query's runs are all cached (answering it simulates nothing): parsing takes microseconds,
    so routes ask this on the event loop (http.run_until_disconnect's `quick`)."""
    try:
        return is_cached(page_request(pairs))
    except (ScenarioError, SetupError, TraceError):
        return False


def answers_from_cache(req: WebRequest) -> bool:
    """is_cached, False where the deployment cannot be set up (the run says why: a 422)."""
    try:
        return is_cached(req)
    except (ScenarioError, SetupError, TraceError):
        return False


def upload_text(req: WebRequest) -> str | None:
    """The text of the trace `req` replays (None: a preset), or ScenarioError if it has left the server's store
    since the request was checked."""
    if not req.upload:
        return None
    up = get_upload(req.upload)
    if up is None:
        raise ScenarioError([("upload", "this uploaded trace is no longer on the server; upload it again")])
    return up.text


# ----- runs -----
_views = SingleFlightLRU(maxsize=256, max_bytes=VIEW_CACHE_BYTES)


def per_seed(req: WebRequest) -> list[WebRequest]:
    """One single-seed request per seed of `req` (seeds = N runs seed, seed + 1, ..., seed + N - 1)."""
    s = req.scenario
    return [WebRequest(s.model_copy(update={"seed": s.seed + k, "seeds": 1}), req.schedulers, req.upload)
            for k in range(s.seeds)]


def is_cached(req: WebRequest) -> bool:
    """Whether every run of the request is already computed (its answer needs no simulation slot): the views
    compare() would look up, at the first cell size and, where that one was too fine, at the coarser one."""
    for one in per_seed(req):
        views = [_views.get(_view_key(one, name, first_cell(one))) for name in one.schedulers]
        if any(v is None for v in views):
            return False
        coarsest = max(v.kv["k"] for v in views)
        if any(_views.get(_view_key(one, name, coarsest)) is None for name in one.schedulers):
            return False
    return True


def _view_key(req: WebRequest, name: str, cell: int) -> str:
    return f"{req.run_key(name)}&kv_cell={cell}"


def first_cell(req: WebRequest) -> int:
    """The KV cell size every scheduler's grid is drawn with first: the largest pool's (the token budget changes
    the pool, so schedulers' pools differ; a cluster's pools are its engines', which may differ too)."""
    return max(cell_blocks(pool.num_blocks) for name in req.schedulers
               for pool in resolve(req.for_scheduler(name)).deployment)


def compare(req: WebRequest, cancel: np.ndarray | None = None, min_cell: int = 1) -> list[RunView]:
    """One RunView per scheduler of the request, from the cache or simulated now. Setting `cancel[0]` (the client
    went away) stops a simulation in progress: Cancelled is raised and nothing is cached. `min_cell`: the fewest
    blocks a KV cell holds (a pair of scenarios draws both at the coarser side's)."""
    shared: dict[str, object] = {}

    def requests_for(scenario, resolved):  # the workload is the same for every scheduler: build it once
        if "reqs" not in shared:
            shared["reqs"] = _workload(req, scenario, resolved)
        return shared["reqs"]

    def views_at(cell: int) -> list[RunView]:
        return [_views.get_or_compute(_view_key(req, name, cell),
                                      lambda name=name: _simulate(req, name, requests_for, cancel, cell))
                for name in req.schedulers]

    # Every scheduler's KV pool is drawn with one cell size, so grids compare cell for cell (first_cell). A pool
    # so fragmented that its cells had to grow sets the size for all: the others are drawn again with it.
    views = views_at(max(first_cell(req), min_cell))
    coarsest = max(v.kv["k"] for v in views)
    if any(v.kv["k"] != coarsest for v in views):
        views = views_at(coarsest)
    return views


@dataclass
class SeedViews:
    """A comparison over the request's seeds: the first seed's views (what the figures draw) and, per scheduler,
    its metrics averaged over every seed with their 95% intervals (empty with one seed)."""

    views: list[RunView]
    means: list[dict]
    ci95: list[dict]


# Requests found within the budget lately (canonical queries): the API checks a request before its place in line,
# and its run (or its retry) checks it again: a lookup.
_within_budget = SingleFlightLRU(max_bytes=1024 * 1024, sizeof=lambda _: 1024)


def check_work(req: WebRequest) -> None:
    """Refuse (ScenarioError) a request whose whole work, every scheduler at every seed, is more than the web's
    budget, before any of it runs: the first seed's workload is generated (milliseconds) and stands for every
    seed's. Nothing to check when every run is cached."""
    key = req.query(sweep=False)
    if _within_budget.get(key) or is_cached(req):
        return
    _check_work(req)
    _within_budget.put(key, True)


def work_checked(req: WebRequest) -> bool:
    """Whether check_work found `req` within the budget lately: a lookup, for the event loop (a retry's check)."""
    return bool(_within_budget.get(req.query(sweep=False)))


def _check_work(req: WebRequest) -> None:
    s = req.scenario
    reqs = make_requests(s, resolve(s), upload_text(req))
    budgets = {name: resolve(req.for_scheduler(name)).token_budget for name in req.schedulers}
    for budget in sorted(set(budgets.values())):  # one run too large says so first, as it always has
        problems = work_problems(s, budget, reqs)
        if problems:
            raise ScenarioError(problems)
    problems = request_work_problems(req, reqs, budgets)
    if problems:
        raise ScenarioError(problems)


def compare_seeds(req: WebRequest, cancel: np.ndarray | None = None, min_cell: int = 1) -> SeedViews:
    check_work(req)
    runs = [compare(one, cancel, min_cell) for one in per_seed(req)]
    if len(runs) == 1:
        return SeedViews(runs[0], [v.metrics for v in runs[0]], [{} for _ in runs[0]])
    pairs = [aggregate([views[i].metrics for views in runs]) for i in range(len(runs[0]))]
    return SeedViews(runs[0], [means for means, _ in pairs], [ci for _, ci in pairs])


def _workload(req: WebRequest, scenario, resolved):
    """The requests a web run simulates (generated, or the upload's), refused past the web's work limits."""
    reqs = make_requests(scenario, resolved, upload_text(req))
    problems = work_problems(scenario, resolved.token_budget, reqs)
    if problems:
        raise ScenarioError(problems)
    return reqs


def full_run(req: WebRequest, name: str, cancel: np.ndarray | None = None) -> Result:
    """One scheduler's whole run, with its event log (what the per-request CSV and the Perfetto trace are made
    of; a cluster's engines log into one). Not cached: a Result holds tens of MB, and the simulation is
    deterministic, so it is simply run again."""
    scenario = req.for_scheduler(name)
    resolved = resolve(scenario)
    if not SIM_SLOTS.acquire(timeout=SIM_WAIT_S):
        raise slots_busy()
    try:
        return simulate_requests(scenario, resolved, _workload(req, scenario, resolved),
                                 RunOptions(record_events=True, cancel=cancel))
    except MemoryError:  # past run_budget's estimate: a 503 naming the limit, never a 500
        raise BusyError(OUT_OF_MEMORY, limit=("max_run_bytes", MAX_RUN_BYTES)) from None
    finally:
        SIM_SLOTS.release()


def _simulate(req: WebRequest, name: str, requests_for, cancel: np.ndarray | None, kv_cell: int) -> RunView:
    scenario = req.for_scheduler(name)
    resolved = resolve(scenario)
    if not SIM_SLOTS.acquire(timeout=SIM_WAIT_S):
        raise slots_busy()
    try:
        reqs = requests_for(scenario, resolved)
        if cancel is not None and cancel[0]:  # the client left while the workload was made: simulate nothing
            raise Cancelled("cancelled before the run started")
        options = RunOptions(record_events=True, kv_frames=recorded_frames_for(resolved, scenario), cancel=cancel,
                             bounds=True)
        with reported_as(req.query()):  # what a long part of it is doing, for the page's poll (/api/progress)
            res = simulate_requests(scenario, resolved, reqs, options)
        if scenario.engines > 1:  # each engine's KV frames and step log, one event log for the cluster
            view = cluster_view(res, kv_cell)
        else:
            view = build_view(res, *pick_frames(res), kv_cell=kv_cell)
    except MemoryError:  # past run_budget's estimate: a 503 naming the limit, never a 500
        raise BusyError(OUT_OF_MEMORY, limit=("max_run_bytes", MAX_RUN_BYTES)) from None
    finally:
        SIM_SLOTS.release()
    view.kept = figures.keep(res)  # what figures draw beyond the view (the Result is not kept)
    del res
    release_memory()
    return view


# ----- rate sweeps -----
@dataclass
class SweepJob(JobRecord):
    id: str
    request: WebRequest
    problems: list[tuple[str, str]] | None = None  # when the error is the scenario's: (field, what it allows)
    trace_text: str | None = None  # the uploaded trace it replays at each rate (kept: uploads may be evicted)


_sweeps = JobBoard("sweep", MAX_QUEUED_SWEEPS, keep=32, busy=lambda retry: BusyError(
    f"{MAX_QUEUED_SWEEPS} sweeps are already running or queued (the server's limit, max_queued_sweeps); retry in "
    f"about {retry} s", retry, ("max_queued_sweeps", MAX_QUEUED_SWEEPS)))


def start_sweep(req: WebRequest) -> SweepJob:
    """The sweep job for this request: an existing one (running or done) or a new one in the background.
    Raises ScenarioError when the sweep is more work than the web does (before anything is queued)."""
    assert req.sweep is not None
    req.scenario.require_constant_rate("a sweep")  # a schedule or a closed loop has no rate to sweep: say so now
    key = job_id(req.query())
    job = _sweeps.find(key)
    if job is not None:
        return job
    text = upload_text(req)
    problems = sweep_work_problems(req, lambda s: make_requests(s, resolve(s), text),
                                   lambda s: resolve(s).token_budget)
    if problems:
        raise ScenarioError(problems)
    job, _ = _sweeps.start(
        SweepJob(key, req, total=len(req.schedulers) * len(req.sweep.rates()) * req.scenario.seeds, trace_text=text),
        _run_sweep)
    return job


def cancel_sweep(key: str) -> SweepJob | None:
    """Stop a sweep (its Cancel button): the point being simulated stops within milliseconds."""
    return _sweeps.cancel(key)


def sweep_polled(job: SweepJob) -> None:
    _sweeps.polled(job)


def sweep_eta(job: SweepJob) -> int:
    """Seconds until the sweep ends, at its pace so far (a Retry-After)."""
    return _sweeps.eta(job)


def watch_sweep(job: SweepJob) -> None:
    _sweeps.watch(job)


def unwatch_sweep(job: SweepJob, gone: bool) -> None:
    _sweeps.unwatch(job, gone)


def proposed_sweep(req: WebRequest) -> RateRange:
    """The rate range a sweep form proposes for this request: around its rate, or its uploaded trace's own."""
    return default_sweep(req.scenario, upload_info(req.upload) if req.upload else None)


def get_job(key: str) -> SweepJob | None:
    return _sweeps.get(key)


def _run_sweep(job: SweepJob) -> dict:
    req = job.request

    def progress(done: int, total: int) -> None:
        job.done = done

    try:  # in-process (workers=1), inside the job's cancel_scope: its Cancel stops the running point
        points = sweep(req.scenario, req.schedulers, req.sweep.rates(), workers=1, on_point=progress,
                       trace_text=job.trace_text)
        job.result = sweep_summary(req, points)
    except ScenarioError as e:  # a check only the deployment can make (e.g. KV offload without a prefix cache)
        job.problems, job.error = e.problems, str(e)
    except MemoryError:  # past run_budget's estimate: a 422 naming the sweep's size and the limit, never a 500
        job.problems = [("rate_max", f"{OUT_OF_MEMORY}; sweep to a lower rate_max")]
        job.error = job.problems[0][1]
    except Exception as e:  # reported on the page; asking for the same sweep again retries it
        job.error = f"{type(e).__name__}: {e}"
    finally:
        job.trace_text = None  # up to MAX_UPLOAD_BYTES of text, of no use once the sweep is over
        release_memory()
    return job.result


def sweep_summary(req: WebRequest, points: dict[str, list[dict]]) -> dict:
    """Per scheduler, its points (goodput and attainment up front for the plot) and knee. Over several seeds,
    the means, with `ci95` beside each point's metrics and `knee_interval` (sweep.knee_interval) beside the knee."""
    first = next(iter(points.values()))[0]["metrics"]
    out = {"rates": req.sweep.rates(), "target_attainment": KNEE_TARGET, "slo": first["slo"], "schedulers": {}}
    if req.scenario.seeds > 1:
        out["seeds"] = [req.scenario.seed + k for k in range(req.scenario.seeds)]
    for name in req.schedulers:
        pts = points.get(name, [])
        entry = {"knee_rate": knee_rate(pts, KNEE_TARGET),
                 "points": [{"rate": p["rate"], "goodput": p["metrics"]["goodput"],
                             "slo_attainment": p["metrics"]["slo_attainment"], "metrics": p["metrics"]}
                            | ({"ci95": p["ci95"]} if "ci95" in p else {}) for p in pts]}
        band = knee_interval(pts, KNEE_TARGET)
        if band is not None:
            entry["knee_interval"] = list(band)
        out["schedulers"][name] = entry
    return out


def clear_caches() -> None:
    """Forget cached runs and the pages rendered from them (tests and benchmarks use this to measure cold
    paths)."""
    _views.clear()
    rendered.clear()


def cache_stats() -> dict:
    return {"hits": _views.hits, "misses": _views.misses, "bytes": _views.bytes, "entries": len(_views._items),
            "max_bytes": _views.max_bytes, "sweeps_running": _sweeps.running_jobs(), "pages": rendered.stats()}
