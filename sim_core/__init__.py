"""sched-sim's simulation core: a library with no web or plotting imports.

    from sim_core import Scenario, run
    result = run(Scenario(scheduler="chunked", workload="rag", hardware="rtx3050"))
    result.metrics["itl_ms"]["p99"]
"""

from .catalog import GPUS, MODELS, SetupError
from .policies import SCHEDULER_NAMES
from .runner import Result, SeedRuns, SimulationError, resolve, run, run_seeds, warm_up
from .scenario import Scenario, ScenarioError, parse_scenario
from .workload import PRESETS, TraceError

__all__ = [
    "GPUS", "MODELS", "PRESETS", "SCHEDULER_NAMES", "Result", "Scenario", "ScenarioError", "SetupError",
    "SeedRuns", "SimulationError", "TraceError", "parse_scenario", "resolve", "run", "run_seeds", "warm_up",
]

