"""Tiered KV offload (issue #23): the scenario's kv_offload_* fields as the engine's tier parameter vector
(kernel/kv_tiers.py), and the run's per-tier figures as `metrics.kv_tiers`.

Bandwidths: the host link is the GPU's in the catalogue (PCIe, or NVLink-C2C on Grace parts) at the efficiency
KV swap uses (gpu.HOST_LINK_EFFICIENCY), unless kv_offload_host_gbs sets it; the disk's defaults are a PCIe 5.0
datacenter NVMe's sequential read and write (sim_core/data/kv_tiers.json, source samsung_pm1743_news). Capacities
are per GPU, as swap_space_gb: each GPU of a tensor-parallel engine keeps and moves its own share of every block.
"""

from __future__ import annotations

import numpy as np

from .data import read
from .gpu import HOST_LINK_EFFICIENCY
from .kernel.kv_tiers import (
    LOW_CPU,
    LOW_DISK,
    N_TIER_PARAMS,
    N_TS,
    POLICY_EVICT,
    POLICY_STORE,
    TIER_CPU,
    TIER_DISK,
    TIER_GPU,
    TP_BLOCK_BYTES,
    TP_CPU_BLOCKS,
    TP_DISK_BLOCKS,
    TP_DISK_READ_BW,
    TP_DISK_WRITE_BW,
    TP_HOST_BW,
    TP_OVERLAP,
    TP_POLICY,
    TS_BYTES_IN,
    TS_BYTES_OUT,
    TS_EVICTED,
    TS_HIT_TOKENS,
    TS_LINK_S,
    TS_LOAD_S,
)
from .scenario import ScenarioError

GIB = 1 << 30
POLICIES = {"evict": POLICY_EVICT, "store": POLICY_STORE}
TIERS = {"gpu": TIER_GPU, "cpu": TIER_CPU, "disk": TIER_DISK}
DEFAULT_DISK_SOURCE = "samsung_pm1743_news"


def cited_disk_gbs(direction: str) -> float:
    """The default disk's sequential `direction` ("read" or "write") GB/s, from kv_tiers.json."""
    for entry in read("kv_tiers.json")["entries"]:
        if (entry["source_id"] == DEFAULT_DISK_SOURCE and entry["unit"] == "GB/s"
                and f"sequential {direction}" in entry["what"]):
            return float(entry["value"])
    raise LookupError(f"kv_tiers.json has no {DEFAULT_DISK_SOURCE} sequential {direction} bandwidth")


def offload_on(scenario) -> bool:
    return scenario.kv_offload_cpu_gb > 0 or scenario.kv_offload_disk_gb > 0


def tier_params(scenario, setup, prefix_cache: bool) -> np.ndarray:
    """The engine's kv_tiers vector for one pool's setup (all zero when offload is off)."""
    par = np.zeros(N_TIER_PARAMS)
    if not offload_on(scenario):
        return par
    if not prefix_cache:
        field = "kv_offload_cpu_gb" if scenario.kv_offload_cpu_gb > 0 else "kv_offload_disk_gb"
        raise ScenarioError([(field, "KV offload keeps prefix-cache blocks: set prefix_cache=true")])
    block = setup.kv_bytes_per_block
    par[TP_CPU_BLOCKS] = int(scenario.kv_offload_cpu_gb * GIB // block)
    par[TP_DISK_BLOCKS] = int(scenario.kv_offload_disk_gb * GIB // block)
    for field, blocks in (("kv_offload_cpu_gb", par[TP_CPU_BLOCKS]), ("kv_offload_disk_gb", par[TP_DISK_BLOCKS])):
        if getattr(scenario, field) > 0 and blocks == 0:
            raise ScenarioError([(field, f"{getattr(scenario, field)} GB holds no KV block of this deployment "
                                         f"(one is {block / GIB:.3g} GB per GPU): set 0 or more")])
    par[TP_POLICY] = POLICIES[scenario.kv_offload_policy]
    host = scenario.kv_offload_host_gbs or setup.gpu.host_link_gbs * HOST_LINK_EFFICIENCY
    par[TP_HOST_BW] = host * 1e9
    par[TP_DISK_READ_BW] = (scenario.kv_offload_disk_read_gbs or cited_disk_gbs("read")) * 1e9
    par[TP_DISK_WRITE_BW] = (scenario.kv_offload_disk_write_gbs or cited_disk_gbs("write")) * 1e9
    par[TP_BLOCK_BYTES] = block
    par[TP_OVERLAP] = 1.0 if scenario.kv_offload_overlap else 0.0
    return par


def tier_metrics(stats: np.ndarray, makespan_s: float, gpus: int = 1) -> dict:
    """metrics.kv_tiers: per tier, the prompt tokens its hits served, bytes written into it and read out of it
    (all GPUs), the seconds the step waited on its loads, and its link's busy fraction (the host link for the
    CPU tier, the disk's for the disk tier; the GPU tier has no link). `stats`: Outcome.kv_tiers (per GPU)."""
    out = {}
    for name, t in TIERS.items():
        row = stats[t * N_TS:(t + 1) * N_TS]
        doc = {"hit_tokens": int(row[TS_HIT_TOKENS])}
        if t != TIER_GPU:
            doc.update(bytes_in=float(row[TS_BYTES_IN] * gpus), bytes_out=float(row[TS_BYTES_OUT] * gpus),
                       evicted_blocks=int(row[TS_EVICTED]), load_s=float(row[TS_LOAD_S]),
                       link_utilization=float(row[TS_LINK_S] / makespan_s) if makespan_s > 0 else 0.0)
        out[name] = doc
    return out


def tier_occupancy(result) -> dict[str, dict]:
    """Per lower tier with capacity ("cpu", "disk"): {"capacity": blocks, "frames": the blocks it held at each of
    the run's KV frames (Result.kv_frame_tiers, beside kv_frame_s)}; {} without offload or frames."""
    frames = getattr(result, "kv_frame_tiers", None)
    if not offload_on(result.scenario) or frames is None:
        return {}
    par = tier_params(result.scenario, result.resolved.setup, True)
    return {name: {"capacity": int(par[cap]), "frames": np.asarray(frames)[:, col]}
            for name, col, cap in (("cpu", LOW_CPU, TP_CPU_BLOCKS), ("disk", LOW_DISK, TP_DISK_BLOCKS))
            if par[cap] > 0}
