"""Work that starts on one click from another site needs a second click here (issue #37).

A link or a frame on another site (Sec-Fetch-Site: cross-site, or same-site: a sibling subdomain may host anyone's
pages) pointing at a URL that simulates, or starts a sweep, plan or frontier, would make every visitor's browser
start that work here: a page elsewhere could keep this server busy with its visitors' clicks. Such a navigation
is answered without starting anything: a page already rendered from cached runs (rendered.py: no work at all),
else a page naming the scenario with a Run button (clicking it is a navigation from this server's own page,
Sec-Fetch-Site: same-origin, which runs); the JSON API answers 403 saying how to proceed.

Direct use stays one step: a typed URL, a bookmark or a shared link pasted into a new tab (Sec-Fetch-Site: none; a
link clicked on another site is cross-site even into a new tab), this server's own pages (same-origin), and
clients that send no Fetch Metadata (curl, scripts). Browsers without Fetch
Metadata (Safari before 16.4) cannot be told apart from those, and run: the rule degrades to the old behaviour.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl

from markupsafe import escape
from starlette.requests import Request

from . import rendered

# Sec-Fetch-Site values that mean "another site's page asked for this".
FOREIGN_SITES = (b"cross-site", b"same-site")
# GET routes that start no simulation and no job: everything else a browser may navigate to is presumed to (a new
# route is covered until it is listed here). Static files, health, documentation, the catalogue, the cost model
# alone, and the job pages' polls (a poll finds a job; it never starts one).
NO_WORK = re.compile(
    r"^/(static/.*|healthz|docs|openapi\.json|favicon\.ico|api/catalog|api/step-time|"
    r"goodput/[^/]+|plan/job/[^/]+|frontier/[^/]+|api/plan/[^/]+)$"
)
WHY = (
    "this link comes from another site ({site}), and opening it would start a simulation on this server; "
    "it starts only from this server's own pages or when opened directly"
)
HOW_API = (
    "open the URL directly (paste it into the address bar, or run it with curl or a script, which send no "
    "Sec-Fetch-Site), or click Run on the dashboard's page for it: {page}"
)


def needs_click(method: str, path: str, headers: dict[bytes, bytes]) -> bool:
    """Whether this request is another site's navigation (a link, a form, a frame) to a URL that starts work."""
    if method not in ("GET", "HEAD") or NO_WORK.match(path):
        return False
    return headers.get(b"sec-fetch-site", b"") in FOREIGN_SITES


def _api_page(path: str, query: str) -> str:
    """The dashboard page of an API URL where there is one (the API and the pages share their queries)."""
    page = {"/api/run": "/", "/api/diff": "/diff", "/api/plan": "/plan"}.get(path)
    return f"{page}?{query}" if page else f"{path}?{query}"


def api_refusal(path: str, query: str, site: str) -> tuple[int, dict]:
    return 403, {
        "detail": WHY.format(site=site) + "; " + HOW_API.format(page=_api_page(path, query)),
        "reason": "cross_site_navigation",
        "open": f"{path}?{query}" if query else path,
    }


def run_button_page(path: str, query: str, site: str) -> str:
    """A page that names what the link would run and runs it on a click (a GET form to the same URL: its
    submission comes from this origin). Self-contained: no script (the CSP allows our own only), one style sheet."""
    fields = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
        for k, v in parse_qsl(query, keep_blank_values=True)
    )
    shown = escape(f"{path}?{query}" if query else path)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>sched-sim · run this simulation?</title><link rel="stylesheet" href="/static/css/app.css">'
        '</head><body><main class="card empty" id="run-click"><h1>Run this simulation?</h1>'
        f"<p>You followed a link from another site ({escape(site)}). It starts a simulation on this server only "
        "when you ask:</p>"
        f"<p><code>{shown}</code></p>"
        f'<form method="get" action="{escape(path)}">{fields}'
        '<button type="submit" id="run-button">Run</button></form></main></body></html>'
    )


def kept_page(scope) -> tuple[int, list, bytes] | None:
    """The page as rendered before for this URL (only complete answers of cached runs are kept), or None."""
    kept = rendered.get(Request(scope))
    if kept is None:
        return None
    return kept.status_code, list(kept.raw_headers), kept.body


def answer(scope, headers: dict[bytes, bytes]) -> tuple[int, list, bytes]:
    """(status, headers, body) for another site's navigation to work: see the module's doc."""
    path, query = scope["path"], scope.get("query_string", b"").decode("latin-1")
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1")
    if path.startswith("/api/"):
        status, doc = api_refusal(path, query, site)
        body = json.dumps(doc).encode()
        return status, [(b"content-type", b"application/json")], body
    kept = kept_page(scope)
    if kept is not None:
        return kept
    body = run_button_page(path, query, site).encode()
    return 200, [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")], body
