"""Every cached numba kernel in app/ and sim_core/ goes through sim_core's compile flavours (sim_core/compiled.py,
sim_core/kernel/jit.py), whose cache save survives a full disk; and a server whose warm-up failed on a full disk
serves once there is room again, without a restart (issue #37)."""

from __future__ import annotations

import ast
import errno
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.web import server
from app.web.server import create_app

ROOT = Path(__file__).resolve().parent.parent
# numba's own decorators: with cache=True their cache save raises out of the compile when the write fails.
NUMBA_DECORATORS = {"njit", "jit", "generated_jit", "vectorize", "guvectorize", "cfunc", "stencil"}


def _called_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def bare_cached_jits(source: str, filename: str = "<source>") -> list[int]:
    """Lines where numba's own decorator is called with cache=True (njit(cache=True), numba.njit(..., cache=True),
    numba.jit(cache=True, nopython=True), ...)."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and _called_name(node) in NUMBA_DECORATORS:
            if any(
                k.arg == "cache" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                for k in node.keywords
            ):
                lines.append(node.lineno)
    return lines


def test_the_scan_finds_every_spelling_of_a_bare_cached_jit():
    source = (
        "from numba import njit\nimport numba\n"
        "@njit(cache=True, nogil=True)\ndef a(x): return x\n"
        "@numba.njit(nogil=True, cache=True)\ndef b(x): return x\n"
        "@numba.jit(cache=True)\ndef c(x): return x\n"
        "d = njit(cache=True)(lambda x: x)\n"
        "@njit(nogil=True)\ndef e(x): return x\n"  # not cached: nothing to save, nothing to fail
        "@njit(cache=False)\ndef f(x): return x\n"
    )
    assert bare_cached_jits(source) == [3, 5, 7, 9]


@pytest.mark.parametrize(
    "path",
    sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "sim_core").rglob("*.py")]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_kernel_bypasses_the_cache_save_guard(path):
    found = bare_cached_jits(path.read_text(encoding="utf-8"), str(path))
    assert not found, (
        f"{path.relative_to(ROOT)}:{found}: a bare numba decorator with cache=True; use "
        "sim_core.compiled's flavours (their cache save survives a full disk)"
    )


def test_a_warm_up_failing_on_a_full_disk_recovers_by_itself_once_there_is_room(monkeypatch):
    """The disk is full for the first two warm-ups (as numba's cache save raised before the guard); the server says
    why and that it retries, then serves simulations without a restart once the space is back."""
    real_warm_up = server.kvgrid.warm_up
    failures = [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.ENOSPC, "No space left on device"),
    ]

    seen = threading.Event()  # the disk is freed only once the test has seen the retrying state (no race on load)

    def full_then_freed():
        if failures:
            raise failures.pop(0)
        seen.wait(60)
        real_warm_up()

    monkeypatch.setattr(server.kvgrid, "warm_up", full_then_freed)
    monkeypatch.setattr(server.api, "WARM_UP_RETRY_S", 0.2)
    monkeypatch.setattr(server, "WARM_UP_WAIT_S", 0.0)
    app = create_app()
    with TestClient(app) as client:
        seen_retrying = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if app.state.kernels_retrying is not None:
                seen_retrying = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=5")
                break
            app.state.kernels_ready.wait(0.01)
        seen.set()
        assert seen_retrying is not None, "the failed warm-up was never reported"
        assert seen_retrying.status_code == 503 and "retry-after" in seen_retrying.headers
        assert "No space left on device" in seen_retrying.json()["detail"]
        assert "restarted" not in seen_retrying.json()["detail"]
        assert app.state.kernels_ready.wait(30), "the warm-up did not retry once the disk had room"
        assert not failures and app.state.kernels_error is None and app.state.kernels_retrying is None
        assert client.get("/healthz").json()["status"] == "ok"
        r = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=5&seed=4")
        assert r.status_code == 200, r.text
