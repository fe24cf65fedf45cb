"""Workloads: arrival processes, prompt/output length distributions and named presets (reading a recorded trace:
traces.py).

Everything is drawn from one seeded numpy Generator, so a scenario and seed give the same requests on every run.
The presets' length statistics come from public traces (../shared/reference/workloads_and_slos.json); their SLOs
from DistServe's evaluation settings.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .rate_schedule import RateSchedule
from .rate_schedule import arrivals as scheduled_arrivals


@dataclass(frozen=True)
class LengthDist:
    """Lognormal token counts given by median and sigma of log, clipped to [low, high]; or uniform when
    `uniform` is set (median and sigma unused)."""

    median: float = 0.0
    sigma: float = 0.0
    low: int = 1
    high: int = 1 << 20
    uniform: bool = False

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.uniform:
            x = rng.integers(self.low, self.high + 1, size=n)
        else:
            x = np.rint(rng.lognormal(math.log(self.median), self.sigma, size=n))
        return np.clip(x, self.low, self.high).astype(np.int64)

    def draw_one(self, rng: np.random.Generator) -> int:
        """int(draw(rng, 1)[0]), from the same random stream, without building arrays: session workloads draw
        turn by turn in a Python loop, which on the web holds the GIL (numpy's per-call overhead was most of it)."""
        if self.uniform:
            x = int(rng.integers(self.low, self.high + 1))
        else:
            x = round(rng.lognormal(math.log(self.median), self.sigma))  # half to even, as np.rint
        return min(max(x, self.low), self.high)


@dataclass(frozen=True)
class RequestClass:
    """A kind of request (or a tenant): its share of arrivals, lengths, and optionally its own SLOs and
    fair-share weight (the preset's SLOs apply where a class sets none)."""

    name: str
    share: float
    prompt: LengthDist
    output: LengthDist
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    weight: float = 1.0
    # A reasoning model's hidden thinking, decoded before the visible answer (`output`): a request's output
    # tokens are both, Requests.thinking_tokens the hidden part.
    thinking: LengthDist | None = None


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    classes: tuple[RequestClass, ...]
    rate: float  # default arrival rate, requests/s (agent: sessions/s)
    burstiness: float  # coefficient of variation of inter-arrival gaps (1 = Poisson)
    slo_ttft_ms: float
    slo_tpot_ms: float
    # How prompts are put together from content segments (what the prefix cache can share):
    #   "plain": [shared system prompt] + the request's own text
    #   "rag":   system prompt + user text (chat class), or system prompt + a document from a Zipf-popular pool
    #            + a question (retrieval class)
    #   "agent": multi-turn sessions; each turn resends the previous prompt and answer plus a new message
    #   "multiturn": the same for a chat user: no shared prompt, a human's reading and typing time between turns
    structure: str = "plain"
    system_prompt_tokens: int = 0


# First turns of ShareGPT conversations, the dataset of vLLM's serving benchmarks: prompts average ~160-260
# tokens (vLLM paper: 161; our count of the pip-packaged copy: mean 264), answers ~300 (338 / 312).
FIRST_TURN = RequestClass("first-turn", 1.0, LengthDist(150, 1.0, 4, 4000), LengthDist(240, 0.7, 4, 1500))
# Azure LLM inference trace 2023, conversation: prompt median 1020 / mean 1155 / p90 2735 tokens (multi-turn
# history included), output median 129 / mean 211 / p90 424.
CONVERSATION = RequestClass("conversation", 1.0, LengthDist(1020, 0.7, 16, 8000), LengthDist(129, 0.9, 2, 1024))
# RAG (seed 004): short chat streams and 3-4k-token retrieval prompts, all after a shared 200-token system
# prompt. Chat: the user's text (median ~80 tokens). Retrieval: a document of 2,800-3,800 tokens from a pool
# of RAG_DOCUMENTS with Zipf(RAG_ZIPF) popularity, then a question (median ~60 tokens).
RAG_CHAT = RequestClass("chat", 0.75, LengthDist(80, 0.8, 8, 1800), LengthDist(150, 0.6, 8, 600))
RETRIEVAL = RequestClass("retrieval", 0.25, LengthDist(60, 0.5, 8, 300), LengthDist(200, 0.5, 16, 600))
RAG_DOCUMENTS = 200
RAG_DOC_TOKENS = (2800, 3800)
RAG_ZIPF = 1.1
# Agent sessions: a 1,500-token system prompt of tool definitions shared by every session, a task message, then
# turns of (answer or tool call, tool result). Turns per session 1 + geometric (mean AGENT_TURNS), think time
# (tool execution / user) exponential with mean AGENT_THINK_S; a session ends before a prompt would pass
# AGENT_MAX_PROMPT tokens.
AGENT = RequestClass("agent", 1.0, LengthDist(150, 0.8, 16, 2000), LengthDist(150, 0.8, 8, 1000))
AGENT_TOOL_RESULT = LengthDist(400, 0.9, 16, 3000)
AGENT_TURNS = 4.0
AGENT_THINK_S = 2.0
AGENT_MAX_PROMPT = 6000
# Multi-turn chat conversations: what each follow-up reuses is its own conversation's history, not a prompt every
# request shares. First message and every answer: ShareGPT first turns (FIRST_TURN). A later message: LMSYS-Chat-1M
# averages 69.5 prompt tokens per user turn (lognormal median 50, sigma 0.8: mean 69). Turns per conversation:
# LMSYS-Chat-1M averages 2.0 (1 + geometric, mean CHAT_TURNS). A conversation ends before its prompt would pass
# CHAT_MAX_PROMPT (Llama-3's 8,192-token context; the Azure conversation lengths' clip). Between turns the user
# reads the answer and types the next message, exponential with mean CHAT_THINK_S: silent reading of non-fiction
# averages 238 words/min (Brysbaert, J. Memory and Language 2019, a meta-analysis of 190 studies), typing 52
# words/min (Dhakal et al., CHI 2018, 168k typists), at 0.75 words per token (OpenAI's rule of thumb for English):
# 5.3 and 1.16 tokens/s, so ~45 s to read a median 240-token answer and ~43 s to type a median 50-token message.
# (Per turn from its own lengths would have a 2,000-token pasted message take half an hour to "type".)
CHAT_FOLLOW_UP = LengthDist(50, 0.8, 2, 2000)
CHAT_TURNS = 2.0
CHAT_MAX_PROMPT = 8000
CHAT_THINK_S = FIRST_TURN.output.median / (238 / 60 / 0.75) + CHAT_FOLLOW_UP.median / (52 / 60 / 0.75)
# Azure code trace 2023: prompt median 1469 / mean 2048, output median 13 / mean 28.
CODE = RequestClass("code", 1.0, LengthDist(1469, 0.8, 16, 8000), LengthDist(13, 1.2, 1, 512))
# arXiv summarisation (Vidur's processed trace): prompt median 2730, output median 167.
SUMMARY = RequestClass("summarize", 0.15, LengthDist(2730, 0.3, 512, 7000), LengthDist(167, 0.8, 8, 1024))
# The `random` preset's lengths when the scenario sets no isl/osl: vLLM's RandomDataset defaults (input 1024,
# output 128, range ratio 0: every request exactly that long).
RANDOM_ISL = 1024
RANDOM_OSL = 128
RANDOM = RequestClass("random", 1.0, LengthDist(low=RANDOM_ISL, high=RANDOM_ISL, uniform=True),
                      LengthDist(low=RANDOM_OSL, high=RANDOM_OSL, uniform=True))
# Reasoning (thinking) models. ML.ENERGY leaderboard v3 (Chung et al., arXiv 2601.22076; its blog, over B200
# minimum-energy configurations): "Problem Solving" (GPQA Diamond, reasoning on) averages 6,988 output tokens,
# "Text Conversation" (LM Arena, reasoning off) 717; per model in validation/energy_mlenergy.csv, Qwen3-8B's same
# weights give 8,122 tokens on GPQA with reasoning on against 647 in conversation without, Qwen3-30B-A3B-Thinking
# 8,143, DeepSeek-R1 11,445, gpt-oss-120b 1,739. The visible answer is taken as a conversation answer (mean 717)
# and the hidden thinking as the rest (mean 6,988 - 717 = 6,271). Those sources publish means only: the spread is
# FIRST_TURN's answer sigma (0.7), an assumption until a per-request trace of thinking lengths (Bailian Thinking,
# a Git LFS object we could not fetch: sim_core/data/traces/README.md) can be read; a lognormal's median is its
# mean / exp(sigma^2 / 2). Thinking is cut at 32,768 tokens, the output length Qwen3's model card suggests for
# most queries; the question is a ShareGPT first turn.
REASONING_SIGMA = 0.7
REASONING = RequestClass(
    "reasoning", 1.0, FIRST_TURN.prompt,
    LengthDist(717 / math.exp(REASONING_SIGMA ** 2 / 2), REASONING_SIGMA, 4, 4000),
    thinking=LengthDist((6988 - 717) / math.exp(REASONING_SIGMA ** 2 / 2), REASONING_SIGMA, 1, 32768))
# Per-class SLOs in `mixed` and `multitenant` follow DistServe's evaluation settings (OSDI'24): chatbot (OPT-66B)
# TTFT 0.4 s / TPOT 0.1 s, code completion TTFT 0.125 s / TPOT 0.2 s, summarisation TTFT 15 s / TPOT 0.15 s.

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        # A chat service sees both: new conversations and follow-ups that resend the history. SLOs: DistServe's
        # chatbot setting for OPT-66B (TTFT 0.4 s, TPOT 0.1 s).
        Preset("chat", "chat turns: half ShareGPT first turns, half follow-ups carrying their history (Azure 2023)",
               (RequestClass("first-turn", 0.5, FIRST_TURN.prompt, FIRST_TURN.output),
                RequestClass("follow-up", 0.5, CONVERSATION.prompt, CONVERSATION.output)), 4.0, 1.0, 400, 100),
        Preset("conversation", "multi-turn conversations with Azure-2023 conversation-trace lengths",
               (CONVERSATION,), 2.0, 1.0, 500, 100),
        # seed 004's experiment (the dashboard's default): chunked prefill against FCFS's inter-token stalls.
        Preset("rag", "short chat streams mixed with 3-4k-token retrieval prompts over a shared document pool",
               (RAG_CHAT, RETRIEVAL), 6.0, 1.0, 1000, 100, structure="rag", system_prompt_tokens=200),
        Preset("agent", "multi-turn agent sessions: shared tool prompt, each turn resends the history (rate: "
               "sessions/s)", (AGENT,), 1.0, 1.0, 1000, 100, structure="agent", system_prompt_tokens=1500),
        Preset("multiturn", "multi-turn chat conversations: each turn resends the conversation so far, after the "
               "user read the answer and typed (rate: conversations/s)", (FIRST_TURN,), 1.0, 1.0, 400, 100,
               structure="multiturn"),
        Preset("code", "code completion with Azure-2023 code-trace lengths, bursty arrivals",
               (CODE,), 4.0, 2.0, 125, 200),
        Preset("mixed", "chat, code completion and summarisation sharing one server",
               (RequestClass("conversation", 0.6, CONVERSATION.prompt, CONVERSATION.output, 400, 100),
                RequestClass("code", 0.25, CODE.prompt, CODE.output, 125, 200),
                RequestClass("summarize", 0.15, SUMMARY.prompt, SUMMARY.output, 15000, 150)), 4.0, 1.0, 400, 100),
        # Two tenants on one server, one sending four times the other's traffic: with fair sharing the light
        # tenant's latency stays bounded while the heavy one floods the queue (VTC, Sheng et al., OSDI'24).
        Preset("multitenant", "a heavy and a light tenant sharing a server (same chat lengths, 4:1 traffic)",
               (RequestClass("heavy", 0.8, FIRST_TURN.prompt, FIRST_TURN.output),
                RequestClass("light", 0.2, FIRST_TURN.prompt, FIRST_TURN.output)), 20.0, 1.0, 400, 100),
        # Benchmark-style fixed lengths (vLLM's `bench serve --dataset-name random`, AIPerf, InferenceX): prompt
        # and output lengths around the scenario's isl/osl (random_preset); SLOs: rag's TTFT (its prompts are as
        # long) and every preset's TPOT.
        Preset("random", "fixed-length synthetic requests: prompt ~isl, output ~osl tokens, uniform within "
               "length_range (vLLM's random dataset); for load frontiers", (RANDOM,), 4.0, 1.0, 1000, 100),
        # ~7,000 decoded tokens a request: 0.5 req/s is ~3,500 decode tokens/s. SLOs: chat's TTFT (the first,
        # hidden, token) and every preset's TPOT.
        Preset("reasoning", "a thinking model's answers: ~6,300 hidden thinking tokens before a ~700-token visible "
               "answer (ML.ENERGY v3 problem solving vs conversation)", (REASONING,), 0.5, 1.0, 400, 100),
    ]
}


LENGTH_RANGE_MODES = ("vllm", "inferencex")  # how length_range r spreads a length: length_bounds


def length_bounds(length: int, ratio: float | None, mode: str = "vllm") -> tuple[int, int]:
    """The integer range a length is drawn from, uniformly, at least 1; L itself without a ratio (None). "vllm":
    [floor(L(1-r)), ceil(L(1+r))] (vllm/benchmarks/datasets.py RandomDataset.get_sampling_params; vLLM also
    subtracts the tokenizer's special tokens, which a token-count simulation has none of). "inferencex": [int(L r),
    L], InferenceX's client reading the same --random-range-ratio as a lower bound (SemiAnalysisAI/InferenceX
    utils/bench_serving/benchmark_serving.py sample_random_requests: np.random.randint(int(L * r), L + 1))."""
    if ratio is None:
        return max(1, length), max(1, length)
    if mode == "inferencex":
        return max(1, math.floor(length * ratio)), max(1, length)
    return max(1, math.floor(length * (1 - ratio))), max(1, math.ceil(length * (1 + ratio)))


def random_preset(isl: int | None, osl: int | None, ratio: float | None, mode: str = "vllm") -> Preset:
    """The `random` preset with the scenario's prompt length `isl`, output length `osl`, `ratio` and `mode`
    (vLLM's --random-input-len, --random-output-len, --random-range-ratio; None: their defaults 1024, 128, 0)."""
    p_lo, p_hi = length_bounds(RANDOM_ISL if isl is None else isl, ratio, mode)
    o_lo, o_hi = length_bounds(RANDOM_OSL if osl is None else osl, ratio, mode)
    cls = RequestClass(RANDOM.name, 1.0, LengthDist(low=p_lo, high=p_hi, uniform=True),
                       LengthDist(low=o_lo, high=o_hi, uniform=True))
    return dataclasses.replace(PRESETS["random"], classes=(cls,))


def closed_loop(reqs: Requests, users: int, think_s: float = 0.0, semaphore: bool = False) -> Requests:
    """The requests sent by `users` concurrent clients, each sending its next request `think_s` after its last one
    ended (AIPerf's and InferenceX's concurrency: N users, each looping). The requests keep their order: they are
    dealt round-robin, request k to user k mod N (a session of follow-up turns counts as one request and stays
    whole, its own think times kept), and each user's first request arrives at 0. Content is untouched: a user's
    consecutive requests share no prefix beyond what any two requests share (they are independent requests, not
    a conversation).

    `semaphore`: vLLM's `bench serve --max-concurrency` instead: the first N go out at 0 and each later one
    (parent QUEUED) when any request ends (a session's last turn), in order, whichever slot freed. Both keep
    exactly N in flight; they differ only in which request follows which, which the engine decides as it runs."""
    parent = reqs.parents().copy()
    think = reqs.think_times().copy()
    n = len(reqs)
    child = np.full(n, -1, np.int64)
    has_parent = parent >= 0
    child[parent[has_parent]] = np.flatnonzero(has_parent)
    heads = np.flatnonzero(~has_parent)
    heads = heads[np.argsort(reqs.arrival_s[heads], kind="stable")]
    tails = heads.copy()
    for k in range(len(tails)):  # each session's last turn (a plain request is its own)
        while child[tails[k]] >= 0:
            tails[k] = child[tails[k]]
    nxt = heads[users:]
    loop_link = np.zeros(n, bool)
    if semaphore:
        nxt = np.sort(nxt)  # the queue goes out in index order: keep it the list's order
        parent[nxt] = QUEUED
    else:
        parent[nxt] = tails[:len(nxt)]  # user k's j-th request (or session) follows its (j-1)-th
        loop_link[nxt] = True
    think[nxt] = think_s
    arrival = np.where(parent == -1, reqs.arrival_s, np.inf)
    arrival[heads[:users]] = 0.0
    return dataclasses.replace(reqs, arrival_s=arrival, parent=parent, think_s=think, loop_link=loop_link)


# Requests.parent of a closed-loop request waiting for any slot to free (closed_loop's semaphore).
QUEUED = -2

# Content segment ids: shared ones are small numbers, every request's own text gets a unique id above UNIQUE.
SYSTEM_PROMPT_SEGMENT = 1
DOCUMENT_SEGMENT = 1_000  # + document index
TRACE_BLOCK_SEGMENT = 1 << 32  # + a trace's block hash id
UNIQUE = 1 << 40


@dataclass
class Requests:
    """The workload as arrays. Open-loop requests (parent -1) are in arrival order; a follow-up turn (parent >= 0)
    arrives think_s after its parent ends, so its arrival_s is unknown (inf) until the engine has run.

    Content, for the prefix cache: request i's tokens (prompt then output) are the segments
    seg_off[i]..seg_off[i+1] of (seg_ids, seg_lens); equal segment ids mean equal tokens. None: all unique."""

    arrival_s: np.ndarray  # float64
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    request_class: np.ndarray  # int64 index into class_names
    class_names: tuple[str, ...]
    parent: np.ndarray | None = None  # int64, -1 for open-loop requests
    think_s: np.ndarray | None = None  # float64
    seg_ids: np.ndarray | None = None
    seg_lens: np.ndarray | None = None
    seg_off: np.ndarray | None = None
    # bool: the parent link is a closed-loop user's next request (closed_loop), not a conversation's next turn
    loop_link: np.ndarray | None = None
    # int64: how many of each request's output tokens are hidden thinking (decoded, not shown); None: none are
    thinking_tokens: np.ndarray | None = None

    def conversation_parents(self) -> np.ndarray:
        """parents() without the closed-loop links: each request's previous turn in its own conversation."""
        parents = self.parents()
        return parents if self.loop_link is None else np.where(self.loop_link, -1, parents)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def parents(self) -> np.ndarray:
        return self.parent if self.parent is not None else np.full(len(self), -1, np.int64)

    def think_times(self) -> np.ndarray:
        return self.think_s if self.think_s is not None else np.zeros(len(self))

    def hidden_tokens(self) -> np.ndarray:
        """Each request's hidden thinking tokens (zeros when none): its visible output is output_tokens less them."""
        return self.thinking_tokens if self.thinking_tokens is not None else np.zeros(len(self), np.int64)

    def content(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.seg_ids is not None:
            return self.seg_ids, self.seg_lens, self.seg_off
        # Every request's prompt and output are its own: one unique segment each.
        n = len(self)
        ids = np.empty(2 * n, np.int64)
        ids[0::2] = UNIQUE + 2 * np.arange(n)
        ids[1::2] = UNIQUE + 2 * np.arange(n) + 1
        lens = np.empty(2 * n, np.int64)
        lens[0::2] = self.prompt_tokens
        lens[1::2] = self.output_tokens
        return ids, lens, np.arange(0, 2 * n + 1, 2, dtype=np.int64)

    def take(self, count: int) -> Requests:
        """The first `count` requests (a follow-up whose parent is cut keeps nothing dangling: it is cut too)."""
        keep = np.arange(len(self)) < count
        if self.parent is not None:
            keep &= self.parent < count
        idx = np.flatnonzero(keep)
        return self.subset(idx)

    def subset(self, idx: np.ndarray) -> Requests:
        remap = np.full(len(self), -1, np.int64)
        remap[idx] = np.arange(len(idx))
        parent = None if self.parent is None else np.where(self.parent[idx] >= 0, remap[self.parent[idx]],
                                                           np.minimum(self.parent[idx], -1))  # keeps QUEUED
        seg = (None, None, None)
        if self.seg_ids is not None:
            starts, ends = self.seg_off[idx], self.seg_off[idx + 1]
            pieces = [np.arange(a, b) for a, b in zip(starts, ends, strict=True)]
            sel = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
            seg = (self.seg_ids[sel], self.seg_lens[sel], np.concatenate([[0], np.cumsum(ends - starts)]))
        return Requests(self.arrival_s[idx], self.prompt_tokens[idx], self.output_tokens[idx],
                        self.request_class[idx], self.class_names, parent,
                        None if self.think_s is None else self.think_s[idx], *seg,
                        None if self.loop_link is None else self.loop_link[idx] & (parent >= 0),
                        None if self.thinking_tokens is None else self.thinking_tokens[idx])


def arrival_times(rng: np.random.Generator, rate: float | RateSchedule, burstiness: float, n: int | None,
                  duration_s: float) -> np.ndarray:
    """Arrival instants of a renewal process with mean rate `rate` and gap CV `burstiness` (gamma gaps; CV 1 is
    Poisson). With `n`, exactly n arrivals; otherwise every arrival in [0, duration_s). A RateSchedule as the rate:
    the same process, time-rescaled to follow it (sim_core.rate_schedule)."""
    if isinstance(rate, RateSchedule) and not (rate.shape == "piecewise" and len(rate.pieces) == 1):
        return scheduled_arrivals(rate, rng, burstiness, n, duration_s)
    if isinstance(rate, RateSchedule):  # one constant rate: its own arrivals exactly (time-rescaling rounds them)
        rate = rate.pieces[0][1]
    shape = 1.0 / (burstiness * burstiness)
    scale = 1.0 / (rate * shape)
    if n is not None:
        gaps = rng.gamma(shape, scale, size=n)
        return np.cumsum(gaps) - gaps[0]  # first request at t = 0
    times = []
    t = 0.0
    chunk = max(16, int(rate * duration_s * 1.2) + 16)
    while True:
        gaps = rng.gamma(shape, scale, size=chunk)
        arr = t + np.cumsum(gaps)
        inside = arr[arr < duration_s]
        times.append(inside)
        if len(inside) < chunk:
            break
        t = arr[-1]
    return np.concatenate(times)


def _segments(parts: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Interleave per-request segment columns [(ids, lens), ...] (each of length n; len 0 = absent) into flat
    (seg_ids, seg_lens, seg_off)."""
    ids = np.stack([p[0] for p in parts], axis=1)
    lens = np.stack([p[1] for p in parts], axis=1)
    present = lens > 0
    counts = present.sum(axis=1)
    return ids[present], lens[present], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def synthesize(preset: Preset, rate: float | RateSchedule, burstiness: float, n: int | None, duration_s: float,
               seed: int, system_prompt_tokens: int | None = None) -> Requests:
    """The preset's requests arriving at `rate` (requests/s, or a RateSchedule: a rate that changes over time;
    agent and multi-turn presets: sessions/s)."""
    rng = np.random.default_rng(seed)
    sys_len = preset.system_prompt_tokens if system_prompt_tokens is None else system_prompt_tokens
    if preset.structure in ("agent", "multiturn"):
        return _agent_sessions(preset, rng, rate, burstiness, n, duration_s, sys_len)
    arrivals = arrival_times(rng, rate, burstiness, n, duration_s)
    count = len(arrivals)
    shares = np.array([c.share for c in preset.classes])
    cls = rng.choice(len(preset.classes), size=count, p=shares / shares.sum())
    own = np.zeros(count, np.int64)  # the request's own prompt text
    output = np.zeros(count, np.int64)
    thinking = np.zeros(count, np.int64) if any(c.thinking is not None for c in preset.classes) else None
    for k, c in enumerate(preset.classes):
        mask = cls == k
        m = int(mask.sum())
        own[mask] = c.prompt.draw(rng, m)
        output[mask] = c.output.draw(rng, m)
        if c.thinking is not None:  # drawn after the rest: presets without thinking draw what they always drew
            thinking[mask] = c.thinking.draw(rng, m)
            output[mask] += thinking[mask]
    uid = UNIQUE + 2 * np.arange(count, dtype=np.int64)
    system = (np.full(count, SYSTEM_PROMPT_SEGMENT, np.int64), np.full(count, sys_len, np.int64))
    doc_ids = np.zeros(count, np.int64)
    doc_lens = np.zeros(count, np.int64)
    if preset.structure == "rag":
        lo, hi = RAG_DOC_TOKENS
        pool_lens = np.random.default_rng([seed, 1]).integers(lo, hi + 1, size=RAG_DOCUMENTS)
        weights = 1.0 / np.arange(1, RAG_DOCUMENTS + 1) ** RAG_ZIPF
        retrieval = cls == [c.name for c in preset.classes].index("retrieval")
        picked = rng.choice(RAG_DOCUMENTS, size=int(retrieval.sum()), p=weights / weights.sum())
        doc_ids[retrieval] = DOCUMENT_SEGMENT + picked
        doc_lens[retrieval] = pool_lens[picked]
    prompt = sys_len + doc_lens + own
    seg = _segments([system, (doc_ids, doc_lens), (uid, own), (uid + 1, output)], count)
    return Requests(arrivals.astype(np.float64), prompt, output, cls.astype(np.int64),
                    tuple(c.name for c in preset.classes), None, None, *seg, thinking_tokens=thinking)


def _agent_sessions(preset: Preset, rng: np.random.Generator, rate: float | RateSchedule, burstiness: float,
                    n: int | None, duration_s: float, sys_len: int) -> Requests:
    """Closed-loop sessions: turn k+1 arrives a think time after turn k ends and carries all of it as prefix. Agent:
    tool results between turns, tools' think times; multiturn: a user's messages, reading and typing time."""
    cls = preset.classes[0]
    chat = preset.structure == "multiturn"
    later, mean_turns, max_prompt, think_s = (CHAT_FOLLOW_UP, CHAT_TURNS, CHAT_MAX_PROMPT, CHAT_THINK_S) if chat \
        else (AGENT_TOOL_RESULT, AGENT_TURNS, AGENT_MAX_PROMPT, AGENT_THINK_S)
    starts = arrival_times(rng, rate, burstiness, n, duration_s)  # with n, at most n sessions are needed
    arrival, prompt, output, parent, think = [], [], [], [], []
    seg_ids: list[int] = []
    seg_lens: list[int] = []
    seg_off = [0]
    uid = UNIQUE
    for start in starts:
        content = [(SYSTEM_PROMPT_SEGMENT, sys_len)] if sys_len else []
        content.append((uid, cls.prompt.draw_one(rng)))
        uid += 1
        turns = int(rng.geometric(1.0 / mean_turns))  # mean mean_turns, at least 1
        prev = -1
        for _ in range(turns):
            p_len = sum(length for _, length in content)
            o_len = cls.output.draw_one(rng)
            if prev >= 0 and p_len + o_len > max_prompt:
                break
            idx = len(arrival)
            arrival.append(float(start) if prev < 0 else np.inf)
            prompt.append(p_len)
            output.append(o_len)
            parent.append(prev)
            think.append(0.0 if prev < 0 else float(rng.exponential(think_s)))
            answer = (uid, o_len)
            uid += 1
            for sid, length in [*content, answer]:
                seg_ids.append(sid)
                seg_lens.append(length)
            seg_off.append(len(seg_ids))
            tool = (uid, later.draw_one(rng))
            uid += 1
            content = [*content, answer, tool]
            prev = idx
            if n is not None and len(arrival) >= n:
                break
        if n is not None and len(arrival) >= n:
            break
    count = len(arrival)
    return Requests(np.array(arrival, np.float64), np.array(prompt, np.int64), np.array(output, np.int64),
                    np.zeros(count, np.int64), (cls.name,), np.array(parent, np.int64), np.array(think),
                    np.array(seg_ids, np.int64), np.array(seg_lens, np.int64), np.array(seg_off, np.int64))
