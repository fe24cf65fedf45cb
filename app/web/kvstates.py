"""What the KV view colours beyond who holds a block: each grid cell's state from the engine's block states
(sim_core.views.BlockState: shared by several requests, or free but still holding a cached prefix that a later
request may reuse until it is evicted), and what is swapped out to host memory at each frame (from the event log:
a request's KV leaves the GPU at its swap-out and comes back at its swap-in).

The grid's cells (runview.kv_data) already say who holds them; `state_runs` adds, per frame, the run-length code
[state, length, ...] of each cell's CELL_* state, and `swap_frames` per frame [owner, blocks, ...] of the requests
swapped out then. static/js/kv_paint.js paints them with figures/kv.py's KV_STATES colours.
"""

from __future__ import annotations

import math

import numpy as np

from sim_core.kv_offload import GIB, tier_occupancy
from sim_core.views import BlockState, EventKind, event_columns, step_columns

# A cell's state beside its owner: CELL_PLAIN (free, or held: prefilling or decoding by its request's first-token
# time), CELL_SHARED (held, and at least half its held blocks are shared prefix blocks), CELL_CACHED (nobody holds
# it, and at least half its blocks keep a cached prefix, evictable), CELL_HELD (no running request owns it, but at
# least half its blocks are in use: on a prefill engine, a request's KV waiting to be pulled by a decode engine).
CELL_PLAIN, CELL_SHARED, CELL_CACHED, CELL_HELD = 0, 1, 2, 3


def frame_rows(recorded_s, frame_s) -> np.ndarray:
    """The recorded frames (indices into `recorded_s`, a run's kv_frame_s) that the view kept at the instants
    `frame_s`."""
    times = np.asarray(recorded_s, np.float64)
    want = np.asarray(frame_s, np.float64)  # rounded (runview._r): take the nearest recorded instant
    hi = np.clip(np.searchsorted(times, want), 0, len(times) - 1)
    lo = np.clip(hi - 1, 0, len(times) - 1)
    return np.where(np.abs(times[lo] - want) <= np.abs(times[hi] - want), lo, hi)


def cell_states(block_states: np.ndarray, k: int) -> np.ndarray:
    """[frame, block] BlockState -> [frame, cell] CELL_* for cells of k blocks."""
    n_frames, n_blocks = block_states.shape
    cells = math.ceil(n_blocks / k) if n_blocks else 0
    pad = np.full((n_frames, cells * k), BlockState.FREE, np.int8)
    pad[:, :n_blocks] = block_states
    s = pad.reshape(n_frames, cells, k)
    shared = (s == BlockState.SHARED).sum(axis=2)
    held = shared + (s == BlockState.USED).sum(axis=2)
    cached = (s == BlockState.CACHED).sum(axis=2)
    out = np.full((n_frames, cells), CELL_PLAIN, np.int8)
    out[(held > 0) & (2 * shared >= held)] = CELL_SHARED
    out[(held == 0) & (2 * cached >= k)] = CELL_CACHED
    if n_blocks % k and cells:  # the last cell is shorter: compare against its own size
        last = n_blocks - (cells - 1) * k
        tail = (held[:, -1] == 0) & (2 * cached[:, -1] >= last)
        out[:, -1] = np.where(tail, CELL_CACHED, out[:, -1])
    return out


def state_runs(res, kv: dict) -> list[list[int]]:
    """Per kept frame of the view's KV data `kv` (runview.kv_data), [state, length, ...] over its cells; empty
    when the run recorded no block states."""
    return pool_state_runs(getattr(res, "kv_frame_state", np.zeros((0, 0))), res.kv_frame_s, kv)


def run_lengths(code: np.ndarray) -> list[list[int]]:
    """Per row of a 2-D array: [value, run length, value, run length, ...]."""
    rows, n = code.shape
    start = np.ones(code.shape, bool)
    start[:, 1:] = code[:, 1:] != code[:, :-1]
    flat = np.flatnonzero(start.ravel())
    lengths = np.diff(np.append(flat, rows * n))  # every row begins a run, so runs never cross rows
    pairs = np.stack([code.ravel()[flat], lengths], axis=1)
    per_row = np.cumsum(start.sum(axis=1))[:-1]
    return [p.ravel().tolist() for p in np.split(pairs, per_row)]


def pool_state_runs(frame_state, recorded_s, kv: dict, owners=None) -> list[list[int]]:
    """state_runs of one KV pool: its recorded block states [frame, block] and their instants `recorded_s` (a
    single engine's run, or one engine of a cluster). With `owners` (the recorded frames [frame, block]: the
    request holding each block, or -1), cells in use that no request owns are CELL_HELD."""
    states = np.asarray(frame_state if frame_state is not None else np.zeros((0, 0)))
    if states.ndim != 2 or states.shape[0] == 0 or not kv["frame_s"]:
        return []
    rows = frame_rows(recorded_s, kv["frame_s"])
    cells = cell_states(states[rows], kv["k"])
    if owners is not None:
        cells[held_cells(states[rows], np.asarray(owners)[rows], kv["k"])] = CELL_HELD
    return run_lengths(cells)


def held_cells(block_states: np.ndarray, owners: np.ndarray, k: int) -> np.ndarray:
    """[frame, cell] True where no block of the cell has an owner and at least half its blocks are in use (USED
    or SHARED) all the same, for cells of k blocks."""
    n_frames, n_blocks = block_states.shape
    cells = math.ceil(n_blocks / k) if n_blocks else 0
    unowned = np.zeros((n_frames, cells * k), np.int64)
    owned = np.zeros((n_frames, cells * k), np.int64)
    in_use = (block_states == BlockState.USED) | (block_states == BlockState.SHARED)
    unowned[:, :n_blocks] = in_use & (owners < 0)
    owned[:, :n_blocks] = owners >= 0
    size = np.full(cells, k)
    if n_blocks % k and cells:  # the last cell is shorter
        size[-1] = n_blocks - (cells - 1) * k
    return ((owned.reshape(n_frames, cells, k).sum(axis=2) == 0)
            & (2 * unowned.reshape(n_frames, cells, k).sum(axis=2) >= size))


def swap_frames(res, kv: dict) -> dict | None:
    """At each frame of the view's KV data `kv`, the requests whose KV is swapped out to host memory and how many blocks each:
    {"capacity": swap blocks, "frames": [[owner, blocks, ...] per frame]}. None when nothing was swapped out (or
    the run's timeline is not recorded)."""
    if res.step_stride != 1:  # the events name steps: their start times need every step logged
        return None
    return pool_swap_frames(event_columns(res), step_columns(res)["start_s"], res.kv_frame_s, kv,
                            int(res.resolved.setup.block_size), int(res.resolved.swap_blocks))


def pool_swap_frames(ev: dict, start: np.ndarray, recorded_s, kv: dict, block: int, capacity: int) -> dict | None:
    """swap_frames of one KV pool: its events (event_columns, `step` numbering its own steps), its steps' start
    times, its recorded frames' instants, the block size and its host swap space in blocks."""
    kind = ev["kind"]
    swap = np.flatnonzero((kind == EventKind.SWAP_OUT) | (kind == EventKind.SWAP_IN))
    if not (kind[swap] == EventKind.SWAP_OUT).any():
        return None
    out_at: dict[int, tuple[float, int]] = {}
    spans = []  # (owner, blocks, out_s, in_s)
    swap = swap[np.argsort(ev["step"][swap], kind="stable")]
    for r, s, k, tokens in zip(*(ev[c][swap].tolist() for c in ("request", "step", "kind", "tokens")), strict=True):
        t = float(start[s]) if s < len(start) else math.inf
        if k == EventKind.SWAP_OUT:
            out_at[r] = (t, -(-tokens // block))
        elif r in out_at:
            t_out, blocks = out_at.pop(r)
            spans.append((r, blocks, t_out, t))
    spans += [(r, blocks, t_out, math.inf) for r, (t_out, blocks) in out_at.items()]
    frames = []
    # The recorded instants (kv["frame_s"] is rounded), each a step's start, snapshotted before that step ran.
    for t in np.asarray(recorded_s, np.float64)[frame_rows(recorded_s, kv["frame_s"])].tolist():
        row: list[int] = []
        for r, blocks, t_out, t_in in spans:
            if t_out < t <= t_in:  # a frame at a step's start is taken before that step swaps
                row += [int(r), int(blocks)]
        frames.append(row)
    return {"capacity": capacity, "frames": frames}


# The lower KV tiers (issue #23's tiered offload) and how the card labels them.
TIER_LABELS = {"cpu": "CPU", "disk": "disk"}


def tier_frames(res, kv: dict) -> dict | None:
    """At each frame of the view's KV data `kv`, the blocks each lower KV tier (host memory, disk) held, beside its
    capacity: {"tiers": [{"key", "label", "capacity" (blocks), "block_gb" (one block, per GPU), "frames"}],
    "caption": the run's hits and bytes per tier (metrics.kv_tiers)}. None without offload (or without frames)."""
    tiers = tier_occupancy(res)
    if not tiers or not kv["frame_s"] or len(res.kv_frame_s) == 0:
        return None
    rows = frame_rows(res.kv_frame_s, kv["frame_s"])
    block_gb = res.resolved.setup.kv_bytes_per_block / GIB
    return {"tiers": [{"key": key, "label": TIER_LABELS[key], "capacity": t["capacity"], "block_gb": block_gb,
                       "frames": t["frames"][rows].tolist()} for key, t in tiers.items()],
            "caption": tier_caption(res.metrics.get("kv_tiers", {}))}


def tier_caption(metrics: dict) -> str:
    """One line of the run's per-tier figures: prompt tokens each tier's hits served, and bytes moved."""
    parts = [f"prefix hits: GPU {metrics.get('gpu', {}).get('hit_tokens', 0):,} tokens"]
    for key, label in TIER_LABELS.items():
        m = metrics.get(key)
        if m:
            parts.append(f"{label} {m['hit_tokens']:,} tokens ({m['bytes_in'] / 1e9:.3g} GB written, "
                         f"{m['bytes_out'] / 1e9:.3g} GB loaded)")
    return "; ".join(parts)
