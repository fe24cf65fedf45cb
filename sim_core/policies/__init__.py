"""Schedulers: everything a scheduler decides lives in this package, and nothing else names a policy.

A scheduler is a registry entry below (name, waiting-queue order, switches) plus, where it needs them, jitted hooks
the engine calls at fixed points of a step:
  ordering.waiting_key / rekey_waiting   the waiting-queue key, and re-keying while requests wait
  fair.next_tenant / service_cost        which tenant's queue goes next, what a step costs it (VTC)
  preemption.priority_victim / memory_victim   who is evicted, and when a waiting request may evict
  admission.admission_verdict            admit, shed or degrade a request whose TTFT target is out of reach
  adaptive_budget.adapt_budget           the per-step token budget controller
  static_batching                        request-level batching instead of continuous batching
Adding a scheduler: a `Scheduler` entry, and if it orders the queue its own way an ORDER_ code with its branch in
`ordering.waiting_key` (its key function in a module of its own); options go in `options.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .orders import (
    ORDER_ARRIVAL,
    ORDER_CACHED_PREFIX,
    ORDER_DEADLINE,
    ORDER_MLFQ,
    ORDER_PROMPT_LENGTH,
    ORDER_SLACK,
    ORDER_TENANT_SHARE,
)


@dataclass(frozen=True)
class Scheduler:
    name: str
    order: int
    chunked_prefill: bool  # split prompts across steps to fill the token budget (Sarathi-Serve)
    static_batching: bool  # request-level batches: nothing joins until the whole batch has finished
    # A waiting request may preempt running ones with a strictly worse key when memory is short (seed 000's
    # SPF + preemption). Only for orders other than arrival: with FCFS a requeued victim would otherwise evict
    # the very requests that overtook it.
    preempts_for_priority: bool
    # Default per-step token budget; None means "as large as the longest allowed sequence" (no chunking:
    # vLLM sets max_num_batched_tokens >= max_model_len when chunked prefill is off).
    default_token_budget: int | None
    summary: str
    # What happens to a request whose TTFT target is already out of reach when it could be admitted:
    # "admit" anyway, "reject" (shed, counted), or "degrade" (admit later with a relaxed target).
    default_admission: str = "admit"
    # Turn on the prefix cache whatever the scenario says (a cache-aware order needs one).
    needs_prefix_cache: bool = False


SCHEDULERS: tuple[Scheduler, ...] = (
    Scheduler("static", ORDER_ARRIVAL, False, True, False, None,
              "request-level static batching: a batch is padded, prefilled together and decoded until its "
              "longest request finishes; the baseline continuous batching is measured against"),
    Scheduler("fcfs", ORDER_ARRIVAL, False, False, False, None,
              "continuous batching, arrival order, each prompt prefilled whole in one step"),
    Scheduler("spf", ORDER_PROMPT_LENGTH, False, False, True, None,
              "continuous batching, shortest prompt first; may preempt longer-prompt requests for memory"),
    Scheduler("chunked", ORDER_ARRIVAL, True, False, False, 512,
              "Sarathi-Serve: decodes first, prompts chunked into the rest of a per-step token budget"),
    Scheduler("slo", ORDER_SLACK, True, False, False, 512,
              "deadline-aware: chunked prefill, least TTFT slack first, sheds requests that can no longer "
              "meet their TTFT target", default_admission="reject"),
    Scheduler("fair", ORDER_TENANT_SHARE, True, False, False, 512,
              "weighted fair share across tenants (Virtual Token Counter): the backlogged tenant with the "
              "least weighted service goes first; chunked prefill"),
    Scheduler("cache_aware", ORDER_CACHED_PREFIX, True, False, False, 512,
              "prefix-cache aware: longest cached prefix first (SGLang's LPM; arrival order past 128 waiting), "
              "so the cheapest admissions in memory and compute go first; chunked prefill",
              needs_prefix_cache=True),
    Scheduler("edf", ORDER_DEADLINE, True, False, False, 512,
              "earliest deadline first: the waiting request whose TTFT deadline (arrival + its class's target) "
              "comes first goes first; admits every request (unlike slo, it sheds nothing); chunked prefill"),
    Scheduler("mlfq", ORDER_MLFQ, True, False, True, 512,
              "FastServe's skip-join multi-level feedback queue: a request starts at the level its prefill fits, "
              "drops a level each time it uses up that level's quantum of generated tokens, and new short "
              "requests preempt demoted long ones; chunked prefill"),
)
SCHEDULER_NAMES: tuple[str, ...] = tuple(s.name for s in SCHEDULERS)
BY_NAME: dict[str, Scheduler] = {s.name: s for s in SCHEDULERS}


__all__ = ["BY_NAME", "SCHEDULERS", "SCHEDULER_NAMES", "Scheduler"]
