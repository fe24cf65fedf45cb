"""KV-pool frames -> grid cells, compiled with numba (a frame set holds up to millions of block owners).

A cell is `k` consecutive blocks; its code is (majority owner + 1) * (k + 1) + blocks in use, where the majority
owner is the request holding most of the cell's blocks (ties to the smaller id) and -1 for an empty cell.
"""

from __future__ import annotations

import numpy as np

from sim_core.compiled import entry_nogil


@entry_nogil  # called by cell_codes (and by tests from Python); np.sort allocates: reference counting on
def _majority(values, k):
    """Most frequent non-negative value among values[:k] (-1 if none); ties go to the smaller value."""
    best, best_count = -1, 0
    if k <= 8:
        for i in range(k):
            v = values[i]
            if v < 0:
                continue
            c = 0
            for j in range(k):
                if values[j] == v:
                    c += 1
            if c > best_count or (c == best_count and v < best):
                best, best_count = v, c
        return best
    s = np.sort(values[:k])
    run = 0
    for i in range(k):
        if s[i] < 0:
            continue
        run = run + 1 if i > 0 and s[i] == s[i - 1] else 1
        if run > best_count:
            best, best_count = s[i], run
    return best


@entry_nogil  # the web calls it from request threads: let the event loop run
def cell_codes(frames, k):
    """frames[f, block] (owner or -1) -> codes[f, cell] as described above."""
    n_frames, n_blocks = frames.shape
    n_cells = (n_blocks + k - 1) // k
    codes = np.zeros((n_frames, n_cells), np.int64)
    buf = np.empty(k, np.int64)
    for f in range(n_frames):
        for c in range(n_cells):
            lo = c * k
            hi = min(n_blocks, lo + k)
            used = 0
            for b in range(lo, hi):
                buf[b - lo] = frames[f, b]
                if frames[f, b] >= 0:
                    used += 1
            owner = _majority(buf, hi - lo) if used else -1
            codes[f, c] = (owner + 1) * (k + 1) + used
    return codes


def warm_up() -> None:
    cell_codes(np.full((1, 20), -1, np.int32), 2)
    cell_codes(np.full((1, 20), -1, np.int32), 10)
