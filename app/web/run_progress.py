"""What a page's runs are doing while its client waits: sim_core.progress's reports from the runs' threads, kept
by the page's query (service._simulate runs each under reported_as), answered by GET /api/progress
(progress_api.py), which the form polls while its request is out (static/js/run_progress.js). A first autoscaler
selection spent 80 s in the capacity search behind a bare "simulating…" (issue #41); now the page says which
run of at most how many."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sim_core.progress import reporting

_doing: dict[str, dict[int, str]] = {}  # a page's query -> per run thread, what it last reported
_lock = threading.Lock()


@contextmanager
def reported_as(key: str) -> Iterator[None]:
    """This thread's run reports, while the block runs, as part of the page whose query is `key`."""
    me = threading.get_ident()

    def note(text: str) -> None:
        with _lock:
            runs = _doing.setdefault(key, {})
            runs.pop(me, None)  # re-inserted last, so that doing() reads the page's latest report
            runs[me] = text

    try:
        with reporting(note):
            yield
    finally:
        with _lock:
            runs = _doing.get(key, {})
            runs.pop(me, None)
            if not runs:
                _doing.pop(key, None)


def doing(key: str) -> str | None:
    """What the page's runs said last (the latest of its runs' reports), or None: nothing long under way."""
    with _lock:
        said = list(_doing.get(key, {}).values())
    return said[-1] if said else None
