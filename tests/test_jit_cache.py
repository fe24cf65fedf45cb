"""Where compiled kernels are cached: keyed on all of sim_core's sources, and never a crash when the place asked
for is not writable (a read-only deployment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import sim_core
from app.web import kvgrid
from sim_core.kernel import jit


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


# A child process in which the cache directory is read-only: as root (CI) a chmod does not stop writes, so the
# child's os.access also answers "not writable" for it, which is what sim_core.kernel.jit asks.
READ_ONLY_CHILD = """
import os, sys
read_only, real_access = os.environ["READ_ONLY_DIR"], os.access
os.access = lambda p, mode, *a, **k: (False if str(p).startswith(read_only) and mode & os.W_OK
                                      else real_access(p, mode, *a, **k))
if sys.argv[1] == "cli":
    from app.cli import main
    sys.exit(main(sys.argv[2:]))
import time
from fastapi.testclient import TestClient
from app.web import app
with TestClient(app) as client:
    deadline = time.monotonic() + 300
    while (r := client.get("/api/run?" + sys.argv[2])).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    print(r.status_code, r.json()["schedulers"]["fcfs"]["metrics"]["completed"])
"""


def _files(d: Path) -> dict[str, float]:
    return {str(f.relative_to(d)): f.stat().st_mtime for f in d.rglob("*") if f.is_file()}


def test_a_warm_read_only_cache_is_used_not_recompiled_and_not_written(tmp_path):
    sim_core.warm_up()  # this process's cache holds every kernel now, the dashboard's too
    kvgrid.warm_up()
    warm = tmp_path / "baked-into-the-image"
    shutil.copytree(jit.CACHE_DIR, warm)
    for d in (warm, *(p for p in warm.rglob("*") if p.is_dir())):
        d.chmod(0o555)
    before = _files(warm)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(warm), READ_ONLY_DIR=str(warm), TMPDIR=str(scratch))
    run = [sys.executable, "-c", READ_ONLY_CHILD]

    cli = subprocess.run(run + ["cli", "run", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "chat", "--num-requests", "20",
                                "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["schedulers"]["chunked"]["metrics"]["completed"] == 20
    assert f"{warm} is not writable" in cli.stderr and f"starting from its {len(before)} cached files" in cli.stderr
    fallback = next(scratch.glob("sched-sim-numba-*/*"))
    # Loaded, not compiled again: every kernel file in the fallback is the copy, untouched.
    assert _files(fallback) == before

    server = subprocess.run(run + ["server", "schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=20"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert server.returncode == 0 and server.stdout.split() == ["200", "20"], server.stderr
    assert _files(warm) == before and _files(fallback) == before


YAML_CHILD = """
import os, sys
import sim_core.kernel.jit  # the first import of numba, through the project's jit wrapper
from numba.core import config
hidden = "yaml" not in sys.modules
if sys.argv[1] == "later":
    with open(".numba_config.yaml", "w") as f:
        f.write("full_tracebacks: 1\\n")
    config.reload_config()  # what numba does before each compile
print(hidden, config.FULL_TRACEBACKS)
"""


def test_numba_reads_a_config_file_whether_it_is_there_at_import_or_appears_later(tmp_path):
    """sim_core imports numba without PyYAML when no .numba_config.yaml is in the working directory (~13 ms of a
    CLI run), yet numba still reads one that is there or that appears later."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_FULL_TRACEBACKS", "NUMBA_DEVELOPER_MODE")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(sim_core.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    later = subprocess.run([sys.executable, "-c", YAML_CHILD, "later"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert later.returncode == 0, later.stderr
    assert later.stdout.split() == ["True", "1"]
    there = subprocess.run([sys.executable, "-c", YAML_CHILD, "there"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert there.returncode == 0, there.stderr
    assert there.stdout.split() == ["False", "1"]
