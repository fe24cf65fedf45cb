"""Classic experiments, one scenario each: what the paper showed, as a dashboard query string, the outcome it
should reproduce in words, and the check of that outcome against the simulated metrics (each claim compares
schedulers of the same run, or the run with one setting changed: no figure is written down here).

The dashboard lists them as a gallery (one click each) and says beside the results whether the stated outcome
held; tests/test_experiments.py runs every one. `run_query(query) -> {scheduler: metrics}` is the caller's: the
web passes its cached runs, tests sim_core's `run`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from ..runner import run
from ..scenario import Scenario

Metrics = dict[str, dict]  # scheduler -> its metrics
RunQuery = Callable[[str], Metrics]
Claim = tuple[str, bool]  # a sentence, and whether it held


@dataclass(frozen=True)
class Experiment:
    key: str
    title: str
    source: str  # the paper (or system) the experiment comes from
    query: str  # a dashboard query: schedulers=...&hardware=...&workload=...&duration=... (always these three)
    expect: str  # the outcome it should show, in words
    check: Callable[[RunQuery, str], list[Claim]]  # (run_query, query) -> each claim and whether it held

    def claims(self, run_query: RunQuery) -> list[Claim]:
        return self.check(run_query, self.query)

    def holds(self, run_query: RunQuery) -> bool:
        return all(ok for _, ok in self.claims(run_query))


def _v(m: dict, key: str) -> float:
    value: object = m
    for part in key.split("."):
        value = value[part]  # type: ignore[index]
    return float(value)  # type: ignore[arg-type]


def _with(query: str, **fields: object) -> str:
    """The query with some fields set (or replaced)."""
    pairs = [(k, v) for k, v in parse_qsl(query) if k not in fields]
    return urlencode(pairs + [(k, str(v)) for k, v in fields.items()], safe=",")


def _orca(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    s, c = m["static"], m["fcfs"]
    return [("continuous batching's mean E2EL is lower", _v(c, "e2el_ms.mean") < _v(s, "e2el_ms.mean")),
            ("its goodput is higher", _v(c, "goodput") > _v(s, "goodput")),
            ("its output throughput is higher", _v(c, "output_throughput") > _v(s, "output_throughput"))]


# Sarathi-Serve's chunk size for strict inter-token SLOs. Set on a run of chunked alone: a query's token_budget is
# every scheduler's, and FCFS, prefilling whole, needs max_model_len.
SARATHI_CHUNK = 512


def _sarathi(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    f, c = m["fcfs"], m["chunked"]
    small = run(_with(q, schedulers="chunked", token_budget=SARATHI_CHUNK))["chunked"]
    stall = "attribution_ms.prefill_stall"
    return [("chunked prefill's P99 ITL is lower", _v(c, "itl_ms.p99") < _v(f, "itl_ms.p99")),
            (f"{SARATHI_CHUNK}-token chunks stall decodes less than FCFS and 2,048-token ones",
             _v(small, stall) < min(_v(f, stall), _v(c, stall)))]


def _spf(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    f, s = m["fcfs"], m["spf"]
    return [("SPF's median TTFT is lower than FCFS's", _v(s, "ttft_ms.p50") < _v(f, "ttft_ms.p50")),
            ("its worst TTFT is higher than FCFS's (long prompts starve)", _v(s, "ttft_ms.max") > _v(f, "ttft_ms.max"))]


def _aging(run: RunQuery, q: str) -> list[Claim]:
    aged, plain = run(q), run(_with(q, aging_rate=0))
    return [("with aging, SPF's worst TTFT is lower than without",
             _v(aged["spf"], "ttft_ms.max") < _v(plain["spf"], "ttft_ms.max")),
            ("its median TTFT stays below FCFS's", _v(aged["spf"], "ttft_ms.p50") < _v(aged["fcfs"], "ttft_ms.p50"))]


def _slo(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    f, s = m["fcfs"], m["slo"]
    return [("past the knee, FCFS serves fewer than half the requests within their SLOs",
             _v(f, "slo_attainment") < 0.5),
            ("SLO admission sheds requests it can no longer serve in time", _v(s, "shed") > 0),
            ("and its goodput is higher than FCFS's", _v(s, "goodput") > _v(f, "goodput"))]


def _vtc(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    f, v = m["fcfs"]["per_class"], m["fair"]["per_class"]
    return [("under fair sharing the light tenant's P99 TTFT is lower than under FCFS",
             _v(v["light"], "ttft_ms.p99") < _v(f["light"], "ttft_ms.p99")),
            ("and lower than the heavy tenant's", _v(v["light"], "ttft_ms.p99") < _v(v["heavy"], "ttft_ms.p99"))]


def _cache(run: RunQuery, q: str) -> list[Claim]:
    m = run(q)
    a, c = m["chunked"], m["cache_aware"]
    return [("cache-aware ordering's prefix-cache hit rate is higher",
             _v(c, "prefix_cache_hit_rate") > _v(a, "prefix_cache_hit_rate")),
            ("it saves more prefill tokens", _v(c, "prefill_tokens_saved") > _v(a, "prefill_tokens_saved")),
            ("and its goodput is higher", _v(c, "goodput") > _v(a, "goodput"))]


def _spec(run: RunQuery, q: str) -> list[Claim]:
    low, low_off = run(q), run(_with(q, spec_tokens=0))
    knee, knee_off, knee_goodput = (run(_with(q, rate=12.0, **off)) for off in
                                    ({}, {"spec_tokens": 0}, {"spec_k_policy": "goodput"}))
    return [("at 1 req/s EAGLE's 5 drafts a step lower the mean TPOT",
             _v(low["chunked"], "tpot_ms.mean") < _v(low_off["chunked"], "tpot_ms.mean")),
            ("at 12 req/s, past its knee, its goodput falls below no speculation's",
             _v(knee["chunked"], "goodput") < _v(knee_off["chunked"], "goodput")),
            ("choosing each step's k by goodput (spec_k_policy goodput) wins back goodput there",
             _v(knee_goodput["chunked"], "goodput") > _v(knee["chunked"], "goodput"))]


def _offload(run: RunQuery, q: str) -> list[Claim]:
    on, off = run(q)["chunked"], run(_with(q, kv_offload_cpu_gb=0))["chunked"]
    roomy = run(_with(q, kv_offload_cpu_gb=0, kv_blocks=28000))["chunked"]
    return [("with a GPU cache too small for the conversations, offloading KV to host memory lowers the mean TTFT",
             _v(on, "ttft_ms.mean") < _v(off, "ttft_ms.mean")),
            ("returning turns find their prefix in the host tier", _v(on, "kv_tiers.cpu.hit_tokens") > 0),
            ("loading it costs something: a GPU cache big enough for every conversation is faster still",
             _v(roomy, "ttft_ms.mean") < _v(on, "ttft_ms.mean"))]


def _lora(run: RunQuery, q: str) -> list[Claim]:
    fcfs, grouped = run(q)["chunked"], run(_with(q, lora_order="grouped"))["chunked"]
    all_in = run(_with(q, max_loras=64, max_cpu_loras=64))["chunked"]
    return [("with 64 adapters and 4 batch slots, fewer requests finish per second than with all 64 allowed",
             _v(fcfs, "request_throughput") < _v(all_in, "request_throughput")),
            ("adapter-aware ordering serves more requests within their SLOs than vLLM's order",
             _v(grouped, "goodput") > _v(fcfs, "goodput")),
            ("but recovers only part: its throughput stays below all adapters allowed",
             _v(grouped, "request_throughput") < _v(all_in, "request_throughput"))]


# The seeds' experiments, with the 8,192-token max_model_len they were written with (llama-3.2-1b's 131k context
# does not fit this GPU's KV cache, which vLLM refuses); each scheduler takes vLLM's budget for the GPU.
_BASE = "hardware=rtx3050&duration=20.0&max_model_len=8192"
EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("orca", "Static vs continuous batching", "Orca (Yu et al., OSDI '22)",
               f"schedulers=static,fcfs&{_BASE}&workload=chat",
               "Static batching runs a batch until its longest request finishes while new requests wait; continuous "
               "batching lets requests join and leave every step: lower latency and more goodput at the same load.",
               _orca),
    Experiment("sarathi", "Prefill stalls vs chunked prefill", "Sarathi-Serve (Agrawal et al., OSDI '24)",
               f"schedulers=fcfs,chunked&{_BASE}&workload=rag",
               "Prefilling a 3-4k-token retrieval prompt whole stalls every decode in that step; chunking it into "
               "a per-step token budget (vLLM's 2,048 here) cuts the P99 inter-token latency, and Sarathi-Serve's "
               f"{SARATHI_CHUNK}-token chunks also cut the time decodes stall.",
               _sarathi),
    Experiment("spf", "Shortest prompt first starves long prompts", "SJF scheduling (e.g. Fu et al., 2024)",
               f"schedulers=fcfs,spf&{_BASE}&workload=chat&rate=14.0",
               "Past saturation, serving the shortest prompt first lowers the median TTFT, but long prompts keep "
               "being passed over: SPF's worst TTFT is far above FCFS's.", _spf),
    Experiment("aging", "SPF with aging", "priority aging (classic OS scheduling)",
               f"schedulers=fcfs,spf&{_BASE}&workload=chat&rate=14.0&aging_rate=1000.0",
               "Aging raises a request's priority the longer it waits (1,000 prompt tokens' worth per second): "
               "SPF's worst TTFT falls below what it is without aging while its median stays below FCFS's.", _aging),
    Experiment("slo", "SLO admission vs FCFS past the knee", "goodput under SLOs (DistServe, OSDI '24)",
               f"schedulers=fcfs,slo&{_BASE}&workload=chat&rate=10.0",
               "Past the knee FCFS admits everything and most requests miss their TTFT target; shedding the "
               "requests that can no longer make it serves more of the rest in time: higher goodput.", _slo),
    Experiment("vtc", "Fairness across tenants", "VTC (Sheng et al., OSDI '24)",
               f"schedulers=fcfs,fair&{_BASE}&workload=multitenant",
               "A heavy tenant sends four times the light one's traffic. In one FCFS queue the light tenant waits "
               "behind the heavy one's backlog; fair sharing serves the tenant with the least service first, so "
               "the light tenant's P99 TTFT drops, below FCFS's and below the heavy tenant's.", _vtc),
    Experiment("cache", "Prefix-cache-aware ordering", "SGLang's longest-prefix-match (Zheng et al., 2024)",
               f"schedulers=chunked,cache_aware&{_BASE}&workload=rag&rate=12.0&prefix_cache=true&kv_blocks=1500",
               "With a KV pool too small to keep every retrieved document cached, admitting the request with the "
               "longest cached prefix first reuses more of the cache than arrival order: a higher hit rate, more "
               "prefill tokens saved and more goodput.", _cache),
    Experiment("spec", "Speculative decoding below and past the knee", "EAGLE (Li et al., 2024); SmartSpec (2024)",
               "schedulers=chunked&hardware=l4&workload=chat&duration=20.0&model=llama-3.2-1b&rate=1.0"
               "&spec_method=eagle&spec_tokens=5",
               "At low load each step is memory-bound: verifying 6 tokens costs about what 1 does, so EAGLE's "
               "drafts cut the time per token. Past the knee (12 req/s here) the step is compute-bound and the "
               "rejected drafts' work crowds out other requests: goodput falls below no speculation's. Picking each "
               "step's draft count by goodput wins part of it back.", _spec),
    Experiment("offload", "KV offload to host memory for multi-turn chat", "LMCache; vLLM's CPU offload",
               "schedulers=chunked&hardware=a100&workload=multiturn&duration=60.0&rate=8.0&prefix_cache=true"
               "&kv_blocks=2000&kv_offload_cpu_gb=16.0",
               "A 2,000-block GPU cache cannot keep the conversations between turns, so a returning turn recomputes "
               "its history. Keeping evicted blocks in 16 GB of host memory and loading them back over the host "
               "link cuts the mean TTFT, though not to what a GPU cache big enough for all of them gives.",
               _offload),
    Experiment("lora", "More LoRA adapters than batch slots", "S-LoRA (Sheng et al., MLSys '24); vLLM max_loras",
               "schedulers=chunked&hardware=a100&workload=chat&duration=60.0&rate=8.0&lora_adapters=64&max_loras=4"
               "&max_cpu_loras=8",
               "64 adapters, popular ones more often, but at most 4 in a step (vLLM's max_loras) and 8 in host "
               "memory: requests wait for a slot and adapters load from disk, so fewer finish per second than with "
               "all 64 allowed. Batching the adapters with the most waiting requests first (lora_order grouped) "
               "serves more of them in time, recovering part of the loss.", _lora),
)
BY_KEY = {e.key: e for e in EXPERIMENTS}


def split_query(query: str) -> tuple[list[str], str]:
    """(schedulers, the rest of the query: one scenario without its scheduler)."""
    pairs = parse_qsl(query)
    schedulers = [s for k, v in pairs if k == "schedulers" for s in v.split(",")]
    return schedulers, urlencode([(k, v) for k, v in pairs if k != "schedulers"])


def run_query(query: str) -> Metrics:
    """Each scheduler of a dashboard query simulated with sim_core's runner."""
    schedulers, rest = split_query(query)
    return {name: run(Scenario.from_query(f"{rest}&scheduler={name}")).metrics for name in schedulers}
