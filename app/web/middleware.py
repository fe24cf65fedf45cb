"""Which requests are served at all (Host and Origin checks), response headers every page gets, HEAD on every GET route (FastAPI routes declared with GET answer HEAD with 405
otherwise; monitors and link checkers send HEAD), and gzip off the event loop.

Compression: a page with its figure data is a few hundred KB and takes ~5 ms to gzip, which on the event loop
(as Starlette's GZipMiddleware does it) holds up every other answer, health checks included. GzipOffLoop gathers
a body and compresses it on a worker thread (bodies are whole answers here; nothing is streamed to clients)."""

from __future__ import annotations

import gzip
import ipaddress
import json
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from starlette.requests import ClientDisconnect
from starlette.routing import Match, Mount

from . import cross_site

# Embeds are meant to be framed by other sites (slides, docs); nothing else is.
EMBED_PREFIX = "/embed/"
COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
# Scripts only from our own origin: no inline script, no eval (htmx's hx-on and trigger filters are not used).
# Styles may be inline: Plotly and htmx set style attributes. JSON figures ride in <script type=application/json>,
# which is data, not script.
_CSP = (b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        b"object-src 'none'; base-uri 'self'; form-action 'self'")
# No frame-ancestors at all for embeds: `*` matches only network schemes, so slides opened from a file (file://)
# or written into a blank page could not frame them.
FRAMEABLE = ((b"content-security-policy", _CSP),)
NOT_FRAMEABLE = ((b"content-security-policy", _CSP + b"; frame-ancestors 'none'"), (b"x-frame-options", b"DENY"))


# Names that always mean this machine (RFC 6761: *.localhost never leaves it), whatever --allowed-hosts says.
LOCAL_NAMES = ("localhost", "*.localhost")
# Methods a browser may send cross-site in a plain form or fetch; every one of them may start work here.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
ROUTE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")  # what a 405's Allow may name (HEAD: wherever GET)
# Paths that start no work, which any page may load as a resource: the static files (an embed framed in a sandboxed
# iframe has an opaque origin, so its own scripts and styles come "cross-site") and the health check.
NO_WORK_PREFIX, NO_WORK_PATHS = "/static/", ("/healthz",)


def host_name(host: str) -> str:
    """The name in a Host header: without its port and IPv6 brackets, lower case, without a trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name, sep, port = host.rpartition(":")
    return (name if sep and port.isdigit() else host).rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether the server answers to Host `name`: localhost names, IP addresses (DNS rebinding needs a name the
    attacker's DNS resolves, so an address in Host cannot be one) and the configured names."""
    if _is_ip(name):
        return True
    for pattern in LOCAL_NAMES + allowed:
        if pattern == "*" or pattern == name or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def _json(status: int, detail: str):
    body = json.dumps({"detail": detail}).encode()
    start = {"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    return start, {"type": "http.response.body", "body": body, "more_body": False}


def _foreign_origin(headers: dict[bytes, bytes]) -> str | None:
    """The Origin header if it names another server than Host (or is "null"), else None."""
    origin = headers.get(b"origin")
    if origin is None:
        return None
    netloc = urlsplit(origin.decode("latin-1")).netloc.lower()
    if netloc and netloc == headers.get(b"host", b"").decode("latin-1").lower():
        return None
    return origin.decode("latin-1")


def cross_site_problem(method: str, headers: dict[bytes, bytes], path: str = "/") -> str | None:
    """Why a request is refused as cross-site, or None. Browsers send Origin with every POST and with a script's
    cross-origin GET, and the Fetch Metadata headers with every request: a form or script on another site posting
    here (which would start a simulation) is refused, and so is a page elsewhere fetching our URLs or loading them
    as images or scripts. Navigations are not (shared links and framed embeds come from other sites: they pass to
    cross_site.py, which answers them without starting work), nor are clients that send neither header (curl,
    scripts), nor resources that start no work (NO_WORK_PATHS)."""
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1")
    if method not in SAFE_METHODS:
        origin = _foreign_origin(headers)
        if origin is not None:
            return f"cross-site request refused: Origin {origin!r} is not this server"
        if site in ("cross-site", "same-site"):
            return "cross-site request refused: only this server's own pages may send it"
        return None
    if path.startswith(NO_WORK_PREFIX) or path in NO_WORK_PATHS:
        return None
    if site == "cross-site" and headers.get(b"sec-fetch-mode") != b"navigate":
        return "cross-site request refused: another site's page may link here, not load this as a resource"
    origin = _foreign_origin(headers)  # a browser without Fetch Metadata (Safari before 16.4) still sends Origin
    if origin is not None and headers.get(b"sec-fetch-mode") != b"navigate":
        return f"cross-site request refused: Origin {origin!r} is not this server"
    return None


class AllowedHostsAndOrigin:
    """400 for a Host the server does not answer to (a DNS-rebinding page could otherwise read the API from a
    browser on this machine), 403 for a cross-site request that would start work (cross_site_problem), and for
    another site's navigation to work, an answer that starts none (cross_site.needs_click)."""

    def __init__(self, app, allowed_hosts: tuple[str, ...] = ()):
        self.app = app
        self.allowed_hosts = tuple(allowed_hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        host = headers.get(b"host")  # absent only from non-browser HTTP/1.0 clients, which DNS rebinding is not
        problem = None
        if host is not None and not host_allowed(host_name(host.decode("latin-1")), self.allowed_hosts):
            status, problem = 400, (f"this server does not answer to Host {host.decode('latin-1')!r}; start it with "
                                    "--allowed-hosts (or SCHED_SIM_ALLOWED_HOSTS) naming it")
        elif scope["type"] == "http":
            status, problem = 403, cross_site_problem(scope["method"], headers, scope["path"])
            if problem is None and cross_site.needs_click(scope["method"], scope["path"], headers):
                await _send_without_work(scope, send, headers)
                return
        if problem is None:
            try:
                await self.app(scope, receive, send)
            except ClientDisconnect:  # gone mid-body (an upload it gave up, or one the server dropped as stalled):
                pass                  # nobody to answer, and no traceback per connection in the log
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        for message in _json(status, problem):
            await send(message)


async def _send_without_work(scope, send, headers: dict[bytes, bytes]) -> None:
    """Another site's navigation to work (cross_site.needs_click): its answer, which starts none, with the headers
    every page gets."""
    status, out, body = cross_site.answer(scope, headers)
    frame = FRAMEABLE if scope["path"].startswith(EMBED_PREFIX) else NOT_FRAMEABLE
    names = {k.lower() for k, _ in out}
    out = [(k, v) for k, v in out if k.lower() != b"content-length"] + [
        (k, v) for k, v in COMMON_HEADERS + frame if k not in names] + [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body, "more_body": False})


class SecurityHeadersAndHead:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        if head:
            scope = dict(scope, method="GET")
        extra = COMMON_HEADERS + (FRAMEABLE if scope["path"].startswith(EMBED_PREFIX) else NOT_FRAMEABLE)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if message["status"] == 405:
                    headers = _allow_every_method(scope, headers)
                names = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in extra if k not in names]
                message = dict(message, headers=headers)
            elif head and message["type"] == "http.response.body":
                if message.get("more_body"):
                    return  # HEAD: the headers (Content-Length included) as for GET, no body
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _allow_every_method(scope, headers: list) -> list:
    """A 405's Allow header naming every method the path answers: Starlette names only those of the first route
    that matched the path (GET /api/run's, not POST's)."""
    routes = [r for r in getattr(getattr(scope.get("app"), "router", None), "routes", ())
              if not isinstance(r, Mount)]  # a mount (the static files) matches every method
    methods = {m for m in ROUTE_METHODS
               if any(r.matches({**scope, "method": m})[0] == Match.FULL for r in routes)}
    if not methods:
        return headers
    if "GET" in methods:
        methods.add("HEAD")  # answered on every GET route (above)
    return [(k, v) for k, v in headers if k.lower() != b"allow"] + [(b"allow", ", ".join(sorted(methods)).encode())]


GZIP_MIN_BYTES = 2048
GZIP_LEVEL = 5  # JSON and HTML with figure data compress ~8x; plotly.js ~3x (once per browser: it is cached)
_GZIP_THREADS = anyio.CapacityLimiter(4)  # its own threads: compression never waits behind a simulation


class GzipOffLoop:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or b"gzip" not in dict(scope.get("headers", [])).get(b"accept-encoding", b""):
            await self.app(scope, receive, send)
            return
        start = None
        chunks: list[bytes] = []

        async def buffered(message):
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body":  # e.g. the test client's template debug message
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            await _send_compressed(send, start, b"".join(chunks))

        await self.app(scope, receive, buffered)


async def _send_compressed(send, start, body: bytes) -> None:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length",)]
    encoded = {k.lower() for k, _ in headers}
    if len(body) >= GZIP_MIN_BYTES and b"content-encoding" not in encoded:
        body = await anyio.to_thread.run_sync(gzip.compress, body, GZIP_LEVEL, limiter=_GZIP_THREADS)
        headers.append((b"content-encoding", b"gzip"))
        headers.append((b"vary", b"Accept-Encoding"))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
