"""The kernel cache's compile flavours for code outside the engine (the faces' own kernels, e.g. app/web/kvgrid.py):
numba's plain `njit(cache=True)` raises out of a compile when its cache write fails (a full or read-only disk:
`OSError: [Errno 28]`), where these fall back to a temporary directory, or to compiling unsaved
(sim_core/kernel/jit.py says how). tests/test_web_jit_wrapper.py keeps every cached kernel on them."""

from __future__ import annotations

from .kernel.jit import allocating_kernel, entry_nogil

__all__ = ["allocating_kernel", "entry_nogil"]
