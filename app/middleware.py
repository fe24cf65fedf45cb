"""Response headers every page gets, and HEAD on every GET route (FastAPI routes declared with GET answer HEAD
with 405 otherwise; monitors and link checkers send HEAD). A plain ASGI middleware: it never buffers bodies."""

from __future__ import annotations

# Embeds are meant to be framed by other sites (slides, docs); nothing else is.
EMBED_PREFIX = "/embed/"
COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
# No script-src yet: templates/_trace_field.html still has an inline event handler.
NOT_FRAMEABLE = ((b"content-security-policy", b"frame-ancestors 'none'"), (b"x-frame-options", b"DENY"))


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
        extra = COMMON_HEADERS if scope["path"].startswith(EMBED_PREFIX) else COMMON_HEADERS + NOT_FRAMEABLE

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
