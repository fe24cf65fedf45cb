"""The server's caches and its memory: an LRU map bounded by entries and by bytes whose misses are computed once
(single flight), the size of what it holds (deep_size), and handing freed memory back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import fields, is_dataclass

import numpy as np

from sim_core.runner import Cancelled

# What the caches may hold, in bytes (deep_size): cached views are most of an idle server's memory. Every cache
# has a bound in bytes (an entry's size varies a hundredfold with its run's length, so a count bounds nothing).
VIEW_CACHE_BYTES = 256 * 1024 * 1024
UPLOAD_CACHE_BYTES = 64 * 1024 * 1024
DIFF_CACHE_BYTES = 64 * 1024 * 1024  # request-level A/Bs (diff_page): a few arrays per request of both runs
ENSEMBLE_CACHE_BYTES = 16 * 1024 * 1024  # model-uncertainty ensembles (model_interval): metrics per member
JOB_RESULTS_BYTES = 64 * 1024 * 1024  # finished sweeps', plans' and frontiers' results, each board (jobs.py)
PAGE_CACHE_BYTES = 32 * 1024 * 1024  # rendered pages and embeds (rendered.py): a page is ~0.4 MB of HTML


_SCALARS = frozenset((str, bytes, int, float, bool, type(None)))


def deep_size(obj: object) -> int:
    """About how many bytes `obj` holds: numpy arrays' buffers, and containers, dataclasses and plain objects
    walked (each counted once; scalars are counted where they appear, without a visit of their own)."""
    seen: set[int] = set()
    stack, total = [obj], 0
    size = sys.getsizeof

    def push(items) -> None:
        nonlocal total
        for x in items:
            if type(x) in _SCALARS:
                total += size(x)
            else:
                stack.append(x)

    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            total += o.nbytes if o.base is None else 0  # a view of another array owns no buffer
            if o.base is not None:
                stack.append(o.base)
            continue
        total += size(o)
        if isinstance(o, dict):
            push(o.keys())
            push(o.values())
        elif isinstance(o, list | tuple) and len(o) > 64 and type(o[0]) in (float, int) and type(o[-1]) is type(o[0]):
            total += len(o) * size(o[0])  # a long numeric column (figure data): its numbers are all one size
        elif isinstance(o, list | tuple | set | frozenset):
            push(o)
        elif is_dataclass(o) and not isinstance(o, type):
            push(getattr(o, f.name) for f in fields(o))
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            stack.append(vars(o))
    return total


_libc = ctypes.CDLL(ctypes.util.find_library("c")) if sys.platform.startswith("linux") else None
_trimmed_at = 0.0
TRIM_EVERY_S = 1.0


def release_memory() -> None:
    """Hand memory freed by finished runs back to the system (glibc keeps freed heap pages in its per-thread
    arenas otherwise: after a load test the server sat at several GB with its caches full at a few hundred MB).
    At most once a second: a trim walks the heap."""
    global _trimmed_at
    now = time.monotonic()
    if _libc is None or now - _trimmed_at < TRIM_EVERY_S:
        return
    _trimmed_at = now
    try:
        _libc.malloc_trim(0)
    except AttributeError:  # not glibc
        pass


class SingleFlightLRU:
    """An LRU map, bounded by bytes (`sizeof`) and by entries, whose misses are computed once even when many
    threads ask at the same time."""

    def __init__(self, *, max_bytes: int, maxsize: int = 4096, sizeof: Callable[[object], int] = deep_size):
        self.maxsize, self.max_bytes, self._sizeof = maxsize, max_bytes, sizeof
        self._items: OrderedDict[str, object] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.bytes = 0
        self._pending: dict[str, Future] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: str):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def get_or_compute(self, key: str, compute: Callable[[], object]):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            fut = self._pending.get(key)
            owner = fut is None
            if owner:
                fut = self._pending[key] = Future()
                self.misses += 1
        if not owner:
            try:
                return fut.result()
            except Cancelled:  # the computing client went away; this one still wants the value
                return self.get_or_compute(key, compute)
        try:
            value = compute()
        except BaseException as e:
            with self._lock:
                del self._pending[key]
            fut.set_exception(e)
            raise
        size = self._sizeof(value)
        with self._lock:
            del self._pending[key]
            self._keep(key, value, size)
        fut.set_result(value)
        return value

    def put(self, key: str, value: object) -> None:
        """Keep `value` under `key` (computed elsewhere), replacing what was there."""
        size = self._sizeof(value)
        with self._lock:
            if key in self._items:
                del self._items[key]
                self.bytes -= self._sizes.pop(key)
            self._keep(key, value, size)

    def _keep(self, key: str, value: object, size: int) -> None:
        """Called locked."""
        if size <= self.max_bytes:  # one larger than the whole cache is not kept
            self._items[key] = value
            self._sizes[key] = size
            self.bytes += size
        while self._items and (len(self._items) > self.maxsize or self.bytes > self.max_bytes):
            old, _ = self._items.popitem(last=False)
            self.bytes -= self._sizes.pop(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self.bytes = 0
            self.hits = self.misses = 0
