"""Uploads kept on disk by content hash, so a link naming one (`?upload=<id>`) still works after the server
restarts. Generic by kind (traces now; model configs can use the same store): each kind is a folder, each item a
pair of files `<id>.bin` (the bytes as uploaded) and `<id>.json` (what its kind needs to use it without parsing the
bytes again, e.g. a trace's row count).

Bounded in bytes: past `max_bytes` in all kinds together, the least recently used items go (a read counts as a
use; it is recorded as the files' modification time, so the order survives restarts). Writes go to a temporary
file renamed into place, so a crash never leaves half an item; ids are hashes of the content, so two servers
sharing the folder agree on them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..write_problems import folder_problem

ID_LENGTH = 16  # hex digits of the sha256: 64 bits, no collision among any plausible number of uploads
_ID = re.compile(rf"^[0-9a-f]{{{ID_LENGTH}}}$")
_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def content_id(data: bytes, name: str = "") -> str:
    """The id of `data` uploaded under `name` (the name is part of it: two people uploading the same file under
    different names each see their own)."""
    return hashlib.sha256(data + b"\0" + name.encode("utf-8", "replace")).hexdigest()[:ID_LENGTH]


@dataclass(frozen=True)
class Item:
    id: str
    data: bytes
    meta: dict


class BlobStore:
    def __init__(self, root: str | os.PathLike, max_bytes: int):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._sizes: OrderedDict[tuple[str, str], int] = OrderedDict()  # (kind, id) -> bytes, least recent first
        self._scan()

    def problem(self) -> str | None:
        """Why items cannot be written here ("read-only file system: <folder>", ...), or None."""
        return folder_problem(self.root)

    @property
    def total_bytes(self) -> int:
        return sum(self._sizes.values())

    def _paths(self, kind: str, uid: str) -> tuple[Path, Path]:
        if not _KIND.match(kind) or not _ID.match(uid):
            raise ValueError(f"not a store key: {kind}/{uid}")
        folder = self.root / kind
        return folder / f"{uid}.bin", folder / f"{uid}.json"

    def _scan(self) -> None:
        """The items already on disk, oldest use first (what a restarted server finds)."""
        found = []
        if self.root.is_dir():
            for folder in self.root.iterdir():
                if not folder.is_dir() or not _KIND.match(folder.name):
                    continue
                for blob in folder.glob("*.bin"):
                    meta = blob.with_suffix(".json")
                    if not _ID.match(blob.stem) or not meta.exists():
                        continue  # a half-removed item, or not ours
                    st = blob.stat()
                    found.append((st.st_mtime, folder.name, blob.stem, st.st_size + meta.stat().st_size))
        for _, kind, uid, size in sorted(found):
            self._sizes[(kind, uid)] = size

    def put(self, kind: str, data: bytes, meta: dict, name: str = "") -> str:
        """Keep `data` (with `meta`, a JSON-able dict) under its content id; returns the id. An item larger than
        the whole store is refused with ValueError."""
        uid = content_id(data, name)
        blob, meta_path = self._paths(kind, uid)
        meta_bytes = json.dumps(meta, sort_keys=True).encode()
        size = len(data) + len(meta_bytes)
        if size > self.max_bytes:
            raise ValueError(f"the upload ({size:,} bytes) is larger than the whole store ({self.max_bytes:,} bytes)")
        with self._lock:
            if (kind, uid) in self._sizes and blob.exists():
                self._touch(kind, uid, blob)
                return uid
            blob.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(blob, data)
            _write_atomic(meta_path, meta_bytes)  # last: an item counts as present once its meta exists
            self._sizes[(kind, uid)] = size
            self._sizes.move_to_end((kind, uid))
            self._evict()
        return uid

    def get(self, kind: str, uid: str) -> Item | None:
        """The item, or None if it is not in the store (never was, or was evicted)."""
        try:
            blob, meta_path = self._paths(kind, uid)
        except ValueError:
            return None
        with self._lock:
            try:
                data = blob.read_bytes()
                meta = json.loads(meta_path.read_bytes())
            except (OSError, ValueError):
                return None
            self._sizes.setdefault((kind, uid), len(data) + meta_path.stat().st_size)
            self._touch(kind, uid, blob)
        return Item(uid, data, meta)

    def meta(self, kind: str, uid: str) -> dict | None:
        """Only the item's meta (a small read, fit for the event loop), or None if it is not in the store."""
        try:
            _, meta_path = self._paths(kind, uid)
            return json.loads(meta_path.read_bytes())
        except (OSError, ValueError):
            return None

    def _touch(self, kind: str, uid: str, blob: Path) -> None:
        self._sizes.move_to_end((kind, uid))
        try:
            os.utime(blob, (time.time(), time.time()))
        except OSError:
            pass

    def _evict(self) -> None:
        while sum(self._sizes.values()) > self.max_bytes and len(self._sizes) > 1:
            (kind, uid), _ = self._sizes.popitem(last=False)
            for path in self._paths(kind, uid)[::-1]:  # meta first: without it the blob no longer counts
                path.unlink(missing_ok=True)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
