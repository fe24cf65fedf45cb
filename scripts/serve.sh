#!/usr/bin/env bash
# Install the product into .venv and start the dashboard on http://127.0.0.1:${PORT:-8000}
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
    rm -rf .venv
    python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e .

# numba's cache keys each file on its own source; key the directory on all of sim_core (see scripts/test.sh).
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$(pwd)/.numba_cache/$(cat sim_core/*.py | sha1sum | cut -c1-12)}"
exec .venv/bin/sched-sim serve --host 127.0.0.1 --port "${PORT:-8000}"
