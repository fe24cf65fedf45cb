"""The scenario's tiered KV offload fields (issue #23; sim_core/kv_offload.py turns them into the engine's tier
parameters). A base of sim_core.scenario.Scenario, which holds every other field: pydantic lists a base's fields
first, so these lead the scenario's field order (flags, the form's advanced section, the JSON echo)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class KVOffloadFields(BaseModel):
    kv_offload_cpu_gb: float = Field(0.0, ge=0, le=4096,
                                     description="host memory for KV blocks offloaded below the GPU's prefix cache "
                                                 "(a lower tier, per GPU; needs prefix_cache; 0: off)")
    # At most 16 TiB a GPU: a DGX H100 holds 8 x 3.84 TB of NVMe for its 8 GPUs (3.84 TB each), so this leaves 4x
    # room; it was 1 PiB, a tier of ~2 billion small blocks whose arrays (~90 bytes each) no host holds (issue #37).
    kv_offload_disk_gb: float = Field(0.0, ge=0, le=16_384,
                                      description="local disk (NVMe) for KV blocks offloaded below the host tier "
                                                  "(per GPU; needs prefix_cache; 0: off)")
    kv_offload_policy: Literal["evict", "store"] = Field(
        "evict", description="when blocks go down a tier: evict (written as the GPU cache evicts them: vLLM's "
                             "CPU offload, SGLang HiCache) or store (every full block written as it is computed: "
                             "LMCache)")
    kv_offload_overlap: bool = Field(False, description="load offloaded blocks layer by layer under the step's "
                                                        "compute instead of before it")
    kv_offload_host_gbs: float | None = Field(None, gt=0, le=10_000,
                                              description="host link GB/s per direction for offloaded KV; default: "
                                                          "the GPU's (PCIe, or NVLink-C2C on Grace) at 80%")
    kv_offload_disk_read_gbs: float | None = Field(None, gt=0, le=10_000,
                                                   description="disk read GB/s; default: a PCIe 5.0 datacenter "
                                                               "NVMe's (sim_core/data/kv_tiers.json)")
    kv_offload_disk_write_gbs: float | None = Field(None, gt=0, le=10_000,
                                                    description="disk write GB/s; default: the same NVMe's")
