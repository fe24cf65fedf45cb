"""sched-sim's simulation core: a library with no web or plotting imports.

    from sim_core import Scenario, run
    result = run(Scenario(scheduler="chunked", workload="rag", hardware="a100"))
    result.metrics["itl_ms"]["p99"]

Faces read a Result's logs through `views` (named columns, enums), never the engine's own column numbers.
"""

# .views after .runner: numba is first imported through sim_core.kernel.jit (which keeps PyYAML out of a CLI run), not
# through views' import of state. Importing it sets `sim_core.views` too.
from .catalog import GPUS, MODELS, SetupError
from .policies import SCHEDULER_NAMES
from .runner import Result, SeedRuns, SimulationError, resolve, run, run_seeds, warm_up
from .scenario import Scenario, ScenarioError, parse_scenario
from .traces import TraceError
from .views import BlockState, EventKind, RequestState
from .workload import PRESETS

__all__ = [
    "GPUS", "MODELS", "PRESETS", "SCHEDULER_NAMES", "BlockState", "EventKind", "RequestState", "Result", "Scenario",
    "ScenarioError", "SetupError", "SeedRuns", "SimulationError", "TraceError", "parse_scenario", "resolve", "run",
    "run_seeds", "views", "warm_up",
]

