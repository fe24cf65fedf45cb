"""Why a file cannot be written, said the same way by every face: a read-only file system is not "permission
denied" (the fix differs: remount, or point the flag elsewhere, versus chmod or run as another user). Both faces
read it: the CLI's output-file checks (app/cli/report.py) and the web's upload store (app/web/store.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

_REASONS = {
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
}


def describe(err: OSError, path: str | os.PathLike) -> str:
    """`<reason>: <path>` for a failed write, the reason in plain words ("read-only file system", ...)."""
    return f"{_REASONS.get(err.errno, (err.strerror or str(err)).lower())}: {path}"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def read_only(path: str | os.PathLike) -> bool:
    """Whether the file system holding `path` (or its nearest existing ancestor) is mounted read-only."""
    try:
        return bool(os.statvfs(_nearest_existing(Path(path))).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # cannot tell (no statvfs on Windows): the write will say
        return False


def folder_problem(folder: str | os.PathLike) -> str | None:
    """Why files cannot be created in `folder` (created first where missing, as a write would), or None. Asked
    before writing: os.access answers "no" on a read-only file system as for a missing permission, so the file
    system's read-only flag is asked first."""
    if read_only(folder):
        return describe(OSError(errno.EROFS, "read-only"), folder)
    existing = _nearest_existing(Path(folder))
    if not os.access(existing, os.W_OK | os.X_OK):
        return describe(OSError(errno.EACCES, "denied"), folder)
    return None
