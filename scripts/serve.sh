#!/usr/bin/env bash
# Install the product into .venv and start the dashboard on http://127.0.0.1:${PORT:-8000}
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
    rm -rf .venv
    python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e .

# Compiled kernels are cached under ~/.cache/sched-sim/numba/<hash of sim_core's sources> (sim_core/kernel/jit.py),
# or NUMBA_CACHE_DIR if set.
# More flags pass through (e.g. --allowed-hosts sim.example.org; `sched-sim serve --help` lists them, and the
# SCHED_SIM_* environment variables each names).
exec .venv/bin/sched-sim serve --host 127.0.0.1 --port "${PORT:-8000}" "$@"
