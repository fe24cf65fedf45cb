"""How `sched-sim serve` runs the application under uvicorn, with the connection limits uvicorn lacks.

uvicorn accepts every connection and waits for its request headers for as long as the client likes, so clients
that connect and never finish their headers (a slowloris flood, or just many idle sockets) hold one file
descriptor each until the process has none left, and from then on nobody gets in. Here every connection must
finish its request headers within HEADER_TIMEOUT_S of connecting (or of its previous answer, on a kept-alive
connection), and past `max_connections` open connections the oldest one still sending its headers is dropped to
make room: a client whose headers arrive at once (any real one) is always served. A request's body (an upload)
must arrive within BODY_TIMEOUT_S of its headers, and until it has, its connection is one the limit may drop, so
connections that trickle a body cannot hold the server either. bench/bench_connections.py measures it with 20,000
half-open connections.

Behind a reverse proxy (docs/USAGE.md, "Public deployment") the proxy enforces the same limits per client.
"""

from __future__ import annotations

import logging
import resource
from collections import OrderedDict

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from .settings import Settings

log = logging.getLogger("sched_sim.web")

# Seconds a client has to send its request headers; nginx's client_header_timeout is 60 s by default, but headers
# are a few hundred bytes: any client that is not stalling sends them in one round trip.
HEADER_TIMEOUT_S = 10.0
# Seconds a request's body may take after its headers: uploads are at most 5 MiB (inputs.MAX_UPLOAD_BYTES), which a
# 1 Mbit/s uplink sends in about 45 s.
BODY_TIMEOUT_S = 60.0
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this (uvicorn's default, said out loud)
# Descriptors left for everything but client connections: the listening socket, numba's cache files, uploads being
# stored, the threads' pipes.
FD_RESERVE = 128
MAX_HEADER_BYTES = 16 * 1024  # h11's buffer for an unfinished request head (its default, said out loud)
BACKLOG = 2048  # connections the kernel queues before we accept them (uvicorn's default)


class _HeaderDeadline:
    """Mixed into uvicorn's HTTP protocol: a connection is "pending" from when it opens (or its last answer is
    sent) until its next request's headers are complete, and then while that request's body is still arriving; a
    pending connection is dropped at its deadline, or when the server is at `max_connections` and it is the oldest
    pending one."""

    max_connections = 1000
    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._deadline = None
        self._in_body = False  # pending for its body, not its headers
        inner = self.app

        async def app(scope, receive, send):  # uvicorn calls its app once a request's headers are complete
            self._disarm()
            if self._body_pending():
                self._arm(self.body_timeout_s, in_body=True)
            await inner(scope, receive, send)

        self.app = app

    @property
    def _pending(self) -> OrderedDict:
        """This server's pending connections, oldest first (kept on uvicorn's state shared by its connections)."""
        state = self.server_state
        if not hasattr(state, "header_pending"):
            state.header_pending = OrderedDict()
        return state.header_pending

    def _body_pending(self) -> bool:
        """Whether the current request's body is still arriving (uvicorn's h11 and httptools cycles both say so)."""
        cycle = getattr(self, "cycle", None)
        return cycle is not None and bool(getattr(cycle, "more_body", False))

    def _still_pending(self) -> bool:
        return not self._in_body or self._body_pending()

    def connection_made(self, transport):
        super().connection_made(transport)
        self._arm(self.header_timeout_s)
        if len(self.connections) > self.max_connections:
            while self._pending:
                oldest = next(iter(self._pending))  # this one, if no older connection is still pending
                if oldest._still_pending():
                    oldest._drop()
                    break
                oldest._disarm()  # its body has arrived since: it is not pending any more

    def connection_lost(self, exc):
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self):
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm(self.header_timeout_s)  # kept alive: the next request's headers are due in their turn

    def _arm(self, timeout_s: float, in_body: bool = False) -> None:
        self._disarm()
        self._pending[self] = None
        self._in_body = in_body
        self._deadline = self.loop.call_later(timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._pending.pop(self, None)

    def _expire(self) -> None:
        if self._still_pending():
            self._drop()
        else:
            self._disarm()

    def _drop(self) -> None:
        self._disarm()
        self.transport.abort()  # a reset frees the descriptor now, without waiting for the client's FIN


def guarded_protocol(max_connections: int, header_timeout_s: float = HEADER_TIMEOUT_S,
                     body_timeout_s: float = BODY_TIMEOUT_S) -> type:
    """uvicorn's HTTP protocol (h11, or httptools where installed) with the limits above."""
    return type("GuardedHTTPProtocol", (_HeaderDeadline, AutoHTTPProtocol),
                {"max_connections": max_connections, "header_timeout_s": header_timeout_s,
                 "body_timeout_s": body_timeout_s})


def raise_fd_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_limit(settings: Settings, fd_limit: int) -> int:
    """The connections to allow: the configured ones, fewer if the descriptors could not hold them."""
    if fd_limit == resource.RLIM_INFINITY:
        return settings.max_connections
    return max(1, min(settings.max_connections, fd_limit - FD_RESERVE))


def serve(host: str, port: int, settings: Settings | None = None) -> None:
    """Run `app.web:app` (which reads its settings from the environment) until interrupted."""
    settings = settings or Settings.from_env()
    limit = connection_limit(settings, raise_fd_limit())
    if limit < settings.max_connections:
        log.warning("at most %d connections: the open-files limit allows no more", limit)
    config = uvicorn.Config("app.web:app", host=host, port=port, http=guarded_protocol(limit),
                            timeout_keep_alive=KEEP_ALIVE_S, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
                            backlog=BACKLOG)
    uvicorn.Server(config).run()
