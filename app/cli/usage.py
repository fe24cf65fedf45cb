"""What the parser and `main` need before any command runs: the one-line user error (UsageError), the parser that
raises it, the exit statuses and the one `error: ...` line. Apart from flags.py and report.py, which read the
Scenario model and the catalogue, so that `sched-sim --help` and a mistyped command load neither."""

from __future__ import annotations

import argparse
import re
import sys
import typing

EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130


def error(message: str, code: int = EXIT_USAGE) -> int:
    """One line on stderr; control characters escaped (a trace or a path may carry terminal escapes)."""
    line = " ".join(message.split())
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    print(f"error: {line}", file=sys.stderr)
    return code


class UsageError(Exception):
    """A user error: printed as one `error: ...` line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump) raised as UsageError so `main` can return 2."""

    def error(self, message: str) -> typing.NoReturn:
        message = re.sub(r"^argument (\S+?)(/\S+)?: ", r"\1: ", message)
        raise UsageError(f"{message} (see '{self.prog} --help')")
