"""The Prometheus metrics vLLM and SGLang export, as sched-sim writes them (`run --metrics-out`) and reads them
(`calibrate --from-prometheus`): one table per engine, each metric's name, type, bucket boundaries and help, keyed
by what it measures (its concept), so that the writer, the reader and the fit all name a metric from here.

vLLM: vllm/v1/metrics/loggers.py, PrometheusStatLogger, at vllm-project/vllm commit 005a810bc40f (labels
model_name and engine; histogram buckets as listed there; `vllm:inter_token_latency_seconds` from the later
loggers.py that deprecates `vllm:time_per_output_token_seconds`, same buckets). vLLM 0.9 renamed
`vllm:gpu_cache_usage_perc` to `vllm:kv_cache_usage_perc`; the reader accepts either.
SGLang: python/sglang/srt/metrics/collector.py at sgl-project/sglang commit 00ae9c1590d2
(TokenizerMetricsCollector's default buckets, SchedulerMetricsCollector's gauges; label model_name).
"""

from __future__ import annotations

from dataclasses import dataclass

FLAVOURS = ("vllm", "sglang")
HISTOGRAM, COUNTER, GAUGE = "histogram", "counter", "gauge"

VLLM_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
VLLM_ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
VLLM_REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
VLLM_ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_E2E_BUCKETS = SGLANG_TTFT_BUCKETS + (600, 1200, 1800, 2400)
SGLANG_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.000,
    2.000,
    4.000,
    6.000,
    8.000,
)
SGLANG_TOKEN_BUCKETS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12000,
    15000,
    20000,
    22000,
    25000,
    30000,
    35000,
    40000,
    66000,
    99000,
    132000,
    300000,
    600000,
    900000,
    1100000,
)
# vLLM's token-count histograms: 1, 2, 5, 10, 20, 50, ... up to the model's context (build_1_2_5_buckets).
LENGTH_BUCKETS = "1-2-5 up to max_model_len"

# The label a request's finish reason is counted under: a simulated request stops at its output length, as a
# benchmark's request does with ignore_eos (vLLM's FinishReason "length"); a refused one counts as "abort".
FINISHED_REASON = "length"
ABORTED_REASON = "abort"


@dataclass(frozen=True)
class MetricSpec:
    concept: str  # what it measures, the same key for every engine: ttft, itl, e2e, queue, ...
    name: str  # the family's name; a counter's samples end in _total
    kind: str  # HISTOGRAM, COUNTER or GAUGE
    help: str
    buckets: tuple[float, ...] | str = ()  # a histogram's upper bounds (+Inf added), or LENGTH_BUCKETS


def _h(concept, name, buckets, help_text):
    return MetricSpec(concept, name, HISTOGRAM, help_text, buckets)


VLLM = (
    _h(
        "ttft",
        "vllm:time_to_first_token_seconds",
        VLLM_TTFT_BUCKETS,
        "Histogram of time to first token in seconds.",
    ),
    _h(
        "itl",
        "vllm:inter_token_latency_seconds",
        VLLM_ITL_BUCKETS,
        "Histogram of inter-token latency in seconds.",
    ),
    _h(
        "itl_legacy",
        "vllm:time_per_output_token_seconds",
        VLLM_ITL_BUCKETS,
        "Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
    ),
    _h(
        "e2e",
        "vllm:e2e_request_latency_seconds",
        VLLM_REQUEST_LATENCY_BUCKETS,
        "Histogram of e2e request latency in seconds.",
    ),
    _h(
        "queue",
        "vllm:request_queue_time_seconds",
        VLLM_REQUEST_LATENCY_BUCKETS,
        "Histogram of time spent in WAITING phase for request.",
    ),
    _h(
        "inference",
        "vllm:request_inference_time_seconds",
        VLLM_REQUEST_LATENCY_BUCKETS,
        "Histogram of time spent in RUNNING phase for request.",
    ),
    _h(
        "prefill",
        "vllm:request_prefill_time_seconds",
        VLLM_REQUEST_LATENCY_BUCKETS,
        "Histogram of time spent in PREFILL phase for request.",
    ),
    _h(
        "decode",
        "vllm:request_decode_time_seconds",
        VLLM_REQUEST_LATENCY_BUCKETS,
        "Histogram of time spent in DECODE phase for request.",
    ),
    _h("prompt_len", "vllm:request_prompt_tokens", LENGTH_BUCKETS, "Number of prefill tokens processed."),
    _h(
        "output_len",
        "vllm:request_generation_tokens",
        LENGTH_BUCKETS,
        "Number of generation tokens processed.",
    ),
    _h(
        "iteration_tokens",
        "vllm:iteration_tokens_total",
        VLLM_ITERATION_TOKEN_BUCKETS,
        "Histogram of number of tokens per engine_step.",
    ),
    MetricSpec("prompt_tokens", "vllm:prompt_tokens", COUNTER, "Number of prefill tokens processed."),
    MetricSpec(
        "generation_tokens", "vllm:generation_tokens", COUNTER, "Number of generation tokens processed."
    ),
    MetricSpec("requests", "vllm:request_success", COUNTER, "Count of successfully processed requests."),
    MetricSpec(
        "preemptions", "vllm:num_preemptions", COUNTER, "Cumulative number of preemption from the engine."
    ),
    MetricSpec(
        "prefix_queries",
        "vllm:prefix_cache_queries",
        COUNTER,
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    MetricSpec(
        "prefix_hits",
        "vllm:prefix_cache_hits",
        COUNTER,
        "Prefix cache hits, in terms of number of cached tokens.",
    ),
    MetricSpec(
        "running", "vllm:num_requests_running", GAUGE, "Number of requests in model execution batches."
    ),
    MetricSpec("waiting", "vllm:num_requests_waiting", GAUGE, "Number of requests waiting to be processed."),
    MetricSpec("kv_usage", "vllm:kv_cache_usage_perc", GAUGE, "KV-cache usage. 1 means 100 percent usage."),
)

SGLANG = (
    _h(
        "ttft",
        "sglang:time_to_first_token_seconds",
        SGLANG_TTFT_BUCKETS,
        "Histogram of time to first token in seconds.",
    ),
    _h(
        "itl",
        "sglang:inter_token_latency_seconds",
        SGLANG_ITL_BUCKETS,
        "Histogram of inter-token latency in seconds.",
    ),
    _h(
        "e2e",
        "sglang:e2e_request_latency_seconds",
        SGLANG_E2E_BUCKETS,
        "Histogram of End-to-end request latency in seconds",
    ),
    _h(
        "prompt_len",
        "sglang:prompt_tokens_histogram",
        SGLANG_TOKEN_BUCKETS,
        "Histogram of prompt token length.",
    ),
    _h(
        "output_len",
        "sglang:generation_tokens_histogram",
        SGLANG_TOKEN_BUCKETS,
        "Histogram of generation token length.",
    ),
    MetricSpec("prompt_tokens", "sglang:prompt_tokens", COUNTER, "Number of prefill tokens processed."),
    MetricSpec(
        "generation_tokens", "sglang:generation_tokens", COUNTER, "Number of generation tokens processed."
    ),
    MetricSpec("requests", "sglang:num_requests", COUNTER, "Number of requests processed."),
    MetricSpec("prefix_hits", "sglang:cached_tokens", COUNTER, "Number of cached prompt tokens."),
    MetricSpec("running", "sglang:num_running_reqs", GAUGE, "The number of running requests."),
    MetricSpec("waiting", "sglang:num_queue_reqs", GAUGE, "The number of requests in the waiting queue."),
    MetricSpec("kv_usage", "sglang:token_usage", GAUGE, "The token usage."),
)

METRICS = {"vllm": VLLM, "sglang": SGLANG}
# Names older releases used for a concept (read, never written): vLLM before 0.9's KV gauge.
LEGACY_NAMES = {
    "vllm": {"kv_usage": ("vllm:gpu_cache_usage_perc",), "itl": ("vllm:time_per_output_token_seconds",)}
}


def spec(flavour: str, concept: str) -> MetricSpec | None:
    return next((m for m in METRICS[flavour] if m.concept == concept), None)


def length_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's 1-2-5 buckets up to the context length: 1, 2, 5, 10, 20, 50, ..."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return tuple(out)
            out.append(m * scale)
        scale *= 10


def buckets_of(m: MetricSpec, max_model_len: int) -> tuple[float, ...]:
    return length_buckets(max_model_len) if m.buckets == LENGTH_BUCKETS else tuple(m.buckets)


def flavour_of_engine(engine: str) -> str:
    """The metric names an engine's scenario exports by default: SGLang's for sglang, vLLM's otherwise
    (TensorRT-LLM's own /metrics is not modelled; vLLM's names are the ones dashboards expect)."""
    return "sglang" if engine == "sglang" else "vllm"
