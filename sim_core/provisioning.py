"""How long a new replica takes from being asked for to serving: its weights loaded from storage, then the
engine started (profiling, KV-cache allocation, torch.compile, CUDA-graph capture), then the process and API
server up. Each part from public start-up measurements in sim_core/data/startup.json (sources cited there).

- Weight load: the model's bytes per GPU over one rank's read bandwidth. The default is vLLM streaming from network
  storage, one rank at 1.7 GiB/s (run-ai/runai-model-streamer issue 135, a vLLM log line); local NVMe with GDS
  reaches ~26 GB/s over four GPUs (fastsafetensors), so a provision_delay_s of its own models that.
- Engine initialisation: vLLM's "init engine (profile, create kv cache, warmup model)" for Meta-Llama-3-8B at
  default settings, 14.18 s (vllm PR 11005; CUDA-graph capture, 10 s, is part of it).
- Process and server start: what vLLM does not log, the pod's 59 s to its first response less its logged model
  loading (0.90 s) and engine initialisation (34.11 s) (vllm issue 20264): ~24 s.

For Llama-3-8B on one A100 that is ~8.8 + 14.2 + 24.0 = ~47 s; scenario field provision_delay_s overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from . import data

STARTUP_FILE = "startup.json"
GIB = float(1 << 30)


@dataclass(frozen=True)
class ProvisionDelay:
    weight_load_s: float
    engine_init_s: float
    process_start_s: float

    @property
    def total_s(self) -> float:
        return self.weight_load_s + self.engine_init_s + self.process_start_s


def _entry(entries: list[dict], source_id: str, what_starts: str) -> float:
    """The value of the startup.json entry from `source_id` whose `what` starts with `what_starts`."""
    for e in entries:
        if e["source_id"] == source_id and e["what"].startswith(what_starts):
            return float(e["value"])
    raise data.CatalogDataError(f"{data.where(STARTUP_FILE)}: no entry from {source_id} starting {what_starts!r}")


@cache
def startup_constants() -> tuple[float, float, float]:
    """(one rank's weight-streaming bandwidth in bytes/s, engine initialisation s, process start s)."""
    entries = data.read(STARTUP_FILE)["entries"]
    bandwidth = _entry(entries, "runai_issue_135", "one vLLM rank streaming") * GIB
    engine_init = _entry(entries, "vllm_pr_11005", "vLLM init engine (profile")
    total = _entry(entries, "vllm_issue_20264", "vLLM start-up: time from pod start")
    logged = (_entry(entries, "vllm_issue_20264", "vLLM start-up: model loading incl.")
              + _entry(entries, "vllm_issue_20264", "vLLM start-up: init engine"))
    return bandwidth, engine_init, total - logged


def provision_delay(weight_bytes_per_gpu: float) -> ProvisionDelay:
    """The derived delay for a replica whose every GPU loads `weight_bytes_per_gpu` (its ranks load side by side)."""
    bandwidth, engine_init, process_start = startup_constants()
    return ProvisionDelay(weight_bytes_per_gpu / bandwidth, engine_init, process_start)


def provision_delay_s(scenario, resolved) -> float:
    """The scenario's provisioning delay: provision_delay_s if set, else derived from the model's weights."""
    if scenario.provision_delay_s is not None:
        return float(scenario.provision_delay_s)
    return provision_delay(resolved.setup.weight_bytes_per_gpu).total_s
