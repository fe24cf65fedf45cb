"""Schedulers. Each is a name, an ordering key for the waiting queue, and a few switches the engine reads.

Adding a scheduler: add a `Scheduler` entry below and, if it orders the waiting queue differently, an ORDER_
constant and a branch in `waiting_key`. Nothing else in the engine names a policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

# How the waiting queue is ordered (smaller key first; ties go to the earlier arrival).
ORDER_ARRIVAL = 0  # first come, first served
ORDER_PROMPT_LENGTH = 1  # shortest prompt first (prompt length is the only size known before decoding)
ORDER_SLACK = 2  # least slack first: TTFT deadline minus the time its prefill still needs (seed 003)
ORDER_TENANT_SHARE = 3  # least-served tenant first (Virtual Token Counter), arrival order within a tenant
ORDER_CACHED_PREFIX = 4  # longest cached prefix first (SGLang's LPM) while the queue is short, else arrival
# SGLang stops matching prefixes for ordering past this many waiting requests (it costs more than it saves).
LPM_QUEUE_LIMIT = 128


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
)
SCHEDULER_NAMES: tuple[str, ...] = tuple(s.name for s in SCHEDULERS)
BY_NAME: dict[str, Scheduler] = {s.name: s for s in SCHEDULERS}



@njit(cache=True)
def waiting_key(order, arrival_s, prompt_tokens, remaining_tokens, deadline_s, chunk_tokens, step_s, aging_rate):
    """Priority of a waiting request (smaller first).

    Aging subtracts `aging_rate` x seconds waited from the key; as every request's wait grows at the same pace,
    that is the same order as adding aging_rate x arrival time, which keeps keys fixed while requests wait.
    Units of aging_rate are the key's per second: tokens/s for shortest-prompt-first, s/s for least slack."""
    if order == ORDER_PROMPT_LENGTH:
        key = float(prompt_tokens)
    elif order == ORDER_SLACK:
        steps_needed = (remaining_tokens + chunk_tokens - 1) // chunk_tokens
        key = deadline_s - steps_needed * step_s  # slack + now; "now" is common to every request
    else:
        key = arrival_s
    return key + aging_rate * arrival_s
