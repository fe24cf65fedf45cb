#!/usr/bin/env bash
# The numba kernel cache on a full filesystem (issue #26): a 2 MB tmpfs, filled, as NUMBA_CACHE_DIR, and an empty
# TMPDIR (so the temporary cache sched-sim falls back to starts cold). A fresh server must answer /api/run within
# LIMIT_S seconds of its start, then a CLI run must succeed and a restarted server load the kernels from TMPDIR;
# then a CLI run with TMPDIR full too (no cache anywhere: it compiles without one) must succeed. Needs root (it mounts a tmpfs). From the repository root:
#     bash bench/bench_full_cache.sh    (PYTHON=.venv/bin/python, LIMIT_S=120, WAIT_S=600; BASELINE=1 also times a
#                                       cold start with a roomy empty cache, to tell a slow machine from the disk)
# Prints each step's wall time and exits non-zero if a step fails or a server start takes over LIMIT_S.
set -u
PYTHON=${PYTHON:-.venv/bin/python}
LIMIT_S=${LIMIT_S:-120}
WAIT_S=${WAIT_S:-600}
PORT=${PORT:-18765}
if [ "$(id -u)" != 0 ]; then echo "needs root to mount a tmpfs" >&2; exit 2; fi
MNT=$(mktemp -d /tmp/full-cache.XXXXXX)
SPARE=$(mktemp -d /tmp/full-cache-tmpdir.XXXXXX)
MNT2=$(mktemp -d /tmp/full-cache-2.XXXXXX)
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    umount "$MNT" "$MNT2" 2>/dev/null
    rmdir "$MNT" "$MNT2" 2>/dev/null
    rm -rf "$SPARE"
    rm -f /tmp/full-cache-run.$$.* /tmp/full-cache-serve.$$.log
}
trap cleanup EXIT
mount -t tmpfs -o size=2m tmpfs "$MNT" || exit 2
dd if=/dev/zero of="$MNT/fill" bs=64k 2>/dev/null  # until "No space left on device"
df -h "$MNT" | tail -1
export NUMBA_CACHE_DIR=$MNT/cache TMPDIR=$SPARE PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0

cli_run() {  # $1: what the run is
    local start rc
    start=$(date +%s.%N)
    "$PYTHON" -m app.cli run --duration 2 >/tmp/full-cache-run.$$.out 2>/tmp/full-cache-run.$$.err
    rc=$?
    printf 'cli run --duration 2 (%s): exit %s in %.1f s\n' "$1" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)"
    sed 's/^/  stderr: /' /tmp/full-cache-run.$$.err
    grep -m1 "Goodput" /tmp/full-cache-run.$$.out | sed 's/^/  stdout: /'
    [ "$rc" = 0 ] || status=1
}

serve() {  # $1: what the start is. Waits up to WAIT_S for /api/run, to report the time even past LIMIT_S.
    local start code elapsed
    start=$(date +%s.%N)
    "$PYTHON" -m app.cli serve --port "$PORT" >/tmp/full-cache-serve.$$.log 2>&1 &
    SERVER=$!
    while :; do
        elapsed=$(echo "$(date +%s.%N) - $start" | bc)
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/run?hardware=rtx3050&num_requests=5")
        [ "$code" = 200 ] && break
        if [ "$(echo "$elapsed > $WAIT_S" | bc)" = 1 ] || ! kill -0 "$SERVER" 2>/dev/null; then break; fi
        sleep 1
    done
    printf 'server (%s): /api/run answered %s %.1f s after start (limit %s s)\n' "$1" "$code" "$elapsed" "$LIMIT_S"
    curl -s "http://127.0.0.1:$PORT/healthz" | sed 's/^/  healthz: /'; echo
    grep "sched-sim:\|Error" /tmp/full-cache-serve.$$.log | sed 's/^/  server log: /'
    if [ "$code" != 200 ] || [ "$(echo "$elapsed > $LIMIT_S" | bc)" = 1 ]; then status=1; fi
    kill "$SERVER"; wait "$SERVER" 2>/dev/null; SERVER=
}

if [ -n "${BASELINE:-}" ]; then  # the same cold start with a roomy, empty cache directory, for comparison
    NUMBA_CACHE_DIR=$SPARE/roomy serve "baseline: cold, an empty cache directory with room"
fi
serve "cold: cache directory full, an empty TMPDIR"
cli_run "after the server, its kernels cached in TMPDIR"
serve "restarted: cache directory full, its kernels cached in TMPDIR"
# No cache anywhere: TMPDIR on a second tmpfs with one page left, room for Python's own check of the temporary
# directory (it skips a full one for /tmp) but not for kernels.
mount -t tmpfs -o size=2m tmpfs "$MNT2" || exit 2
dd if=/dev/zero of="$MNT2/fill" bs=4k count=$((512 - 4)) 2>/dev/null
TMPDIR=$MNT2 cli_run "TMPDIR nearly full too: no cache anywhere"
exit $status
