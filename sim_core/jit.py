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
from pathlib import Path

from numba import config, njit


def _source_keyed_cache_dir() -> str | None:
    """numba keys each cached function on its own file only, so after an edit to one module the kernels of
    another that inline or call it would be stale. Unless NUMBA_CACHE_DIR says otherwise, keep the cache in a
    directory named after a hash of all of sim_core's sources (None, i.e. numba's default, if none is writable)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    sources = sorted(Path(__file__).resolve().parent.rglob("*.py"))
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sched-sim" / "numba" / digest
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(base) if os.access(base, os.W_OK) else None


_cache_dir = _source_keyed_cache_dir()
if _cache_dir is not None:
    config.CACHE_DIR = _cache_dir  # read when each function below is decorated

kernel = njit(cache=True)
entry = kernel
entry_nogil = njit(cache=True, nogil=True)  # releases the GIL: several web requests simulate in parallel threads
inline = njit(cache=True, inline="always")
