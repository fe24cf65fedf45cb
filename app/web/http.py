"""Small HTTP helpers shared by the pages and the API: htmx request detection, multipart trace uploads, and
turning input problems into FastAPI-style 422 details."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .inputs import MAX_UPLOAD_BYTES
from .service import MAX_IN_FLIGHT

DISCONNECT_POLL_S = 0.25
CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never seen by anyone


class _Gate:
    """How many gated requests are in the thread pool; touched only on the event loop, so it needs no lock."""

    inside = 0


async def run_until_disconnect(request: Request, fn, *args, busy: Callable[[str], Response] | None = None):
    """`fn(*args, cancel)` in the threadpool. If the client goes away first, `cancel[0]` is set, which stops the
    simulation within milliseconds (the engine checks it), and the answer is a 499 nobody reads. With `busy`,
    at most service.MAX_IN_FLIGHT such calls are in the pool at once; past that `busy(message)` answers at once,
    without taking a thread."""
    if busy is not None:
        if _Gate.inside >= MAX_IN_FLIGHT:
            return busy(f"the server is busy with {MAX_IN_FLIGHT} simulation requests; retry in a few seconds")
        _Gate.inside += 1
    try:
        return await _run_watching(request, fn, *args)
    finally:
        if busy is not None:
            _Gate.inside -= 1


async def _run_watching(request: Request, fn, *args):
    cancel = np.zeros(1, np.int64)
    task = asyncio.ensure_future(run_in_threadpool(fn, *args, cancel))
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
        if done:
            return task.result()
        if await request.is_disconnected():
            cancel[0] = 1
            try:
                await task
            except Exception:  # noqa: BLE001 - the run's end is of no interest to anyone now
                pass
            return Response(status_code=CLIENT_CLOSED)


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


async def read_multipart(request: Request, file_field: str = "trace") -> tuple[bytes | None, str, dict]:
    """(file bytes or None, file name, other fields) of a multipart form with at most one file. Refuses a body
    larger than the upload limit before reading it when the client says its size."""
    limit = MAX_UPLOAD_BYTES + 64 * 1024  # the file plus the multipart framing and a few fields
    too_large = f"the upload is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB (the web's limit)"
    if _declared_length(request) > limit:
        raise UploadProblem(too_large)
    try:
        form = await _limited(request, limit).form(max_files=1, max_fields=100)
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
