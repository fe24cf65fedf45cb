"""A kernel cache on a full disk: kernels compile without saving (the CLI and the server work, slower to start),
and a server whose kernels cannot be compiled at all says why (/healthz, the API's 503s, the page) instead of
"still compiling" forever. The real full tmpfs is bench/bench_full_cache.sh (it needs root to mount one)."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from numba.core import caching

from app.web import app, server
from sim_core.kernel import jit

pytestmark = pytest.mark.skipif(jit.CACHE_DIR is None, reason="kernels are not cached in this process")


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """Every write numba makes into the cache fails as on a full filesystem, in CACHE_DIR and in FALLBACK_DIR;
    creating (empty) files works, as it does on a full tmpfs that still has inodes. Restores this process's
    cache directories and 'writes work' state afterwards."""
    writes = []

    def no_space(self, filepath):
        writes.append(filepath)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(caching.IndexDataCacheFile, "_open_for_write", no_space)
    monkeypatch.setattr(jit, "CACHE_WRITE_ERROR", None)
    monkeypatch.setattr(jit, "FALLBACK_DIR", str(tmp_path / "also-full"))
    monkeypatch.setattr(jit, "CACHE_DIR", jit.CACHE_DIR)
    monkeypatch.setattr(jit.config, "CACHE_DIR", jit.CACHE_DIR)
    return writes


def _new_kernel():
    """A kernel of its own (a fresh function each call, so never in the cache), decorated like the engine's."""
    def doubled_sum(values):
        total = 0.0
        for v in values:
            total += 2.0 * v
        return total

    return jit.entry(doubled_sum)


def test_full_cache_disks_compile_without_saving_and_say_so_once(full_disk, capsys):
    first, second = _new_kernel(), _new_kernel()
    assert first(np.arange(4.0)) == 12.0  # numba alone raised OSError [Errno 28] out of this call
    assert len(full_disk) == 2 and jit.CACHE_WRITE_ERROR == "No space left on device"  # CACHE_DIR, FALLBACK_DIR
    assert second(np.arange(3.0)) == 6.0
    assert len(full_disk) == 2  # after both failed no more writes are tried
    err = capsys.readouterr().err
    assert err.count("cannot save compiled kernels") == 2 and err.count("No space left on device") == 2
    assert err.count("compiling without the cache") == 1


def test_a_cache_dir_numba_cannot_use_at_all_means_no_caching_not_a_crash(full_disk, monkeypatch, capsys):
    """numba checks a cache directory by creating a file in it; when that fails it would look for another place
    (the source tree's __pycache__, keyed on one file only): here the kernel compiles uncached instead."""

    def no_inodes(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(caching._CacheLocator, "ensure_cache_path", no_inodes)
    kernel = _new_kernel()
    assert kernel(np.ones(5)) == 10.0
    assert isinstance(kernel._cache, caching.NullCache)
    assert "No space left on device" in capsys.readouterr().err


def test_the_warm_up_helper_stops_at_the_first_failed_write(full_disk, monkeypatch):
    exits = []
    monkeypatch.setattr(jit, "EXIT_ON_CACHE_WRITE_FAILURE", True)
    monkeypatch.setattr(jit.os, "_exit", exits.append)
    _new_kernel()(np.ones(2))
    assert exits == [3]


def test_kernels_that_cannot_compile_are_reported_not_polled_forever(monkeypatch):
    def broken(progress=None):
        raise MemoryError("LLVM ran out of memory")

    monkeypatch.setattr(server.sim_core, "warm_up", broken)
    with TestClient(app) as client:
        deadline_polls = 200
        while client.app.state.kernels_error is None and deadline_polls:
            deadline_polls -= 1
            client.app.state.kernels_ready.wait(0.05)
        health = client.get("/healthz")
        assert health.status_code == 503
        doc = health.json()
        assert doc["status"] == "error" and doc["kernels_ready"] is False
        assert doc["kernels_error"] == "MemoryError: LLVM ran out of memory"
        api = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=5")
        assert api.status_code == 503 and "retry-after" not in api.headers
        assert "LLVM ran out of memory" in api.json()["detail"] and "retry shortly" not in api.json()["detail"]
        page = client.get("/?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&num_requests=5")
        assert "LLVM ran out of memory" in page.text and 'id="kernels-error"' in page.text
        assert "Compiling the simulator" not in page.text and 'hx-trigger="every 2s"' not in page.text


def test_a_cache_dir_that_fills_up_moves_to_the_temporary_one(monkeypatch, tmp_path, capsys):
    """Writes fail in CACHE_DIR only: the kernel is saved in FALLBACK_DIR, and so are kernels opened later."""
    full = jit.CACHE_DIR
    real_open = caching.IndexDataCacheFile._open_for_write

    def full_here(self, filepath):
        if filepath.startswith(full):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(self, filepath)

    monkeypatch.setattr(caching.IndexDataCacheFile, "_open_for_write", full_here)
    monkeypatch.setattr(jit, "CACHE_WRITE_ERROR", None)
    monkeypatch.setattr(jit, "FALLBACK_DIR", str(tmp_path / "fallback"))
    monkeypatch.setattr(jit, "CACHE_DIR", full)
    monkeypatch.setattr(jit.config, "CACHE_DIR", full)
    first = _new_kernel()
    assert first(np.arange(4.0)) == 12.0
    assert jit.CACHE_DIR == jit.config.CACHE_DIR == str(tmp_path / "fallback") and jit.CACHE_WRITE_ERROR is None
    assert f"cannot save compiled kernels in {full} (No space left on device); caching them in" in \
        capsys.readouterr().err
    saved = sorted(f.suffix for f in (tmp_path / "fallback").rglob("*doubled_sum*"))
    assert saved == [".nbc", ".nbi"]
    second = _new_kernel()  # opened after the move: loads from, and would save to, the fallback
    assert second(np.arange(3.0)) == 6.0
    assert Path(second._cache._cache_path).parent == tmp_path / "fallback"


def test_a_nearly_full_cache_disk_is_passed_over_at_start(monkeypatch, tmp_path, capsys):
    wanted, fallback = tmp_path / "full", tmp_path / "tmp"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(wanted))
    monkeypatch.setattr(jit.tempfile, "gettempdir", lambda: str(fallback))
    free = {str(wanted): 0, }

    def usage(path):
        return jit.shutil._ntuple_diskusage(1 << 40, 0, free.get(str(path), 1 << 40))

    monkeypatch.setattr(jit.shutil, "disk_usage", usage)
    chosen, spare = jit._cache_dirs()
    assert chosen == spare and fallback in Path(chosen).parents
    assert f"{wanted} has less than" in capsys.readouterr().err
    free[str(wanted)] = 1 << 40
    assert jit._cache_dirs()[0] == str(wanted)
