"""A read-only file system is called one, not "permission denied" (issue #37): in the CLI's output-file check, the
web's upload store (logged at start-up and shown on /healthz) and a failed upload write. A real read-only mount
needs root; here os.statvfs reports the read-only flag, and os.access says "no", as the kernel answers on one."""

from __future__ import annotations

import errno
import logging
import os

import pytest
from fastapi.testclient import TestClient

from app import write_problems
from app.cli.flags import UsageError
from app.cli.report import check_writable
from app.web import service
from app.web.server import create_app
from app.web.settings import Settings
from app.web.store import BlobStore


@pytest.fixture
def read_only_mount(monkeypatch, tmp_path):
    """tmp_path/ro behaves as a read-only mount: statvfs says so and access(W_OK) fails, as on a real one."""
    mount = tmp_path / "ro"
    mount.mkdir()
    real_statvfs, real_access = os.statvfs, os.access

    class Flags:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        @property
        def f_flag(self):
            return self.real.f_flag | os.ST_RDONLY

    def statvfs(path):
        real = real_statvfs(path)
        return Flags(real) if str(path).startswith(str(mount)) else real

    def access(path, mode, *a, **k):
        if str(path).startswith(str(mount)) and mode & os.W_OK:
            return False
        return real_access(path, mode, *a, **k)

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(os, "access", access)
    return mount


def test_the_cli_calls_a_read_only_file_system_one(read_only_mount):
    with pytest.raises(UsageError) as e:
        check_writable(str(read_only_mount / "trace.json"))
    assert "read-only file system" in str(e.value) and "permission denied" not in str(e.value)


def test_a_missing_permission_is_still_permission_denied(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(UsageError, match="permission denied"):
        check_writable(str(tmp_path / "trace.json"))
    assert write_problems.folder_problem(tmp_path / "store") == f"permission denied: {tmp_path / 'store'}"


@pytest.fixture
def own_store():
    """create_app sets the process's upload store: the one in force before comes back afterwards."""
    before = service._store
    yield
    service.use_store(before)


def test_the_store_on_a_read_only_file_system_says_so_at_start_up_and_on_healthz(
    read_only_mount, caplog, own_store
):
    folder = (
        read_only_mount / "store"
    )  # not there yet, as on a first start: its nearest ancestor is read-only
    assert BlobStore(folder, 1 << 20).problem() == f"read-only file system: {folder}"
    with caplog.at_level(logging.WARNING, "sched_sim.web"):
        app = create_app(
            Settings(allowed_hosts=("testserver",), store_dir=str(folder), store_max_mb=1, max_connections=10)
        )
    assert f"read-only file system: {folder}" in caplog.text and "permission denied" not in caplog.text
    with TestClient(app) as client:
        assert client.get("/healthz").json()["store_problem"] == f"read-only file system: {folder}"


def test_an_upload_whose_write_fails_on_a_read_only_disk_is_logged_as_one(tmp_path, monkeypatch, caplog):
    store = BlobStore(tmp_path / "store", 1 << 20)
    monkeypatch.setattr(service, "_store", store)

    def erofs(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(store, "put", erofs)
    with caplog.at_level(logging.WARNING, "sched_sim.web"):
        up = service.add_upload(b"arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,12,6\n", "ro.csv")
    assert up.info.rows == 2  # still served, from memory
    assert f"read-only file system: {tmp_path / 'store'}" in caplog.text


def test_every_reason_is_named_and_unknown_ones_keep_their_own_words():
    assert write_problems.describe(OSError(errno.ENOSPC, "x"), "/d") == "no space left on device: /d"
    assert write_problems.describe(OSError(errno.EIO, "Input/output error"), "/d") == "input/output error: /d"
