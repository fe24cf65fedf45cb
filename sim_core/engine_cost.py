"""The cost-parameter vector an engine runs with, defined once: the runner builds each engine's Config from it and
the bounds price a finished run's steps with it (two copies once differed: the bounds' left the power cap out)."""

from __future__ import annotations

import numpy as np

from .catalog import Setup
from .energy import capped_constants
from .hardware_profile import profile_constants
from .kernel.cost_model import cost_params


def engine_cost_params(scenario, setup: Setup, time_scale: float) -> np.ndarray:
    """The cost model's parameters for an engine of `setup` in `scenario`: its hardware profile's constants, its
    compute-bound kernels at the power cap's clock (energy.capped_constants), the scenario's CPU overlap and engine,
    every step time scaled by `time_scale` (Resolved.step_time_scale)."""
    constants = capped_constants(setup, profile_constants(scenario.hardware_profile), scenario.power_cap_w)
    return cost_params(setup, constants, cpu_overlap=scenario.async_scheduling, time_scale=time_scale,
                       engine=scenario.engine)
