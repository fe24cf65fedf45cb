"""Every kernel also runs as plain Python: a child process with NUMBA_DISABLE_JIT=1 runs every scheduler x
preemption mode and a subset of the golden scenarios, and must produce exactly what the jitted kernels do;
tests/test_plain_units.py (kernel internals driven directly) runs there too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from numba import config

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(config.DISABLE_JIT, reason="compares against the jitted kernels")


def _plain_env() -> dict[str, str]:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=str(HERE.parent))
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def test_plain_python_run_matches_jitted_exactly(tmp_path):
    from plain_python_cases import run_all

    out = tmp_path / "plain.json"
    subprocess.run([sys.executable, str(HERE / "plain_python_cases.py"), str(out)], env=_plain_env(), check=True,
                   timeout=600)
    plain = json.loads(out.read_text(encoding="utf-8"))
    jitted = json.loads(json.dumps(run_all(), sort_keys=True))
    assert plain.keys() == jitted.keys()
    for name in jitted:
        assert plain[name] == jitted[name], name


def test_kernel_internals_pass_as_plain_python():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(HERE / "test_plain_units.py")], env=_plain_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
