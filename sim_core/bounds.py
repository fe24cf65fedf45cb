"""Bounds from a scheduler that knows the future: for one run's requests, how good any scheduler could be on the
same deployment, so each policy's result reads as a fraction of what was achievable.

Every bound relaxes the engine to something easier to solve, so that whatever a real scheduler does is a
feasible schedule of the relaxation (the argument for each is beside it; docs/MODEL.md#bounds says it in prose):

- Per-request floors, from the step-time model (cost_model.py). A step's time never falls when work is added to
  its batch, and splitting a prompt into chunks never costs less than computing it in one step, so request i's
  first token comes at least `prefill_floor` after it arrives (its uncached prompt alone, in one step, on an idle
  engine), and every later token needs a step of its own: E2EL_i >= prefill_floor_i + (output_i - 1) x
  decode_floor_i, with decode_floor the step of that request alone (its context at its shortest). With
  speculative decoding a step emits at most 1 + k of its tokens (k drafts all accepted, and the bonus token), and
  verifying them costs no less than decoding one: ceil((output_i - 1) / (1 + k)) such steps.
- Capacity: a step of n tokens takes at least f(n), the step's weight read, GEMM arithmetic, elementwise and
  all-reduce terms and CPU time with attention and the lm head left out; f(n)/n only falls with n, so an engine
  computes at most N / f(N) tokens per second, N the most tokens a step can hold. The deployment becomes one
  preemptive server at the sum of its engines' rates (a prefill pool's alone for first tokens): what the engines
  compute in each step, the server computes in at most that step's time.
- Mean E2EL/TTFT: SRPT is optimal for mean flow time on one preemptive server with release dates (Schrage 1968),
  so SRPT on that server (work = a request's tokens, release = its arrival) bounds the mean from below; so does
  the mean of the floors. The bound is the larger of the two. A run's means are over the requests it served, so
  its bounds are over those same requests: what the run did for them is a schedule of them alone (what it spent
  on the requests it rejected or shed only adds), so it holds whichever requests a scheduler turns away.
- TTFT deadlines met: a request whose floor exceeds its TTFT target never meets it, nor does one the deployment
  can never run (NEVER_RUNS: the run rejected it for a reason any scheduler would); the rest must have their
  prompts computed on the server by arrival + target. The most such deadlines a preemptive server meets
  (1|r_j,pmtn|sum U_j) is solved exactly here when deadlines follow arrivals (one SLO class): then EDF never
  preempts, and Kise, Ibaraki and Mine's algorithm (1978) for agreeable release and due dates is optimal. Where
  classes differ, each deadline is first relaxed to the latest deadline of any request that arrived before it
  (later deadlines: still an upper bound), which makes them agreeable.
- Goodput: the same count over the requests whose TPOT floor also meets their TPOT target, per second of the
  arrival window.

Follow-up turns of closed-loop workloads arrive when their parents end, so the run's own arrival times are used:
the bounds hold for that run (for open-loop workloads they are the same for every scheduler that serves the
same requests; the latency bounds follow the requests each run served).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .engine_cost import engine_cost_params
from .kernel.content_hash import content_hashes
from .kernel.cost_constants import (
    ALLREDUCE_BUS_BW,
    ALLREDUCE_BYTES_PER_TOKEN,
    ALLREDUCE_LATENCY_S,
    CPU_OVERLAP,
    CUSTOM_ALLREDUCE_LATENCY_S,
    CUSTOM_AR_MAX_BYTES,
    DENSE_GEMM_BW,
    DENSE_WEIGHT_BYTES,
    ELEMENTWISE_BW,
    ELEMENTWISE_BYTES_PER_TOKEN,
    ELEMENTWISE_KERNELS,
    ELEMENTWISE_LAUNCH_FLOOR_S,
    GEMM_LAUNCH_FLOOR_S,
    GEMMS,
    LAYERS,
    LINEAR_ACT_BYTES_PER_TOKEN,
    LINEAR_FLOPS_PER_TOKEN,
    LINEAR_RATE,
    STEP_OVERHEAD_PER_SEQ,
    STEP_OVERHEAD_S,
    STEP_TIME_SCALE,
    STREAM_BW,
    TP,
)
from .kernel.jit import entry, inline
from .kernel.state import REJECT_LARGER_THAN_KV_POOL, REJECT_LONGER_THAN_MODEL
from .metrics import arrival_window_s, request_latencies_s
from .request_floors import request_floors_s
from .spec_decode import spec_tokens

# Why a request was rejected that no scheduler on the deployment could have served it (REJECT_*): it does not fit
# the model's context or the whole KV pool. (Longer than the token budget depends on the scheduler's chunking.)
NEVER_RUNS = (REJECT_LONGER_THAN_MODEL, REJECT_LARGER_THAN_KV_POOL)
# Slack on deadlines in the relaxed problem, seconds: the run's own check allows 1e-12 (metrics.py); a little more
# keeps float rounding in the server's clock from ever cutting the bound below a run.
DEADLINE_SLACK_S = 1e-9


# ----- the step-time model's floors -----
def _allreduce_floor(p: np.ndarray, tokens) -> np.ndarray:
    """Two all-reduces per layer of `tokens` rows at the cheapest latency the engine has (its one-kernel all-reduce
    or NCCL's): a lower bound on the communication of any steps computing these rows, however split."""
    if p[TP] <= 1.0:
        return np.zeros_like(np.asarray(tokens, np.float64))
    latency = min(p[ALLREDUCE_LATENCY_S], CUSTOM_ALLREDUCE_LATENCY_S if p[CUSTOM_AR_MAX_BYTES] > 0 else math.inf)
    per_row = 2.0 * (p[TP] - 1.0) / p[TP] * p[ALLREDUCE_BYTES_PER_TOKEN] / p[ALLREDUCE_BUS_BW]
    return 2.0 * p[LAYERS] * (latency + per_row * np.asarray(tokens, np.float64))


def _with_cpu(p: np.ndarray, gpu_s, cpu_s):
    """A step's time from its GPU and CPU time: the longer with asynchronous scheduling, else the sum."""
    return np.maximum(gpu_s, cpu_s) if p[CPU_OVERLAP] > 0 else gpu_s + cpu_s


def step_floor_s(p: np.ndarray, tokens) -> np.ndarray:
    """f(n): a lower bound on the time of any step of `tokens` tokens, whatever they are (prompt or output, any
    context): the GEMMs (weights read once, the arithmetic of every token), the elementwise kernels and the
    all-reduces, plus one sequence's CPU time; attention and the lm head are left out (they only add).
    f(n)/n never rises with n: every term is a constant plus a part linear in n, or the GEMMs' roofline, whose
    per-token share sqrt(((W/n + a)/bw)^2 + (f/rate)^2) falls with n."""
    n = np.asarray(tokens, np.float64)
    # The dense weights at the GEMMs' own bandwidth, as cost_model.linear_s reads them (x 1.0 where it is STREAM_BW).
    memory = (p[DENSE_WEIGHT_BYTES] * (p[STREAM_BW] / p[DENSE_GEMM_BW]) + n * p[LINEAR_ACT_BYTES_PER_TOKEN]) / p[STREAM_BW]
    compute = n * p[LINEAR_FLOPS_PER_TOKEN] / p[LINEAR_RATE]
    linear = p[GEMMS] * GEMM_LAUNCH_FLOOR_S + np.sqrt(memory * memory + compute * compute)
    elementwise = p[ELEMENTWISE_KERNELS] * ELEMENTWISE_LAUNCH_FLOOR_S + n * p[ELEMENTWISE_BYTES_PER_TOKEN] / p[
        ELEMENTWISE_BW]
    gpu = linear + elementwise + _allreduce_floor(p, n)
    return _with_cpu(p, gpu, p[STEP_OVERHEAD_S] + p[STEP_OVERHEAD_PER_SEQ]) * p[STEP_TIME_SCALE]


def max_step_tokens(scenario, resolved) -> int:
    """The most tokens one step can carry: continuous batching fills at most the token budget (decodes count
    against it; an adaptive budget grows to at most max(token_budget, max_model_len)); a static batch prefills
    up to max_seqs prompts padded to the longest."""
    if resolved.scheduler.static_batching:
        return int(resolved.max_seqs) * int(resolved.max_model_len)
    return max(int(resolved.token_budget), int(resolved.max_model_len))


def engine_rate(p: np.ndarray, step_tokens: int) -> float:
    """An upper bound on the tokens per second one engine computes: N / f(N) at N = the most tokens a step holds
    (f(n)/n falls with n)."""
    return float(step_tokens / step_floor_s(p, step_tokens))


def prefill_floor_s(p: np.ndarray, uncached: np.ndarray, cached: np.ndarray) -> np.ndarray:
    """request_floors_s's prefill floor of each request."""
    return request_floors_s(p, p, _i64(uncached), _i64(cached))[0]


def decode_floor_s(p: np.ndarray, prompt_tokens: np.ndarray) -> np.ndarray:
    """request_floors_s's decode floor of each request."""
    return request_floors_s(p, p, _i64(prompt_tokens), np.zeros(len(prompt_tokens), np.int64))[1]


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def cacheable_prefix_tokens(reqs, block_size: int) -> np.ndarray:
    """Per request, the most prompt tokens the prefix cache could ever serve it: its leading full blocks whose
    chained content hash some other request also has (a block only this request computes is never cached
    before its first admission)."""
    hashes, off = content_hashes(*reqs.content(), block_size)
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1
    out = np.zeros(len(reqs), np.int64)
    for i in range(len(reqs)):
        blocks = shared[off[i]:off[i + 1]]
        lead = int(np.argmin(blocks)) if not blocks.all() else len(blocks)
        out[i] = min(lead * block_size, int(reqs.prompt_tokens[i]))
    return out


# ----- the relaxed single server -----
@inline
def _srpt_total_flow(release, work):
    """Sum over jobs of (completion - release) under preemptive SRPT on one unit-rate server; jobs sorted by
    release. Optimal for this sum (Schrage 1968)."""
    n = release.shape[0]
    heap = np.empty(n, np.float64)  # remaining work of the jobs present, a binary min-heap
    rel = np.empty(n, np.float64)
    size = 0
    total = 0.0
    t = release[0] if n > 0 else 0.0
    k = 0
    while k < n or size > 0:
        if size == 0 and t < release[k]:
            t = release[k]
        while k < n and release[k] <= t:  # admit every job released by now
            j = size
            size += 1
            heap[j], rel[j] = work[k], release[k]
            while j > 0 and heap[(j - 1) // 2] > heap[j]:
                q = (j - 1) // 2
                heap[j], heap[q] = heap[q], heap[j]
                rel[j], rel[q] = rel[q], rel[j]
                j = q
            k += 1
        # Run the shortest until it finishes or the next release, whichever is first.
        next_release = release[k] if k < n else np.inf
        if t + heap[0] <= next_release:
            t += heap[0]
            total += t - rel[0]
            size -= 1
            heap[0], rel[0] = heap[size], rel[size]
            j = 0
            while True:
                a, b, m = 2 * j + 1, 2 * j + 2, j
                if a < size and heap[a] < heap[m]:
                    m = a
                if b < size and heap[b] < heap[m]:
                    m = b
                if m == j:
                    break
                heap[j], heap[m] = heap[m], heap[j]
                rel[j], rel[m] = rel[m], rel[j]
                j = m
        else:
            heap[0] -= next_release - t
            t = next_release
    return total


@inline
def _max_on_time_agreeable(release, work, deadline):
    """The most jobs one server meets the deadlines of, jobs sorted by release with deadlines in the same order
    (agreeable): Kise, Ibaraki and Mine (1978). Jobs go in release order, each run first-come first-served (what
    EDF does with agreeable deadlines, so preemption gains nothing); when the newest would be late, the job whose
    removal brings the last completion earliest leaves. Only the busy period the newest job is in matters: a
    removal before an idle gap moves nothing after it."""
    n = release.shape[0]
    rel = np.empty(n, np.float64)  # the current busy period's jobs, in order, and their completions
    wk = np.empty(n, np.float64)
    done = np.empty(n, np.float64)
    size = 0
    kept = 0  # jobs kept in earlier busy periods
    for j in range(n):
        if size > 0 and release[j] >= done[size - 1]:
            kept += size  # the server idles before j: the busy period closes with what it kept
            size = 0
        start = release[j] if size == 0 else max(done[size - 1], release[j])
        rel[size], wk[size], done[size] = release[j], work[j], start + work[j]
        size += 1
        if done[size - 1] <= deadline[j]:
            continue
        # Removing job k < last moves the next job's start earlier by min(done[k] - done[k-1], its queueing
        # done[k] - release[k+1]), and each later job's by no more than the one before it moved, nor more than its
        # own queueing done[m-1] - release[m]: the last completion moves by the smallest of these. Removing the
        # newest moves the last completion back to the one before it. Ties keep the earlier jobs.
        last = size - 1
        best = done[last] - done[last - 1] if last > 0 else np.inf
        best_k = last
        queueing_after = np.inf  # the smallest queueing of the jobs after k + 1
        for k in range(last - 1, -1, -1):
            if queueing_after <= best:
                break  # no earlier removal can move the last completion further
            frees = done[k] - done[k - 1] if k > 0 else np.inf
            gain = min(frees, done[k] - rel[k + 1], queueing_after)
            if gain > best:
                best, best_k = gain, k
            queueing_after = min(queueing_after, done[k] - rel[k + 1])
        for m in range(best_k, size - 1):
            rel[m], wk[m] = rel[m + 1], wk[m + 1]
        size -= 1
        for m in range(best_k, size):
            start = rel[m] if m == 0 else max(done[m - 1], rel[m])
            done[m] = start + wk[m]
    return float(kept + size)


SRPT_FLOW, MAX_ON_TIME = 0, 1  # the relaxed server's two problems


@entry
def relaxed_server(problem, release, work, deadline):
    """Solve one of the relaxed server's problems on jobs sorted by release: SRPT_FLOW, the total flow time under
    SRPT (`deadline` unused); MAX_ON_TIME, the most deadlines met with agreeable deadlines. One compiled entry for
    both, so a run that reports bounds opens two kernel caches beside the engine's, not three."""
    if problem == SRPT_FLOW:
        return _srpt_total_flow(release, work)
    return _max_on_time_agreeable(release, work, deadline)


def srpt_total_flow(release: np.ndarray, work: np.ndarray) -> float:
    return float(relaxed_server(SRPT_FLOW, _f64(release), _f64(work), _f64(work)))


def max_on_time_agreeable(release: np.ndarray, work: np.ndarray, deadline: np.ndarray) -> int:
    return int(relaxed_server(MAX_ON_TIME, _f64(release), _f64(work), _f64(deadline)))


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.float64)


def max_on_time(release: np.ndarray, work: np.ndarray, deadline: np.ndarray) -> int:
    """An upper bound on the jobs a preemptive server meets the deadlines of (exact when the deadlines follow the
    releases): each deadline is relaxed to the latest of the jobs released before it, then
    `max_on_time_agreeable`."""
    if len(release) == 0:
        return 0
    order = np.lexsort((deadline, release))
    relaxed = np.maximum.accumulate(deadline[order])
    return int(max_on_time_agreeable(np.ascontiguousarray(release[order], np.float64),
                                     np.ascontiguousarray(work[order], np.float64),
                                     np.ascontiguousarray(relaxed, np.float64)))


def srpt_mean_flow(release: np.ndarray, work: np.ndarray) -> float:
    """Mean flow time under SRPT (the optimum on one preemptive server), seconds."""
    if len(release) == 0:
        return 0.0
    order = np.argsort(release, kind="stable")
    return float(srpt_total_flow(np.ascontiguousarray(release[order], np.float64),
                                 np.ascontiguousarray(work[order], np.float64))) / len(release)


# ----- one run's bounds -----
@dataclass(frozen=True)
class Relaxation:
    """A run's requests in the relaxed model: per request its arrival, the prompt tokens it must compute, its
    output tokens, its floors and its targets (device side: the transport overhead taken off the TTFT target);
    and the relaxed server's rates, tokens per second."""

    arrival: np.ndarray
    uncached: np.ndarray
    output: np.ndarray
    ttft_floor: np.ndarray  # seconds
    decode_floor: np.ndarray  # seconds per step that decodes it, at least one step per `tokens_per_step` tokens
    ttft_target: np.ndarray  # seconds from arrival, device side
    tpot_target: np.ndarray
    servable: np.ndarray  # False where the deployment can never run it (longer than max_model_len, than the KV pool)
    prefill_rate: float  # the engines that compute prompts
    total_rate: float  # every engine
    transport_s: float
    tokens_per_step: int = 1  # the most output tokens of one request a step emits: 1 + speculative drafts

    @property
    def decode_steps(self) -> np.ndarray:
        """The fewest steps that emit each request's tokens after the first."""
        return -(-(self.output - 1) // self.tokens_per_step)

    @property
    def e2el_floor(self) -> np.ndarray:
        return self.ttft_floor + self.decode_steps * self.decode_floor

    @property
    def tpot_floor(self) -> np.ndarray:
        """Each request's least TPOT (0 for a single output token)."""
        return self.decode_steps * self.decode_floor / np.maximum(self.output - 1, 1)

    def subset(self, keep: np.ndarray) -> Relaxation:
        return dataclasses.replace(self, **{f: getattr(self, f)[keep] for f in (
            "arrival", "uncached", "output", "ttft_floor", "decode_floor", "ttft_target", "tpot_target",
            "servable")})

    def ttft_mean_lower_s(self) -> float:
        """Mean TTFT (client side) no scheduler beats: the larger of the floors' mean and SRPT's on prompts."""
        if len(self.arrival) == 0:
            return 0.0
        return self.transport_s + max(float(self.ttft_floor.mean()),
                                      srpt_mean_flow(self.arrival, self.uncached / self.prefill_rate))

    def e2el_mean_lower_s(self) -> float:
        """Mean E2EL no scheduler beats: the larger of the floors' mean and SRPT's on every token."""
        if len(self.arrival) == 0:
            return 0.0
        work = (self.uncached + self.output - 1) / self.total_rate
        return self.transport_s + max(float(self.e2el_floor.mean()), srpt_mean_flow(self.arrival, work))

    def deadline_problem(self, paced: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(release, work, deadline) of the requests that could meet their TTFT target, and their TPOT target as
        well with `paced`, on the prompt server."""
        keep = self.servable & (self.ttft_floor <= self.ttft_target + DEADLINE_SLACK_S)
        if paced:
            keep &= self.tpot_floor <= self.tpot_target + DEADLINE_SLACK_S
        return (self.arrival[keep], self.uncached[keep] / self.prefill_rate,
                self.arrival[keep] + self.ttft_target[keep] + DEADLINE_SLACK_S)

    def deadline_met_upper(self) -> int:
        return max_on_time(*self.deadline_problem())

    def goodput_upper(self) -> float:
        """Requests that could meet both targets, per second of the arrival window (as goodput counts them)."""
        if len(self.arrival) == 0:
            return 0.0
        on_time = max_on_time(*self.deadline_problem(paced=True))
        if len(self.arrival) > 1 and self.arrival.max() > self.arrival.min():
            return on_time / arrival_window_s(self.arrival, 0.0)
        # All arrived at once: goodput divides by the run's makespan, which a scheduler shortens by not serving
        # its slowest requests (admission control rejects them). Serving k on time takes at least the k-th
        # smallest floor, so no run beats the best k / (k-th smallest floor) over k <= the on-time maximum.
        ends = np.sort((self.arrival + self.e2el_floor - self.arrival.min())[self.servable])[:on_time]
        ends = ends[ends > 0]
        return float((np.arange(1, len(ends) + 1) / ends).max()) if len(ends) else 0.0


def relaxation(result) -> Relaxation:
    """`result`'s requests (runner.Result) in the relaxed model. A follow-up whose parent never finished never
    arrived (its arrival stays inf): it is left out."""
    s, r = result.scenario, result.resolved
    reqs = result.requests
    prompt, output = reqs.prompt_tokens.astype(np.int64), reqs.output_tokens.astype(np.int64)
    n = len(reqs)
    cached = cacheable_prefix_tokens(reqs, r.setup.block_size) if r.prefix_cache and n else np.zeros(n, np.int64)
    uncached = np.maximum(prompt - cached, 1)  # an engine computes at least a prompt's last token
    pools = r.deployment
    step_tokens = max_step_tokens(s, r)
    params = [result_cost_params(result, k) for k in range(len(pools))]
    rates = [pool.engines * engine_rate(p, step_tokens) for pool, p in zip(pools, params, strict=True)]
    # Disaggregated serving: prompts on the prefill pool (the first), output tokens on the decode pool (the last).
    floors = request_floors_s(params[0], params[-1], _i64(uncached), _i64(prompt - uncached))
    cls = reqs.request_class
    transport_s = s.transport_overhead_ms / 1e3
    relaxed = Relaxation(
        arrival=np.asarray(reqs.arrival_s, np.float64), uncached=uncached, output=output,
        ttft_floor=floors[0], decode_floor=floors[1],
        ttft_target=result.class_ttft_s[cls] - transport_s, tpot_target=result.class_tpot_s[cls],
        servable=~np.isin(result.reject_reason, NEVER_RUNS),
        prefill_rate=rates[0] if r.pools else sum(rates), total_rate=sum(rates), transport_s=transport_s,
        tokens_per_step=1 + spec_tokens(s))
    return relaxed.subset(np.isfinite(relaxed.arrival))


def bounds(result) -> dict:
    """The bounds on `result`'s requests (runner.Result), and how much of each the run reaches: the keys of
    metrics.bounds (metric_catalog.py describes each)."""
    relaxed = relaxation(result)
    latency = request_latencies_s(result)
    # The run's means are over the requests it served: their bounds too (see the module's docstring).
    served = relaxed.subset(latency["finished"][np.isfinite(result.requests.arrival_s)])
    e2el_lower_ms = served.e2el_mean_lower_s() * 1e3
    ttft_lower_ms = served.ttft_mean_lower_s() * 1e3
    deadline_upper = relaxed.deadline_met_upper()
    goodput_upper = relaxed.goodput_upper()
    met = int((latency["finished"]
               & (latency["ttft"] <= result.class_ttft_s[result.requests.request_class] + 1e-12)).sum())
    m = result.metrics
    return {
        "e2el_mean_lower_ms": e2el_lower_ms,
        "ttft_mean_lower_ms": ttft_lower_ms,
        "deadline_met_upper": deadline_upper,
        "goodput_upper": goodput_upper,
        "deadline_met": met,
        "e2el_mean_fraction": _ratio(e2el_lower_ms, m["e2el_ms"]["mean"]),
        "ttft_mean_fraction": _ratio(ttft_lower_ms, m["ttft_ms"]["mean"]),
        "deadline_met_fraction": _ratio(met, deadline_upper),
        "goodput_fraction": _ratio(m["goodput"], goodput_upper),
    }


def _ratio(num, den) -> float | None:
    """How much of the bound a run reaches; None where there is nothing to compare (no request served, a bound
    of zero)."""
    if num is None or den is None or den <= 0:
        return None
    return float(num) / float(den)


def result_cost_params(result, pool: int) -> np.ndarray:
    """The cost-parameter vector of a pool's engines, as the run's Config had it."""
    return engine_cost_params(result.scenario, result.resolved.deployment[pool].setup,
                              result.resolved.step_time_scale)
