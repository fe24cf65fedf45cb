#!/usr/bin/env bash
# THE test command: installs everything needed on a fresh Debian machine (as root), lints, runs pytest.
# Extra arguments are passed to pytest, e.g.  bash scripts/test.sh -m "not browser" -x
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"

# Browser for the Playwright tests: Debian's chromium (Playwright cannot download its own here).
if [ ! -x /usr/bin/chromium ]; then
    echo "==> installing Debian chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi

# Virtual environment (recreated if missing or broken, e.g. its base python went away).
if ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
    echo "==> creating .venv"
    rm -rf .venv
    python3 -m venv .venv
fi

echo "==> pip install -e '.[test,ray]'"
.venv/bin/pip install -q --disable-pip-version-check -e '.[test,ray]'

echo "==> ruff check"
.venv/bin/ruff check .

echo "==> pytest"
# numba's on-disk cache keys each file on its own source only; key the directory on all of sim_core so an edit
# to one module never runs against stale machine code compiled from another.
SIM_HASH="$(find sim_core -name "*.py" | sort | xargs cat | sha1sum | cut -c1-12)"
export NUMBA_CACHE_DIR="$REPO_ROOT/.numba_cache/$SIM_HASH"
# The simulator's kernels compiled once, before the workers start (a no-op on a warm cache): the engine's on two
# cores (warm.compile_in_two), then the fleet's entry. Left to the tests, each worker compiled the engine, and the
# fleet's entry, for itself at the same time as the other (a fresh clone's run: 70 s and 45 s in the first two
# fleet tests); about a minute here on a cold cache, printed so that it is never hidden.
echo "==> compiling the simulator's kernels (numba; cached in $NUMBA_CACHE_DIR)"
start_s=$SECONDS
.venv/bin/python -c "from sim_core.kernel.warm import compile_fleet, warm_up; warm_up(); compile_fleet()"
echo "    $((SECONDS - start_s)) s"
# Test files spread over the cores (pytest-xdist; at most 4 workers: each runs its own compiles, server and
# chromium), one file's tests on one worker so a module's browser and server start once. One core: one process.
WORKERS="$(.venv/bin/python -c 'import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))')"
if [ "$WORKERS" -gt 1 ]; then
    PARALLEL=(-n "$WORKERS" --dist loadfile)
else
    PARALLEL=(-p no:xdist)
fi
# --durations: the slowest tests in the log, to keep the default run under 10 minutes.
.venv/bin/python -m pytest -q --durations=30 "${PARALLEL[@]}" "$@"
