"""LoRA adapters (issue #23), the Python side: the scenario fields' defaults and checks, each request's adapter,
and the parameter vector the engine's kernel/lora.py reads.

Every figure is from sim_core/data/lora.json (sources in docs/SOURCES-mechanisms.md) or the cost model's own
constants; what is a modelling choice says so.
- Defaults: vLLM's LoRAConfig (max_lora_rank 16, max_loras 1, max_cpu_loras = max_loras when unset).
- The batched LoRA kernels (Punica's SGMV, vLLM's punica kernels) run a shrink (d_in -> r) and an expand
  (r -> d_out) GEMM per targeted projection per layer: 2 r (d_in + d_out) FLOPs per token, and each adapter group
  reads its own A and B matrices. Per step: a launch floor per kernel (cost_constants.GEMM_LAUNCH_FLOOR_S, measured
  for the smallest GEMMs), and per group the roofline of its weights' bytes and its tokens' FLOPs. Punica reports
  2 ms added per token (tests/test_lora.py checks the model stays at or under it at Punica's setting).
- Loading an adapter into a GPU slot: its bytes over the host link (as KV swap, cost_constants.HOST_LINK_BW); from
  disk, LoRAX's measured 0.5 s (the low end of its '500ms ~ 1+s' per load) first.
"""

from __future__ import annotations

import numpy as np

from . import data
from .kernel.cost_constants import GEMM_LAUNCH_FLOOR_S, HOST_LINK_BW, LINEAR_RATE, STREAM_BW
from .kernel.lora_slots import (
    LP_ADAPTERS,
    LP_AGING_S,
    LP_BYTES_PER_ADAPTER,
    LP_DISK_LOAD_S,
    LP_FLOPS_PER_TOKEN,
    LP_GROUPED,
    LP_HOST_BW,
    LP_LAUNCH_S,
    LP_LINEAR_RATE,
    LP_MAX_CPU_LORAS,
    LP_MAX_LORAS,
    LP_STREAM_BW,
    LS_GROUPS,
    LS_KERNEL_S,
    LS_LOAD_S,
    LS_LOADS_DISK,
    LS_LOADS_HOST,
    LS_MAX_GROUPS,
    LS_STEPS,
    N_LORA_COUNTERS,
    N_LORA_PARAMS,
)
from .policies import BY_NAME

LORA_FILE = "lora.json"


def _entry(source_id: str, what_starts: str) -> dict:
    for e in data.read(LORA_FILE)["entries"]:
        if e["source_id"] == source_id and e["what"].startswith(what_starts):
            return e
    raise KeyError(f"{LORA_FILE}: no entry {source_id!r} / {what_starts!r}")


DEFAULT_RANK = int(_entry("vllm_lora_config", "vLLM default max_lora_rank")["value"])
DEFAULT_MAX_LORAS = int(_entry("vllm_lora_config", "vLLM default max_loras")["value"])
RANKS = tuple(sorted(int(e["value"]) for e in data.read(LORA_FILE)["entries"]
                     if e["source_id"] == "unsloth_vllm_args"))
DISK_LOAD_S = float(min(_entry("lorax_issue_433", "LoRAX adapter load latency")["value"]))
PUNICA_ADDED_S_PER_TOKEN = float(_entry("punica_paper", "added decode latency")["value"]) / 1e3
MAX_ADAPTERS = 100_000
# Modelling choices, not measurements: Zipf exponent 1 for adapter popularity (the default shape), the
# attention projections as targets (what S-LoRA's and Punica's evaluations adapt), and the grouped order's aging
# limit: past it a request goes in arrival order again. On chat at 8 req/s with 64 adapters, max_loras 4 (800
# requests), the grouped order finished 3.90 req/s within the arrival window at aging 120 s or none, 3.63 at 30 s,
# FCFS 3.57: shorter limits give back the gain, longer ones starve rare adapters longer.
DEFAULT_ZIPF = 1.0
DEFAULT_TARGETS = "q,k,v,o"
DEFAULT_AGING_S = 120.0
TARGET_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
ORDERS = ("fcfs", "grouped")
# The projections' (d_in, d_out) from the model's shapes (the MLP's of a dense layer).
HELP = {
    "lora_adapters": "LoRA adapters the requests use (0: none, the base model only); each request (each "
                     "conversation) names one, drawn by popularity (lora_zipf)",
    "lora_rank": f"rank of every adapter (vLLM's default {DEFAULT_RANK}; vLLM accepts "
                 f"{', '.join(map(str, RANKS))})",
    "lora_targets": "projections each adapter targets, comma-separated from " + ", ".join(TARGET_MODULES),
    "lora_zipf": "adapter popularity: Zipf exponent (0: uniform)",
    "max_loras": f"adapters a step's batch may hold (vLLM's max_loras, default {DEFAULT_MAX_LORAS}); also the GPU's "
                 "adapter slots",
    "max_cpu_loras": "adapters kept in host memory (vLLM's max_cpu_loras; default: max_loras); others load from disk",
    "lora_order": "fcfs: vLLM's (a request whose adapter would be one too many for the step is skipped); grouped: "
                  "a step with room for another adapter takes the one with the most waiting requests (one needing no "
                  "disk load wins a tie), requests waiting past lora_aging_s in arrival order",
    "lora_aging_s": "grouped order: a request waiting this long is no longer deferred for its adapter",
    "lora_disk_load_s": f"seconds to read an adapter from disk (default LoRAX's measured {DISK_LOAD_S})",
}


def check(s) -> str | None:
    """Why the scenario's LoRA fields cannot run, as 'field: reason', or None."""
    if s.lora_adapters == 0:
        return None
    bad = [t.strip() for t in s.lora_targets.split(",") if t.strip() not in TARGET_MODULES]
    if bad:
        return f"lora_targets: unknown projection {bad[0]!r}; use some of " + ", ".join(TARGET_MODULES)
    if s.max_cpu_loras is not None and s.max_cpu_loras < s.max_loras:
        return "max_cpu_loras: must be at least max_loras (as vLLM requires)"
    if s.engines > 1:
        return "lora_adapters: modelled on one engine for now (replicas, data parallelism and disaggregated " \
               "pools share a config); set replicas 1 or lora_adapters 0"
    if BY_NAME[s.scheduler].static_batching:
        return "lora_adapters: the static scheduler's request-level batches do not apply max_loras; use a " \
               "continuous-batching scheduler or lora_adapters 0"
    if s.preemption == "swap":
        return "lora_adapters: swap preemption is not modelled with adapters (a swapped request's adapter is " \
               "not checked on resume); use preemption recompute or none"
    return None


def targets(spec: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.strip() for t in spec.split(",")))


def projection_dims(model, target: str) -> tuple[int, int]:
    """(d_in, d_out) of one targeted projection."""
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    return {"q": (model.hidden, q), "k": (model.hidden, kv), "v": (model.hidden, kv), "o": (q, model.hidden),
            "gate": (model.hidden, model.ffn), "up": (model.hidden, model.ffn), "down": (model.ffn, model.hidden)}[target]


def params(s, setup, cost: np.ndarray) -> np.ndarray:
    """The engine's LoRA parameter vector (kernel/lora.py LP_*) on one GPU of the setup; empty when off."""
    if s.lora_adapters == 0:
        return np.zeros(0)
    model, tp = setup.model, setup.tp
    chosen = targets(s.lora_targets)
    per_layer = sum(sum(projection_dims(model, t)) for t in chosen)  # sum of (d_in + d_out)
    p = np.zeros(N_LORA_PARAMS)
    p[LP_ADAPTERS] = s.lora_adapters
    p[LP_MAX_LORAS] = s.max_loras
    p[LP_MAX_CPU_LORAS] = s.max_cpu_loras if s.max_cpu_loras is not None else s.max_loras
    p[LP_LAUNCH_S] = 2 * len(chosen) * model.layers * GEMM_LAUNCH_FLOOR_S  # a shrink and an expand each
    p[LP_FLOPS_PER_TOKEN] = 2.0 * s.lora_rank * per_layer * model.layers / tp
    p[LP_BYTES_PER_ADAPTER] = 2.0 * s.lora_rank * per_layer * model.layers / tp  # 16-bit A and B
    p[LP_LINEAR_RATE], p[LP_STREAM_BW], p[LP_HOST_BW] = cost[LINEAR_RATE], cost[STREAM_BW], cost[HOST_LINK_BW]
    p[LP_DISK_LOAD_S] = s.lora_disk_load_s
    p[LP_GROUPED] = 1.0 if s.lora_order == "grouped" else 0.0
    p[LP_AGING_S] = s.lora_aging_s
    return p


def state(p: np.ndarray) -> np.ndarray:
    """A fresh lora_state for parameters p (kernel/lora.py's layout)."""
    return np.zeros(0) if p.shape[0] == 0 else np.zeros(4 * int(p[LP_ADAPTERS]) + N_LORA_COUNTERS)


def adapters(s, parents: np.ndarray) -> np.ndarray:
    """Each request's adapter (-1 for all when off): drawn Zipf(lora_zipf) over lora_adapters from the scenario's
    seed, on a stream of its own (the requests' draws stay as they are); a conversation's later turns keep its
    first turn's adapter."""
    n = len(parents)
    if s.lora_adapters == 0:
        return np.full(n, -1, np.int64)
    rng = np.random.default_rng([s.seed, 0x10_7A])
    weights = 1.0 / np.arange(1, s.lora_adapters + 1, dtype=np.float64) ** s.lora_zipf
    out = rng.choice(s.lora_adapters, size=n, p=weights / weights.sum()).astype(np.int64)
    turns = np.flatnonzero(parents >= 0)  # a closed loop's links are no conversation (conversation_parents)
    for _ in range(n):  # one turn further down each session per pass
        inherited = out[parents[turns]]
        if np.array_equal(inherited, out[turns]):
            break
        out[turns] = inherited
    return out


def counters(lora_state: np.ndarray, p: np.ndarray) -> dict:
    """What a run's adapters did (kernel/lora.py LS_*): loads from host and from disk, seconds spent loading and
    in the LoRA kernels, adapter groups per step (mean, most) and the kernels' seconds per step."""
    c = lora_state[4 * int(p[LP_ADAPTERS]):]
    steps = max(c[LS_STEPS], 1.0)
    return {"loads_host": int(c[LS_LOADS_HOST]), "loads_disk": int(c[LS_LOADS_DISK]), "load_s": float(c[LS_LOAD_S]),
            "kernel_s": float(c[LS_KERNEL_S]), "kernel_s_per_step": float(c[LS_KERNEL_S] / steps),
            "groups_per_step": float(c[LS_GROUPS] / steps), "max_groups_per_step": int(c[LS_MAX_GROUPS])}


def decode_kernel_ms(s, resolved, tokens: list[int]) -> list[float]:
    """The LoRA kernels' time in a step of each token count in `tokens`, split evenly over as many adapter groups
    as may share a step (max_loras, at most one per token), as kernel/lora.py costs them: a launch floor per
    targeted GEMM and per group the roofline of its weights and its tokens' FLOPs. [] when off (the step-time
    figure's band)."""
    if s.lora_adapters == 0:
        return []
    from .kernel.cost_model import cost_params

    p = params(s, resolved.setup, cost_params(resolved.setup, engine=s.engine))
    out = []
    for t in tokens:
        groups = max(1, min(t, s.max_loras, s.lora_adapters))
        per_group = max(p[LP_BYTES_PER_ADAPTER] / p[LP_STREAM_BW], t / groups * p[LP_FLOPS_PER_TOKEN] / p[LP_LINEAR_RATE])
        out.append(float(p[LP_LAUNCH_S] + groups * per_group) * 1e3)
    return out
