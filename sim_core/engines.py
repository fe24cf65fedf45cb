"""Engine profiles: the serving engine a scenario stands for (its `engine` field), read from
sim_core/data/engines.json, where each value is cited.

A profile gives the defaults of the scheduler fields a scenario leaves unset (its capacity policy as a preemption
mode and its overlap scheduling, SCENARIO_FIELDS; its max sequences and token budget for the GPU, budgets) and the
kernel-level constants the cost model takes from it (decode_attention_slowdown, decode_attention_kernel). The
default engine, vllm, gives the budgets its API server picks for the GPU (its entry says which source version).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import data
from .gpu import GPU
from .kernel.cost_constants import PAGED_ATTENTION_SLOWDOWN

ENGINES_FILE = "engines.json"
# The decode attention kernels whose least times gpus.json records (GPU.decode_attention_floor).
DECODE_ATTENTION_KERNELS = ("paged", "xqa")
DEFAULT_ENGINE = "vllm"
# How an engine's attention data-parallel ranks exchange tokens with the expert-parallel GPUs (EngineProfile.ep_exchange).
EP_EXCHANGES = ("alltoall", "allgather_off_mnnvl")
# What an engine's fused MoE multiplies an MXFP4 checkpoint's experts by on FP4 tensor cores
# (EngineProfile.mxfp4_moe_activations).
MXFP4_MOE_ACTIVATIONS = ("fp4", "fp8")
# Scenario fields an engine gives defaults for that depend on nothing but the engine, filled in the scenario itself,
# in the scenario's own order. Its budgets (token_budget, max_seqs) depend on the GPU and the scheduler too
# (EngineProfile.budgets) and are filled when the scenario is resolved (deployment.engine_budgets), so a scenario
# copied onto another GPU or scheduler takes that one's.
SCENARIO_FIELDS = ("async_scheduling", "preemption")
# Constants an entry may name instead of a number (defined beside their measurements in the cost model).
ENGINE_CONSTANTS = {"PAGED_ATTENTION_SLOWDOWN": PAGED_ATTENTION_SLOWDOWN}


@dataclass(frozen=True)
class EngineProfile:
    """One engine's documented defaults and kernel-level differences (engines.json's entry)."""

    name: str
    max_seqs: int
    token_budget: int | None  # None: the scheduler's own default
    preemption: str
    async_scheduling: bool
    decode_attention_slowdown: float
    decode_attention_kernel: str  # whose one-sequence floor the GPU's entry gives: "paged" or "xqa"
    # The budgets the engine picks instead on a large GPU (vLLM's get_batch_defaults): at least this much memory,
    # and a key or name containing none of large_gpu_except (comma-separated, lower case). 0: no such rule.
    large_gpu_min_memory_gib: float = 0.0
    large_gpu_except: str = ""
    large_gpu_token_budget: int | None = None
    large_gpu_max_seqs: int | None = None
    # The token budget the engine picks instead on a GPU with less than this much memory (SGLang's). 0: no such rule.
    small_gpu_max_memory_gib: float = 0.0
    small_gpu_token_budget: int | None = None
    budget_schedulers: str = "all"  # "chunked": the token budget is a chunked-prefill scheduler's only
    max_model_len_rule: str = "refuse"  # when one sequence of the model's context does not fit: refuse or cap
    version: str = ""  # the engine source the entry's values are read from
    # How the KV pool holds windowed layers: "hybrid" (vLLM's hybrid manager: a window's blocks freed as it slides,
    # catalog.Setup.kv_pool_plan's conservative stand-in) or "equal_pools" (TensorRT-LLM: one pool per window size,
    # each an equal share of the memory; chunked attention no window to the cache: catalog.Setup.equal_pools_plan).
    windowed_kv: str = "hybrid"
    # How attention data-parallel ranks hand tokens to the expert-parallel GPUs (sim_core/kernel/ep_params.py):
    # "alltoall" (each token dispatched to its top-k experts' GPUs and combined back: DeepEP, the wide-EP
    # deployments of vLLM and SGLang) or "allgather_off_mnnvl" (TensorRT-LLM's fused MoE: all-to-all only inside a
    # multi-node NVLink domain and with more EP ranks than top-k; elsewhere every rank's tokens are all-gathered to
    # every GPU and the outputs reduce-scattered).
    ep_exchange: str = "alltoall"
    # The activations an MXFP4 checkpoint's experts (gpt-oss's) are multiplied by on a GPU with FP4 tensor cores:
    # "fp4" (W4A4 at the FP4 rate, the weight format's own) or "fp8" (W4A8, MXFP8 activations: the block-scaled
    # MMA with an FP8 operand runs at the FP8 rate; kernel/gemm_rates.py expert_rate).
    mxfp4_moe_activations: str = "fp4"

    def is_large(self, gpu: GPU) -> bool:
        if not self.large_gpu_min_memory_gib or gpu.mem_gib < self.large_gpu_min_memory_gib:
            return False
        names = f"{gpu.key} {gpu.name}".lower()
        return not any(x.strip() and x.strip() in names for x in self.large_gpu_except.split(","))

    def budgets(self, gpu: GPU, chunked_prefill: bool = True) -> tuple[int | None, int]:
        """(token_budget, max_seqs) the engine picks on `gpu` when they are left unset, for a scheduler that chunks
        prefills or not (token_budget None: the scheduler's own, or max_model_len)."""
        budget, seqs = self.token_budget, self.max_seqs
        if self.is_large(gpu):
            budget, seqs = self.large_gpu_token_budget or budget, self.large_gpu_max_seqs or seqs
        elif gpu.mem_gib < self.small_gpu_max_memory_gib:
            budget = self.small_gpu_token_budget or budget
        if self.budget_schedulers == "chunked" and not chunked_prefill:
            budget = None  # prefilled whole: the budget is max_model_len, as vLLM sets it with chunked prefill off
        return budget, seqs


def profiles_from(doc: dict) -> dict[str, EngineProfile]:
    """engines.json's entries as profiles; CatalogDataError naming the entry and key of a value out of range."""
    profiles = data.load(doc, ENGINES_FILE, EngineProfile, ENGINE_CONSTANTS)
    for key, p in profiles.items():
        if p.preemption not in ("recompute", "swap", "none"):
            raise data.CatalogDataError(f"{data.where(ENGINES_FILE)}: entry {key!r}: key 'preemption': "
                                        f"{p.preemption!r} is not recompute, swap or none")
        if p.decode_attention_kernel not in DECODE_ATTENTION_KERNELS:
            raise data.CatalogDataError(f"{data.where(ENGINES_FILE)}: entry {key!r}: key 'decode_attention_kernel': "
                                        f"{p.decode_attention_kernel!r} is not one of "
                                        f"{', '.join(DECODE_ATTENTION_KERNELS)}")
        for name, allowed in (("budget_schedulers", ("all", "chunked")), ("max_model_len_rule", ("refuse", "cap")),
                              ("windowed_kv", ("hybrid", "equal_pools")),
                              ("ep_exchange", EP_EXCHANGES),
                              ("mxfp4_moe_activations", MXFP4_MOE_ACTIVATIONS)):
            if getattr(p, name) not in allowed:
                raise data.CatalogDataError(f"{data.where(ENGINES_FILE)}: entry {key!r}: key {name!r}: "
                                            f"{getattr(p, name)!r} is not {' or '.join(allowed)}")
        if not p.decode_attention_slowdown >= 1.0:
            raise data.CatalogDataError(f"{data.where(ENGINES_FILE)}: entry {key!r}: key "
                                        f"'decode_attention_slowdown' must be at least 1 (a kernel's time over "
                                        f"its bytes at streaming bandwidth)")
    if DEFAULT_ENGINE not in profiles:
        raise data.CatalogDataError(f"{data.where(ENGINES_FILE)}: no entry {DEFAULT_ENGINE!r} (the default engine)")
    return profiles


ENGINES: dict[str, EngineProfile] = profiles_from(data.read(ENGINES_FILE))
ENGINE_NAMES = tuple(ENGINES)


def scenario_defaults(engine: str, disaggregated: bool = False) -> dict[str, object]:
    """The scenario fields `engine` sets when they are left unset ({} for an unknown name: the field's own check
    names it). A disaggregated deployment keeps synchronous scheduling (sched-sim does not model overlap there)."""
    p = ENGINES.get(engine)
    if p is None:
        return {}
    out = {name: getattr(p, name) for name in SCENARIO_FIELDS if getattr(p, name) is not None}
    if disaggregated:
        out.pop("async_scheduling", None)
    return out


def engine_of(framework: str) -> str:
    """The profile a benchmark's framework, as its source names it, stands for: SGLang and TensorRT-LLM (and what
    runs on it: NIM, NeMo's inference, MLPerf's harness) their own, anything else vLLM's."""
    low = framework.lower()
    return "sglang" if "sglang" in low else "trtllm" if "tensorrt" in low else DEFAULT_ENGINE
