"""The scenario's fields grouped by the mechanism they set (speculative decoding, KV tiers, LoRA, ...), each group
with the field that switches it on, a one-line explanation and where the docs describe it.

The groups are read off the mechanisms' own definitions where those exist (the KV-offload and energy field
models, the autoscaler's and the P/D pools' field tuples, LoRA's help texts, speculative decoding's `spec_`
prefix), so a field added to a mechanism joins its group by itself; a field no mechanism claims is an engine
setting unless it is one every scenario names (CORE_FIELDS). The dashboard's form lays its Advanced section out
from `MECHANISMS`; the CLI or /docs may group by it too.

    group_of("spec_tokens")      -> "spec"
    MECHANISMS[0].title          -> "Engine and batching"
"""

from __future__ import annotations

from dataclasses import dataclass

from . import lora
from .energy_fields import EnergyFields
from .fields import field_info
from .kv_offload_fields import KVOffloadFields
from .scenario import AUTOSCALE_FIELDS, POOL_FIELDS, Scenario


@dataclass(frozen=True)
class Mechanism:
    key: str
    title: str
    explanation: str  # one line: what the mechanism does
    doc: str  # the docs file and section that describe it: "model#speculative-decoding"
    fields: tuple[str, ...]  # the scenario fields it holds, in the scenario's order
    switch: str | None = None  # the field that turns it on (None: always on, as the engine's settings are)
    on_value: str | None = None  # what turning it on sets `switch` to (None: the user gives a number)


def _own(predicate) -> tuple[str, ...]:
    return tuple(n for n in Scenario.model_fields if predicate(n))


SPEC_FIELDS = _own(lambda n: n.startswith("spec_"))
KV_TIER_FIELDS = tuple(KVOffloadFields.model_fields)
LORA_FIELDS = _own(lambda n: n in lora.HELP)
MOE_FIELDS = ("ep", "attention_dp", "moe_imbalance", "scale_out_link")  # the network beyond a node: EP and TP
CLUSTER_FIELDS = ("replicas", "router", "router_staleness_ms", "router_cache_weight", "prefill_replicas",
                  "decode_replicas", *POOL_FIELDS, "kv_link")
AUTOSCALING_FIELDS = ("autoscaler", *AUTOSCALE_FIELDS)
POWER_FIELDS = tuple(EnergyFields.model_fields)
# What every scenario names (the dashboard's first groups: deployment, workload, SLOs); no mechanism's.
CORE_FIELDS = ("scheduler", "hardware", "model", "model_file", "quantization", "tp", "workload", "trace", "rate",
               "duration", "burstiness", "num_requests", "seed", "seeds", "slo_ttft_ms", "slo_tpot_ms")
WORKLOAD_SHAPE_FIELDS = ("rate_schedule", "concurrency", "think_time_s", "concurrency_mode", "isl", "osl",
                         "length_range", "length_range_mode", "system_prompt_tokens", "trace_format",
                         "trace_block_tokens")
_CLAIMED = {*CORE_FIELDS, *SPEC_FIELDS, *KV_TIER_FIELDS, *LORA_FIELDS, *MOE_FIELDS, *CLUSTER_FIELDS,
            *AUTOSCALING_FIELDS, *POWER_FIELDS, *WORKLOAD_SHAPE_FIELDS}
ENGINE_FIELDS = _own(lambda n: n not in _CLAIMED)


def _first_choice(name: str) -> str:
    """The first of a choice field's values (what switching its mechanism on picks)."""
    return str(field_info(name).choices[0])


MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism("engine", "Engine and batching",
              "How each engine forms its steps: token budget and sequence cap, the KV pool, preemption, the "
              "scheduler's own settings.", "model#engine", ENGINE_FIELDS),
    Mechanism("workload_shape", "Workload shape",
              "Beyond the preset: a rate that changes over time, a closed loop of users, fixed lengths, a "
              "trace's format.", "model#workloads", WORKLOAD_SHAPE_FIELDS),
    Mechanism("spec", "Speculative decoding",
              "A cheap proposer drafts tokens that one pass of the model verifies: more tokens per step, for "
              "the verification's work.", "model#speculative-decoding", SPEC_FIELDS,
              "spec_method", _first_choice("spec_method")),
    Mechanism("kv_tiers", "KV tiers",
              "Prefix-cached KV blocks the GPU evicts go to host memory or disk and load back instead of "
              "being recomputed (needs the prefix cache).", "model#tiered-kv-offload", KV_TIER_FIELDS,
              "kv_offload_cpu_gb"),
    Mechanism("lora", "LoRA adapters",
              "Requests use one of many adapters over one base model; a step holds a few, the rest load from "
              "host memory or disk.", "model#lora-adapters", LORA_FIELDS, "lora_adapters"),
    Mechanism("moe", "MoE and parallelism",
              "A mixture-of-experts model's experts spread whole over ep GPUs, reached by all-to-all, "
              "optionally with data-parallel attention.", "model#expert-parallelism", MOE_FIELDS, "ep"),
    Mechanism("cluster", "Cluster and P/D",
              "Several engines behind a router, or prefill and decode split into pools whose KV crosses a "
              "link.", "model#clusters", CLUSTER_FIELDS, "replicas"),
    Mechanism("autoscaling", "Autoscaling",
              "An autoscaler adds and releases replicas over the run, each serving only after its "
              "provisioning delay.", "usage#the-dashboard", AUTOSCALING_FIELDS,
              "autoscaler", _first_choice("autoscaler")),
    Mechanism("power", "Power and energy",
              "GPU board power per step from what the step does: joules per token and per request, average "
              "and peak power.", "model#energy", POWER_FIELDS, "energy", "true"),
)
BY_KEY = {m.key: m for m in MECHANISMS}
_GROUP = {name: m.key for m in MECHANISMS for name in m.fields}


def group_of(name: str) -> str:
    """The key of the mechanism a scenario field belongs to, "core" for CORE_FIELDS (KeyError for a name that is
    not a field)."""
    return "core" if name in CORE_FIELDS and name in Scenario.model_fields else _GROUP[name]
