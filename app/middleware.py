"""Response headers every page gets, and HEAD on every GET route (FastAPI routes declared with GET answer HEAD
with 405 otherwise; monitors and link checkers send HEAD). A plain ASGI middleware: it never buffers bodies."""

from __future__ import annotations

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
