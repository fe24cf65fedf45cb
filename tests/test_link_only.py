"""Kernels compile to code their callers link, without machine code of their own until Python calls one
(sim_core/kernel/link_only.py): in the process that compiles them and in one that loads them from the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNELS = '''
from sim_core.kernel.jit import entry, kernel


@kernel
def add_one(x):
    return x + 1


@kernel
def add_two(x):
    return add_one(add_one(x))


@entry
def twice_plus(x):
    return add_two(x) * 2


@entry
def thrice_plus(x):
    return add_one(x) * 3
'''

# Prints, as JSON: results, and which kernels held only a placeholder entry point (no machine code) when.
CHILD = '''
import json, sys
from sim_core.kernel import link_only
import link_kernels as k

def link_only_now():
    return sorted(f.py_func.__name__ for f in (k.add_one, k.add_two)
                  if any(isinstance(c.entry_point, link_only.LinkOnly) for c in f.overloads.values()))

out = {}
first = sys.argv[1]
out[first] = getattr(k, first)(3)
out["after_entry"] = link_only_now()
out["add_two_from_python"] = k.add_two(4)
out["after_python_call"] = link_only_now()
out["add_two_again"] = k.add_two(5)
out["add_one_cache_hits"] = sum(k.add_one.stats.cache_hits.values())
print(json.dumps(out))
'''


def _run(tmp_path: Path, first_entry: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run([sys.executable, "-c", CHILD, first_entry], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kernels_get_machine_code_only_when_python_calls_them_compiled_or_loaded(tmp_path):
    (tmp_path / "link_kernels.py").write_text(KERNELS, encoding="utf-8")
    compiled = _run(tmp_path, "twice_plus")  # an empty cache: everything compiles
    assert compiled == {"twice_plus": 10, "after_entry": ["add_one", "add_two"], "add_two_from_python": 6,
                        "after_python_call": ["add_one"], "add_two_again": 7, "add_one_cache_hits": 0}
    # Another process: thrice_plus compiles, linking add_one loaded from the cache (no machine code), and
    # add_two, called from Python, loads from the cache and gets machine code then.
    loaded = _run(tmp_path, "thrice_plus")
    assert loaded == {"thrice_plus": 12, "after_entry": ["add_one"], "add_two_from_python": 6,
                      "after_python_call": ["add_one"], "add_two_again": 7, "add_one_cache_hits": 1}
