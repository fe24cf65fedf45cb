"""The one catalogue of the metrics a run reports: for every key of `Result.metrics`, its name, unit, meaning and
which way is better, in the vocabulary of vLLM's benchmark tooling (TTFT, TPOT, ITL, E2EL, goodput, SLO
attainment, MBU, MFU).

The CLI's tables, the dashboard's metrics table and the `/docs` page all render from `METRICS` (and the tables
from `table_sections`, which also decides which rows a set of runs shows), so a metric is named, described and
ordered in one place. A face only chooses how to format a value of each `kind`.

Keys are dotted paths into the metrics dict (`ttft_ms.p99`, `kv_cache_usage.mean`). A `*` in a key stands for a
part that varies per run, named by `part`: a request class (`per_class.*.slo_attainment`) or a rejection reason
(`rejected_reasons.*`); the label's `{}` is filled with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .pool_metric_catalog import pool_metrics

# How a value is shown (each face formats these its own way):
#   count    an integer; "ms" / "seconds" a duration; "rate" requests/s; "tokens" tokens/s;
#   fraction a fraction 0-1, shown as a percentage; "average" a mean of counts; "flag" true/false; "usd" dollars;
#   "joules" energy (J, J/tok); "watts" power
KINDS = ("count", "ms", "seconds", "rate", "tokens", "fraction", "average", "flag", "usd", "joules", "watts")
# Which tables show a metric:
#   always        whenever some run has a value
#   nonzero       only when some run's value is not zero (rare events: shed, degraded)
#   prefix_cache  only when some run had the prefix cache on; a run without it shows no value
#   docs          never: listed in the reference only (configuration echoes, details behind a shown row)
SHOWN = ("always", "nonzero", "prefix_cache", "docs")
# The table section of the bounds a clairvoyant scheduler sets (sim_core/bounds.py).
_BOUNDS = "Against a clairvoyant bound"
# Units without a symbol in a table label.
UNITLESS = ("count", "flag")


@dataclass(frozen=True)
class Metric:
    key: str  # dotted path into Result.metrics ("*" = the varying part)
    label: str  # "P99 TTFT"; "{}: P99 TTFT" for a per-class metric
    unit: str  # "ms", "s", "req/s", "tok/s", "%", "count" or "flag"
    description: str  # one sentence: what it measures
    better: str | None  # "lower", "higher", or None where neither is (utilisation, step counts)
    group: str  # the table section
    kind: str  # one of KINDS
    shown: str = "always"  # one of SHOWN
    part: str = ""  # what "*" stands for: "class" or "reason"; "" for a fixed key
    served_only: bool = False  # measured over the requests a run served (latencies), not over all it was sent

    @property
    def unit_text(self) -> str:
        """The unit as a table label carries it: "ms", "%"; "" for plain counts and flags."""
        return "" if self.unit in UNITLESS else self.unit

    @property
    def doc_key(self) -> str:
        """The key with its varying part named: `per_class.<class>.ttft_ms.p99`."""
        return self.key.replace("*", f"<{self.part}>")

    @property
    def doc_label(self) -> str:
        return self.label.format(f"<{self.part}>") if self.part else self.label

    def filled(self, part: str) -> Metric:
        """This templated metric for one class or reason."""
        return replace(self, key=self.key.replace("*", part), label=self.label.format(part), part="")


_STATS = (("mean", "Mean", "The mean"), ("p50", "Median", "The median"), ("p90", "P90", "The 90th percentile"),
          ("p99", "P99", "The 99th percentile"), ("max", "Max", "The maximum"))


def _distribution(key: str, short: str, what: str, group: str, in_tables: Sequence[str], *, part: str = "",
                  label_prefix: str = "") -> list[Metric]:
    """mean, p50, p90, p99 and max of one latency (the stats in `in_tables` are shown, the rest documented)."""
    return [Metric(f"{key}.{stat}", f"{label_prefix}{name} {short}", "ms", f"{phrase} of {what}.", "lower", group,
                   "ms", "always" if stat in in_tables else "docs", part, served_only=True)
            for stat, name, phrase in _STATS]


_TTFT = ("time to first token (TTFT): from a request's arrival to its first output token, queueing and prefill "
         "included, as the client sees it (transport overhead included)")
_TPOT = ("time per output token (TPOT): (E2EL - TTFT) / (output tokens - 1), each request's decode pace after its "
         "first token")
_ITL = ("inter-token latency (ITL): every gap between consecutive output tokens of every request, the stalls a "
        "streaming client sees")
_E2EL = "end-to-end latency (E2EL): from a request's arrival to its last output token, as the client sees it"
_TABLE_STATS = ("mean", "p50", "p90", "p99")
# Where the time went (sim_core/kernel/attribution.py defines each part): the mean per completed request of each part of
# its E2EL; the six sum to the mean E2EL. Stalls and transport are shown only when some run has them; preemption
# always, as the preemption counts are (a row that comes and goes with the schedulers ticked would shift the table).
_ATTRIBUTION = tuple(
    Metric(f"attribution_ms.{key}", label, "ms", text, "lower", "Where the time went", "ms", shown, served_only=True)
    for key, label, text, shown in (
        ("queue", "Queueing", "Mean per request of the time spent waiting to be scheduled: before its first step, "
         "and while its prompt waited for room in the token budget.", "always"),
        ("prefill", "Own prefill", "Mean per request of the time of the steps that computed its own prompt (a "
         "step that runs a chunk of its prompt counts whole).", "always"),
        ("prefill_stall", "Stalled behind prefills", "Mean per request of the time its decode steps lost to other "
         "requests' prefill chunks: each such step's time minus what its decodes alone would cost (cost model), "
         "plus decode turns the token budget skipped.", "nonzero"),
        ("decode", "Decode", "Mean per request of its decode steps at the cost of the decodes alone.", "always"),
        ("preemption", "Lost to preemption", "Mean per request of the time lost to preemption: waiting to come "
         "back, recomputing the KV it lost, and swap traffic.", "always"),
        ("transport", "Transport", "Mean per request of the KV hand-over from the prefill to the decode pool "
         "(disaggregated serving) plus the client's transport overhead.", "nonzero"),
    ))

METRICS: tuple[Metric, ...] = (
    # ----- requests -----
    Metric("num_requests", "Requests", "count", "Requests in the run: generated from the workload preset or read "
           "from the trace.", None, "Requests", "count"),
    Metric("completed", "Completed", "count", "Requests that generated all their output tokens.", "higher",
           "Requests", "count"),
    Metric("rejected", "Rejected", "count", "Requests never served: longer than max_model_len, the KV pool or the "
           "token budget allows, or shed by SLO admission control.", "lower", "Requests", "count"),
    Metric("rejected_reasons.*", "Rejected: {}", "count", "Rejected requests for one reason.", "lower", "Requests",
           "count", part="reason"),
    Metric("shed", "Shed", "count", "Requests SLO admission control refused because their TTFT target was already "
           "out of reach (admission=reject); they count as SLO misses.", "lower", "Requests", "count", "nonzero"),
    Metric("degraded", "Degraded", "count", "Requests admitted with a relaxed TTFT target (admission=degrade) "
           "because their own target was out of reach.", "lower", "Requests", "count", "nonzero"),
    # ----- throughput -----
    Metric("duration_s", "Benchmark duration", "s", "Simulated time from the first arrival to the end of the last "
           "engine step; the throughputs divide by it.", None, "Throughput", "seconds"),
    Metric("request_throughput", "Request throughput", "req/s", "Completed requests per second of benchmark "
           "duration.", "higher", "Throughput", "rate"),
    Metric("output_throughput", "Output throughput", "tok/s", "Output tokens of completed requests per second of "
           "benchmark duration.", "higher", "Throughput", "tokens"),
    Metric("total_token_throughput", "Total token throughput", "tok/s", "Prompt plus output tokens of completed "
           "requests per second of benchmark duration.", "higher", "Throughput", "tokens"),
    Metric("goodput", "Goodput", "req/s", "Completed requests that met both SLOs, TTFT and TPOT (each against its "
           "own request class's targets), per second of the arrival window: at full attainment it equals the "
           "arrival rate.", "higher", "Throughput", "rate"),
    Metric("goodput_over_run", "Goodput over the run", "req/s", "The same requests per second of benchmark "
           "duration, drain included (vLLM's benchmark figure): below the arrival rate even at full attainment "
           "when the run drains long after the last arrival.", "higher", "Throughput", "rate"),
    Metric("arrival_rate", "Arrival rate", "req/s", "Requests per second of the arrival window (the offered "
           "load the run measured).", None, "Throughput", "rate"),
    Metric("arrival_window_s", "Arrival window", "s", "The span of the arrivals, n gaps long (first to last "
           "arrival plus one mean gap); goodput and the arrival rate divide by it.", None, "Throughput",
           "seconds"),
    Metric("token_goodput", "Token goodput", "tok/s", "Output tokens per second delivered by their own deadline "
           "(arrival + TTFT target + (k-1) x TPOT target for the k-th token), so a late request still scores the "
           "tokens it delivered in time.", "higher", "Throughput", "tokens"),
    Metric("slo_attainment", "SLO attainment", "%", "The share of all requests that met both SLOs (TTFT and TPOT); "
           "rejected and shed requests count as misses. A fraction 0-1 in JSON.", "higher", "Throughput",
           "fraction"),
    # ----- against what a clairvoyant scheduler could reach on the same requests (sim_core/bounds.py; present
    # only when a face asks for bounds, so the golden runs' metrics stay as they were) -----
    Metric("bounds.goodput_fraction", "Goodput, share of bound", "%", "This run's goodput over the most any "
           "scheduler could reach on these requests (bounds.goodput_upper): 100% is the clairvoyant bound.",
           "higher", _BOUNDS, "fraction"),
    Metric("bounds.goodput_upper", "Goodput bound", "req/s", "An upper bound on any scheduler's goodput on these "
           "requests and this deployment: the most requests that can meet their TTFT target on the relaxed "
           "engine (one preemptive server at the best throughput the step-time model allows, prompts released at "
           "arrival, due at arrival + TTFT target) among those whose own prefill and decode steps alone meet both "
           "targets, per second of the arrival window.", None, _BOUNDS, "rate"),
    Metric("bounds.deadline_met_fraction", "TTFT deadlines met, share of bound", "%", "Requests this run served "
           "by their TTFT target over the most any scheduler could (bounds.deadline_met_upper).", "higher",
           _BOUNDS, "fraction"),
    Metric("bounds.deadline_met", "TTFT deadlines met", "count", "Requests this run served by their class's TTFT "
           "target.", "higher", _BOUNDS, "count", "docs"),
    Metric("bounds.deadline_met_upper", "TTFT deadlines bound", "count", "An upper bound on the requests any "
           "scheduler serves by their TTFT target: the most whose prompts the relaxed engine computes by "
           "arrival + target (offline EDF feasibility, solved exactly when every request has the same target; "
           "with several classes each deadline is first relaxed to the latest of those arrived before it), "
           "counting only requests the deployment can run (within max_model_len and the KV pool) whose prefill "
           "alone on an idle engine meets the target.", None, _BOUNDS, "count", "docs"),
    Metric("bounds.ttft_mean_fraction", "Mean TTFT, share of bound", "%", "The mean-TTFT lower bound over this "
           "run's mean TTFT, both over the requests it served: 100% is as fast as a clairvoyant scheduler "
           "could serve them.", "higher", _BOUNDS, "fraction", served_only=True),
    Metric("bounds.ttft_mean_lower_ms", "Mean TTFT bound", "ms", "A lower bound on any scheduler's mean TTFT over "
           "the requests this run served: the larger of the mean of each request's floor (its uncached prompt "
           "alone in one step) and SRPT's mean on the relaxed engine (optimal there), plus the transport "
           "overhead.", None,
           _BOUNDS, "ms", "docs"),
    Metric("bounds.e2el_mean_fraction", "Mean E2EL, share of bound", "%", "The mean-E2EL lower bound over this "
           "run's mean E2EL, both over the requests it served: 100% is as fast as a clairvoyant scheduler "
           "could serve them.", "higher", _BOUNDS, "fraction", served_only=True),
    Metric("bounds.e2el_mean_lower_ms", "Mean E2EL bound", "ms", "A lower bound on any scheduler's mean E2EL over "
           "the requests this run served: the larger of the mean of each request's floor (prefill alone, then each "
           "output token a step of its own, or 1 + k of them with k speculative drafts, at the fastest a step "
           "decoding it can be) and SRPT's mean on the relaxed engine over all its tokens, plus the transport "
           "overhead.", None, _BOUNDS, "ms", "docs"),
    # ----- latencies -----
    *_distribution("ttft_ms", "TTFT", _TTFT, "Time to first token", _TABLE_STATS),
    *_distribution("tpot_ms", "TPOT", _TPOT, "Time per output token", _TABLE_STATS),
    *_distribution("itl_ms", "ITL", _ITL, "Inter-token latency", (*_TABLE_STATS, "max")),
    *_distribution("e2el_ms", "E2EL", _E2EL, "End-to-end latency", _TABLE_STATS),
    *_ATTRIBUTION,
    # ----- GPU -----
    Metric("mbu", "MBU", "%", "Model bandwidth utilisation: bytes the steps read and wrote (weights, KV cache, "
           "activations) per busy second, over the GPUs' peak memory bandwidth.", None, "GPU", "fraction"),
    Metric("mfu", "MFU", "%", "Model FLOPs utilisation: FLOPs the steps computed per busy second, over the GPUs' "
           "peak dense FLOP rate for the weight format.", None, "GPU", "fraction"),
    Metric("gpu_busy_fraction", "GPU busy", "%", "The share of the benchmark duration the GPU spent running engine "
           "steps.", None, "GPU", "fraction"),
    Metric("kv_cache_usage.mean", "KV cache use, mean", "%", "KV-cache blocks in use, averaged over busy time, as "
           "a share of the block pool.", None, "GPU", "fraction"),
    Metric("kv_cache_usage.peak", "KV cache use, peak", "%", "The most KV-cache blocks in use at once, as a share "
           "of the block pool.", None, "GPU", "fraction"),
    # ----- the deployment: GPUs, cost, replicas -----
    Metric("gpus", "GPUs", "count", "GPUs the deployment uses: replicas x tensor-parallel degree.", None, "Deployment",
           "count"),
    Metric("cost_per_hour", "Cost per hour", "$/h", "The deployment's GPUs at their on-demand list price "
           "(sim_core/data/prices.json names each price's provider, source and date), plus electricity where "
           "energy_price_per_kwh is set; none where no price is known.",
           "lower", "Deployment", "usd"),
    Metric("cost_per_mtok", "Cost per 1M output tokens", "$", "Cost per hour over output tokens served per hour at "
           "this arrival rate: an idle deployment's tokens are dear, a saturated one's cheapest.", "lower",
           "Deployment", "usd"),
    Metric("load_imbalance", "Load imbalance", "count", "With several replicas: the most tokens one replica "
           "served over the mean (1 = perfectly even).", "lower", "Deployment", "average"),
    Metric("kv_transfers", "KV transfers", "count", "Disaggregated serving: prompts whose KV crossed from the "
           "prefill pool to the decode pool.", None, "Deployment", "count"),
    Metric("kv_transfer_bytes", "KV transferred", "count", "Disaggregated serving: bytes of prompt KV sent per GPU "
           "link (each tensor-parallel rank sends its shard).", None, "Deployment", "count", "docs"),
    *_distribution("kv_transfer_ms", "KV transfer", "KV transfer time: from a prompt's prefill end to its KV "
                   "reaching the decode engine, waiting for a busy link or for the decode engine to have blocks "
                   "for it included", "Deployment", ("mean", "p99")),
    *_distribution("kv_wait_ms", "KV wait", "the wait before a prompt's KV starts across: from its prefill end "
                   "until its decode engine has blocks for it (the prefill engine holds its KV meanwhile) and the "
                   "link is free", "Deployment", ("p99",)),
    Metric("kv_link_utilization", "KV link busy", "%", "Disaggregated serving: the share of the benchmark "
           "duration the prefill engines' links spent sending KV (autoscaled: of the time prefill replicas were serving).", None, "Deployment", "fraction"),
    Metric("replicas", "Replicas", "count", "With several replicas: a list, one entry per replica, with its "
           "requests, completed, served_tokens, gpu_busy_fraction, kv_cache_usage_mean, waiting_peak, preemptions "
           "and steps.", None, "Deployment", "count", "docs"),
    # ----- an autoscaler (scenario field autoscaler): reported only when one runs -----
    Metric("gpu_hours", "GPU-hours", "count", "With an autoscaler: GPU-hours the replicas held, each from being "
           "asked for (provisioning) to its release. With one, gpus, cost_per_hour and cost_per_mtok are the run's: "
           "the most GPUs held at once, the run's cost per hour of it and over its output tokens.", "lower",
           "Deployment", "average"),
    Metric("cost", "Cost of the run", "$", "With an autoscaler: its GPU-hours at the GPU's on-demand list price; "
           "none where no price is known.", "lower", "Deployment", "usd"),
    Metric("slo_attainment_worst_window", "SLO attainment, worst minute", "%", "With an autoscaler: the lowest "
           "SLO attainment of any window (slo_attainment_by_window) in which requests arrived.", "higher",
           "Deployment", "fraction"),
    Metric("autoscaler.replicas_provisioned", "Replicas provisioned", "count", "With an autoscaler: replicas it "
           "asked for over the run, beyond those serving at the start.", None, "Deployment", "count"),
    *[Metric(f"autoscaler.{k}", f"Autoscaler: {k.replace('_', ' ')}", unit, f"With an autoscaler: {what}.", None,
             "Deployment", kind, "docs") for k, unit, kind, what in (
        ("policy", "flag", "flag", "its policy"),
        ("provision_delay_s", "s", "seconds", "seconds from asking for a replica to its serving"),
        ("interval_s", "s", "seconds", "seconds between its evaluations"),
        ("min_replicas", "count", "count", "the fewest replicas it keeps"),
        ("max_replicas", "count", "count", "the most replicas alive at once"),
        ("capacity", "req/s", "rate", "predictive: a list, the requests/s it plans k replicas to serve (k = 0, "
                                      "1, ... max_replicas)"),
        ("target", "count", "average", "utilization: the metric's target per replica (autoscale_metric)"),
        ("kv_blocks_leaked_on_release", "count", "count", "KV blocks released replicas still held (always 0)"))],
    *[Metric(f"slo_attainment_by_window.{k}", f"SLO attainment by window: {k}", "count", f"With an autoscaler: "
             f"{what}.", None, "Deployment", "count", "docs") for k, what in (
        ("window_s", "the windows' length, seconds"), ("start_s", "a list: each window's start, seconds"),
        ("requests", "a list: requests that arrived in each window"),
        ("attainment", "a list: the share of each window's requests that met the SLO (null: none arrived)"))],
    *[Metric(f"replicas_over_time.{k}", f"Replicas over time: {k}", "count", f"With an autoscaler: {what}.", None,
             "Deployment", "count", "docs") for k, what in (
        ("window_s", "the windows' length, seconds"), ("start_s", "a list: each window's start, seconds"),
        ("provisioning", "a list: replicas provisioning, on average over each window"),
        ("serving", "a list: replicas serving, on average over each window"),
        ("draining", "a list: replicas draining, on average over each window"))],
    *pool_metrics(Metric),  # autoscaled prefill and decode pools: pools_over_time.<pool>
    # ----- scheduling -----
    Metric("waiting.mean", "Waiting requests, mean", "count", "Requests queued and not yet running, averaged over "
           "busy time.", "lower", "Scheduling", "average"),
    Metric("waiting.peak", "Waiting requests, peak", "count", "The longest the waiting queue got.", "lower",
           "Scheduling", "count"),
    Metric("preemptions", "Preemptions", "count", "Times a running request was evicted to free KV-cache blocks "
           "(recomputed or swapped back in later).", "lower", "Scheduling", "count"),
    Metric("preempted_requests", "Preempted requests", "count", "Requests preempted at least once.", "lower",
           "Scheduling", "count"),
    Metric("steps", "Engine steps", "count", "Scheduler iterations: batches the engine ran.", None, "Scheduling",
           "count"),
    Metric("prefill_tokens", "Prefill tokens", "count", "Prompt tokens the engine computed, recomputation after "
           "preemption included and prefix-cache hits excluded.", None, "Scheduling", "count", "docs"),
    Metric("decode_tokens", "Decode tokens", "count", "Output tokens the engine generated in decode steps.", None,
           "Scheduling", "count", "docs"),
    # ----- speculative decoding (only when on) -----
    Metric("spec_decode.tokens_per_step", "Draft tokens per step", "count", "Draft tokens each decoding sequence "
           "proposes per step when speculative decoding is on.", None, "Speculative decoding", "count", "docs"),
    Metric("spec_decode.acceptance_length", "Acceptance length", "count", "Tokens a verification step emits per "
           "speculating sequence on average: accepted drafts plus the target model's bonus token.", "higher",
           "Speculative decoding", "average"),
    Metric("spec_decode.acceptance_rate", "Draft acceptance rate", "%", "Share of the scored draft tokens the "
           "target model accepted.", "higher", "Speculative decoding", "fraction"),
    Metric("spec_decode.drafted_tokens", "Drafted tokens", "count", "Draft tokens the verification steps scored.",
           None, "Speculative decoding", "count", "docs"),
    Metric("spec_decode.accepted_tokens", "Accepted draft tokens", "count", "Draft tokens the target model "
           "accepted.", None, "Speculative decoding", "count", "docs"),
    Metric("spec_decode.draft_time_share", "Proposer time share", "%", "Share of the engine's busy time the "
           "proposer took (draft model, EAGLE or MTP head passes, n-gram lookup).", None, "Speculative decoding",
           "fraction"),
    Metric("spec_decode.verify_time_share", "Verification time share", "%", "Share of the engine's busy time in "
           "forward passes that verified drafts (the proposer's time excluded).", None, "Speculative decoding",
           "fraction", "docs"),
    # ----- prefix cache -----
    Metric("prefix_cache", "Prefix cache", "flag", "Whether the run reused cached KV blocks of shared prompt "
           "prefixes (automatic prefix caching).", None, "Prefix cache", "flag", "docs"),
    Metric("prefix_cache_hit_rate", "Prefix cache hit rate", "%", "Prompt tokens found in the prefix cache at "
           "each request's first admission, over all admitted prompt tokens.", "higher", "Prefix cache", "fraction",
           "prefix_cache"),
    Metric("prefill_tokens_saved", "Prefill tokens saved", "count", "Prompt tokens not computed because their KV "
           "was cached, counting hits of preempted requests coming back too.", "higher", "Prefix cache", "count",
           "prefix_cache"),
    Metric("cache_evictions", "Cache evictions", "count", "Cached blocks evicted (least recently used first) to "
           "make room.", "lower", "Prefix cache", "count", "prefix_cache"),
    # ----- lower KV tiers (sim_core/kv_offload.py; present only when kv_offload_cpu_gb or _disk_gb is set) -----
    Metric("kv_tiers.gpu.hit_tokens", "GPU-tier hit tokens", "count", "With KV offload: prompt tokens found in "
           "the GPU's prefix cache at admission (readmissions after preemption included).", "higher",
           "Prefix cache", "count"),
    *[m for tier, where, link in (("cpu", "host memory", "host link (PCIe or NVLink-C2C)"),
                                  ("disk", "the local disk", "disk"))
      for m in (
          Metric(f"kv_tiers.{tier}.hit_tokens", f"{tier.upper()}-tier hit tokens", "count", f"Prompt tokens "
                 f"loaded from {where} instead of recomputed, found after the GPU's cached prefix.", "higher",
                 "Prefix cache", "count"),
          Metric(f"kv_tiers.{tier}.link_utilization", f"{tier.upper()}-tier link busy", "%", f"The share of the "
                 f"run its {link} spent moving offloaded KV (writes and loads, per engine).", None, "Prefix cache",
                 "fraction"),
          Metric(f"kv_tiers.{tier}.load_s", f"{tier.upper()}-tier load wait", "s", f"Seconds steps spent "
                 f"loading KV from {where} (all engines; with layer overlap, the loads' own time).", "lower",
                 "Prefix cache", "seconds", "docs"),
          Metric(f"kv_tiers.{tier}.bytes_in", f"{tier.upper()}-tier bytes written", "count", f"Bytes of KV "
                 f"written to {where} (all GPUs).", None, "Prefix cache", "count", "docs"),
          Metric(f"kv_tiers.{tier}.bytes_out", f"{tier.upper()}-tier bytes loaded", "count", f"Bytes of KV "
                 f"loaded from {where} to the GPU (all GPUs).", None, "Prefix cache", "count", "docs"),
          Metric(f"kv_tiers.{tier}.evicted_blocks", f"{tier.upper()}-tier evictions", "count", f"Blocks that "
                 f"fell out of {where}, oldest first (from host memory: down to disk if there is one).", None,
                 "Prefix cache", "count", "docs"))],
    # ----- the SLOs goodput counted against (settings echoed back, not measurements) -----
    Metric("slo.ttft_ms", "TTFT target", "ms", "The TTFT SLO goodput counted against; with several request "
           "classes, the tightest (each class's own under per_class).", None, "SLO targets", "ms", "docs"),
    Metric("slo.tpot_ms", "TPOT target", "ms", "The TPOT SLO goodput counted against; with several request "
           "classes, the tightest.", None, "SLO targets", "ms", "docs"),
    Metric("slo.by_class", "Targets per class", "flag", "Whether request classes have different SLOs.", None,
           "SLO targets", "flag", "docs"),
    Metric("slo.transport_overhead_ms", "Transport overhead", "ms", "Client-visible minus device latency, added to "
           "every TTFT and E2EL.", None, "SLO targets", "ms", "docs"),
    # ----- reasoning (present only when some request has hidden thinking tokens) -----
    Metric("reasoning.thinking_tokens", "Thinking tokens", "count", "Hidden thinking tokens the completed requests "
           "decoded: counted in output throughput, TPOT and the KV cache, never shown.", None, "Reasoning",
           "count"),
    Metric("reasoning.visible_output_tokens", "Visible output tokens", "count", "Output tokens of the completed "
           "requests a user sees: output tokens less thinking tokens.", None, "Reasoning", "count"),
    Metric("reasoning.thinking_share", "Thinking share", "%", "Thinking tokens as a share of all output tokens of "
           "the completed requests.", None, "Reasoning", "fraction"),
    Metric("reasoning.visible_output_throughput", "Visible output throughput", "tok/s", "Visible output tokens "
           "of completed requests per second of benchmark duration.", "higher", "Reasoning", "tokens"),
    # ----- LoRA adapters (sim_core/lora.py; present only when a run has adapters) -----
    Metric("lora.loads_disk", "Adapter loads from disk", "count", "LoRA adapters read from disk into a GPU slot "
           "(and the host cache).", "lower", "LoRA adapters", "count", "docs"),
    Metric("lora.loads_host", "Adapter loads from host", "count", "LoRA adapters copied from the host cache into a "
           "GPU slot.", "lower", "LoRA adapters", "count", "docs"),
    Metric("lora.load_s", "Adapter load time", "s", "Seconds steps waited for adapter loads.", "lower",
           "LoRA adapters", "seconds", "docs"),
    Metric("lora.kernel_s", "LoRA kernel time", "s", "Seconds of the batched LoRA kernels over the run.", None,
           "LoRA adapters", "seconds", "docs"),
    Metric("lora.kernel_s_per_step", "LoRA kernel time per step", "s", "The LoRA kernels' mean seconds per step "
           "that ran adapters.", None, "LoRA adapters", "seconds", "docs"),
    Metric("lora.groups_per_step", "Adapters per step", "count", "Distinct adapters in a step's batch, mean over "
           "steps that ran adapters.", None, "LoRA adapters", "average", "docs"),
    Metric("lora.max_groups_per_step", "Adapters per step, most", "count", "The most distinct adapters one step "
           "batched (at most max_loras).", None, "LoRA adapters", "count", "docs"),
    # ----- energy (scenario field energy; sim_core/energy.py; present only when asked for) -----
    Metric("energy.joules_per_output_token", "Energy per output token", "J/tok", "Energy of the run (GPU boards, "
           "plus host power and PUE where set) over the output tokens generated.", "lower", "Energy", "joules"),
    Metric("energy.joules_per_token", "Energy per token", "J/tok", "The same energy over every token, prompt and "
           "output, of the completed requests.", "lower", "Energy", "joules"),
    Metric("energy.joules_per_request", "Energy per request", "J", "The same energy over the completed requests.",
           "lower", "Energy", "joules"),
    Metric("energy.energy_j", "Energy", "J", "The run's energy: GPU boards from the first arrival to the end (each "
           "step's modelled power x its seconds, idle power between steps), plus node_power_w per GPU, times pue.",
           "lower", "Energy", "joules"),
    Metric("energy.gpu_energy_j", "GPU energy", "J", "The GPU boards' part of the energy, before host power and "
           "PUE.", "lower", "Energy", "joules", "docs"),
    Metric("energy.idle_energy_j", "Idle energy", "J", "GPU energy while engines ran no step (waiting for work; an "
           "autoscaled replica's provisioning too), at the GPUs' idle power.", "lower", "Energy", "joules", "docs"),
    Metric("energy.node_energy_j", "Host energy", "J", "The host power node_power_w x GPUs x seconds held, before "
           "PUE (0 unless node_power_w is set).", None, "Energy", "joules", "docs"),
    Metric("energy.avg_power_w_per_gpu", "Average power per GPU", "W", "GPU energy over GPU-seconds held: the mean "
           "board power of one GPU.", None, "Energy", "watts"),
    Metric("energy.peak_power_w_per_gpu", "Peak power per GPU", "W", "The highest modelled board power of one GPU "
           "in any step (at most its board limit).", None, "Energy", "watts"),
    Metric("energy.engines", "Energy per engine", "count", "With several engines: a list, one entry per engine, with "
           "its name, pool, gpus, energy_j, idle_j and avg_power_w_per_gpu.", None, "Energy", "count", "docs"),
    Metric("energy.pool_energy_j.prefill", "Prefill pool energy", "J", "Disaggregated serving: GPU energy of the "
           "prefill pool's engines.", None, "Energy", "joules", "docs"),
    Metric("energy.pool_energy_j.decode", "Decode pool energy", "J", "Disaggregated serving: GPU energy of the decode "
           "pool's engines.", None, "Energy", "joules", "docs"),
    Metric("energy.energy_cost", "Electricity cost", "$", "The run's energy at energy_price_per_kwh (present only "
           "when a price is set).", "lower", "Energy", "usd", "docs"),
    Metric("energy.energy_cost_per_hour", "Electricity per hour", "$/h", "Electricity bought per hour of the run, "
           "at energy_price_per_kwh: included in cost_per_hour.", "lower", "Energy", "usd"),
    Metric("energy.energy_cost_per_mtok", "Electricity per 1M output tokens", "$", "Electricity bought per million "
           "output tokens, at energy_price_per_kwh: included in cost_per_mtok.", "lower", "Energy", "usd"),
    Metric("energy.gco2_per_1k_requests", "Carbon per 1k requests", "gCO2", "The run's energy at the grid's carbon "
           "intensity grid_gco2_per_kwh, per thousand completed requests (present only when it is set).", "lower",
           "Energy", "average"),
    # ----- per request class (shown when a workload mixes classes) -----
    Metric("per_class.*.requests", "{}: requests", "count", "Requests of this class.", None, "Per request class",
           "count", part="class"),
    Metric("per_class.*.completed", "{}: completed", "count", "Requests of this class that completed.", "higher",
           "Per request class", "count", part="class"),
    Metric("per_class.*.rejected", "{}: rejected", "count", "Requests of this class never served.", "lower",
           "Per request class", "count", "docs", part="class"),
    Metric("per_class.*.slo_attainment", "{}: SLO attainment", "%", "The share of this class's requests that met "
           "both of the class's SLOs; rejected ones count as misses.", "higher", "Per request class", "fraction",
           part="class"),
    Metric("per_class.*.slo.ttft_ms", "{}: TTFT target", "ms", "This class's TTFT SLO.", None, "Per request class",
           "ms", "docs", part="class"),
    Metric("per_class.*.slo.tpot_ms", "{}: TPOT target", "ms", "This class's TPOT SLO.", None, "Per request class",
           "ms", "docs", part="class"),
    *_distribution("per_class.*.ttft_ms", "TTFT", "TTFT over this class's completed requests", "Per request class",
                   ("p99",), part="class", label_prefix="{}: "),
    *_distribution("per_class.*.e2el_ms", "E2EL", "E2EL over this class's completed requests", "Per request class",
                   ("p99",), part="class", label_prefix="{}: "),
)

BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}

# One request's latencies, as a request-level A/B (request_diff.py) reports each request's change in them: not keys
# of Result.metrics (those summarise a run), so kept apart from METRICS. `better` is the direction of a good change.
REQUEST_METRICS: tuple[Metric, ...] = (
    Metric("ttft_ms", "TTFT", "ms", "The request's time to first token, transport overhead included.", "lower",
           "Per request", "ms", "docs", served_only=True),
    Metric("tpot_ms", "TPOT", "ms", "The request's time per output token after its first: (E2EL - TTFT) / (output "
           "tokens - 1); 0 with a single output token.", "lower", "Per request", "ms", "docs", served_only=True),
    Metric("max_itl_ms", "Longest ITL", "ms", "The request's longest gap between consecutive output tokens (the "
           "engine keeps each request's longest gap, not all of them: with at most 100 gaps it is the request's "
           "nearest-rank P99 ITL).", "lower", "Per request", "ms", "docs", served_only=True),
    Metric("e2el_ms", "E2EL", "ms", "The request's end-to-end latency, arrival to last token, transport overhead "
           "included.", "lower", "Per request", "ms", "docs", served_only=True),
)


def value_at(metrics: dict, key: str) -> Any:
    """The value at a dotted key, or None where the run has none."""
    value: Any = metrics
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# ----- tables -----
@dataclass(frozen=True)
class Row:
    metric: Metric  # with any "*" filled in
    values: list  # one per run; None where the run has no value


@dataclass(frozen=True)
class Section:
    title: str
    rows: list[Row]


def _parts(runs: Sequence[dict], part: str) -> list[str]:
    """The classes (a row each only when runs mix more than one) or rejection reasons present in any run."""
    if part == "class":
        classes = list(dict.fromkeys(c for m in runs for c in m.get("per_class") or {}))
        return classes if len(classes) > 1 else []
    return sorted({r for m in runs for r in m.get("rejected_reasons") or {}})


def _row(metric: Metric, runs: Sequence[dict]) -> Row | None:
    """The metric's row, or None where the table leaves it out."""
    values = [value_at(m, metric.key) for m in runs]
    if metric.shown == "prefix_cache":
        if not any(m.get("prefix_cache") for m in runs):
            return None
        values = [v if m.get("prefix_cache") else None for v, m in zip(values, runs, strict=True)]
    if metric.shown == "nonzero" and not any(values):
        return None
    if all(v is None for v in values):
        return None
    return Row(metric, values)


def table_sections(runs: Sequence[dict]) -> list[Section]:
    """The rows every face's metrics table shows for these runs (one metrics dict per scheduler), by section,
    in catalogue order. Templated metrics next to each other expand together, one class or reason at a time, so
    a class's rows stay together."""
    sections: dict[str, list[Row]] = {}
    shown = [m for m in METRICS if m.shown != "docs"]
    k = 0
    while k < len(shown):
        block = [shown[k]]
        while block[0].part and k + len(block) < len(shown) and shown[k + len(block)].part == block[0].part:
            block.append(shown[k + len(block)])
        concrete = [m.filled(p) for p in _parts(runs, block[0].part) for m in block] if block[0].part else block
        rows = sections.setdefault(block[0].group, [])
        rows += [r for r in (_row(m, runs) for m in concrete) if r is not None]
        k += len(block)
    return [Section(title, rows) for title, rows in sections.items() if rows]
