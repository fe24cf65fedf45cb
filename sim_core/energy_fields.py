"""The scenario's energy fields (issue #40; sim_core/energy.py turns a run's step log into `metrics.energy`). A base
of sim_core.scenario.Scenario, as kv_offload_fields.py is: off by default, so a run without them reports exactly
what it did before."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from .catalog import GPUS

# The most a facility's power usage effectiveness plausibly reaches (an old air-cooled room: ~2-2.5; hyperscalers
# report 1.1-1.2); a bound for the field, not a model figure.
MAX_PUE = 3.0
# Host power per GPU the field accepts: a whole 8-GPU server's CPUs, memory, NICs and fans stay below a few kW
# (an HGX B200 system is rated ~14.3 kW with its GPUs' 8 kW), so 2 kW per GPU bounds it with room.
MAX_NODE_POWER_W = 2000.0
# The field's bound on a power cap; each GPU's own range (above its idle power, at most its board limit) is
# checked against gpus.json below. 2 kW is above every catalogue GPU's board limit.
MAX_POWER_CAP_W = 2000.0
# Bounds of the price and carbon fields, not model figures: retail electricity stays well under $1/kWh, and the
# dirtiest grids (lignite) emit ~1,100 gCO2/kWh.
MAX_ENERGY_PRICE_PER_KWH = 10.0
MAX_GRID_GCO2_PER_KWH = 2000.0
# Fields that count only in metrics.energy, with their off values.
ENERGY_ONLY = (("node_power_w", 0.0), ("pue", 1.0), ("energy_price_per_kwh", 0.0), ("grid_gco2_per_kwh", 0.0))
HARDWARE_FIELDS = ("hardware", "prefill_hardware", "decode_hardware")


class EnergyFields(BaseModel):
    energy: bool = Field(
        False,
        description="report metrics.energy: GPU board power per step from what the step "
        "does (sim_core/energy.py), joules per token and per request, average "
        "and peak power",
    )
    node_power_w: float = Field(
        0.0,
        ge=0,
        le=MAX_NODE_POWER_W,
        description="energy: host power per GPU beyond its board (CPUs, memory, NICs, fans; "
        "W, drawn for the whole run; 0: GPU boards only)",
    )
    pue: float = Field(
        1.0,
        ge=1.0,
        le=MAX_PUE,
        description="energy: the facility's power usage effectiveness, multiplying GPU and host energy "
        "(1: the IT load only)",
    )
    power_cap_w: float | None = Field(
        None,
        gt=0,
        le=MAX_POWER_CAP_W,
        description="power limit per GPU (W, as nvidia-smi -pl sets it): above the GPU's idle power, at most "
        "its board limit; clocks fall so that no step draws more, and compute-bound kernels slow "
        "(sim_core/energy.py); unset: the board limit",
    )
    energy_price_per_kwh: float = Field(
        0.0,
        ge=0,
        le=MAX_ENERGY_PRICE_PER_KWH,
        description="energy: electricity price ($/kWh), added to cost_per_hour and cost_per_mtok "
        "(0: GPU rental only)",
    )
    grid_gco2_per_kwh: float = Field(
        0.0,
        ge=0,
        le=MAX_GRID_GCO2_PER_KWH,
        description="energy: the grid's carbon intensity (gCO2/kWh), reported as gCO2 per 1k requests "
        "(0: not reported)",
    )

    @model_validator(mode="after")
    def _energy_fields(self):
        if not self.energy:
            for name, off in ENERGY_ONLY:
                if getattr(self, name) != off:
                    raise ValueError(
                        f"{name}: counts only in metrics.energy; set energy with it (or leave it at {off})"
                    )
        if not self.energy and self.power_cap_w is None:
            return self
        for name in HARDWARE_FIELDS:
            key = getattr(self, name, None)
            if key is not None:
                problem = power_problem(key, self.power_cap_w, "energy" if self.energy else "power_cap_w", name)
                if problem:
                    raise ValueError(problem)
        return self


def power_problem(key: str, cap: float | None, what: str = "power_cap_w", name: str = "hardware") -> str | None:
    """Why GPU `key` cannot be powered as asked (no measured idle power, or `cap` W outside (idle, board]), or
    None: the one check of a power cap, for scenarios and step shapes alike."""
    gpu = GPUS[key]
    if gpu.idle_power_w is None:
        powered = ", ".join(k for k, g in GPUS.items() if g.idle_power_w is not None)
        return (f"{what}: {name} {key} has no measured idle power (sim_core/data/gpus.json power_source); "
                f"energy and power caps are modelled on {powered}")
    if cap is not None and not gpu.idle_power_w < cap <= gpu.board_power_w:
        return (f"power_cap_w: {cap:g} W is outside {key}'s range: above its idle power ({gpu.idle_power_w:g} W), "
                f"at most its board limit ({gpu.board_power_w:g} W)")
    return None
