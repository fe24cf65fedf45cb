"""Response headers every page gets, HEAD on every GET route (FastAPI routes declared with GET answer HEAD with 405
otherwise; monitors and link checkers send HEAD), and gzip off the event loop.

Compression: a page with its figure data is a few hundred KB and takes ~5 ms to gzip, which on the event loop
(as Starlette's GZipMiddleware does it) holds up every other answer, health checks included. GzipOffLoop gathers
a body and compresses it on a worker thread (bodies are whole answers here; nothing is streamed to clients)."""

from __future__ import annotations

import gzip

import anyio
import anyio.to_thread

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
                names = {k.lower() for k, _ in message.get("headers", [])}
                headers = list(message.get("headers", [])) + [(k, v) for k, v in extra if k not in names]
                message = dict(message, headers=headers)
            elif head and message["type"] == "http.response.body":
                if message.get("more_body"):
                    return  # HEAD: the headers (Content-Length included) as for GET, no body
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(scope, receive, send_with_headers)


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
