"""One module per `sched-sim` subcommand, named after it (`step-time` -> step_time.py). Each defines

    NAME                  the subcommand, as typed
    add_arguments(parser) its flags (the scenario flags and the shared ones come from app.cli.flags)
    handle(args) -> int   runs it and prints its report; the exit status

and holds what only it prints. `app.cli.dispatch` lists the commands COMMANDS names, in this order (the order
`sched-sim --help` lists them), with the line given there; adding a subcommand is a new module here and its entry
in COMMANDS (tests/test_cli.py checks the two agree). Only the module of the command a command line names is
imported (`sched-sim --help` imports none), so a module imports what its command runs on at its top, and
`sched-sim list` loads none of the engine.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module -> its one line in `sched-sim --help` (and its --help's description), in the order --help lists them.
COMMANDS = {
    "run": "simulate one scheduler on one scenario and print its metrics",
    "compare": "simulate several schedulers on the same scenario and requests, side by side",
    "diff": "compare two runs over the same requests request by request: who won, who lost, and why",
    "sweep": "simulate schedulers over a grid of arrival rates and find each one's saturation knee",
    "capacity": "the highest arrival rate a deployment serves within its SLOs, over seeds",
    "plan": "the cheapest deployments (GPU, TP, scheduler, replicas) that meet the SLOs at a rate",
    "frontier": ("throughput per GPU against tokens/s per user over closed-loop concurrencies, per GPU and configuration "
            "(InferenceX's axes)"),
    "serve": "start the web dashboard",
    "step_time": ("predict one engine step's time and where it goes (GEMMs, attention, elementwise, lm head, communication, "
            "CPU overhead)"),
    "calibrate": ("fit the cost model's efficiency and overhead constants to your own hardware from measured steps or a vllm "
            "bench serve result, and write a profile for --hardware-profile"),
    "validate": ("predict every row of the validation set (public kernel, step and serving measurements) and print the "
            "errors, per row and per group"),
    "list": "list the GPUs, models, workload presets, schedulers and metrics (name, unit, meaning)",
    "worker": ("start, stop or show a process that keeps the simulator loaded, which later commands of this "
               "checkout run in, skipping their imports and kernel loads"),
}


def load(name: str) -> ModuleType:
    """The module of one command (its module name: `step_time`)."""
    return importlib.import_module(f"{__name__}.{name}")


def load_all() -> tuple[ModuleType, ...]:
    # (Not `list(...)` here: importing the `list` command binds that name in this package to its module.)
    return tuple(load(name) for name in COMMANDS)
