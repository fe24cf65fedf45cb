"""Routing: which engine of a pool a request goes to (the router in front of replicas, or of a prefill pool).

A router sees each engine's load as of its last look (the cluster loop refreshes what it `seen`s every
`staleness_s` of simulated time, since real routers poll metrics endpoints) and adds what it sent since. Each
router is one entry of ROUTERS (its name, code and what it does), a branch of `choose`, and, if it draws at
random, its draws in `router_draws` (the kernels draw nothing): adding one touches this file and its tests.

least_outstanding and power_of_two count the load in tokens, not requests: the tokens a replica has still to
prefill, which is the queue a new prompt's first token waits behind. One 4,000-token prompt delays it as much as
dozens of short ones, and requests already decoding hardly do (continuous batching runs a prefill chunk beside
them). A count of outstanding requests tells none of this apart: on chat at ~70% load with bursty arrivals it
routed no better than round robin; adding the KV tokens in use (Dynamo's active blocks) also made mean TTFT worse
than round robin's (bench/bench_cluster.py, section 2). prefix_affinity weighs what a replica's cache saves
against the KV tokens its requests hold (see _prefix_cost). A follow-up turn is routed like any request when it
arrives (its think time after the previous turn ended).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernel.jit import inline
from ..kernel.kv_pool import cached_prefix
from ..kernel.state import N_RUNNING, N_SWAPPED, N_WAITING_TOKENS
from .routers import (
    DEFAULT_CACHE_WEIGHT,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_PREFIX_AFFINITY,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
    ROUTE_SESSION,
    ROUTERS,
)


class Routing(NamedTuple):
    """How requests reach the engines: the open-loop arrivals (follow-up turns come when their parent ends) and
    the router."""

    arrival_s: np.ndarray
    open_ids: np.ndarray  # open-loop arrivals, in order
    router: int  # ROUTE_*
    staleness_s: float
    choices: np.ndarray  # the draws the random routers use (row r: request r's; session: its conversation's hash)
    cache_weight: float  # prefix_affinity: what a prompt token to compute weighs against an outstanding KV token
    independent: bool  # no follow-up turns: engines interact only at arrivals (the fleet loop may run one ahead: pool_steps.advance)


class RouterSettings(NamedTuple):
    """The router a scenario asks for, as Python holds it; `routing` builds the loops' Routing record from it."""

    name: str  # a ROUTERS key
    staleness_s: float
    seed: int  # the random routers' draws
    cache_weight: float = DEFAULT_CACHE_WEIGHT
    # Each request's conversation (its first turn's id), what session routing hashes; None: read off the table's
    # follow-up chains. A closed loop chains each user's independent requests too (workload.closed_loop): those
    # links are no conversation, so its runs pass the conversations here.
    sessions: np.ndarray | None = None

    def routing(self, table, replicas: int, independent: bool) -> Routing:
        """The Routing record for `replicas` engines over `table` (a RequestTable)."""
        return Routing(table.arrival_s, table.open_ids, ROUTERS[self.name][0], self.staleness_s,
                       router_draws(table.child, replicas, self.name, self.seed, self.sessions),
                       float(self.cache_weight), independent)



@inline
def _held_tokens(eng, r):
    """The KV tokens request r holds, or will once its prompt is in: its prompt and what it generated so far."""
    return eng.req.prompt_tokens[r] + eng.st.generated[r]


@inline
def _outstanding_tokens(eng):
    """The KV tokens of every request outstanding on the engine (running, waiting, swapped out): the load a
    cache-aware router balances (Dynamo's KV router counts a worker's active blocks the same way)."""
    q = eng.q
    total = 0
    for i in range(q.size[N_RUNNING]):
        total += _held_tokens(eng, q.running[i])
    for t in range(q.q_size.shape[0]):
        for i in range(q.q_off[t], q.q_off[t] + q.q_size[t]):
            total += _held_tokens(eng, q.wait_ids[i])
    for i in range(q.size[N_SWAPPED]):
        total += _held_tokens(eng, q.swap_ids[i])
    return total


@inline
def _prefill_queue(eng):
    """The tokens the engine has still to prefill: its waiting requests' (a counter, not a scan of the heaps,
    which past saturation hold thousands of requests; this is read after every step) and the rest of the running
    prompts part-way through. What a new prompt's first token waits behind."""
    q, prompt, computed = eng.q, eng.req.prompt_tokens, eng.st.computed
    tokens = q.size[N_WAITING_TOKENS]
    for i in range(q.size[N_RUNNING]):
        tokens += max(0, prompt[q.running[i]] - computed[q.running[i]])
    return tokens


@inline
def router_load(eng, router):
    """The load the router reads off a replica when it looks: KV tokens held for prefix_affinity (its cost adds
    the prompt tokens to compute there), tokens still to prefill for least_outstanding and power_of_two,
    nothing for the routers that do not look."""
    if router == ROUTE_PREFIX_AFFINITY:
        return _outstanding_tokens(eng)
    if router == ROUTE_LEAST_OUTSTANDING or router == ROUTE_POWER_OF_TWO:
        return _prefill_queue(eng)
    return 0


@inline
def sent_load(eng, r):
    """What sending request r adds to its replica's load as the router counts it until it looks again: its
    prompt (to prefill there; for prefix_affinity, to hold)."""
    return eng.req.prompt_tokens[r]


@inline
def _prefix_cost(engines, seen, r, block_size, cache_weight):
    """prefix_affinity: the replica where request r costs least. A replica's cost is the prompt tokens r would
    compute there (the prompt less the longest prefix that replica has cached) plus the KV tokens it already
    has outstanding (`seen`), both in tokens, as Dynamo's KV router weighs new prefill blocks against active
    blocks (overlap weight 1). So a request follows its cached prefix unless the replica holding it is loaded
    by more than the prefill the prefix saves: a bound on load that scales with what the cache is worth,
    where SGLang's cache-aware router switches to the shortest queue past fixed imbalance thresholds. A prefix
    every replica caches (a shared system prompt) weighs the same everywhere and load decides. Ties go to the
    less loaded replica."""
    best, best_cost = 0, np.inf
    for e in range(seen.shape[0]):
        eng = engines[e]
        total = eng.req.prompt_tokens[r] + 1  # leaves the whole prompt to look up (one token is always computed)
        hits = cached_prefix(eng.kv, eng.req, r, total, block_size)[0]
        cost = cache_weight * (eng.req.prompt_tokens[r] - hits * block_size) + seen[e]
        if cost < best_cost or (cost == best_cost and seen[e] < seen[best]):
            best, best_cost = e, cost
    return best


@inline
def choose(engines, seen, r, routing, block_size, sent):
    """The replica for request r (`seen`: the load the router sees; `sent`: requests routed before it)."""
    n = seen.shape[0]
    router, choices = routing.router, routing.choices
    if router == ROUTE_ROUND_ROBIN:
        return sent % n
    if router == ROUTE_LEAST_OUTSTANDING:
        return _argmin_from(seen, sent % n)
    if router == ROUTE_POWER_OF_TWO:
        a, b = choices[r, 0], choices[r, 1]
        return a if seen[a] <= seen[b] else b
    if router == ROUTE_RANDOM:
        return choices[r, 0]
    if router == ROUTE_SESSION:
        return choices[r, 0]  # its conversation's hash
    return _prefix_cost(engines, seen, r, block_size, routing.cache_weight)


@inline
def choose_serving(engines, seen, r, routing, block_size, sent):
    """`choose` among the replicas serving now, when their number changes over a run (an autoscaler;
    kernel/autoscaled.py): `engines` and `seen` list the serving ones only. The random routers' draws were made
    over the most replicas there can be, so each is taken modulo the replicas serving (a session then stays on
    its replica while their number holds)."""
    n = seen.shape[0]
    router, choices = routing.router, routing.choices
    if router == ROUTE_RANDOM or router == ROUTE_SESSION:
        return choices[r, 0] % n
    if router == ROUTE_POWER_OF_TWO:
        a, b = choices[r, 0] % n, choices[r, 1] % n
        if a == b and n > 1:
            b = (a + 1) % n
        return a if seen[a] <= seen[b] else b
    return choose(engines, seen, r, routing, block_size, sent)


@inline
def _argmin_from(values, start):
    """The index of the least value, ties to the first from `start` on (wrapping): ties rotate, not pile up on 0."""
    n = values.shape[0]
    best = start
    for k in range(1, n):
        i = (start + k) % n
        if values[i] < values[best]:
            best = i
    return best



def router_draws(child: np.ndarray, replicas: int, router: str, seed: int,
                 sessions: np.ndarray | None = None) -> np.ndarray:
    """Per request, the replicas a random router may pick (drawn here: the kernels draw nothing); for session,
    its conversation's hash (`sessions`: each request's conversation; None: the chains of `child`)."""
    k = len(child)
    if router == "session":  # a conversation's id (its first turn's) hashed: splitmix64's finaliser mixes well
        roots = _conversation(child) if sessions is None else sessions
        x = roots.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        hashed = (x ^ (x >> np.uint64(31))) % np.uint64(replicas)
        return np.ascontiguousarray(np.stack([hashed, hashed], axis=1), np.int64)
    if router == "random":
        drawn = np.random.default_rng([seed, 0x52414E44]).integers(0, replicas, k)
        return np.ascontiguousarray(np.stack([drawn, drawn], axis=1), np.int64)
    if router == "power_of_two":
        rng = np.random.default_rng([seed, 0x9E3779B9])
        first = rng.integers(0, replicas, k)
        second = (first + rng.integers(1, replicas, k)) % replicas if replicas > 1 else first
        return np.ascontiguousarray(np.stack([first, second], axis=1), np.int64)
    return np.zeros((k, 2), np.int64)


def conversations(parent: np.ndarray) -> np.ndarray:
    """Each request's conversation, the id of its first turn, from each request's previous turn (-1: none)."""
    child = np.full(len(parent), -1, np.int64)
    has_parent = np.flatnonzero(parent >= 0)
    child[parent[has_parent]] = has_parent
    return _conversation(child)


def _conversation(child: np.ndarray) -> np.ndarray:
    """Each request's conversation: the id of its first turn (turns chain parent -> child)."""
    root = np.arange(len(child))
    has_child = np.flatnonzero(child >= 0)
    parent = np.full(len(child), -1)
    parent[child[has_child]] = has_child
    while (parent[root] >= 0).any():
        root = np.where(parent[root] >= 0, parent[root], root)
    return root
