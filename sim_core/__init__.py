"""sched-sim's simulation core: a library with no web or plotting imports.

    from sim_core import Scenario, run
    result = run(Scenario(scheduler="chunked", workload="rag", hardware="a100"))
    result.metrics["itl_ms"]["p99"]

Faces read a Result's logs through `views` (named columns, enums), never the engine's own column numbers.

Each name below is imported from its module when first read (PEP 562), not with the package: every
`import sim_core.<module>` runs this file first, and importing the runner here made each of them load numba and
every engine kernel (~0.4 s), even for `sched-sim --help`, which reads the scenario's fields and nothing else.
"""

import importlib

# name -> the module of sim_core that defines it
_EXPORTS = {
    "GPUS": "catalog", "MODELS": "catalog", "SetupError": "catalog",
    "SCHEDULER_NAMES": "policies",
    "Result": "runner", "SeedRuns": "runner", "resolve": "runner", "run": "runner",
    "run_seeds": "runner", "warm_up": "kernel.warm", "warm_up_steps": "kernel.warm",
    "compiled_on_two_cores": "kernel.warm",
    "SimulationError": "simulation_error",
    "Scenario": "scenario", "ScenarioError": "scenario", "parse_scenario": "scenario",
    "TraceError": "traces",
    "BlockState": "views", "EventKind": "views", "RequestState": "views",
    "PRESETS": "workload",
}

__all__ = [*sorted(_EXPORTS), "views"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # read once: later reads find it here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
