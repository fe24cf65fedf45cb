"""Background jobs that pages poll (rate sweeps, capacity plans): each is found by an id derived from what it
computes, so asking again finds it; they run one at a time on the board's own thread; at most `max_queued` are
running or queued; finished ones are kept for their pages, the oldest forgotten past `keep`. A failed job is not
found again: asking again retries it."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def job_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class JobBoard:
    def __init__(self, name: str, max_queued: int, keep: int, busy: Callable[[], Exception]):
        """`busy()`: the error raised when `max_queued` jobs are already running or queued."""
        self.max_queued, self.keep, self._busy = max_queued, keep, busy
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._jobs: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self._lock:
            return self._jobs.get(key)

    def find(self, key: str) -> Any | None:
        """The job with this id, running or done, unless it failed."""
        with self._lock:
            return self._live(key)

    def start(self, job: Any, run: Callable[[Any], Any]) -> tuple[Any, Future | None]:
        """Queue `job` (its `id`, `running` and `error` are read) to run as `run(job)`; or, when another request
        started the same one meanwhile, that one instead (and no future)."""
        with self._lock:
            found = self._live(job.id)
            if found is not None:
                return found, None
            if sum(j.running for j in self._jobs.values()) >= self.max_queued:
                raise self._busy()
            self._jobs[job.id] = job
            while len(self._jobs) > self.keep:
                oldest = next((k for k, j in self._jobs.items() if not j.running), None)
                if oldest is None:
                    break
                del self._jobs[oldest]
            return job, self._pool.submit(run, job)

    def _live(self, key: str) -> Any | None:
        job = self._jobs.get(key)
        if job is None or job.error is not None:
            return None
        self._jobs.move_to_end(key)
        return job
