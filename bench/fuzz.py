"""The long fuzz campaigns: the HTTP API from its OpenAPI schema (schemathesis), every trace reader with arbitrary
text (hypothesis) and the command line with arbitrary flags and values. No 5xx, no traceback, no hang allowed.
And two over runs: `attribution N`, N drawn combinations of mechanisms per cluster shape whose every request's
attribution must sum to its TTFT and E2EL (default 200); `bounds N`, N drawn runs none of whose metrics may pass
its bound (default 500).

    .venv/bin/python bench/fuzz.py [api N] [readers N] [cli N] [attribution N] [bounds N] [limits N]

`api N`: N cases per API operation (default 1000); `readers N`: N inputs per reader (default 2500: the four
readers make 10,000); `cli N`: N command lines (default 10000); `limits N`: N API requests with every
mechanism's fields at their bounds and N / 4 uploaded configs (default 5000). With no argument, all of them at their defaults.
Prints the counts each campaign ran; exits non-zero if any case failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGNS = {  # name: (test file, environment variable, default count)
    "api": ("tests/test_fuzz_api.py", "FUZZ_CASES_PER_OPERATION", "1000"),
    "readers": ("tests/test_trace_errors.py", "FUZZ_READER_EXAMPLES", "2500"),
    "cli": ("tests/test_fuzz_cli.py", "FUZZ_CLI_EXAMPLES", "10000"),
    # Invariants of runs rather than inputs (issue #35): where the time went adds up, no run beats its bounds.
    "attribution": ("tests/test_attribution_mechanisms.py", "ATTRIBUTION_EXAMPLES", "200"),
    "bounds": ("tests/test_bounds.py", "BOUNDS_EXAMPLES", "500"),
    # Every mechanism's fields at their bounds through /api/run, and uploaded configs (issue #37): N requests and
    # N / 4 uploads, each accepted upload run once; no 5xx but a 503 naming its limit.
    "limits": ("tests/test_fuzz_limits.py", "FUZZ_LIMITS_CASES", "5000"),
}


def campaign(name: str, count: str) -> int:
    path, var, _ = CAMPAIGNS[name]
    env = dict(os.environ, **{var: count}, PYTHONPATH=str(ROOT))
    select = {"readers": ["-k", "fuzzed"], "bounds": ["-k", "whatever_it_turns_away"]}.get(name, [])
    print(f"== {name}: {var}={count}", flush=True)
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", path, *select],
                           env=env, cwd=ROOT)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) % 2 or any(a not in CAMPAIGNS for a in args[::2]):
        sys.exit(__doc__)
    chosen = dict(zip(args[::2], args[1::2], strict=True)) or {k: v[2] for k, v in CAMPAIGNS.items()}
    sys.exit(max(campaign(name, count) for name, count in chosen.items()))
