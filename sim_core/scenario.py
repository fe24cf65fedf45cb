"""The one scenario model. CLI flags, URL query strings and the JSON API all parse into `Scenario`; its canonical
query string round-trips (Scenario -> query -> Scenario is the identity)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import parse_qsl, urlencode

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from . import lora
from .catalog import AUTO_QUANTIZATION, GPUS, KV_CACHE_DTYPES, MODELS, QUANTIZATION_CHOICES, weight_format
from .energy_fields import EnergyFields
from .engines import DEFAULT_ENGINE, ENGINE_NAMES, ENGINES, scenario_defaults
from .expert_parallel import MAX_EP, SCALE_OUT_LINK, SCALE_OUT_LINK_BY_GPU, shape_error
from .hardware_profile import canonical, mismatch, parse_compact
from .hybrid_blocks import HybridBlockFields
from .kv_offload_fields import KVOffloadFields
from .links import KV_LINKS
from .policies import SCHEDULER_NAMES
from .policies.autoscalers import AUTOSCALERS, SCALE_PREDICTIVE, SCALING_METRICS
from .policies.routers import DEFAULT_CACHE_WEIGHT, ROUTERS
from .rate_schedule import ScheduleError
from .rate_schedule import parse as parse_schedule
from .replay_fields import ReplayFields
from .scenario_errors import ScenarioError, describe_error, model_error_field
from .tensor_parallel import ALLOWED_TP_TEXT, MAX_TP, SCALE_OUT_LINK_NAMES, TensorParallelDegree
from .trace_formats import FORMATS, TRACE_FORMAT_NAMES
from .workload import LENGTH_RANGE_MODES, PRESETS, RANDOM_ISL, RANDOM_OSL

SchedulerName = Literal[SCHEDULER_NAMES]  # type: ignore[valid-type]
HardwareName = Literal[tuple(GPUS)]  # type: ignore[valid-type]
ModelName = Literal[tuple(MODELS)]  # type: ignore[valid-type]
Quantization = Literal[QUANTIZATION_CHOICES]  # type: ignore[valid-type]
KvCacheDtype = Literal[tuple(KV_CACHE_DTYPES)]  # type: ignore[valid-type]
WorkloadName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]
RouterName = Literal[tuple(ROUTERS)]  # type: ignore[valid-type]
KvLinkName = Literal[tuple(KV_LINKS)]  # type: ignore[valid-type]
ScaleOutLinkName = Literal[SCALE_OUT_LINK_NAMES]  # type: ignore[valid-type]
EngineName = Literal[ENGINE_NAMES]  # type: ignore[valid-type]
AutoscalerName = Literal[tuple(AUTOSCALERS)]  # type: ignore[valid-type]
TraceFormatName = Literal[TRACE_FORMAT_NAMES]  # type: ignore[valid-type]
ScalingMetric = Literal[tuple(SCALING_METRICS)]  # type: ignore[valid-type]

# Limits that keep one simulation bounded; the web layer applies tighter ones of its own.
MAX_REQUESTS = 10_000_000
MAX_DURATION_S = 7 * 24 * 3600.0
BLOCK_SIZES = (8, 16, 32, 64, 128)
# The slowest arrival rate that keeps a run meaningful: one request in ~12 days (a week of arrivals at most).
# Below it the gap arithmetic underflows (a rate of 5e-324 divides by zero).
MIN_RATE = 1e-6
MAX_SEEDS = 50
MAX_REPLICAS = 64
# Engines attention data-parallel ranks may add up to (replicas x ep / tp): four NVL72 racks' worth.
MAX_DP_ENGINES = 4 * MAX_EP
# A closed loop's users (each holds a request in the system) and the longest think time between requests.
MAX_CONCURRENCY = 100_000
MAX_THINK_S = 3600.0
# An autoscaler's settings (each refused without one) and the most replicas it scales to by default.
AUTOSCALE_FIELDS = ("min_replicas", "max_replicas", "autoscale_interval_s", "autoscale_metric", "autoscale_target",
                    "autoscale_cooldown_s", "autoscale_replica_rate", "provision_delay_s")
DEFAULT_MAX_REPLICAS = 8
# A disaggregated deployment's per-pool settings (None: the scenario's hardware or tp, ep 1).
POOL_FIELDS = ("prefill_hardware", "decode_hardware", "prefill_tp", "decode_tp", "prefill_ep", "decode_ep")


class Scenario(EnergyFields, KVOffloadFields, ReplayFields, HybridBlockFields):
    """Everything one simulation needs. Unset optional fields take the workload preset's or the GPU's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheduler: SchedulerName = Field("chunked", description="scheduling policy")
    hardware: HardwareName = Field("a100", description="GPU type (one per tensor-parallel rank)")
    model: ModelName | None = Field(None, description="model; default: the GPU's default model")
    model_file: str | None = Field(None, min_length=1, max_length=4096,
                                   description="a Hugging Face config.json to read the model's architecture from, "
                                               "instead of model (the CLI flag is --model-config FILE)")
    quantization: Quantization = Field(AUTO_QUANTIZATION, description="weight format; auto: the checkpoint's own "
                                       "(its config's quantization_config: FP8, MXFP4, NVFP4, int4/int8, else 16-bit), "
                                       "run as the engine runs it on the GPU: on FP8/FP4 tensor cores where the GPU "
                                       "has them, weight-only elsewhere")
    kv_cache_dtype: KvCacheDtype = Field("auto", description="KV-cache format: auto keeps K and V in 16 bits; fp8 "
                                         "stores them in 8 bits (vLLM's --kv-cache-dtype fp8): twice the tokens "
                                         "per GB and half the bytes attention reads")
    tp: TensorParallelDegree = Field(1, ge=1, le=MAX_TP, description="tensor-parallel degree (GPUs): "
                                     + ALLOWED_TP_TEXT + "; above a node's NVLink domain over scale_out_link")
    ep: int = Field(1, ge=1, le=MAX_EP,
                    description="expert-parallel degree of a mixture-of-experts model: its routed experts spread "
                                "whole over ep GPUs, tokens reaching them by all-to-all (1: experts split "
                                "tensor-parallel like the rest); with attention tensor-parallel ep equals tp")
    attention_dp: bool = Field(False, description="with ep > 1: attention data-parallel (DeepSeek-style): ep / tp "
                                                  "ranks of tp GPUs, each holding the attention weights and its own "
                                                  "requests' KV and scheduling its own batch")
    moe_imbalance: float | None = Field(None, ge=1, le=16,
                                        description="with ep > 1: the busiest GPU's routed tokens over the mean "
                                                    "(a measured expert load-imbalance factor); default 1: "
                                                    "uniform routing")
    hardware_profile: str | None = Field(
        None, min_length=1, max_length=512,
        description="the cost model's constants fitted on your own deployment by `sched-sim calibrate` (the CLI "
                    "flag takes the profile's JSON file; elsewhere its scenario_field string); must match "
                    "hardware, model, quantization and tp")
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS, description="engines behind a router, each on its own GPUs")
    router: RouterName = Field("round_robin", description="how the router picks a replica for each request: "
                                                          + "; ".join(f"{k}: {v[1]}" for k, v in ROUTERS.items()))
    router_staleness_ms: float = Field(0.0, ge=0, le=600_000,
                                       description="how old the replica load the router sees is (it polls "
                                                   "metrics); 0: always current")
    router_cache_weight: float = Field(DEFAULT_CACHE_WEIGHT, ge=0, le=1000,
                                       description="prefix_affinity: what a prompt token the replica would have to "
                                                   "compute (not cached there) weighs against a KV token it already "
                                                   "has outstanding; higher keeps sessions on their cache, lower "
                                                   "balances load (1: Dynamo's KV router default)")
    autoscaler: AutoscalerName | None = Field(None, description="change the number of replicas over the run "
                                                                "(replicas: how many serve at the start): "
                                                                + "; ".join(f"{k}: {v[1]}" for k, v in
                                                                            AUTOSCALERS.items()))
    min_replicas: int | None = Field(None, ge=0, le=MAX_REPLICAS, description="autoscaler: the fewest replicas (of "
                                     "each pool, with prefill_replicas and decode_replicas); "
                                     "default 1; 0 scales to zero (a request arriving to none wakes one, serving "
                                     "after the provisioning delay)")
    max_replicas: int | None = Field(None, ge=1, le=MAX_REPLICAS,
                                     description="autoscaler: the most replicas alive at once (provisioning, serving "
                                                 "or draining: each holds its GPUs), of each pool with "
                                                 "prefill_replicas and decode_replicas; default 8, or replicas if "
                                                 "more")
    # At least 1 ms (issue #37): the HPA evaluates every 15 s and KEDA polls every 30 s; a nanosecond period was
    # accepted and meant 6e11 evaluations of every replica in 600 s, a run no machine finishes.
    autoscale_interval_s: float | None = Field(None, ge=0.001, le=86_400, description="autoscaler: seconds between "
                                               "evaluations; default 15 (the Kubernetes HPA's sync period)")
    autoscale_metric: ScalingMetric | None = Field(None, description="autoscaler utilization: the vLLM metric it "
                                                   "scales on (waiting, running requests or kv_usage); default running")
    autoscale_target: float | None = Field(None, gt=0, le=100_000, description="autoscaler utilization: the metric's "
                                           "target per replica (kv_usage: a fraction); default for running: the "
                                           "requests one replica holds at the rate it serves within the SLO")
    autoscale_cooldown_s: float | None = Field(None, ge=0, le=86_400, description="autoscaler utilization: no "
                                               "scale-down sooner than this after the last change; default 300")
    autoscale_replica_rate: float | None = Field(None, gt=0, le=10_000, description="autoscaler predictive: requests/s "
                                                 "each replica serves within the SLO (either pool's, with prefill "
                                                 "and decode pools); default: the capacity search's for 1, 2, 4, ... "
                                                 "replicas (one replica of each pool)")
    provision_delay_s: float | None = Field(None, ge=0, le=86_400, description="autoscaler: seconds from asking for "
                                            "a replica to its serving; default: weight load + engine start-up "
                                            "(sim_core/data/startup.json)")
    prefill_replicas: int = Field(0, ge=0, le=MAX_REPLICAS,
                                  description="disaggregated serving: engines that only prefill (0: each engine "
                                              "prefills and decodes its own requests)")
    decode_replicas: int = Field(0, ge=0, le=MAX_REPLICAS,
                                 description="disaggregated serving: engines that decode what the prefill pool "
                                             "computed, after its KV crosses kv_link")
    prefill_hardware: HardwareName | None = Field(None, description="disaggregated serving: the prefill pool's GPU "
                                                                    "type; default: hardware")
    decode_hardware: HardwareName | None = Field(None, description="disaggregated serving: the decode pool's GPU "
                                                                  "type; default: hardware")
    prefill_tp: TensorParallelDegree | None = Field(None, ge=1, le=MAX_TP, description="disaggregated serving: the prefill pool's "
                                                                 "tensor-parallel degree; default: tp")
    decode_tp: TensorParallelDegree | None = Field(None, ge=1, le=MAX_TP, description="disaggregated serving: the decode pool's "
                                                                "tensor-parallel degree; default: tp")
    prefill_ep: int | None = Field(None, ge=1, le=MAX_EP, description="disaggregated serving: the prefill pool's "
                                   "expert-parallel degree (as ep; with attention_dp each replica is ep / tp ranks); "
                                   "default 1")
    decode_ep: int | None = Field(None, ge=1, le=MAX_EP, description="disaggregated serving: the decode pool's "
                                  "expert-parallel degree (as ep; with attention_dp each replica is ep / tp ranks); "
                                  "default 1")
    kv_link: KvLinkName = Field("ib400", description="disaggregated serving: the link a prompt's KV crosses from "
                                                     "a prefill GPU to a decode GPU: "
                                                     + "; ".join(f"{k}: {v.name}" for k, v in KV_LINKS.items()))
    scale_out_link: ScaleOutLinkName | None = Field(
        None, description="the network between nodes (NVLink domains): what a tensor-parallel group larger than one "
                          "domain all-reduces over, and expert parallelism's all-to-all beyond one; default: the "
                          "GPU's NIC (" + SCALE_OUT_LINK + "; " + ", ".join(
                              f"{v} on {k}" for k, v in SCALE_OUT_LINK_BY_GPU.items()) + ")")
    workload: WorkloadName = Field("chat", description="workload preset")
    trace: str | None = Field(None, min_length=1, max_length=4096,
                              description="trace file to replay, any trace_format, or a bundled sample's name such "
                                          "as weka-cc-trace-0291 (replaces the preset)")
    trace_format: TraceFormatName | None = Field(None, description="the trace's format (default: told by its first "
                                                                "line): " + "; ".join(f"{k}: {v.title}" for k, v in
                                                                                     FORMATS.items()))
    trace_block_tokens: int | None = Field(None, ge=1, le=1 << 16,
                                           description="tokens each of the trace's block hash ids covers (default: "
                                                       "the format's, e.g. Mooncake 512, Bailian 16, Weka its "
                                                       "block_size); the prefix cache sees that content at the "
                                                       "engine's own block size")
    rate: float | None = Field(None, ge=MIN_RATE, le=10_000,
                               description="arrival rate, requests/s; default: the preset's (a trace: its recorded "
                                           "timing; with rate set, its gaps scaled to this mean rate)")
    rate_schedule: str | None = Field(None, description="an arrival rate that changes over time, instead of rate: "
                                                        "piecewise '0:5,600:20' (from 0 s 5 req/s, from 600 s 20) "
                                                        "or diurnal:period=S,min=R,max=R[,peak=S], "
                                                        "ramp:from=R,to=R,over=S, "
                                                        "burst:base=R,peak=R,at=S,width=S[,every=S]")
    burstiness: float | None = Field(None, ge=0.05, le=20,
                                     description="coefficient of variation of inter-arrival gaps (1 = Poisson)")
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY,
                                    description="closed loop instead of arrival rates: this many users, each "
                                                "sending its next request when its last one ends (plus "
                                                "think_time_s); the workload's or trace's requests in order, "
                                                "dealt round-robin to the users, all starting at 0 (vLLM bench "
                                                "serve --max-concurrency, AIPerf/InferenceX concurrency)")
    think_time_s: float | None = Field(None, ge=0, le=MAX_THINK_S,
                                       description="closed loop: seconds a user waits after a request ends "
                                                   "before sending its next; default 0")
    concurrency_mode: Literal["users", "semaphore"] = Field(
        "users", description="closed loop: users: request k goes to user k mod concurrency, each user sending its "
                             "next when its last ends (AIPerf, InferenceX); semaphore: the next request in order "
                             "goes out when any request ends (vLLM bench serve --max-concurrency)")
    isl: int | None = Field(None, ge=1, le=1 << 20,
                            description=f"workload random: prompt tokens per request (vLLM's --random-input-len); "
                                        f"default {RANDOM_ISL}")
    osl: int | None = Field(None, ge=1, le=1 << 20,
                            description=f"workload random: output tokens per request (vLLM's "
                                        f"--random-output-len); default {RANDOM_OSL}")
    length_range: float | None = Field(None, ge=0, lt=1,
                                       description="workload random: draw each length uniformly from "
                                                   "[L(1-r), L(1+r)] (vLLM's --random-range-ratio), or [rL, L] "
                                                   "with length_range_mode inferencex; unset: exactly isl and osl")
    length_range_mode: Literal[LENGTH_RANGE_MODES] = Field(  # type: ignore[valid-type]
        "vllm", description="workload random: how length_range r spreads a length L: vllm: uniform in "
                            "[L(1-r), L(1+r)] (vLLM's --random-range-ratio); inferencex: uniform in [rL, L] "
                            "(InferenceX's benchmark client reads its --random-range-ratio so, e.g. 0.8)")
    duration: float = Field(60.0, gt=0, le=MAX_DURATION_S, description="seconds of arrivals")
    num_requests: int | None = Field(None, ge=1, le=MAX_REQUESTS,
                                     description="exact number of requests (overrides duration)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="random seed")
    seeds: int = Field(1, ge=1, le=MAX_SEEDS, description="run seeds seed .. seed + seeds - 1 and report each "
                                                          "metric's mean and 95% confidence interval")
    model_uncertainty: bool = Field(False, description="also replay the run under an ensemble of 16 step-time "
                                                       "models spread as the cost model's validation errors are, "
                                                       "and report each metric's 90% model interval (model_ci)")
    token_budget: int | None = Field(None, ge=16, le=1 << 20,
                                     description="max tokens per step; default: the engine's for the GPU (vllm: "
                                                 "8192 on GPUs of 70 GB or more other than the A100, 2048 "
                                                 "elsewhere) for a chunked-prefill scheduler, max_model_len "
                                                 "for one that prefills whole prompts")
    max_seqs: int | None = Field(None, ge=1, le=4096,
                                 description="max sequences per step; default: the engine's for the GPU (vllm: 1024 "
                                             "on GPUs of 70 GB or more other than the A100, 256 elsewhere)")
    block_size: int = Field(16, description="tokens per KV block: 8, 16, 32, 64 or 128")
    gpu_memory_utilization: float = Field(0.9, ge=0.1, le=0.99, description="fraction of GPU memory to use")
    kv_blocks: int | None = Field(None, ge=1, le=50_000_000,
                                  description="shrink the KV pool to this many usable blocks (vLLM's num_gpu_blocks "
                                              "minus its null block; default: what memory allows)")
    watermark: float = Field(0.0, ge=0, le=0.5,
                             description="fraction of the KV pool a new request may not take while others run "
                                         "(vLLM v1: 0, v0: 0.01)")
    async_scheduling: bool = Field(False, description="vLLM's asynchronous scheduling: each step is scheduled "
                                                      "while the one before runs, so the engine's CPU time hides "
                                                      "under the GPU's, and a request's last token is seen, and "
                                                      "its KV blocks and batch slot freed, one step later")
    engine: EngineName = Field(DEFAULT_ENGINE, description="the serving engine: its documented defaults for "
                                                           "token_budget and max_seqs (for the GPU), "
                                                           "async_scheduling and preemption where those are "
                                                           "unset, and its kernels' costs (sim_core/data/engines.json cites each): "
                                                           + "; ".join(f"{k}: {e.name}" for k, e in ENGINES.items()))
    max_model_len: int | None = Field(None, ge=64, le=1 << 21,
                                      description="max prompt + output tokens; default: the model's context, "
                                                  "limited as the engine limits it (vllm refuses to start when "
                                                  "the KV cache cannot hold one such sequence, naming the "
                                                  "largest that fits; sglang lowers it to what fits)")
    prefix_cache: bool = Field(False, description="reuse cached KV blocks of shared prompt prefixes "
                                                  "(always on for cache_aware)")
    system_prompt_tokens: int | None = Field(None, ge=0, le=32768,
                                             description="shared system prompt before every prompt; "
                                                         "default: the preset's")
    preemption: Literal["recompute", "swap", "none"] = Field(
        "recompute", description="what happens when the KV pool runs out")
    swap_space_gb: float = Field(4.0, ge=0, le=4096, description="host memory for swapped KV, per GPU")
    slo_ttft_ms: float | None = Field(None, gt=0, le=3_600_000, description="TTFT target; default: the preset's")
    slo_tpot_ms: float | None = Field(None, gt=0, le=3_600_000, description="TPOT target; default: the preset's")
    admission: Literal["admit", "reject", "degrade"] | None = Field(
        None, description="a request whose TTFT target is out of reach: admit, reject (shed) or degrade "
                          "(relax its target); default: reject for slo, admit otherwise")
    degrade_factor: float = Field(2.0, ge=1, le=100, description="how much admission=degrade relaxes a TTFT target")
    aging_rate: float = Field(0.0, ge=0, le=1e9,
                              description="priority gained per second waited (tokens/s for spf, s/s for slo)")
    transport_overhead_ms: float = Field(0.0, ge=0, le=60_000,
                                         description="client-visible minus device latency, added to TTFT/E2EL")
    adaptive_budget: bool = Field(False, description="adapt the token budget to keep steps under the ITL target")
    controller_headroom: float = Field(0.75, ge=0.1, le=1.0,
                                       description="adaptive budget keeps step time under this fraction of TPOT")
    mlfq_quantum: int = Field(32, ge=1, le=1_000_000,
                              description="mlfq: decode iterations a request runs at the top level before it drops "
                                          "a level (each level's quantum doubles)")
    mlfq_levels: int = Field(4, ge=1, le=32, description="mlfq: number of priority levels")
    # Speculative decoding (sim_core/spec_decode.py, kernel/spec_decode.py): off unless spec_method is set.
    spec_method: Literal["ngram", "draft", "eagle", "mtp"] | None = Field(
        None, description="speculative decoding's proposer: n-gram prompt lookup, a draft model, an EAGLE head or "
                          "the model's MTP module (default: off)")
    spec_tokens: int | None = Field(None, ge=0, le=16,
                                    description="draft tokens per decoding step (0: off; default: 1 for mtp, 3 "
                                                "otherwise)")
    spec_acceptance: float | None = Field(None, gt=0, lt=1,
                                          description="one per-position draft acceptance rate (geometric) instead "
                                                      "of the method's measured rates")
    spec_draft_model: ModelName | None = Field(None, description="spec_method draft: the catalogue model that drafts "
                                                           "(default: llama-3.2-1b)")
    spec_disable_above: int = Field(0, ge=0, le=4096,
                                    description="no drafts while more than this many requests run (vLLM's "
                                                "speculative_disable_by_batch_size; 0: never)")
    spec_k_policy: Literal["fixed", "goodput"] = Field(
        "fixed", description="fixed: every step proposes spec_tokens; goodput: each step proposes the k (0 .. "
                             "spec_tokens) with the most expected tokens per second for its batch (SmartSpec)")
    # LoRA adapters (sim_core/lora.py, issue #23); all off while lora_adapters is 0
    lora_adapters: int = Field(0, ge=0, le=lora.MAX_ADAPTERS, description=lora.HELP["lora_adapters"])
    lora_rank: int = Field(lora.DEFAULT_RANK, ge=1, le=max(lora.RANKS), description=lora.HELP["lora_rank"])
    lora_targets: str = Field(lora.DEFAULT_TARGETS, max_length=64, description=lora.HELP["lora_targets"])
    lora_zipf: float = Field(lora.DEFAULT_ZIPF, ge=0, le=10, description=lora.HELP["lora_zipf"])
    max_loras: int = Field(lora.DEFAULT_MAX_LORAS, ge=1, le=lora.MAX_ADAPTERS, description=lora.HELP["max_loras"])
    max_cpu_loras: int | None = Field(None, ge=1, le=lora.MAX_ADAPTERS, description=lora.HELP["max_cpu_loras"])
    lora_order: Literal["fcfs", "grouped"] = Field("fcfs", description=lora.HELP["lora_order"])
    lora_aging_s: float = Field(lora.DEFAULT_AGING_S, ge=0, le=1e6, description=lora.HELP["lora_aging_s"])
    lora_disk_load_s: float = Field(lora.DISK_LOAD_S, ge=0, le=3600, description=lora.HELP["lora_disk_load_s"])

    @model_validator(mode="before")
    @classmethod
    def _engine_defaults(cls, data: object) -> object:
        """An engine's defaults for the fields the input leaves out (the input's own values win)."""
        if not isinstance(data, dict):
            return data
        defaults = _engine_defaults_of(data)
        # None is "unset" here too, as a blank form field is: a query string has no way to say None, so a field
        # set to None and then to_query'd would not come back.
        return {**defaults, **{k: v for k, v in data.items() if v is not None}}

    @model_validator(mode="after")
    def _speculation(self) -> Scenario:
        if self.spec_method is None:
            for name in ("spec_tokens", "spec_acceptance", "spec_draft_model"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: needs spec_method (ngram, draft, eagle or mtp)")
            for name in ("spec_disable_above", "spec_k_policy"):
                if getattr(self, name) not in (0, "fixed"):
                    raise ValueError(f"{name}: needs spec_method (ngram, draft, eagle or mtp)")
        if self.spec_draft_model is not None and self.spec_method != "draft":
            raise ValueError("spec_draft_model: only for spec_method draft")
        return self

    @model_validator(mode="after")
    def _pools_together(self) -> Scenario:
        if (self.prefill_replicas > 0) != (self.decode_replicas > 0):
            missing = "decode_replicas" if self.prefill_replicas > 0 else "prefill_replicas"
            raise ValueError(f"{missing}: disaggregated serving needs both pools, at least 1 engine each "
                             f"(or both 0 for engines that prefill and decode)")
        if self.prefill_replicas > 0 and self.async_scheduling:
            raise ValueError("async_scheduling: not modelled for disaggregated serving yet (prefill_replicas and "
                             "decode_replicas); leave it off there")
        if self.prefill_replicas > 0 and self.replicas > 1:
            raise ValueError("replicas: with prefill_replicas and decode_replicas the pools set the engine count; "
                             "leave replicas at 1")
        for name in POOL_FIELDS:
            if getattr(self, name) is not None and not self.disaggregated:
                raise ValueError(f"{name}: sets one pool of a disaggregated deployment; needs prefill_replicas and "
                                 f"decode_replicas (leave it unset otherwise)")
        return self

    @model_validator(mode="after")
    def _autoscaler_fields(self) -> Scenario:
        if self.autoscaler is None:
            for name in AUTOSCALE_FIELDS:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: sets how an autoscaler scales; set autoscaler with it (or leave it "
                                     f"unset)")
            return self
        if self.disaggregated:
            return self._pools_scale()
        if self.ep > 1:  # its fleet counts one replica as one engine of tp GPUs; attention-DP ranks are several
            raise ValueError("autoscaler: scales replicas of tp GPUs; not modelled with expert parallelism (ep > 1) "
                             "yet")
        if self.autoscale_metric not in (None, "running") and self.autoscale_target is None:
            raise ValueError(f"autoscale_target: needed with autoscale_metric {self.autoscale_metric} (the value per "
                             f"replica to hold; only running has a default)")
        lo, hi = self.scaling_bounds
        if lo > hi:
            raise ValueError(f"min_replicas: {lo} is more than max_replicas ({hi})")
        if not lo <= self.replicas <= hi:
            raise ValueError(f"replicas: the replicas serving at the start ({self.replicas}) must be within "
                             f"min_replicas and max_replicas ({lo}..{hi})")
        return self

    def _pools_scale(self) -> Scenario:
        """Prefill and decode pools scale separately (sim_core/pool_autoscale.py), each within the bounds."""
        if AUTOSCALERS[self.autoscaler][0] != SCALE_PREDICTIVE:
            raise ValueError("autoscaler: prefill and decode pools scale with predictive only (each sized by its own "
                             "capacity, as Dynamo's planner); utilization is not modelled there yet")
        if self.energy:
            raise ValueError("energy: not modelled yet for autoscaled prefill and decode pools (unset energy or "
                             "autoscaler)")
        lo, hi = self.scaling_bounds
        if lo < 1 or lo > hi:
            raise ValueError(f"min_replicas: {lo}; each of prefill and decode pools keeps at least 1 replica, at most "
                             f"max_replicas ({hi})")
        for name in ("prefill_replicas", "decode_replicas"):
            if not lo <= getattr(self, name) <= hi:
                raise ValueError(f"{name}: the replicas serving at the start ({getattr(self, name)}) must be within "
                                 f"min_replicas and max_replicas ({lo}..{hi})")
        return self

    @property
    def scaling_bounds(self) -> tuple[int, int]:
        """(min_replicas, max_replicas) as an autoscaler uses them (each pool's, with prefill and decode pools),
        defaults filled in."""
        lo = 1 if self.min_replicas is None else self.min_replicas
        start = max(self.replicas, self.prefill_replicas, self.decode_replicas)
        return lo, self.max_replicas or max(DEFAULT_MAX_REPLICAS, start, lo)

    def pool_deployment(self, pool: str) -> tuple[str, int]:
        """(GPU type, tensor-parallel degree) of the "prefill" or "decode" pool; the scenario's own hardware and tp
        unless the pool sets its own."""
        hw, tp = getattr(self, f"{pool}_hardware"), getattr(self, f"{pool}_tp")
        return hw or self.hardware, tp or self.tp

    @property
    def heterogeneous(self) -> bool:
        """Disaggregated pools on different GPUs or tensor-parallel degrees."""
        return self.disaggregated and self.pool_deployment("prefill") != self.pool_deployment("decode")

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    def offered_rate(self) -> float:
        """The mean arrival rate of a preset workload, requests/s: `rate`, the mean of `rate_schedule` over the
        duration, or the preset's default (what estimates of a run's size read)."""
        if self.rate_schedule is not None:
            return parse_schedule(self.rate_schedule).mean_rate(self.duration)
        return self.rate or PRESETS[self.workload].rate

    def require_constant_rate(self, study: str) -> None:
        """Studies that search over arrival rates (sweep, capacity, plan) vary `rate`: a schedule is refused."""
        if self.rate_schedule is not None:
            raise ScenarioError([("rate_schedule", f"{study} searches over constant arrival rates; unset "
                                                   "rate_schedule (or run the schedule itself with run/compare)")])
        if self.concurrency is not None:
            raise ScenarioError([("concurrency", f"{study} searches over arrival rates; unset concurrency (or run "
                                                 "the closed loop itself with run/compare)")])

    @property
    def engines(self) -> int:
        """Engines the scenario runs (each on tp GPUs; with attention_dp each data-parallel rank is one)."""
        if self.disaggregated:
            return self.prefill_replicas * self.pool_ranks("prefill") + self.decode_replicas * self.pool_ranks("decode")
        return self.replicas * (self.ep // self.tp if self.attention_dp else 1)

    def pool_ep(self, pool: str) -> int:
        """The "prefill" or "decode" pool's expert-parallel degree (ep, which is 1 with pools, where it sets none)."""
        return getattr(self, f"{pool}_ep") or self.ep

    def pool_ranks(self, pool: str) -> int:
        """Engines one replica of the pool runs: its attention data-parallel ranks (1 without attention_dp)."""
        ep = self.pool_ep(pool)
        return ep // self.pool_deployment(pool)[1] if self.attention_dp and ep > 1 else 1

    @field_validator("block_size")
    @classmethod
    def _block_size_allowed(cls, v: int) -> int:
        if v not in BLOCK_SIZES:
            raise ValueError(f"must be one of {', '.join(map(str, BLOCK_SIZES))} (got {v})")
        return v

    @field_validator("rate_schedule")
    @classmethod
    def _schedule_parses(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            return parse_schedule(v).text()  # canonical, so the query string round-trips
        except ScheduleError as e:
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _expert_parallel_shape(self) -> Scenario:
        if self.ep > 1 and self.disaggregated:
            raise ValueError("ep: sets colocated engines' expert parallelism; with prefill_replicas and "
                             "decode_replicas set each pool's: prefill_ep, decode_ep (leave ep at 1)")
        problem = self._pools_shape_error() if self.disaggregated else shape_error(
            self.ep, self.tp, self.attention_dp, self.moe_imbalance)
        if problem:
            raise ValueError(": ".join(problem))
        if self.engines > MAX_DP_ENGINES:
            raise ValueError(f"replicas: replicas x ep / tp data-parallel ranks must stay at most {MAX_DP_ENGINES} "
                             f"engines (got {self.engines})")
        return self

    def _pools_shape_error(self) -> tuple[str, str] | None:
        """expert_parallel.shape_error for each pool with ep > 1 (naming its field); attention_dp and moe_imbalance
        apply to those pools, and are refused when there is none."""
        with_ep = [p for p in ("prefill", "decode") if self.pool_ep(p) > 1]
        if not with_ep:
            problem = shape_error(1, self.tp, self.attention_dp, self.moe_imbalance)
            return problem and (problem[0], "applies to expert parallelism; set prefill_ep or decode_ep > 1 with it "
                                            "(or leave it unset)")
        for pool in with_ep:
            problem = shape_error(self.pool_ep(pool), self.pool_deployment(pool)[1], self.attention_dp,
                                  self.moe_imbalance)
            if problem:
                return f"{pool}_{problem[0]}" if problem[0] == "ep" else problem[0], problem[1]
        return None

    @model_validator(mode="after")
    def _one_model(self) -> Scenario:
        if self.model_file is not None and self.model is not None:
            raise ValueError("model_file: gives the model's architecture itself; leave model unset with it")
        if self.model_file is not None and self.hardware_profile is not None:
            raise ValueError("hardware_profile: fitted on a catalogue model; it cannot apply to a model_file")
        return self

    @model_validator(mode="after")
    def _lora_runs(self) -> Scenario:
        why = lora.check(self)
        if why:
            raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _schedule_alone(self) -> Scenario:
        if self.rate_schedule is not None and self.rate is not None:
            raise ValueError("rate_schedule: sets the arrival rate over time; leave rate unset with it")
        if self.rate_schedule is not None and self.trace is not None:
            raise ValueError("rate_schedule: a trace replays its own arrival times; leave rate_schedule unset "
                             "with a trace")
        return self

    @model_validator(mode="after")
    def _closed_loop_alone(self) -> Scenario:
        # A closed loop's arrivals are its users' finishes: an arrival rate would be silently ignored.
        if self.concurrency is None:
            if self.think_time_s is not None:
                raise ValueError("think_time_s: the pause between a closed-loop user's requests; set concurrency "
                                 "with it (or leave it unset)")
            if self.concurrency_mode != "users":
                raise ValueError("concurrency_mode: how a closed loop hands out requests; set concurrency with it "
                                 "(or leave it unset)")
            return self
        for name in ("rate", "rate_schedule", "burstiness"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name}: with concurrency the users' requests arrive as earlier ones end, at no "
                                 f"set rate; leave {name} unset (or unset concurrency for open-loop arrivals)")
        return self

    @model_validator(mode="after")
    def _lengths_for_random(self) -> Scenario:
        for name in ("isl", "osl", "length_range", "length_range_mode"):
            if getattr(self, name) in (None, "vllm"):  # unset (vllm: length_range_mode's default)
                continue
            if self.workload != "random":
                raise ValueError(f"{name}: sets the random workload's request lengths; use workload random with it "
                                 f"(workload is {self.workload})")
            if self.trace is not None:
                raise ValueError(f"{name}: a trace brings its own request lengths; leave {name} unset with a trace")
        return self

    @field_validator("hardware_profile")
    @classmethod
    def _profile_parses(cls, v: str | None) -> str | None:
        return canonical(v)

    @model_validator(mode="after")
    def _profile_matches(self) -> Scenario:
        why = profile_mismatch(self)
        if why:
            raise ValueError(f"hardware_profile: {why}")
        if self.hardware_profile is not None and self.disaggregated and any(
                self.pool_deployment(p) != (self.hardware, self.tp) for p in ("prefill", "decode")):
            raise ValueError("hardware_profile: fitted on one deployment (hardware, tp); a pool on other GPUs or "
                             "another tp cannot use it (unset prefill_hardware/decode_hardware/prefill_tp/decode_tp)")
        return self

    # ----- canonical query string -----
    def to_query(self) -> str:
        """Non-default fields in declaration order."""
        data = self.model_dump(exclude_defaults=True)
        # The engine's defaults are left out too, and fields set to the plain ones kept.
        engine = _engine_defaults_of(self.model_dump())
        dump = self.model_dump()
        data = {k: v for k, v in dump.items() if (k in data or k in engine) and not (k in engine and v == engine[k])}
        return urlencode([(k, query_value(v)) for k, v in data.items()])

    @classmethod
    def from_query(cls, query: str | dict[str, str]) -> Scenario:
        pairs = parse_qsl(query, keep_blank_values=True) if isinstance(query, str) else list(query.items())
        data: dict[str, str] = {}
        for k, v in pairs:
            if k in data:
                raise ScenarioError([(k, f"given more than once (use {k}=... once)")])
            data[k] = v
        # An empty value means "use the default", as a form field left blank does.
        return parse_scenario({k: v for k, v in data.items() if v != ""})


def _engine_defaults_of(data: dict) -> dict[str, object]:
    """The defaults a raw input's engine gives (an unknown name gives none here: the field's own check names it)."""
    return scenario_defaults(str(data.get("engine", DEFAULT_ENGINE)), _positive(data.get("prefill_replicas")))


def _positive(value: object) -> bool:
    """A raw input's integer (a number or a query string's text) is above 0; anything unreadable is not."""
    try:
        return int(value) > 0
    except (TypeError, ValueError):
        return False


def profile_mismatch(s) -> str | None:
    """Why `s.hardware_profile` does not apply to `s`'s deployment (None when it does, or there is none). `s`:
    any model with the deployment fields (Scenario, step_time.StepShape)."""
    if s.hardware_profile is None:
        return None
    model = s.model or GPUS[s.hardware].default_model
    return mismatch(parse_compact(s.hardware_profile), s.hardware, model,
                    weight_format(s.quantization, MODELS[model], GPUS[s.hardware]).quantization, s.tp)


def query_value(v: object) -> str:
    """A field value as the canonical query string spells it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def parse_scenario(data: dict) -> Scenario:
    """Validate raw input (strings allowed) into a Scenario, or raise ScenarioError naming each bad field."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field, err = model_error_field(err, "scenario", Scenario)
            problems.append((field, describe_error(err, Scenario, "is not a scenario field")))
        raise ScenarioError(problems) from None
