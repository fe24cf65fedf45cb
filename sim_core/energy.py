"""Energy (issue #40): the board power each GPU draws during each engine step, from what the step does, integrated
over the run into `metrics.energy` (scenario field `energy`; sim_core/energy_fields.py).

The power model. A GPU with a model loaded and no kernel running draws its idle power (GPU.idle_power_w, a measured
nvidia-smi/rocm-smi capture). A GPU running a step draws more, as a share of its dynamic range (board limit minus
idle power):

    P = P_idle + (P_board - P_idle) x min(1, ACTIVE_SHARE + u_compute + MEMORY_SHARE x u_memory)

u_compute: the step's FLOPs over its seconds at the rate the cost model's compute-bound GEMMs reach (LINEAR_RATE,
per GPU; 1 is a step that runs the tensor cores flat out, which reaches the board limit, where power management
holds it); u_memory: its bytes over its seconds at the streaming bandwidth (STREAM_BW, per GPU). ACTIVE_SHARE is what
running kernels at all costs (clocks up, schedulers, NVLink) whatever their work; MEMORY_SHARE what streaming HBM
costs per unit of bandwidth (the DRAM and its I/O, and the SMs issuing the loads). Both are derived, not assumed:
sim_core/studies/power_shares.py regresses the validated per-GPU power of InferenceX's B200 runs (23 records,
SGLang serving Qwen3.5-397B at 8k/1k, concurrency 1 to 640; validation/energy_inferencex.csv) on the utilisations
the simulator gives those runs: ACTIVE_SHARE 0.133, MEMORY_SHARE 1.044 (a memory-saturated step reaches the board
limit). Those records are disjoint from what `validate` checks the model against (ML.ENERGY's vLLM runs on H100
and B200, validation/energy_mlenergy.csv). The earlier memory share from Ma et al. (H200 decode at 137-300 W of
700; arXiv 2605.11999) is not used: ML.ENERGY's H100 decode draws 400-500 W at batch 8, and InferenceX's B200
decode 350-530 W, each far above it (validation/energy_constants.md).

A power cap (`power_cap_w`, per GPU) lowers the clock: dynamic power goes as f x V^2 and the voltage with the
clock in the DVFS range, so as f^3, and a compute-saturated step at the cap runs at CLOCK = ((cap - idle) /
(board - idle))^(1/3) of the full clock. The cost model runs its compute-bound kernels (GEMMs, attention) at CLOCK
x their rate (capped_constants), so compute-bound steps slow; the clock-driven part of a step's power (active and
compute shares) scales by CLOCK^3, the memory share does not (HBM keeps its own clock), and no step draws more than
the cap. Memory-bound steps then barely slow while their power falls, as clock-locking and capping studies report
for decode (validation/energy_constants.md: Ma et al.; Samsi et al. 2023; the llmgarage RTX 3090 sweep).

Between steps an engine waits for work at its idle power; an autoscaled replica draws idle power from being asked
for (weights loading) to its release. Whole-node power (CPUs, NICs, fans: node_power_w per GPU) and the facility's
PUE are separate terms, off by default. What is not modelled yet: communication time at a level of its own (the
step log keeps a step's seconds, bytes and FLOPs, not its split, so all-reduce time counts as low-utilisation time
of the step); temperature; a memory-bound step slowing under a cap tighter than its own power.

Energy is the integral of power over time, taken from the step log: every logged step's power x its seconds, plus
idle power x the time no step ran. A step log that outgrew its bound keeps every `stride`-th step; each kept step
then stands for `stride` steps (exact while the log holds every step, as it does below 2^20 steps).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import timeline
from .catalog import Setup
from .hardware_profile import profile_constants
from .kernel.autoscaled import LIFE_ASKED_S, LIFE_RELEASED_S, LIFE_SLOT
from .kernel.cost_constants import Constants, default_constants
from .kernel.cost_model import LINEAR_RATE, STREAM_BW, cost_params
from .kernel.state import (
    E_KIND,
    E_REQUEST,
    E_STEP,
    E_TOKENS,
    EV_PREFILL,
    FINISHED,
    N_STEP_COLS,
    S_BYTES,
    S_DECODE_SEQS,
    S_DURATION,
    S_FLOPS,
    S_PREFILL_TOKENS,
    S_START,
)

# Shares of the dynamic range (sim_core/studies/power_shares.py derives them; tests/test_power_shares.py checks
# that the derivation still gives these figures).
ACTIVE_SHARE = 0.133
MEMORY_SHARE = 1.044
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class PowerModel:
    """One GPU's power: idle and board limit (W), the per-GPU rates a step's work is measured against, and the
    power cap (W; the board limit when uncapped) with the clock it holds (1 uncapped)."""

    idle_w: float
    board_w: float
    compute_flops_per_s: float  # the cost model's compute-bound GEMM rate (LINEAR_RATE), at the capped clock
    stream_bytes_per_s: float  # the cost model's streaming bandwidth (STREAM_BW)
    cap_w: float | None = None  # power_cap_w; None: the board limit
    clock: float = 1.0  # the share of the full clock the cap leaves (capped_clock)

    @property
    def limit_w(self) -> float:
        return self.board_w if self.cap_w is None else min(self.cap_w, self.board_w)

    def step_power_w(self, seconds: np.ndarray, moved: np.ndarray, flops: np.ndarray) -> np.ndarray:
        """Per-GPU power (W) of steps that took `seconds` and moved `moved` bytes and did `flops` FLOPs on each GPU
        (the step log's columns); a step of no time draws idle power."""
        seconds, moved, flops = (np.asarray(x, dtype=float) for x in (seconds, moved, flops))
        timed = seconds > 0
        span = np.where(timed, seconds, 1.0)
        compute = np.where(timed, np.minimum(flops / (span * self.compute_flops_per_s), 1.0), 0.0)
        memory = np.where(timed, np.minimum(moved / (span * self.stream_bytes_per_s), 1.0), 0.0)
        clocked = np.where(timed, ACTIVE_SHARE + compute, 0.0) * self.clock**3
        share = np.minimum(clocked + MEMORY_SHARE * memory, 1.0)
        return np.minimum(self.idle_w + (self.board_w - self.idle_w) * share, self.limit_w)


def capped_clock(idle_w: float, board_w: float, cap_w: float | None) -> float:
    """The share of its full clock a GPU capped at `cap_w` holds when compute-saturated: dynamic power ~ f^3."""
    if cap_w is None or cap_w >= board_w:
        return 1.0
    return float(((cap_w - idle_w) / (board_w - idle_w)) ** (1.0 / 3.0))


def capped_constants(setup: Setup, constants: Constants | None, cap_w: float | None) -> Constants | None:
    """The cost model's constants on a GPU capped at `cap_w` W: its compute-bound kernels (GEMMs, attention) run
    at the capped clock's share of their rate; `constants` unchanged (None: the catalogue's) when uncapped."""
    gpu = setup.gpu
    if cap_w is None:
        return constants
    clock = capped_clock(float(gpu.idle_power_w), float(gpu.board_power_w), cap_w)
    c = constants or default_constants(setup)
    return dataclasses.replace(
        c, compute_efficiency=c.compute_efficiency * clock, attention_efficiency=c.attention_efficiency * clock
    )


def power_model(setup: Setup, cap_w: float | None = None, constants: Constants | None = None) -> PowerModel:
    """The power model of one GPU of a deployment (its kind, model, weight format and TP degree set the rates),
    capped at `cap_w` W per GPU (None: uncapped), with the cost model's constants (None: the catalogue's)."""
    gpu = setup.gpu
    if gpu.idle_power_w is None or gpu.board_power_w is None:
        raise ValueError(
            f"energy: {gpu.key} has no measured idle power (sim_core/data/gpus.json power_source)"
        )
    p = cost_params(setup, capped_constants(setup, constants, cap_w))
    idle, board = float(gpu.idle_power_w), float(gpu.board_power_w)
    return PowerModel(
        idle, board, float(p[LINEAR_RATE]), float(p[STREAM_BW]), cap_w, capped_clock(idle, board, cap_w)
    )


def scenario_power_model(scenario, setup: Setup) -> PowerModel:
    """The power model of one GPU of a scenario's pool: its power cap and hardware profile applied."""
    return power_model(setup, scenario.power_cap_w, profile_constants(scenario.hardware_profile))


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
    if busy_s > held_s > 0:  # a strided log overestimates a saturated engine's busy time: keep it within held_s
        busy_j *= held_s / busy_s
        busy_s = held_s
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


@dataclass(frozen=True)
class EnginePower:
    """What one engine's energy is computed from: its step log, the GPUs it runs on and when they were held."""

    name: str
    pool: str
    steps: np.ndarray  # its step log (state.S_* columns), every `stride`-th step
    stride: int
    model: PowerModel
    gpus: int
    held: np.ndarray  # [interval, (from s, to s)]: when its GPUs were held

    @property
    def held_s(self) -> float:
        return float((self.held[:, 1] - self.held[:, 0]).sum())

    def energy(self) -> EngineEnergy:
        return engine_energy(self.name, self.pool, self.steps, self.stride, self.model, self.gpus, self.held_s)


def engine_powers(result) -> list[EnginePower]:
    """Each engine of a finished run (runner.Result): one engine, replicas, P/D pools (each pool at its own GPU and
    TP) or an autoscaler's slots (held over their lives, from being asked for to their release); the others are
    held over the run's span (metrics.duration_s, up to its end)."""
    span = float(result.metrics["duration_s"])
    whole_run = np.array([[result.end_s - span, result.end_s]])
    pools = result.resolved.deployment
    if not result.engine_logs:
        setup = pools[0].setup
        model = scenario_power_model(result.scenario, setup)
        return [EnginePower("engine", "engine", result.steps, int(result.step_stride), model, setup.tp, whole_run)]
    autoscaled = result.replica_lives is not None
    setups = (
        [pools[0].setup] * len(result.engine_logs)
        if autoscaled
        else [pool.setup for pool in pools for _ in range(pool.engines)]
    )
    models = {id(s): scenario_power_model(result.scenario, s) for s in setups}
    return [
        EnginePower(
            log.name,
            log.pool,
            log.steps,
            int(log.step_stride),
            models[id(setup)],
            setup.tp,
            _slot_lives(result.replica_lives, result.end_s, k) if autoscaled else whole_run,
        )
        for k, (log, setup) in enumerate(zip(result.engine_logs, setups, strict=True))
    ]


def run_engines(result) -> list[EngineEnergy]:
    """Each engine of a finished run with its energy (engine_powers says over which time)."""
    return [e.energy() for e in engine_powers(result)]


def _slot_lives(lives: np.ndarray, end_s: float, slot: int) -> np.ndarray:
    """[life, (asked for, released or the run's end)] of one autoscaler slot's replicas."""
    mine = lives[lives[:, LIFE_SLOT].astype(np.int64) == slot]
    start = mine[:, LIFE_ASKED_S]
    stop = np.minimum(mine[:, LIFE_RELEASED_S], end_s)
    ok = np.isfinite(start) & (stop > start)
    return np.column_stack([start[ok], stop[ok]]).reshape(-1, 2)


def power_over_time(engine: EnginePower) -> tuple[np.ndarray, np.ndarray]:
    """One engine's power (W, all its GPUs) as a step function: (times s, watts), watts[i] drawn over [times[i],
    times[i + 1]); the last value is 0 (the run's accounting ends). A step draws its power, a held GPU between
    steps its idle power, a GPU not held (an autoscaler's released replica) none. Its integral is the engine's
    energy (engine_energy) when the step log holds every step (stride 1); a strided log's steps stand for others,
    which a time line cannot show."""
    steps = np.asarray(engine.steps, dtype=float).reshape(-1, N_STEP_COLS)
    starts, seconds = steps[:, S_START], steps[:, S_DURATION]
    ends = starts + seconds
    watts = engine.model.step_power_w(seconds, steps[:, S_BYTES], steps[:, S_FLOPS]) * engine.gpus
    held = engine.held
    times = np.unique(np.concatenate([starts, ends, held[:, 0], held[:, 1]]))
    holding = np.searchsorted(np.sort(held[:, 0]), times, "right") - np.searchsorted(
        np.sort(held[:, 1]), times, "right"
    )
    value = np.where(holding > 0, engine.model.idle_w * engine.gpus, 0.0)
    if len(starts):  # an engine's steps follow one another: the one under each time is the last begun by then
        k = np.maximum(np.searchsorted(starts, times, "right") - 1, 0)
        value = np.where((times >= starts[k]) & (times < ends[k]), watts[k], value)
    value[-1:] = 0.0
    keep = np.ones(len(times), bool)
    keep[1:] = value[1:] != value[:-1]  # a value held on: one sample
    keep[-1:] = True
    return times[keep], value[keep]


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
    if s.grid_gco2_per_kwh:
        out["gco2_per_1k_requests"] = (
            total_j / J_PER_KWH * s.grid_gco2_per_kwh / completed * 1000.0 if completed else None
        )
    if any(e.pool in ("prefill", "decode") for e in engines):
        out["pool_energy_j"] = {
            pool: sum(e.joules for e in engines if e.pool == pool) for pool in ("prefill", "decode")
        }
    return out


def add_energy_metrics(result) -> None:
    """Put `metrics.energy` into a finished run's metrics, and fold the electricity it bought into cost_per_hour and
    cost_per_mtok (each at the convention the cost metric already uses: the ratio of the two is kept)."""
    energy = energy_metrics(result)
    result.metrics["energy"] = energy
    price = result.scenario.energy_price_per_kwh
    if not price:
        return
    m = result.metrics
    kwh = energy["energy_j"] / J_PER_KWH
    hours = float(m["duration_s"]) / 3600.0
    output_mtok = float(result.generated.sum()) / 1e6
    energy["energy_cost"] = kwh * price
    energy["energy_cost_per_hour"] = kwh * price / hours if hours > 0 else None
    energy["energy_cost_per_mtok"] = kwh * price / output_mtok if output_mtok > 0 else None
    if m.get("cost_per_hour") and m.get("cost_per_mtok") is not None and energy["energy_cost_per_hour"]:
        per_mtok_per_hour = m["cost_per_mtok"] / m["cost_per_hour"]
        m["cost_per_hour"] += energy["energy_cost_per_hour"]
        m["cost_per_mtok"] = m["cost_per_hour"] * per_mtok_per_hour


@dataclass(frozen=True)
class RequestEnergy:
    """Who paid for whom: each request's share of the GPU energy of the steps that served it (J, all the GPUs of
    its engine; boards only, before host power and PUE), and what no request ran in."""

    joules: np.ndarray  # per request (0 for one never scheduled)
    busy_j: float  # the steps' energy: joules.sum() + unattributed_j
    idle_j: float  # GPUs held with no step running (provisioning included): no request's
    unattributed_j: float  # steps with no token of work (none in the engines' logs so far)


def request_energy(result) -> RequestEnergy:
    """Each step's energy split among the requests in its batch by their share of its tokens: a prefill chunk's
    tokens, one token per decoding sequence. Tokens because every token of a batch is a row through every GEMM,
    whose FLOPs are most of a prefill's work, and a decode step streams the weights once for all its sequences,
    so each sequence's part of that stream is one token's; what tokens miss is attention over each request's own
    context (a long-context request's decode costs more than the share says). Needs what the run's timelines
    need (run(..., record_events=True), unsampled and complete logs): ValueError saying what is missing."""
    if not len(result.events) and bool((result.status == FINISHED).any()):
        raise ValueError("per-request energy needs the run's event log (run(..., record_events=True))")
    segments = timeline.request_segments(result)  # raises ValueError naming what the run did not keep
    engines = engine_powers(result)
    logs = np.concatenate([np.asarray(e.steps, float).reshape(-1, N_STEP_COLS) for e in engines])
    step_j = np.concatenate([e.model.step_power_w(e.steps[:, S_DURATION], e.steps[:, S_BYTES], e.steps[:, S_FLOPS])
                             * e.steps[:, S_DURATION] * e.gpus for e in engines])
    tokens = logs[:, S_PREFILL_TOKENS] + logs[:, S_DECODE_SEQS]
    per_token = np.where(tokens > 0, step_j / np.maximum(tokens, 1.0), 0.0)
    joules = np.zeros(len(result.requests))
    ev = result.events
    prefill = ev[ev[:, E_KIND] == EV_PREFILL] if len(ev) else np.zeros((0, 4), np.int64)
    np.add.at(joules, prefill[:, E_REQUEST], per_token[prefill[:, E_STEP]] * prefill[:, E_TOKENS])
    first = np.cumsum([0] + [len(e.steps) for e in engines])
    engine_of_step = np.repeat(np.arange(len(engines)), np.diff(first))
    engine = np.zeros(len(joules), np.int64)
    engine[prefill[:, E_REQUEST]] = engine_of_step[prefill[:, E_STEP]]
    decode_from = np.full(len(joules), -np.inf)
    h = result.handover
    if h is not None:  # disaggregated: decoded on the decode engine it was handed to, once its KV arrived
        moved = h.to_decode >= 0
        engine[moved] = sum(e.pool == "prefill" for e in engines) + h.to_decode[moved]
        decode_from[moved] = h.delivered[moved]
    cumulative = np.concatenate([[0.0], np.cumsum(per_token)])
    for r, kind, start, end in segments:  # a decoding request is in every step its engine began meanwhile
        if kind != timeline.DECODE:
            continue
        lo, hi = first[engine[r]], first[engine[r] + 1]
        begun = logs[lo:hi, S_START]
        a = np.searchsorted(begun, max(start, decode_from[r]), "left")
        b = np.searchsorted(begun, end, "left")
        joules[r] += cumulative[lo + b] - cumulative[lo + a]
    busy = float(step_j.sum())
    idle = sum(e.energy().idle_j for e in engines)
    return RequestEnergy(joules, busy, idle, float(step_j[tokens <= 0].sum()))


def billed_gpu_energy_j(result) -> float:
    """The run's GPU energy over the time its GPUs are billed for in GPU-hours: a fleet held static from the run's
    start (t = 0, its GPUs idle until the first arrival, which metrics.energy counts from) to its end; an
    autoscaler's replicas from being asked for (weights loading at idle power) to their release, as metrics.energy
    counts them already. Boards only: host power and PUE are the scenario's separate terms."""
    gpu_j = float(result.metrics["energy"]["gpu_energy_j"])
    if result.replica_lives is not None:
        return gpu_j
    before_first_arrival = max(result.end_s - float(result.metrics["duration_s"]), 0.0)
    return gpu_j + sum(e.model.idle_w * e.gpus for e in engine_powers(result)) * before_first_arrival
