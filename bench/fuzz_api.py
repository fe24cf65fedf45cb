"""The long API fuzz campaign (schemathesis, from the app's OpenAPI schema): N cases per operation, no 5xx allowed.

    .venv/bin/python bench/fuzz_api.py [cases per operation, default 1000]

Prints the number of cases run per operation; exits non-zero if any answer was a 5xx."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    per_op = sys.argv[1] if len(sys.argv) > 1 else "1000"
    env = dict(os.environ, FUZZ_CASES_PER_OPERATION=per_op, PYTHONPATH=str(ROOT))
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                              str(ROOT / "tests" / "test_fuzz_api.py")], env=env, cwd=ROOT))
