"""How kernels compile: one signature each, and a cold warm-up split over two processes that compile disjoint
subtrees of the engine with the very signatures the engine calls them with."""

from __future__ import annotations

import json

import numpy as np
import pytest
from numba import config as numba_config

import sim_core
from sim_core.kernel import jit, warm

pytestmark = pytest.mark.skipif(numba_config.DISABLE_JIT, reason="about numba's compiled kernels")


# As jit.kernel and jit.entry make them, but never cached: a caller loaded from the on-disk cache (a second run of
# the suite) would leave _twice uncompiled, with no signatures to count.
@jit._one_signature(cache=False, pipeline_class=jit._KernelCompiler)
def _twice(x, n):
    return x * n


@jit._one_signature(cache=False)
def _calls_with_literals_and_variables(x, n):
    return _twice(x, 0) + _twice(x, 1) + _twice(x, n) + _twice(x, True)


def test_a_kernel_called_with_literal_constants_compiles_one_signature():
    assert _calls_with_literals_and_variables(3.0, 5) == 3.0 * 0 + 3.0 * 1 + 3.0 * 5 + 3.0 * 1
    # numba alone compiles one version per literal (0, 1, True) and one for int64: four.
    assert len(_twice.signatures) == 2  # (float64, int64) and (float64, bool): the literals widened
    assert all("Literal" not in str(sig) for sig in _twice.signatures)


def test_the_two_halves_of_the_warm_up_are_disjoint_kernels_of_the_engine():
    names = warm.HELPER + warm.HELPER_THEN + warm.HERE
    assert len(set(names)) == len(names)
    for module, name in names:
        assert isinstance(warm._kernel(module, name), jit.OneSignature), (module, name)


def test_the_warm_up_compiles_what_the_engine_calls_and_nothing_else():
    """After a warm-up (cold or warm), each kernel the helper or this process compiled ahead holds exactly the
    signatures in the cache: the engine called it with the types warm.py compiled, not others (a mismatch
    would compile a second version and waste the helper's work). The warm-up's last run computes bounds, as the
    CLI's and the dashboard's runs do: HELPER_THEN's signatures are checked against theirs too."""
    sim_core.warm_up()
    for module, name in warm.HELPER + warm.HELPER_THEN + warm.HERE:
        assert sorted(map(str, warm.cached_signatures(module, name))) == sorted(
            map(str, warm.signatures(module, name))), (module, name)
    assert warm.start_helper() is None  # warm now: no helper process


def test_the_fleet_compiler_caches_each_fleet_kernel_as_runs_call_it():
    """compile_fleet's tiny runs leave each fleet entry kernel (replicas, prefill/decode pools, autoscaled) with
    one cached signature, the one a run calls: the background compiler's work is what the session loads."""
    warm.compile_fleet()
    for module, name in warm.FLEET_ENTRIES:
        kernel = warm._kernel(module, name)
        assert [str(s) for s in warm.cached_signatures(module, name)] == [str(s) for s in kernel.signatures], name
    assert warm.start_fleet_compiler() is None  # all cached: no process started
    warm.stop_compiler(None)


def test_new_engine_inputs_match_a_real_run():
    cfg, table, frames = warm._engine_inputs()
    assert cfg.cost.dtype == np.float64 and table.arrival_s.dtype == np.float64 and frames.capacity == 0


def test_kernels_leave_module_optimization_to_the_entry_that_links_them():
    # Uncached, so this process compiles both (a cache hit rebuilds a plain library).
    kernel = jit._one_signature(cache=False, pipeline_class=jit._KernelCompiler)
    entry = jit._one_signature(cache=False)

    @kernel
    def halve(x):
        return x / 2.0

    @entry
    def quarter(x):
        return halve(halve(x))

    assert quarter(10.0) == 2.5 and halve(3.0) == 1.5
    assert type(halve.overloads[halve.signatures[0]].library) is jit._LinkedInto
    assert type(quarter.overloads[quarter.signatures[0]].library) is not jit._LinkedInto


WARM_RUN = """
import io, sys
from app.cli import main
from sim_core.kernel import jit
sys.stdout = io.StringIO()
code = main(["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "20", "--json"])
sys.stdout = sys.__stdout__
kernels = list({id(v): v for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("sim_core")
                for v in vars(m).values() if isinstance(v, jit.OneSignature)}.values())  # each once, wherever imported
opened = sum(1 for k in kernels if k.__dict__.get("_cache") is not jit._OPEN_ON_USE)
print(code, len(kernels), opened, "numba.np.polynomial.polynomial_functions" in sys.modules,
      "numba.np.arrayobj" in sys.modules)
"""


def test_a_warm_cli_run_loads_its_kernel_without_numbas_registries_or_every_cache():
    """With a warm cache, a run opens the cache of the kernels it calls (not ~130) and loads compiled code
    without refreshing numba's typing/target registries (which import every numpy implementation module)."""
    import os
    import subprocess
    import sys

    sim_core.warm_up()  # the cache this test session uses is warm now
    # ... and holds whatever else the command's run calls (run alone, or first of its worker under pytest-xdist,
    # with a cold cache, the child compiled it and refreshed the registries)
    import contextlib
    import io

    from app.cli import main
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "20", "--json"]) == 0
    out = subprocess.run([sys.executable, "-c", WARM_RUN], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, NUMBA_CACHE_DIR=jit.CACHE_DIR))
    assert out.returncode == 0, out.stderr
    code, kernels, opened, refreshed, array_helpers_imported = out.stdout.split()
    assert code == "0" and int(kernels) > 100
    assert 0 < int(opened) <= 3
    assert refreshed == "False"
    assert array_helpers_imported == "False"  # environments of numba's array helpers built without their modules


LINK_MODULE = '''
from sim_core.kernel.jit import entry, kernel

@kernel
def triple(x):
    return 3 * x

@entry
def triple_plus_one(x):
    return triple(x) + 1
'''

LINK_CHILD = """
import sys, json
sys.path.insert(0, sys.argv[1])
import linkmod
from numba import njit
from sim_core.kernel import jit
if sys.argv[2] == "fill":
    print(json.dumps([linkmod.triple_plus_one(4), linkmod.triple(5)]))
else:
    assert linkmod.triple_plus_one(4) == 13          # an entry loaded from the cache
    lib = linkmod.triple_plus_one.overloads[linkmod.triple_plus_one.signatures[0]].library
    parsed_at_load = lib._shared_module is not None
    @njit
    def caller(x):                                   # compiled now: links the kernel loaded from the cache
        return linkmod.triple(x) * 2
    import numba.np.arrayobj                         # noqa: F401  (imported only for the check below)
    print(json.dumps([caller(7), linkmod.triple(5), type(lib).__name__, parsed_at_load,
                      linkmod.triple._cache_hits and sum(linkmod.triple._cache_hits.values())]))
"""


def test_code_loaded_from_the_cache_runs_from_python_and_links_into_new_callers(tmp_path):
    """Loaded libraries parse their link-time bitcode only when a caller links them (jit._LoadedLibrary): a kernel
    loaded from the cache is still linked into a function compiled afterwards, and both loaded functions run."""
    import os
    import subprocess
    import sys

    (tmp_path / "linkmod.py").write_text(LINK_MODULE, encoding="utf-8")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    fill = subprocess.run([sys.executable, "-c", LINK_CHILD, str(tmp_path), "fill"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert fill.returncode == 0, fill.stderr
    assert fill.stdout.split() == ["[13,", "15]"]
    out = subprocess.run([sys.executable, "-c", LINK_CHILD, str(tmp_path), "load"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    caller, direct, library, parsed_at_load, kernel_hits = json.loads(out.stdout)
    assert (caller, direct) == (42, 15)
    assert library == "_LoadedLibrary" and parsed_at_load is False
    assert kernel_hits >= 1  # the kernel came from the cache, not a fresh compile



# A stand-in for warm.py's helper process: its first part done, it says so and goes on (sleeps) with its second.
FAKE_HELPER = "import sys, time; sys.stdout.buffer.write({ready!r}); sys.stdout.flush(); time.sleep(120)"


def test_compile_in_two_goes_on_once_the_helper_has_cached_its_first_part(monkeypatch):
    """compile_in_two returns while the helper still compiles HELPER_THEN (rather than wait for all of it), and
    stop_compiler ends it."""
    import subprocess
    import sys

    helpers, compiled_here = [], []

    def fake_start():
        helpers.append(subprocess.Popen([sys.executable, "-c", FAKE_HELPER.format(ready=warm.HELPER_READY)],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL))
        return helpers[-1]

    monkeypatch.setattr(warm, "start_helper", fake_start)
    monkeypatch.setattr(warm, "compile_part", compiled_here.append)
    helper = warm.compile_in_two()
    assert helper is helpers[0] and compiled_here == [warm.HERE]
    assert helper.poll() is None  # back while the helper goes on
    warm.stop_compiler(helper)
    assert helper.returncode is not None and helper.stdout.closed


@pytest.mark.parametrize("deployment, entry_cached, compiles_in_two", [
    ({}, False, True),                     # one engine, its entry not cached: the engine compiles on two cores
    ({}, True, False),                     # warm: nothing started
    ({"replicas": 2}, False, False),       # the fleet's entry inlines the step: compiled in this process
    ({"prefill_replicas": 1, "decode_replicas": 1}, False, False),
])
def test_the_cli_compiles_a_cold_single_engine_on_two_cores(monkeypatch, deployment, entry_cached, compiles_in_two):
    """`sched-sim run` and `compare` (app/cli/simulate.run_schedulers) run inside warm.compiled_on_two_cores: with
    the engine's entry uncached and one engine, compile_in_two first, and its helper ended after the runs."""
    import contextlib
    import io

    from app.cli import main

    started, stopped = [], []
    helper = object()
    monkeypatch.setattr(warm, "cached_signatures", lambda module, name: [("sig",)] if entry_cached else [])
    monkeypatch.setattr(warm, "compile_in_two", lambda: started.append(1) or helper)
    monkeypatch.setattr(warm, "stop_compiler", stopped.append)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in deployment.items()]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--no-worker", "run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests",
                     "8", *flags]) == 0
    assert started == ([1] if compiles_in_two else [])
    assert stopped == [helper if compiles_in_two else None]
