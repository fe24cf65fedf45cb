"""Small HTTP helpers shared by the pages and the API: htmx request detection, multipart trace uploads, and
turning input problems into FastAPI-style 422 details."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import anyio
import anyio.to_thread
import numpy as np
from markupsafe import escape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from sim_core import Scenario
from sim_core.policies import SCHEDULERS

from .inputs import MAX_UPLOAD_BYTES, REQUEST_TIME_LIMIT_S
from .lane import FairLine, Turn
from .lanes import MAX_IN_FLIGHT, MAX_SIMULATIONS
from .service import LINE_HOLD_S

DISCONNECT_POLL_S = 0.25
CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never seen by anyone
# Why a run's cancel flag was set (the engine stops on any non-zero value).
CANCEL_GONE, CANCEL_TOO_LONG = 1, 2
# Threads for requests that may simulate: a lane of their own, so that pages answered from the cache, static
# files and health checks (anyio's default limiter, server.REQUEST_THREADS) never queue behind simulations. The
# line (lane.FairLine) admits at most MAX_SIMULATIONS requests at once; waiting in it holds no thread.
WORK_THREADS = MAX_SIMULATIONS
_WORK_LANE = anyio.CapacityLimiter(WORK_THREADS)
LINE = FairLine(MAX_SIMULATIONS, MAX_IN_FLIGHT, LINE_HOLD_S)
# The header a client told to come back (503) sends again to resume its place in the line; the 503 carries it too.
TICKET_HEADER = "Queue-Ticket"


def too_long_text() -> str:
    return (f"stopped after the server's time limit of {REQUEST_TIME_LIMIT_S:g} s; ask for less work (fewer "
            "schedulers or seeds, a shorter duration), or run it with the CLI, which has no limit")


def _too_long_json(message: str) -> Response:
    return JSONResponse({"detail": message}, status_code=503)


def busy_html(message: str, retry_after: int, queue: dict | None = None) -> Response:
    """The busy answer of a page or fragment that says no more (an embed, a download's page)."""
    return HTMLResponse(f"<p class=\"field-error\">{escape(message)}</p>", 503,
                        headers={"Retry-After": str(retry_after)})


def line_message(turn: Turn) -> str:
    """Why a request is not run now, and when to come back (its place, or the line being full)."""
    if turn.place is None:
        return (f"the server is busy: {LINE.running} requests are simulating and {LINE.waiting} are in line, its "
                f"limit (max_in_flight_requests, {MAX_IN_FLIGHT}); retry in about {turn.retry_after} s")
    return (f"the server is busy: this request is number {turn.position} in line, its turn in about "
            f"{turn.retry_after} s; retry then with header {TICKET_HEADER}: {turn.place.id} to keep its place")


def queue_doc(turn: Turn) -> dict:
    return {"position": turn.position, "retry_after_s": turn.retry_after,
            "ticket": turn.place.id if turn.place is not None else None, "ticket_header": TICKET_HEADER}


async def run_until_disconnect(request: Request, fn, *args, busy: Callable[..., Response] | None = None,
                               quick: bool = False, too_long: Callable[[str], Response] = _too_long_json,
                               work: float = 1.0):
    """`fn(*args, cancel)` in a thread. If the client goes away first, `cancel[0]` is set, which stops the
    simulation within milliseconds (the engine checks it), and the answer is a 499 nobody reads; past
    REQUEST_TIME_LIMIT_S it is stopped too and `too_long(message)` answers. `quick`: the answer needs no
    simulation (every run is cached, or the input is invalid), so it takes a request thread at once instead of a
    place in the line. Otherwise it waits its turn in LINE (first come, first served; `work`: the runs it may
    simulate, for the line's estimates), or, when its turn is further away than the line holds a connection for
    or the line is full, `busy(message, retry_after, queue=...)` answers at once (default: busy_html) with the
    ticket that keeps its place; a request held in line longer than that (its turn slipped, or the line had no
    pace to announce one yet) is answered so then."""
    if quick:
        return await _run_watching(request, fn, *args, too_long=too_long)
    admitted = asyncio.Event()
    turn = LINE.join(work, request.headers.get(TICKET_HEADER), on_admit=admitted.set)
    if turn.place is None or not turn.place.present:
        return _come_back(turn, busy)
    asked, kept = time.monotonic(), True
    try:
        while not admitted.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(admitted.wait(), DISCONNECT_POLL_S)
            LINE.poll()  # a slot held for an absent client past its grace comes to the next in line
            if admitted.is_set():
                break
            if await request.is_disconnected():
                return Response(status_code=CLIENT_CLOSED)
            if LINE.clock() >= turn.place.hold_until:  # held as long as a connection is: told its turn instead
                later = LINE.send_away(turn.place)
                if not later.place.present:
                    kept = False
                    return _come_back(later, busy)
        waited_ms = (time.monotonic() - asked) * 1e3
        response = await _run_watching(request, fn, *args, limiter=_WORK_LANE, too_long=too_long)
        # How long this request waited for its place (the Server-Timing header: a client, or bench/load.py, can
        # tell it from the run's own time and check it against the turn it was announced).
        if isinstance(response, Response):
            response.headers["Server-Timing"] = f'line;dur={waited_ms:.0f};desc="waited in line"'
        return response
    finally:
        if kept:
            LINE.leave(turn.place)


def _come_back(turn: Turn, busy: Callable[..., Response] | None) -> Response:
    """The busy answer of a request told to come back (its ticket keeps its place), or of a full line."""
    response = (busy or busy_html)(line_message(turn), turn.retry_after, queue=queue_doc(turn))
    if turn.place is not None:
        response.headers[TICKET_HEADER] = turn.place.id
    return response


async def _run_watching(request: Request, fn, *args, limiter=None, too_long=_too_long_json):
    cancel = np.zeros(1, np.int64)
    task = asyncio.ensure_future(anyio.to_thread.run_sync(fn, *args, cancel, limiter=limiter))
    start = time.monotonic()
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
        if done:
            return task.result()
        gone = await request.is_disconnected()
        if gone or time.monotonic() - start > REQUEST_TIME_LIMIT_S:
            cancel[0] = CANCEL_GONE if gone else CANCEL_TOO_LONG
            try:
                await task
            except Exception:  # noqa: BLE001 - the run's end is of no interest to anyone now
                pass
            return Response(status_code=CLIENT_CLOSED) if gone else too_long(too_long_text())


def is_fragment(request: Request) -> bool:
    """An htmx request wants a fragment; a history restore (or any plain request) wants the whole page."""
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


class UploadProblem(ValueError):
    """A multipart upload that cannot be read (too large, malformed); the message says why."""


class BodyTooLarge(ValueError):
    """A request body past its limit: the client either declared it or kept sending."""


def _declared_length(request: Request) -> int:
    try:
        return int(request.headers.get("content-length", "0"))
    except ValueError:
        return 0


def _limited(request: Request, limit: int) -> Request:
    """The same request, whose body stream raises BodyTooLarge as soon as more than `limit` bytes have arrived:
    a chunked body declares no length, so only counting while it streams stops it from being read in full."""
    received = 0

    async def receive():
        nonlocal received
        message = await request.receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise BodyTooLarge(f"the request body is larger than {limit:,} bytes")
        return message

    return Request(request.scope, receive)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or BodyTooLarge once it passes `limit` bytes (refused unread if its declared length does)."""
    if _declared_length(request) > limit:
        raise BodyTooLarge(f"the request body is larger than {limit:,} bytes")
    return await _limited(request, limit).body()


# The most form fields a multipart body may carry: the dashboard's form posts every scenario field with an upload
# (each scheduler a field of its own) plus a few of the page's own; a bound on the parser's work, not on the scenario.
MAX_FORM_FIELDS = len(Scenario.model_fields) + len(SCHEDULERS) + 16


async def read_multipart(request: Request, file_field: str = "trace") -> tuple[bytes | None, str, dict]:
    """(file bytes or None, file name, other fields) of a multipart form with at most one file. Refuses a body
    larger than the upload limit before reading it when the client says its size."""
    limit = MAX_UPLOAD_BYTES + 64 * 1024  # the file plus the multipart framing and a few fields
    too_large = f"the upload is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB (the web's limit)"
    if _declared_length(request) > limit:
        raise UploadProblem(too_large)
    try:
        form = await _limited(request, limit).form(max_files=1, max_fields=MAX_FORM_FIELDS)
    except BodyTooLarge:  # the parser closes (and so deletes) the part of the file it had spooled
        raise UploadProblem(too_large) from None
    except HTTPException as e:  # starlette reports a malformed multipart body this way
        raise UploadProblem(f"the upload could not be read as multipart/form-data: {e.detail}") from None
    data, filename, fields = None, "", {}
    try:
        for key, value in form.multi_items():
            if hasattr(value, "read"):
                if key != file_field:
                    continue
                data = await value.read(MAX_UPLOAD_BYTES + 1)
                filename = value.filename or ""
            elif key == "schedulers":
                fields.setdefault(key, []).append(value)
            else:
                fields[key] = value
    finally:
        await form.close()
    if data is not None and len(data) > MAX_UPLOAD_BYTES:
        raise UploadProblem(f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB (the web's limit)")
    return data, filename, fields


def problem_detail(problems: list[tuple[str, str]], where: str) -> list[dict]:
    """FastAPI's 422 shape: [{"loc": [where, field], "msg": ..., "type": ...}]."""
    return [{"loc": [where, field], "msg": msg, "type": "value_error"} for field, msg in problems]


def errors_by_field(problems: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for field, msg in problems:
        out[field] = f"{out[field]}; {msg}" if field in out else msg
    return out
