"""What is wrong with a path a user names as an input file (a trace, a model's config.json, a hardware profile, a
benchmark result), said before anything opens it: opening a FIFO blocks until something writes into it, and
/dev/zero or /dev/urandom never end, so a reader that only asked "does it exist?" hung or read without bound,
and one that asked "is it a file?" reported a device as missing ("no such file")."""

from __future__ import annotations

import os
import stat

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def input_file_problem(path: str, what: str) -> str | None:
    """None when `path` is a regular file (or a link to one); else why it cannot be read as `what` ("a trace
    file"), as a phrase after the path: "no such file", "is a directory, not a trace file", ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as e:  # a loop of links, a name too long, a NUL byte in it
        return f"cannot be read ({getattr(e, 'strerror', None) or e})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"is a directory, not {what}"
    kind = next((text for test, text in _KINDS if test(mode)), "a special file")
    return f"is {kind}, not a regular file ({what} must be one)"
