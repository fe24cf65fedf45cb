"""Offline maximum-throughput benchmarks (trtllm-bench throughput, an engine fed every request at once): a row's
deployment (tensor, expert and attention data parallelism) simulated with the scheduler settings its engine
documents, one line of validation/engines.csv each (validation/SOURCES.md, "Engine settings of the offline
benchmarks"). sim_core/studies/validation.py predicts the serving rows with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..catalog import ServingSettings, resolve_setup
from ..expert_parallel import expert_parallel
from ..runner import run
from ..scenario import Scenario
from .check_rows import VALIDATION_DIR, int_of, read_rows
from .row_names import hardware_key
from .trtllm_bench import row_setting, utilization_for

# Requests per simulated offline benchmark where the row does not say how many ran: the published runs used
# 1,000-30,000; 1,000 reaches the same steady state (every request is queued at t=0) in a fraction of the time.
OFFLINE_REQUESTS = 1000
# TensorRT-LLM's defaults for the offline benchmarks (trtllm-bench): max_num_tokens 8192, max_batch_size 2048.
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_MAX_BATCH_SIZE = 2048
# How an offline benchmark's engine admits requests, as sched-sim's `preemption` field: TensorRT-LLM's
# GUARANTEED_NO_EVICT reserves a request's whole KV (prompt + output) when it starts and never evicts it, as
# preemption "none" does; MAX_UTILIZATION admits while the current tokens fit and pauses requests when the pool
# runs out, as vLLM does (recompute).
CAPACITY_POLICIES = {"guaranteed_no_evict": "none", "max_utilization": "recompute"}


@dataclass(frozen=True)
class EngineSettings:
    """The scheduler settings an offline benchmark row's engine ran with (validation/engines.csv cites them)."""
    max_batch_size: int = TRTLLM_MAX_BATCH_SIZE
    max_num_tokens: int = TRTLLM_MAX_NUM_TOKENS
    preemption: str = "recompute"
    async_scheduling: bool = False  # TensorRT-LLM's overlap scheduler, vLLM's async scheduling
    engine: str = "vllm"  # whose kernels ran (sim_core/data/engines.json)
    kv_cache_dtype: str = ""  # the cache's format where the row's dtype does not say it ("": as the dtype says)
    kv_free_fraction: float = 0.0  # TensorRT-LLM's KV share of the memory the model leaves (0: vLLM's share of all)


@dataclass(frozen=True)
class Deployment:
    """What a row ran on: `ep` GPUs holding the experts whole (1: none), with attention data-parallel over them
    (`attention_dp`: ep / tp ranks of tp GPUs, each its own engine and batch) or tensor-parallel (ep = tp)."""
    hardware: str
    model: str
    quantization: str
    tp: int
    kv_cache_dtype: str = "auto"
    ep: int = 1
    attention_dp: bool = False

    def setup(self):
        return resolve_setup(self.hardware, self.model, self.quantization, self.tp,
                             ServingSettings(0.9, 16, 8192, 256), self.kv_cache_dtype,
                             expert_parallel=expert_parallel(self.ep, self.attention_dp))


def row_deployment(row: dict, model: str, quantization: str, kv_cache_dtype: str) -> Deployment:
    """A row's deployment: its tp, and its ep and attention_dp columns where it has them (moe_offline.csv)."""
    return Deployment(hardware_key(row["hardware"]), model, quantization, int_of(row.get("tp") or "1"),
                      kv_cache_dtype, int(row.get("ep") or 1), row.get("attention_dp") == "yes")


def offline_output_rate(d: Deployment, prompt: int, output: int, engine: EngineSettings = EngineSettings(),
                        requests: int = OFFLINE_REQUESTS) -> float:
    """Output tokens/s of the whole deployment (every GPU) in a simulated offline run (offline_run)."""
    return offline_run(d, prompt, output, engine, requests)["output_throughput"]


def offline_run(d: Deployment, prompt: int, output: int, engine: EngineSettings = EngineSettings(),
                requests: int = OFFLINE_REQUESTS) -> dict:
    """The metrics of a simulated offline run: `requests` identical requests queued at t=0, handed out round-robin
    to the attention data-parallel ranks (each one engine with its own KV pool and batch limits, as TensorRT-LLM's
    attention-DP ranks schedule their own batches)."""
    text = "arrival_s,prompt_tokens,output_tokens\n" + f"0,{prompt},{output}\n" * requests
    memory = 0.9  # the scenario's default, vLLM's gpu_memory_utilization
    if engine.kv_free_fraction:
        memory = utilization_for(d.setup(), engine.kv_free_fraction)
    s = Scenario(scheduler="chunked", hardware=d.hardware, model=d.model, quantization=d.quantization, tp=d.tp,
                 ep=d.ep, attention_dp=d.attention_dp, kv_cache_dtype=d.kv_cache_dtype,
                 token_budget=engine.max_num_tokens, max_seqs=engine.max_batch_size, preemption=engine.preemption,
                 async_scheduling=engine.async_scheduling, engine=engine.engine,
                 max_model_len=max(prompt + output, 1024), gpu_memory_utilization=memory)
    return run(s, trace_text=text).metrics


@dataclass(frozen=True)
class StepGap:
    """How far a measured offline rate is from a simulated run's, spread over the run's steps: `predicted_step_s`
    and `implied_step_s` (the measured run's duration over the same number of steps, i.e. at the simulated batch),
    and the time missing per output token and per (token, local expert) pair of one MoE layer."""
    predicted_step_s: float
    implied_step_s: float
    missing_per_token_s: float
    missing_per_pair_s: float


def step_gap(steps: int, predicted_s: float, output_tokens: int, measured_rate: float,
             pairs_per_token: float) -> StepGap:
    """A StepGap of one engine (one attention-DP rank): its simulated `steps` and duration `predicted_s`, the
    `output_tokens` it generated, the measured output rate of one such engine (tokens/s) and the (token, expert)
    pairs one of its output tokens makes on one GPU over every MoE layer."""
    measured = output_tokens / measured_rate
    missing = (measured - predicted_s) / output_tokens
    return StepGap(predicted_s / steps, measured / steps, missing, missing / pairs_per_token if pairs_per_token else 0.0)


def engine_settings(row: dict, directory: Path = VALIDATION_DIR) -> EngineSettings:
    """The settings validation/engines.csv records for this row's engine (by source and measurement, or for
    every row of the source: measured_what "*"); TensorRT-LLM's defaults with vLLM-style admission if none.
    A max batch size or max num tokens of "trtllm-bench" is what that tool picks for the row's lengths."""
    for e in read_rows(directory / "engines.csv") if (directory / "engines.csv").is_file() else []:
        if e["source_id"] == row["source_id"] and e["measured_what"] in (row["measured_what"], "*"):
            kv = e.get("kv_cache_dtype") or ""
            sizes = [int(e[k]) if e[k] != "trtllm-bench" else None for k in ("max_batch_size", "max_num_tokens")]
            if None in sizes:
                sizes = [given or bench for given, bench in zip(sizes, row_setting(row, e, kv), strict=True)]
            return EngineSettings(*sizes, CAPACITY_POLICIES[e["capacity_scheduler_policy"]],
                                  e["overlap_scheduler"] == "yes", e.get("engine") or "vllm", kv,
                                  float(e.get("kv_cache_free_gpu_mem_fraction") or 0.0))
    return EngineSettings()
