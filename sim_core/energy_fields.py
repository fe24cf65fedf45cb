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

    @model_validator(mode="after")
    def _energy_fields(self):
        if not self.energy:
            for name, off in (("node_power_w", 0.0), ("pue", 1.0)):
                if getattr(self, name) != off:
                    raise ValueError(
                        f"{name}: counts only in metrics.energy; set energy with it (or leave it at {off})"
                    )
            return self
        for name in ("hardware", "prefill_hardware", "decode_hardware"):
            key = getattr(self, name, None)
            if key is not None and GPUS[key].idle_power_w is None:
                powered = ", ".join(k for k, g in GPUS.items() if g.idle_power_w is not None)
                raise ValueError(
                    f"energy: {name} {key} has no measured idle power (sim_core/data/gpus.json "
                    f"power_source); energy is modelled on {powered}"
                )
        return self
