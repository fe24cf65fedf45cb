"""Energy (issue #40): the board power each GPU draws during each engine step, from what the step does, integrated
over the run into `metrics.energy` (scenario field `energy`; sim_core/energy_fields.py).

The power model. A GPU with a model loaded and no kernel running draws its idle power (GPU.idle_power_w, a measured
nvidia-smi/rocm-smi capture); what a step adds is dynamic power, switching in the tensor cores and in the memory
system, which grows with how much of each the step keeps busy:

    P = P_idle + (P_board - P_idle) x min(1, u_compute + MEMORY_SATURATED_SHARE x u_memory)

u_compute: the step's FLOPs over its seconds at the rate the cost model's compute-bound GEMMs reach (LINEAR_RATE,
per GPU: 1 is a step that runs tensor cores flat out); u_memory: its bytes over its seconds at the streaming
bandwidth (STREAM_BW, per GPU: 1 is a step that saturates HBM), each at most 1. Both shares are of the dynamic
range (board limit minus idle), from measurements, not fitted to the rows we validate against
(validation/energy_constants.md):

- a compute-saturated step reaches the board limit, where power management holds it (so the achieved GEMM rate the
  cost model uses is already the power-limited one): B200s serving 8k/1k at conc 256-640 average 974-979 W per GPU
  of 1,000 W (InferenceX's validated power records, energy_inferencex.csv); MI300X prefill spikes to 89 % of TDP.
- a memory-saturated step draws MEMORY_SATURATED_SHARE of the range: memory-bound decode "saturates HBM bandwidth"
  yet "draws only 137-300 W on a 700 W GPU" (H200; Ma et al., arXiv 2605.11999): the top of that range over the
  H200's 122 W loaded idle and 700 W limit.
- power never exceeds the board limit (the min).

Between steps an engine waits for work at its idle power; an autoscaled replica draws idle power from being asked
for (weights loading) to its release. Whole-node power (CPUs, NICs, fans: node_power_w per GPU) and the facility's
PUE are separate terms, off by default. What is not modelled yet: communication time at a level of its own (the
step log keeps a step's seconds, bytes and FLOPs, not its split, so all-reduce time counts as low-utilisation time
of the step); power capping (steps never slow down for power); temperature.

Energy is the integral of power over time, taken from the step log: every logged step's power x its seconds, plus
idle power x the time no step ran. A step log that outgrew its bound keeps every `stride`-th step; each kept step
then stands for `stride` steps (exact while the log holds every step, as it does below 2^20 steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .catalog import GPUS, Setup
from .kernel.autoscaled import LIFE_ASKED_S, LIFE_RELEASED_S, LIFE_SLOT
from .kernel.cost_model import LINEAR_RATE, STREAM_BW, cost_params
from .kernel.state import FINISHED, N_STEP_COLS, S_BYTES, S_DURATION, S_FLOPS, S_START

# The H200 decode measurement the memory term stands on (Ma et al. 2026, see above): the most a memory-bound decode
# step drew, in W, on a GPU whose idle and board power gpus.json holds.
MEMORY_BOUND_DECODE_W = 300.0
_H200 = GPUS["h200"]
MEMORY_SATURATED_SHARE = (MEMORY_BOUND_DECODE_W - _H200.idle_power_w) / (
    _H200.board_power_w - _H200.idle_power_w
)


@dataclass(frozen=True)
class PowerModel:
    """One GPU's power: idle and board limit (W), and the per-GPU rates a step's work is measured against."""

    idle_w: float
    board_w: float
    compute_flops_per_s: float  # the cost model's compute-bound GEMM rate (LINEAR_RATE)
    stream_bytes_per_s: float  # the cost model's streaming bandwidth (STREAM_BW)

    def step_power_w(self, seconds: np.ndarray, moved: np.ndarray, flops: np.ndarray) -> np.ndarray:
        """Per-GPU power (W) of steps that took `seconds` and moved `moved` bytes and did `flops` FLOPs on each GPU
        (the step log's columns); a step of no time draws idle power."""
        seconds, moved, flops = (np.asarray(x, dtype=float) for x in (seconds, moved, flops))
        timed = seconds > 0
        span = np.where(timed, seconds, 1.0)
        compute = np.where(timed, np.minimum(flops / (span * self.compute_flops_per_s), 1.0), 0.0)
        memory = np.where(timed, np.minimum(moved / (span * self.stream_bytes_per_s), 1.0), 0.0)
        share = np.minimum(compute + MEMORY_SATURATED_SHARE * memory, 1.0)
        return self.idle_w + (self.board_w - self.idle_w) * share


def power_model(setup: Setup) -> PowerModel:
    """The power model of one GPU of a deployment (its kind, model, weight format and TP degree set the rates)."""
    gpu = setup.gpu
    if gpu.idle_power_w is None or gpu.board_power_w is None:
        raise ValueError(
            f"energy: {gpu.key} has no measured idle power (sim_core/data/gpus.json power_source)"
        )
    p = cost_params(setup)
    return PowerModel(
        float(gpu.idle_power_w), float(gpu.board_power_w), float(p[LINEAR_RATE]), float(p[STREAM_BW])
    )


@dataclass(frozen=True)
class EngineEnergy:
    """One engine's energy over the time its GPUs were held."""

    name: str  # "engine", "replica 2", "prefill 0"
    pool: str  # "engine", "replicas", "prefill", "decode"
    gpus: int
    held_s: float  # seconds its GPUs were held (the run's span, or an autoscaled slot's lives)
    busy_s: float  # seconds it ran steps
    busy_j: float  # energy of its steps, all its GPUs
    idle_j: float  # energy while it ran no step (provisioning included), all its GPUs
    peak_w: float  # the highest per-GPU power of a step

    @property
    def joules(self) -> float:
        return self.busy_j + self.idle_j


def engine_energy(
    name: str, pool: str, steps: np.ndarray, stride: int, model: PowerModel, gpus: int, held_s: float
) -> EngineEnergy:
    """∫ power dt of one engine: its logged steps' power x seconds (each standing for `stride` steps), plus idle
    power over the rest of the `held_s` seconds its GPUs were held."""
    steps = np.asarray(steps, dtype=float).reshape(-1, N_STEP_COLS)
    seconds = steps[:, S_DURATION]
    power = model.step_power_w(seconds, steps[:, S_BYTES], steps[:, S_FLOPS])
    busy_s = float(seconds.sum()) * stride
    busy_j = float((power * seconds).sum()) * stride * gpus
    idle_j = model.idle_w * max(held_s - busy_s, 0.0) * gpus
    peak = float(power.max()) if power.size else model.idle_w
    return EngineEnergy(name, pool, gpus, held_s, busy_s, busy_j, idle_j, peak)


def step_power_trace(steps: np.ndarray, model: PowerModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start s, seconds, per-GPU power W) of each logged step: the run's power over time, for a figure or a
    window of it (sim_core/studies/energy_checks.py)."""
    steps = np.asarray(steps, dtype=float).reshape(-1, N_STEP_COLS)
    return (
        steps[:, S_START],
        steps[:, S_DURATION],
        model.step_power_w(steps[:, S_DURATION], steps[:, S_BYTES], steps[:, S_FLOPS]),
    )


def run_engines(result) -> list[EngineEnergy]:
    """Each engine of a finished run (runner.Result) with its energy: one engine, replicas, P/D pools (each pool at
    its own GPU and TP) or an autoscaler's slots (held over their lives)."""
    span = float(result.metrics["duration_s"])
    pools = result.resolved.deployment
    if not result.engine_logs:
        pool = pools[0]
        return [
            engine_energy(
                "engine",
                "engine",
                result.steps,
                int(result.step_stride),
                power_model(pool.setup),
                pool.setup.tp,
                span,
            )
        ]
    held = (
        _slot_seconds(result.replica_lives, result.end_s, len(result.engine_logs))
        if result.replica_lives is not None
        else None
    )
    setups = (
        [pool.setup for pool in pools for _ in range(pool.engines)]
        if held is None
        else [pools[0].setup] * len(result.engine_logs)
    )
    models = {id(s): power_model(s) for s in setups}
    return [
        engine_energy(
            log.name,
            log.pool,
            log.steps,
            int(log.step_stride),
            models[id(setup)],
            setup.tp,
            span if held is None else float(held[k]),
        )
        for k, (log, setup) in enumerate(zip(result.engine_logs, setups, strict=True))
    ]


def _slot_seconds(lives: np.ndarray, end_s: float, slots: int) -> np.ndarray:
    """Seconds each autoscaler slot's replicas were held: from being asked for to their release (or the run's end)."""
    held = np.zeros(slots)
    start = lives[:, LIFE_ASKED_S]
    stop = np.minimum(lives[:, LIFE_RELEASED_S], end_s)
    ok = np.isfinite(start) & (stop > start)
    np.add.at(held, lives[ok, LIFE_SLOT].astype(np.int64), stop[ok] - start[ok])
    return held


def energy_metrics(result) -> dict:
    """`metrics.energy` of a finished run whose scenario has energy on."""
    s = result.scenario
    engines = run_engines(result)
    gpu_j = sum(e.joules for e in engines)
    gpu_s = sum(e.gpus * e.held_s for e in engines)
    node_j = s.node_power_w * gpu_s
    total_j = (gpu_j + node_j) * s.pue
    finished = result.status == FINISHED
    output = float(result.generated.sum())
    tokens = output + float(result.requests.prompt_tokens[finished].sum())
    completed = int(finished.sum())
    out = {
        "joules_per_output_token": total_j / output if output > 0 else None,
        "joules_per_token": total_j / tokens if tokens > 0 else None,
        "joules_per_request": total_j / completed if completed else None,
        "energy_j": total_j,
        "gpu_energy_j": gpu_j,
        "idle_energy_j": sum(e.idle_j for e in engines),
        "node_energy_j": node_j,
        "avg_power_w_per_gpu": gpu_j / gpu_s if gpu_s > 0 else None,
        "peak_power_w_per_gpu": max(e.peak_w for e in engines),
    }
    if len(engines) > 1:
        out["engines"] = [
            {
                "name": e.name,
                "pool": e.pool,
                "gpus": e.gpus,
                "energy_j": e.joules,
                "idle_j": e.idle_j,
                "avg_power_w_per_gpu": e.joules / (e.gpus * e.held_s) if e.held_s > 0 else None,
            }
            for e in engines
        ]
    if any(e.pool in ("prefill", "decode") for e in engines):
        out["pool_energy_j"] = {
            pool: sum(e.joules for e in engines if e.pool == pool) for pool in ("prefill", "decode")
        }
    return out
