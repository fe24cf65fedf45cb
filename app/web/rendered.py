"""Pages and embeds whose runs are all cached, kept as the HTML sent (bounded by bytes, cache.PAGE_CACHE_BYTES).

A cached page used to be rendered again on every request: ~60 ms of one core in Python (each figure's text
summary, its export caption, the templates) for a 0.4 MB page, which on a machine busy with long sweeps became
most of a second. Rendering is deterministic for a query whose runs are cached (the runs are, and so is the page
around them), so the bytes are kept under the URL (and the htmx headers that pick the fragment or the whole
page) and answered on the event loop in microseconds. Only a complete answer is kept: status 200 with results, no
"busy, retrying" card, nothing stale, no sweep (its card starts or finds a background job, whose state changes);
and one is looked up only when the query's runs are all in the run cache (http.run_until_disconnect's `quick`),
so a page whose runs were evicted, or whose upload left the store, is rendered afresh.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .cache import PAGE_CACHE_BYTES, SingleFlightLRU

_pages = SingleFlightLRU(max_bytes=PAGE_CACHE_BYTES, sizeof=lambda kept: len(kept[0]) + 1024)


# The results card that polls while the kernels compile or the server is busy (templates/_workspace.html).
RESULTS_POLL_ID = "warming"


def history_header(request: Request) -> str:
    """How an answered fragment updates the browser's history: a user's change pushes a new entry (Back returns to
    the view before it); the results card's poll, which fills in the page it is on, replaces the current entry, as
    a push would add a step Back must undo and drop the entries Forward goes to."""
    return "HX-Replace-Url" if request.headers.get("HX-Trigger") == RESULTS_POLL_ID else "HX-Push-Url"


def _key(request: Request) -> str:
    return "|".join((request.url.path, request.url.query, request.headers.get("HX-Request", ""),
                     request.headers.get("HX-History-Restore-Request", ""), history_header(request)))


def get(request: Request) -> Response | None:
    """The page as last rendered for this URL and these headers, or None."""
    kept = _pages.get(_key(request))
    if kept is None:
        return None
    body, headers = kept
    response = Response(body)
    response.raw_headers = list(headers)  # the rendered page's own: content type and length, Vary, its history header
    return response


def keep(request: Request, response: Response) -> None:
    """Keep a complete rendered answer (the caller has checked that it is one)."""
    if response.status_code == 200 and isinstance(getattr(response, "body", None), bytes):
        _pages.put(_key(request), (response.body, tuple(response.raw_headers)))


def clear() -> None:
    _pages.clear()


def stats() -> dict:
    return {"entries": len(_pages._items), "bytes": _pages.bytes, "max_bytes": _pages.max_bytes}
