"""What a long part of a run is doing, for whoever waits on it. The run's own thread reports through the callback
its caller set (`reporting`): the dashboard shows "Finding what 1 replica serves within the SLO for the
autoscaler: run 3 of at most 7" while a page waits on an autoscaler's capacity search (80 s behind a bare
"simulating…" on a first selection, issue #41). Where no callback is set (the CLI, tests, studies) a report is
dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_here = threading.local()


@contextmanager
def reporting(to: Callable[[str], None]) -> Iterator[None]:
    """Within the block, this thread's reports go to `to` (the callback set before, if any, afterwards)."""
    before = getattr(_here, "to", None)
    _here.to = to
    try:
        yield
    finally:
        _here.to = before


def report(text: str) -> None:
    """Say what this thread's run is doing now, to the callback its caller set (nothing if none)."""
    to = getattr(_here, "to", None)
    if to is not None:
        to(text)
