"""Where compiled kernels are cached: keyed on all of sim_core's sources, and never a crash when the place asked
for is not writable (a read-only deployment)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sim_core import jit


def test_the_default_cache_is_keyed_on_every_source_file(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = Path(jit._cache_dir())
    assert first.parent == tmp_path / "sched-sim" / "numba"
    assert len(first.name) == 12


def test_an_unwritable_cache_dir_falls_back_to_a_temporary_one(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/dev/null/cache")  # under a file: cannot be created
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    chosen = Path(jit._cache_dir())
    assert tmp_path in chosen.parents and chosen.is_dir()
    assert "/dev/null/cache is not writable" in capsys.readouterr().err


def test_no_writable_place_at_all_means_no_caching_not_a_crash(monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/dev/null/cache")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: "/dev/null")
    assert jit._cache_dir() is None
    assert "kernels compile on every start" in capsys.readouterr().err
