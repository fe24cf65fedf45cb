"""Background jobs that pages poll (rate sweeps, capacity plans, frontiers; each a JobRecord): each is found by an
id derived from what it computes, so asking again finds it; they run one at a time on the board's own thread
(never a request thread: pages, static files and health checks keep theirs whatever long work is queued); at
most `max_queued` are running or queued, and past that `busy(retry_after_s)` says when to come back; finished
ones are kept for their pages, the oldest forgotten past `keep` of them or `keep_bytes` of their results. A
failed or cancelled job is not found again: asking again retries it.

Cancelling: every job carries a cancel flag (`job.state.cancel`, the engine's int64[1]); the board runs the job in
sim_core.runner.cancel_scope, so setting the flag stops whichever simulation of the job is running within
milliseconds, and a queued job that is cancelled never starts. A job is cancelled by its page's Cancel button
(`cancel`), when the last request waiting for it (`watch`) goes away and no page has polled it lately, when
the pages that polled it have all stopped polling for ABANDONED_S (closed) and nobody waits for it, or when the
server stops (cancel_all, from the app's lifespan)."""

from __future__ import annotations

import hashlib
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim_core.runner import cancel_scope

from .cache import JOB_RESULTS_BYTES, deep_size

# A page polls a running job every 500 ms: one not polled for this long has no page showing it.
POLL_GRACE_S = 2.0
# A job a page polled and that nobody has polled or waited for since is abandoned (its pages were closed). Longer
# than a minute: browsers poll a hidden tab's timers about once a minute, and that page still wants the job.
ABANDONED_S = 75.0
REAP_EVERY_S = 1.0
# Retry-After when nothing is known yet about how long the running job takes (it has simulated nothing yet).
DEFAULT_RETRY_S = 10
MAX_RETRY_S = 600
CANCELLED_TEXT = "cancelled"
# A run that returned (or raised past its own handler) without setting a result or an error.
ENDED_WITHOUT_RESULT = "the job ended without a result"


def _seconds_left(job: Any, now: float) -> float | None:
    """A running job's time to its end at the pace it has kept so far; None before it has done anything."""
    started = job.state.started_at
    if started is None or job.done <= 0 or job.total <= job.done:
        return None
    return (now - started) / job.done * (job.total - job.done)


def _retry_seconds(left: float | None) -> int:
    return DEFAULT_RETRY_S if left is None else int(min(MAX_RETRY_S, max(1, math.ceil(left))))


def job_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class JobState:
    """What the board keeps of every job beside the job's own fields (JobRecord's `state`)."""

    cancel: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    future: Future | None = None
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    waiters: int = 0  # requests awaiting the job's end (the synchronous API): it is theirs while any waits
    polled_at: float = 0.0  # when a page last asked for its progress
    bytes: int = 0  # what its result holds once finished (cache.deep_size)

    @property
    def cancelled(self) -> bool:
        return bool(self.cancel[0])


@dataclass(kw_only=True)
class JobRecord:
    """What a board reads of every job (SweepJob, PlanJob and FrontierJob add their own fields before these: the
    base's fields are keyword-only, so a subclass's positional ones come first): its progress (`done` of
    `total`), its outcome (`result`, or `error`) and the board's own `state`."""

    total: int = 1
    done: int = 0
    result: Any = None
    error: str | None = None
    state: JobState = field(default_factory=JobState)

    @property
    def running(self) -> bool:
        return self.result is None and self.error is None

    @property
    def cancelled(self) -> bool:
        return self.state.cancelled

    @property
    def future(self) -> Future | None:
        return self.state.future


# Every board of the process, so that a stopping server stops their jobs (cancel_all, from its lifespan's end).
_BOARDS: weakref.WeakSet[JobBoard] = weakref.WeakSet()


def cancel_all() -> int:
    """Stop every running or queued job of every board (the server is stopping: without this, its job threads
    would keep the process alive until their sweeps and plans ended). How many were stopped."""
    return sum(board.cancel_running() for board in list(_BOARDS))


def running_jobs() -> int:
    """Jobs running or queued on every board (a cancelled one counts until its thread has ended it)."""
    return sum(board.running_jobs() for board in list(_BOARDS))


class JobBoard:
    def __init__(self, name: str, max_queued: int, keep: int, busy: Callable[[int], Exception],
                 keep_bytes: int = JOB_RESULTS_BYTES):
        """`busy(retry_after_s)`: the error raised when `max_queued` jobs are already running or queued."""
        self.name, self.max_queued, self.keep, self._busy = name, max_queued, keep, busy
        self.keep_bytes = keep_bytes
        _BOARDS.add(self)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._jobs: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def get(self, key: str) -> Any | None:
        with self._lock:
            return self._jobs.get(key)

    def find(self, key: str) -> Any | None:
        """The job with this id, running or done, unless it failed or was cancelled."""
        with self._lock:
            return self._live(key)

    def start(self, job: Any, run: Callable[[Any], Any]) -> tuple[Any, Future | None]:
        """Queue `job` (a JobRecord with an `id`) to run as `run(job)`; or, when another
        request started the same one meanwhile, that one instead (and no future)."""
        with self._lock:
            found = self._live(job.id)
            if found is not None:
                return found, None
            if sum(j.running for j in self._jobs.values()) >= self.max_queued:
                raise self._busy(self._retry_after())
            self._jobs[job.id] = job
            self._jobs.move_to_end(job.id)
            self._forget_old()
            job.state.future = self._pool.submit(self._run, job, run)
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="job-reaper", daemon=True)
                self._reaper.start()
            return job, job.state.future

    def cancel(self, key: str) -> Any | None:
        """Stop the job (running: within milliseconds; queued: it never starts). The job, or None if unknown."""
        with self._lock:
            job = self._jobs.get(key)
        if job is not None and job.running:
            job.state.cancel[0] = 1
        return job

    def cancel_running(self) -> int:
        """Stop every running or queued job (a server going away, or a test module done with its server); how
        many."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.running]
        for job in running:
            job.state.cancel[0] = 1
        return len(running)

    def polled(self, job: Any) -> None:
        job.state.polled_at = time.monotonic()

    def watch(self, job: Any) -> None:
        with self._lock:
            job.state.waiters += 1

    def unwatch(self, job: Any, gone: bool) -> None:
        """A waiting request is done with the job; `gone`: its client left before the end. The job is cancelled
        when that client was the last one waiting and no page is showing it."""
        with self._lock:
            job.state.waiters -= 1
            orphaned = gone and job.state.waiters == 0 and time.monotonic() - job.state.polled_at > POLL_GRACE_S
        if orphaned and job.running:
            job.state.cancel[0] = 1

    def running_jobs(self) -> int:
        with self._lock:
            return sum(j.running for j in self._jobs.values())

    def _reap(self) -> None:
        """While any job runs: cancel those whose pages have all gone (ABANDONED_S without a poll, nobody
        waiting). Ends when none runs; start() begins another."""
        while True:
            time.sleep(REAP_EVERY_S)
            with self._lock:
                running = [j for j in self._jobs.values() if j.running]
                if not running:
                    self._reaper = None
                    return
                now = time.monotonic()
                for j in running:
                    st = j.state
                    if st.polled_at and not st.waiters and now - st.polled_at > ABANDONED_S:
                        st.cancel[0] = 1

    def _run(self, job: Any, run: Callable[[Any], Any]) -> Any:
        state = job.state
        state.started_at = time.monotonic()
        if state.cancelled:  # cancelled while queued
            job.error = CANCELLED_TEXT
            return None
        try:
            with cancel_scope(state.cancel):
                return run(job)
        finally:
            if state.cancelled and job.result is None:
                job.error = CANCELLED_TEXT  # whatever the run made of its Cancelled, it was cancelled
            elif job.result is None and job.error is None:  # never left running once its thread is done
                job.error = ENDED_WITHOUT_RESULT
            state.bytes = deep_size(job.result)
            with self._lock:
                self._forget_old(job)

    def _forget_old(self, spare: Any = None) -> None:
        """Forget the oldest finished jobs past `keep` of them or `keep_bytes` of results (never `spare`, the one
        just finished: its page is about to show it); called locked."""
        while len(self._jobs) > self.keep or sum(j.state.bytes for j in self._jobs.values()) > self.keep_bytes:
            oldest = next((k for k, j in self._jobs.items() if not j.running and j is not spare), None)
            if oldest is None:
                return
            del self._jobs[oldest]

    def _retry_after(self) -> int:
        """Seconds until a place frees (the running job's end, at the pace it has kept so far), called locked."""
        now = time.monotonic()
        lefts = [left for j in self._jobs.values() if j.running and (left := _seconds_left(j, now)) is not None]
        return _retry_seconds(min(lefts) if lefts else None)

    def eta(self, job: Any) -> int:
        """Seconds until `job` ends, at the pace it has kept so far (a Retry-After: DEFAULT_RETRY_S while nothing
        of it is done yet, and never more than MAX_RETRY_S)."""
        return _retry_seconds(_seconds_left(job, time.monotonic()))

    def _live(self, key: str) -> Any | None:
        job = self._jobs.get(key)
        if job is None or job.error is not None or job.state.cancelled:
            return None
        self._jobs.move_to_end(key)
        return job
