"""Instructions per simulated token of bench_core's scenarios, two checkouts A/B, counted by valgrind's callgrind.

    .venv/bin/python bench/bench_icount.py --base ../other-checkout            # A = --base, B = --new (this one)
    .venv/bin/python bench/bench_icount.py --base ../other --check --cases chunked   # also determinism, linearity
    .venv/bin/python bench/bench_icount.py --base ../other --keep out/         # keep callgrind.out.* to annotate
    .venv/bin/python bench/bench_icount.py --relative-to chunked --cases chunked+energy   # one checkout: a mechanism's cost

Wall-clock A/B on a shared machine scatters by several percent from pass to pass; the number of instructions a
run executes does not, so it can certify a "within 3%" claim that timings cannot. What is counted is what
bench_core times: one warm `simulate_requests` of a scenario built by the checkout's own bench/bench_core.py.

How: every checkout has its own numba cache, filled outside valgrind first (`warm_up` plus a small run of each
scenario). Then, per scenario and checkout in turn, one child process runs under
`valgrind --tool=callgrind --collect-atstart=no`: it builds the scenario and its requests, runs a small run of the
same scenario (loads the kernels from the cache; not counted), then switches collection on with callgrind's
TOGGLE_COLLECT client request, runs the simulation once and switches it off: only the simulation is counted.

Differences from bench_core, all the same for both checkouts:
- Kernels are generated for NUMBA_CPU_NAME=haswell (AVX2, no AVX-512: valgrind does not decode AVX-512 and the
  host's own code would die with SIGILL), so counts are of that code, not of the host-tuned one.
- Scenarios are 1/10 of bench_core's size by default (--requests 10000; static a tenth of that, as in
  bench_core): a run is ~50-100x slower under callgrind (~1-4 min a run on a busy 2-core machine).
- One run per scenario: callgrind's count is deterministic (the same run in a fresh process gave the same count
  to the instruction; --check shows it, and a run at twice the requests).

Every run also pays a fixed cost that does not grow with the run: ~33M instructions zeroing and summing
fixed-size buffers (memset, numpy's LONG_add), measured on a 100-request run. That is ~3% of a 10000-request
single-engine run and ~25% of static's 1000; `--requests 40000` brings it under 1% (static's 4000: ~8%). The
"numba B/A" column is the ratio of instructions in numba's machine code alone (code with no file, from
callgrind_annotate), free of that fixed cost and of Python's share.
Requires valgrind on PATH; prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import mmap
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# bench_core's scenarios, in its order: (name, bench_core.scenario's keywords, share of --requests).
CASES = (
    ("chunked", {"scheduler": "chunked"}, 1.0),
    ("fcfs", {"scheduler": "fcfs"}, 1.0),
    ("spf", {"scheduler": "spf"}, 1.0),
    ("static", {"scheduler": "static"}, 0.1),
    ("chunked+prefix", {"scheduler": "chunked", "prefix_cache": True}, 1.0),
    ("rag", {"scheduler": "chunked", "workload": "rag"}, 1.0),
    ("rag+prefix", {"scheduler": "chunked", "prefix_cache": True, "workload": "rag"}, 1.0),
    ("4x least_outstanding", {"scheduler": "chunked", "replicas": 4, "router": "least_outstanding"}, 1.0),
    ("4x rag+prefix_affinity", {"scheduler": "chunked", "prefix_cache": True, "workload": "rag", "replicas": 4,
                                "router": "prefix_affinity"}, 1.0),
)
# Deployments bench_core's scenario() has no keyword for, as Scenario fields set on top of its chunked chat
# scenario (the same names in checkouts from before the one fleet loop, so an A/B reaches back to them). The rate is
# bench_core's 40 requests/s per engine that decodes; the autoscaled case starts at 2 replicas and scales within the
# run (short interval and provisioning delay: a 10000-request run lasts about a minute of simulated time).
FLEET_CASES = (
    ("1P+1D", {"prefill_replicas": 1, "decode_replicas": 1, "rate": 40.0}),
    ("1P+3D", {"prefill_replicas": 1, "decode_replicas": 3, "rate": 120.0}),
    ("autoscaled 2-8x", {"replicas": 2, "rate": 160.0, "autoscaler": "utilization", "min_replicas": 1,
                         "max_replicas": 8, "autoscale_interval_s": 5.0, "provision_delay_s": 10.0}),
)
# Mechanisms switched on over the same chunked chat scenario, counted in this checkout only against the scenario
# without them (--relative-to chunked): what a mechanism costs per simulated token. Not A/B cases (an older
# checkout may not have the fields), so not in the default --cases. Energy (issue #40: "with energy on >= 90% of
# the plain run's simulated tokens/s"), uncapped and capped at 60% of the H100's 700 W board limit.
MECHANISM_CASES = (
    ("chunked+energy", {"energy": True}),
    ("chunked+energy+cap420", {"energy": True, "power_cap_w": 420.0}),
)
AB_CASES = tuple(name for name, _, _ in CASES) + tuple(name for name, _ in FLEET_CASES)
CASES += tuple((name, {"scheduler": "chunked"}, 1.0) for name, _ in FLEET_CASES + MECHANISM_CASES)
FIELDS = dict(FLEET_CASES + MECHANISM_CASES)
BY_NAME = {name: (kw, share) for name, kw, share in CASES}
WARM_REQUESTS = 300  # the uncounted run that loads a scenario's kernels before the counted one


def _bench_core(checkout: Path):
    """The checkout's own bench/bench_core.py (it puts the checkout first on sys.path for sim_core)."""
    spec = importlib.util.spec_from_file_location("bench_core", checkout / "bench" / "bench_core.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import sim_core

    if not Path(sim_core.__file__).resolve().is_relative_to(checkout.resolve()):
        raise SystemExit(f"sim_core came from {sim_core.__file__}, not from {checkout}: set PYTHONPATH")
    return mod


# Callgrind's CALLGRIND_TOGGLE_COLLECT client request (valgrind/callgrind.h), as the machine code the header's
# macro expands to on x86-64: `uint64 f(uint64 args[6])` puts &args in rax and 0 (the answer when not under
# valgrind) in rdx, then the four rotations of rdi by 3+13+61+51 bits (128: rdi unchanged, a no-op natively)
# that valgrind recognises as a request, then `xchg rbx,rbx`, and returns rdx.
CLIENT_REQUEST = bytes.fromhex("53 4889f8 31d2 48c1c703 48c1c70d 48c1c73d 48c1c733 4887db 4889d0 5b c3")
TOGGLE_COLLECT = (ord("C") << 24 | ord("T") << 16) + 2  # VG_USERREQ_TOOL_BASE('C','T') + 2


def _counted(fn):
    """fn(), with callgrind collecting only while it runs (run under --collect-atstart=no). Numba's machine code
    has no symbols that --toggle-collect could name, and a libc function entered through ctypes (qsort with a
    Python comparator) is not seen as entered by callgrind, so collection is switched by a client request."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise SystemExit(f"the client request is x86-64 code; this machine is {platform.machine()}")
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(CLIENT_REQUEST)
    request = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    args = (ctypes.c_uint64 * 6)(TOGGLE_COLLECT, 0, 0, 0, 0, 0)
    request(args)
    try:
        return fn()
    finally:
        request(args)


def _scenario(core, case: str, n: int):
    """The case's scenario from the checkout's bench_core, with a fleet case's fields set on top (validated)."""
    s = core.scenario(n, **BY_NAME[case][0])
    if case not in FIELDS:
        return s
    return type(s)(**{**s.model_dump(exclude_unset=True), **FIELDS[case]})


def child(checkout: Path, case: str, n: int, warm_only: bool) -> None:
    core = _bench_core(checkout)
    from sim_core.runner import make_requests, resolve, simulate_requests

    small = _scenario(core, case, WARM_REQUESTS)
    simulate_requests(small, resolve(small), make_requests(small, resolve(small)))
    if warm_only:
        return
    s = _scenario(core, case, n)
    r = resolve(s)
    reqs = make_requests(s, r)
    res = _counted(lambda: simulate_requests(s, r, reqs))
    served = res.status == 4  # as bench_core counts simulated tokens: prompt + output of served requests
    tokens = int(reqs.prompt_tokens[served].sum() + reqs.output_tokens[served].sum())
    print(json.dumps({"requests": n, "tokens": tokens, "steps": res.metrics["steps"],
                      "completed": res.metrics["completed"]}))


def _env(checkout: Path, cache: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=str(cache), NUMBA_CPU_NAME="haswell",
                NUMBA_CPU_FEATURES="", PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")


def warm(checkout: Path, cache: Path, cases: list[str]) -> None:
    """Fill the checkout's cache outside valgrind: every kernel, then a small run of each scenario."""
    env = _env(checkout, cache)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sim_core; sim_core.warm_up()"], env=env, check=True)
    for case in cases:
        subprocess.run([sys.executable, __file__, "--child", str(checkout), "--case", case, "--warm-only"],
                       env=env, check=True)
    print(f"# {checkout}: cache {cache} warm ({time.perf_counter() - t:.0f} s)", flush=True)


def numba_instructions(out_file: Path) -> int:
    """Instructions in code that belongs to no file (numba's machine code), from callgrind_annotate's listing."""
    listing = subprocess.run(["callgrind_annotate", "--threshold=100", str(out_file)], capture_output=True,
                             text=True, check=True).stdout
    rows = re.findall(r"^\s*([\d,]+) \([^)]*\)\s+\?\?\?:\S+ \[\?\?\?\]$", listing, re.M)
    return sum(int(r.replace(",", "")) for r in rows)


def count(checkout: Path, cache: Path, case: str, n: int, keep: Path, tag: str = "B") -> dict:
    """One counted run under callgrind: the simulation's instructions, and the child's figures."""
    keep.mkdir(parents=True, exist_ok=True)
    out_file = keep / f"callgrind.out.{tag}.{re.sub(r'[^A-Za-z0-9]+', '_', case)}.{n}"
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           f"--callgrind-out-file={out_file}", sys.executable, __file__, "--child", str(checkout), "--case", case,
           "--requests", str(n)]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=_env(checkout, cache), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"valgrind run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    figures = json.loads(p.stdout.strip().splitlines()[-1])
    totals = re.search(r"^totals:\s*(\d+)", out_file.read_text(encoding="utf-8"), re.M)
    if totals is None:
        raise SystemExit(f"no totals line in {out_file}")
    figures.update(instructions=int(totals.group(1)), numba=numba_instructions(out_file),
                   wall_s=round(time.perf_counter() - t))
    return figures


def _n(case: str, requests: int) -> int:
    return max(1, round(requests * BY_NAME[case][1]))


def ab(a: Path, b: Path, caches: dict, cases: list[str], requests: int, keep: Path) -> None:
    print(f"{'scenario':24} {'requests':>8} {'A instr/token':>14} {'B instr/token':>14} {'B/A':>7} "
          f"{'numba B/A':>9}", flush=True)
    for case in cases:
        n = _n(case, requests)
        fa = count(a, caches[a], case, n, keep, "A")
        fb = count(b, caches[b], case, n, keep, "B")
        if (fa["tokens"], fa["steps"]) != (fb["tokens"], fb["steps"]):
            print(f"# {case}: the checkouts simulated different runs: A {fa}, B {fb}")
        ia, ib = fa["instructions"] / fa["tokens"], fb["instructions"] / fb["tokens"]
        print(f"{case:24} {n:8d} {ia:14.1f} {ib:14.1f} {ib / ia:7.4f} {fb['numba'] / fa['numba']:9.4f}   "
              f"# A {fa['instructions']:,} B {fb['instructions']:,} instr, {fa['tokens']:,} tokens, "
              f"{fa['steps']:,} steps, {fa['wall_s']}+{fb['wall_s']} s", flush=True)


def relative(b: Path, cache: Path, reference: str, cases: list[str], requests: int, keep: Path) -> None:
    """Each case against `reference`, all in checkout b: instructions per simulated token, and their ratio as the
    ratio of simulated tokens per second (reference's instructions per token over the case's)."""
    ref = count(b, cache, reference, _n(reference, requests), keep, "ref")
    per_ref = ref["instructions"] / ref["tokens"]
    print(f"{'scenario':24} {'requests':>8} {'instr/token':>12} {'tokens/s vs ' + reference:>20}", flush=True)
    print(f"{reference:24} {_n(reference, requests):8d} {per_ref:12.1f} {1.0:20.4f}   "
          f"# {ref['instructions']:,} instr, {ref['tokens']:,} tokens, {ref['steps']:,} steps", flush=True)
    for case in cases:
        f = count(b, cache, case, _n(case, requests), keep, "case")
        per = f["instructions"] / f["tokens"]
        print(f"{case:24} {_n(case, requests):8d} {per:12.1f} {per_ref / per:20.4f}   "
              f"# {f['instructions']:,} instr, {f['tokens']:,} tokens, {f['steps']:,} steps", flush=True)


def check(b: Path, cache: Path, case: str, requests: int, keep: Path) -> None:
    """Is the count deterministic (the same run twice) and does it track cost (twice the requests)?"""
    n = _n(case, requests)
    one, again, double = (count(b, cache, case, m, keep / tag) for m, tag in ((n, "1"), (n, "2"), (2 * n, "3")))
    spread = abs(again["instructions"] - one["instructions"]) / one["instructions"]
    print(f"# check {case}: same run twice {one['instructions']:,} vs {again['instructions']:,} "
          f"({100 * spread:.3f}% apart)")
    fixed = 2 * one["instructions"] - double["instructions"]  # I = fixed + per-request * n, fitted at n and 2n
    print(f"# check {case}: {2 * n} requests / {n} requests = "
          f"{double['instructions'] / one['instructions']:.3f}x instructions, "
          f"{double['tokens'] / one['tokens']:.3f}x tokens, {double['steps'] / one['steps']:.3f}x steps; "
          f"fixed cost fitted {100 * fixed / one['instructions']:+.2f}% of the {n}-request run", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, help="checkout A (e.g. a worktree of an older commit)")
    ap.add_argument("--new", type=Path, default=HERE, help="checkout B (default: this one)")
    ap.add_argument("--requests", type=int, default=10_000, help="requests per scenario (static: a tenth)")
    ap.add_argument("--cases", nargs="+", choices=list(BY_NAME), default=list(AB_CASES))
    ap.add_argument("--relative-to", choices=list(BY_NAME),
                    help="no A/B: count --new only, each case against this one (a mechanism's cost)")
    ap.add_argument("--check", action="store_true", help="also: B's first case twice, and at twice the requests")
    ap.add_argument("--keep", type=Path, help="keep the callgrind.out files here (for callgrind_annotate)")
    ap.add_argument("--cache-name", default="icount-haswell", help="cache folder under each checkout's .numba_cache")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child.resolve(), a.case, a.requests, a.warm_only)
        return
    if a.relative_to:
        new = a.new.resolve()
        cache = new / ".numba_cache" / a.cache_name
        warm(new, cache, [a.relative_to, *a.cases])
        with tempfile.TemporaryDirectory() as tmp:
            print(f"# {new}\n# instructions per simulated token (callgrind, NUMBA_CPU_NAME=haswell)")
            relative(new, cache, a.relative_to, a.cases, a.requests, a.keep.resolve() if a.keep else Path(tmp))
        return
    if a.base is None:
        ap.error("--base: the checkout to compare against is required (or --relative-to)")
    base, new = a.base.resolve(), a.new.resolve()
    caches = {c: c / ".numba_cache" / a.cache_name for c in (base, new)}
    for c in (base, new):
        warm(c, caches[c], a.cases)
    with tempfile.TemporaryDirectory() as tmp:
        keep = a.keep.resolve() if a.keep else Path(tmp)
        print(f"# A = {base}\n# B = {new}\n# instructions per simulated token (callgrind, NUMBA_CPU_NAME=haswell)")
        ab(base, new, caches, a.cases, a.requests, keep)
        if a.check:
            check(new, caches[new], a.cases[0], a.requests, keep / "check")


if __name__ == "__main__":
    main()
