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

from numba import njit

kernel = njit(cache=True)
entry = kernel
entry_nogil = njit(cache=True, nogil=True)  # releases the GIL: several web requests simulate in parallel threads
inline = njit(cache=True, inline="always")
