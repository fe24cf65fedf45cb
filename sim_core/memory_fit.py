"""What one GPU's memory holds in a resolved deployment, and how much of a workload its KV pool fits: the readout
of the memory budget the engine runs with (catalog.Setup's weights, activations and runtime reserve; the pool's
blocks as deployment.resolve gave them to the engine), never a second calculation of it.

    fits = memory_fit(resolved, requests)     # one PoolFit per pool: one engine or replicas, or prefill and decode
    fits[0].weight_bytes, fits[0].kv_pool_bytes, fits[0].kv_tokens, fits[0].concurrent_requests

Per GPU, the usable memory (gpu_memory_utilization of it) is the weights + the runtime reserve + the activations
of one forward pass over the token budget + the KV state reserved per sequence (windowed and linear-attention
layers) + the KV pool + what is left over (less than a block; or what a speculative-decoding proposer's weights
and KV take, or what kv_blocks leaves unused when set below the pool's size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .catalog import GIB


@dataclass(frozen=True)
class PoolFit:
    """One pool's engines, per GPU (bytes) and per engine (tokens, requests)."""

    role: str  # "replicas" (also one engine), "prefill" or "decode"
    engines: int
    gpus_per_engine: int  # its tensor-parallel degree
    gpu_bytes: float
    usable_bytes: float  # gpu_bytes x gpu_memory_utilization: what the engine may allocate
    weight_bytes: float
    runtime_reserve_bytes: float  # CUDA context, graphs, allocator slack (the GPU catalog's runtime_reserve_gib)
    activation_bytes: float  # one forward pass over the token budget, and the sampled rows' logits
    kv_reserved_bytes: float  # windowed layers' windows and linear layers' state, reserved for max_seqs sequences
    kv_pool_bytes: float  # the engine's KV blocks
    free_bytes: float  # usable memory none of the above takes
    kv_blocks: int
    block_size: int
    kv_tokens: int  # tokens of context the engine's KV pool holds at once (its blocks x block size)
    max_seqs: int  # the most sequences one step runs
    tokens_per_request: float  # this workload's mean context at a request's end, in whole blocks
    concurrent_requests: int  # requests of this workload whose whole context the pool holds at once (no sharing)


def memory_fit(resolved, requests) -> list[PoolFit]:
    """Each pool's memory per GPU and what of `requests` (runner.Requests) its KV pool fits."""
    prompt = np.asarray(requests.prompt_tokens, np.int64)
    output = np.asarray(requests.output_tokens, np.int64)
    return [_pool_fit(pool, resolved.max_seqs, prompt, output) for pool in resolved.deployment]


def _pool_fit(pool, max_seqs: int, prompt: np.ndarray, output: np.ndarray) -> PoolFit:
    s = pool.setup
    block = s.block_size
    # The prefill pool keeps a request only until its first token; the others to its last.
    tokens = prompt + (1 if pool.role == "prefill" else output)
    per_request = float((-(-tokens // block) * block).mean()) if len(tokens) else 0.0
    kv_tokens = int(pool.num_blocks) * block
    runtime = s.gpu.runtime_reserve_gib * GIB
    pool_bytes = pool.num_blocks * s.kv_bytes_per_block
    used = s.weight_bytes_per_gpu + runtime + s.activation_bytes_per_gpu + s.kv_reserved_bytes_per_gpu + pool_bytes
    return PoolFit(
        role=pool.role, engines=pool.engines, gpus_per_engine=s.tp, gpu_bytes=s.gpu.mem_gib * GIB,
        usable_bytes=s.usable_bytes, weight_bytes=s.weight_bytes_per_gpu, runtime_reserve_bytes=runtime,
        activation_bytes=s.activation_bytes_per_gpu, kv_reserved_bytes=s.kv_reserved_bytes_per_gpu,
        kv_pool_bytes=pool_bytes, free_bytes=s.usable_bytes - used, kv_blocks=int(pool.num_blocks), block_size=block,
        kv_tokens=kv_tokens, max_seqs=max_seqs, tokens_per_request=per_request,
        concurrent_requests=int(kv_tokens // per_request) if per_request else 0)
