"""One module per `sched-sim` subcommand, named after it (`step-time` -> step_time.py). Each defines

    NAME                  the subcommand, as typed
    HELP                  its one line in `sched-sim --help`, and its --help's description
    add_arguments(parser) its flags (the scenario flags and the shared ones come from app.cli.flags)
    handle(args) -> int   runs it and prints its report; the exit status

and holds what only it prints. `app.cli.dispatch` registers the modules COMMANDS names, in this order (the order
`sched-sim --help` lists them); adding a subcommand is a new module here and its name in COMMANDS
(tests/test_cli.py checks the two agree). A module imports at its top only what parsing needs: what a command
runs on (the planner, the process pool, the web stack) is imported in its handler, so that `sched-sim run` loads
none of the others'.
"""

from __future__ import annotations

import importlib
from types import ModuleType

COMMANDS = ("run", "compare", "diff", "sweep", "capacity", "plan", "frontier", "serve", "step_time", "calibrate", "validate", "list")


def load() -> tuple[ModuleType, ...]:
    # (Not `list(...)` here: importing the `list` command binds that name in this package to its module.)
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in COMMANDS)
