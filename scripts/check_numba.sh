#!/usr/bin/env bash
# Does sim_core still work with the numba release after the one pyproject.toml pins? sim_core subclasses numba's
# classes and uses its internals (sim_core/kernel/RULES.md lists them), so a new minor release may break it quietly.
# In a throwaway venv (never the project's .venv) this installs the project with the pin overridden, runs the
# goldens and the refcount test against it with a cache directory of its own, and prints a one-line verdict.
#
#   bash scripts/check_numba.sh                        # the newest release of the next minor after the pin
#   NUMBA_VERSION=0.69.0rc1 bash scripts/check_numba.sh  # a release of your choice
#   bash scripts/check_numba.sh tests/test_compile.py tests/test_jit_cache.py   # more test files (the cache's
#                                     internals) on top of the two; the project's test extras are installed for them
# PYTHON picks the interpreter the venv is made from (default python3). Exit status 0 only on PASS.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python3}"
TESTS=(tests/test_golden.py tests/test_refcounts.py)
LABEL="goldens and refcounts"
if [ "$#" -gt 0 ]; then
    TESTS+=("$@")
    LABEL="goldens, refcounts and $*"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/check-numba.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
VENV="$WORK/venv"
SRC="$WORK/src"  # a copy of the working tree: the build and the tests write nothing into the repository
unset PYTHONPATH NUMBA_DISABLE_JIT  # nothing of the caller's environment may pick which sim_core or numba runs

echo "==> venv in $WORK"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

mkdir -p "$SRC"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    # Tracked and untracked files that git does not ignore: the working tree as it is, edits included.
    git -C "$ROOT" ls-files -z -co --exclude-standard | tar -C "$ROOT" --null --ignore-failed-read -T - -cf - \
        | tar -C "$SRC" -xf -
else
    tar -C "$ROOT" --exclude=./.venv --exclude=./.git --exclude=./.numba_cache -cf - . | tar -C "$SRC" -xf -
fi

# The pin, the project's other dependencies, and the release to test. Versions are compared with the venv's
# own pip's copy of `packaging` (the venv has nothing else yet).
if [ -n "${NUMBA_VERSION:-}" ]; then
    echo "==> numba $NUMBA_VERSION (NUMBA_VERSION)"
    AVAILABLE=""
else
    echo "==> pip index versions --pre numba"
    if ! AVAILABLE="$("${PIP[@]}" index versions --pre numba 2>/dev/null | sed -n 's/^Available versions: //p')" \
        || [ -z "$AVAILABLE" ]; then
        echo "check_numba: could not list numba's releases (pip index versions --pre numba); set NUMBA_VERSION" >&2
        exit 2
    fi
fi
PLAN="$(AVAILABLE="$AVAILABLE" "$VENV/bin/python" - "$SRC/pyproject.toml" "$WORK/test-extras.txt" <<'EOF'
import os
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    from pip._vendor import tomli as tomllib
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.version import Version

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
deps = [Requirement(d) for d in project["dependencies"]]
pin = next((d for d in deps if d.name == "numba"), None)
if pin is None:
    sys.exit("check_numba: pyproject.toml's dependencies name no numba")
others = [str(d) for d in deps if d.name != "numba"]

chosen = os.environ.get("NUMBA_VERSION", "")
if not chosen:
    versions = sorted(Version(v.strip()) for v in os.environ["AVAILABLE"].split(","))
    admitted = [v for v in versions if pin.specifier.contains(v)]  # final releases the pin admits
    if not admitted:
        sys.exit(f"check_numba: no numba release on the index satisfies the pin {pin}")
    newest_pinned = max(admitted)
    series = f"{newest_pinned.major}.{newest_pinned.minor}.x"
    newer = [v for v in versions if v > newest_pinned and not pin.specifier.contains(v, prereleases=True)]
    finals = [v for v in newer if not v.is_prerelease]
    pick_from = finals or newer  # a pre-release of the next minor only when no final release is out
    if pick_from:
        next_minor = min((v.major, v.minor) for v in pick_from)
        chosen = str(max(v for v in pick_from if (v.major, v.minor) == next_minor))
        what = "pre-release" if not finals else "release"
        print(f"the newest {what} of the next minor after the pin ({pin}): {chosen}"
              + (f"; the newest of all is {max(pick_from)} (NUMBA_VERSION= to test it)"
                 if max(pick_from) != Version(chosen) else ""), file=sys.stderr)
    else:
        chosen = str(newest_pinned)
        print(f"no release newer than {series} exists on PyPI (pip index versions --pre numba); "
              f"testing the newest {series} patch, {chosen}", file=sys.stderr)
print(chosen)
print("\n".join(others))
with open(sys.argv[2], "w") as f:  # what the test files beyond the two may need (httpx for TestClient, ...)
    f.write("\n".join(project.get("optional-dependencies", {}).get("test", [])) + "\n")
EOF
)"
VERSION="$(head -n1 <<<"$PLAN")"
mapfile -t OTHERS < <(tail -n +2 <<<"$PLAN")
EXTRAS=()
if [ "$#" -gt 0 ]; then
    EXTRAS=(-r "$WORK/test-extras.txt")
fi

echo "==> installing the project's other dependencies, numba==$VERSION and pytest, then the project (--no-deps)"
"${PIP[@]}" install -q "${OTHERS[@]}" "numba==$VERSION" pytest "${EXTRAS[@]}"
# Last and without its dependencies, so pip neither resolves the pin nor reports overriding it as a conflict.
"${PIP[@]}" install -q --no-deps "$SRC"
"$VENV/bin/python" -c 'import llvmlite, numba, numpy; print(f"numba {numba.__version__}, llvmlite {llvmlite.__version__}, numpy {numpy.__version__}")'

echo "==> pytest ${TESTS[*]}"
set +e
(cd "$SRC" && NUMBA_CACHE_DIR="$WORK/numba_cache" "$VENV/bin/python" -m pytest -q -rfE -p no:cacheprovider \
    "${TESTS[@]}") 2>&1 | tee "$WORK/pytest.log"
STATUS="${PIPESTATUS[0]}"
set -e

if [ "$STATUS" -eq 0 ]; then
    echo "numba $VERSION: $LABEL PASS"
    exit 0
fi
FAILED="$(sed -n 's/^\(FAILED\|ERROR\) \([^ ]*\).*/\2/p' "$WORK/pytest.log" | paste -sd ' ' -)"
echo "numba $VERSION: $LABEL FAIL (pytest exit $STATUS): ${FAILED:-see the pytest output above}"
exit 1
