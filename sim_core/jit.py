"""How sim_core compiles. Every kernel is numba-compiled in nopython mode and cached on disk; each also runs as
plain Python under NUMBA_DISABLE_JIT=1. Two flavours, because compile time is mostly a fixed cost per compiled
function (~0.25 s each on a laptop core), and a call costs an atomic reference-count update for every array or
record it passes (numba counts references to arguments, even for an inlined call):

  kernel  a function compiled on its own (`entry`, `entry_nogil`: the ones Python calls)
  inline  a few lines: numba inlines it into each caller, so it is not compiled on its own and not called at run
          time. Loops that run per request per step call neither kind with array or record arguments.
No fastmath, no globals that change, random numbers drawn outside the kernels: results are bit-identical across
runs and processes.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from numba import config, njit


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _cache_dir() -> str | None:
    """Where compiled kernels are cached. numba keys each cached function on its own file only, so after an edit
    to one module the kernels of another that inline or call it would be stale: by default the directory is
    named after a hash of all of sim_core's sources. NUMBA_CACHE_DIR, if set and writable, wins. If neither is
    writable (a read-only deployment), a per-user temporary directory; if not even that, None: no caching."""
    sources = sorted(Path(__file__).resolve().parent.rglob("*.py"))
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    home_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sched-sim" / "numba" / digest
    wanted = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else home_cache
    fallback = Path(tempfile.gettempdir()) / f"sched-sim-numba-{os.getuid() if hasattr(os, 'getuid') else 0}" / digest
    for path in (wanted, fallback):
        if _writable(path):
            if path != wanted:
                print(f"sched-sim: {wanted} is not writable; caching compiled kernels in {path}", file=sys.stderr)
            return str(path)
    print(f"sched-sim: no writable cache directory ({wanted}, {fallback}); kernels compile on every start",
          file=sys.stderr)
    return None


CACHE_DIR = _cache_dir()
if CACHE_DIR is not None:
    config.CACHE_DIR = CACHE_DIR  # read when each function below is decorated; numba writes nowhere else

_CACHE = CACHE_DIR is not None
kernel = njit(cache=_CACHE)
entry = kernel
entry_nogil = njit(cache=_CACHE, nogil=True)  # releases the GIL: several web requests simulate in parallel threads
inline = njit(cache=_CACHE, inline="always")
