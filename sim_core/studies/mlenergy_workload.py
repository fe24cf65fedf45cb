"""How ML.ENERGY's benchmark drove each measured run (validation/energy_mlenergy.csv), so that energy_checks.py
simulates the run it measured rather than a stand-in. Read from github.com/ml-energy/benchmark at commit c1d6557
("`mlenergy.benchmark` release"), the harness of Benchmark v3:

- the client (mlenergy/benchmark/llm/benchmark.py) sends every request at once (request_rate inf, no concurrency
  limit), so vLLM holds max_num_seqs of them and queues the rest; it sends `num_requests` x `num_request_repeats`
  requests (configs/vllm/<task>/benchmark.yaml: 1,024 for lm-arena-chat, 198 (all of GPQA Diamond) for gpqa;
  the repeats per batch size in each model's <gpu>/sweeps.yaml: REPEATS below);
- its steady state (RequestTracker) starts when max_num_seqs requests have received their first token and ends
  when num_requests - max_num_seqs - 1 have finished;
- the outputs are the model's own (temperature 0.8, no ignore_eos), cut at --max-output-tokens (4,096 for chat,
  32,768 for gpqa); the leaderboard publishes only their mean (avg_output_len);
- an lm-arena-chat request is one turn of an LMArena conversation (lmarena-ai/arena-human-preference-100k,
  datasets.py LMArenaHumanPreferenceDataset): every turn of a sampled conversation is a request whose prompt is
  the whole history before it (earlier user messages and the dataset's answers) plus that turn's message;
- the engine (configs/vllm/<task>/<model>/<gpu>/monolithic.config.yaml, every model used here):
  async-scheduling true, max-num-batched-tokens 8192, max-model-len 20480 for chat (40960 for Qwen3-8B and 51200
  for the other gpqa models). vLLM's prefix cache was on (V1's default), but it is left off here: the turns of a
  conversation are consecutive requests sent together, admitted and prefilled in the same steps, before any of
  their shared blocks is cached, and the one row whose batch the KV cache bounds agrees with no sharing
  (Llama-3.1-70B on 4 x H100 at max_num_seqs 1024 held 898 requests on average; simulated without sharing 932,
  with it 1,022).

What the benchmark does not publish is drawn from cited statistics of the same source: the conversations' user
messages and answers from LMSYS-Chat-1M, the Chatbot Arena's own logs (CHAT_FOLLOW_UP, ARENA_ANSWER; turns per
conversation CHAT_TURNS, sim_core/workload.py), a GPQA prompt of GPQA_PROMPT_TOKENS, and each output a lognormal
around the row's published mean with the spread the simulator takes for answers (FIRST_TURN's 0.7) and for
thinking (REASONING_SIGMA, also 0.7).
"""

from __future__ import annotations

import math

import numpy as np

from ..workload import CHAT_FOLLOW_UP, CHAT_TURNS, FIRST_TURN, REASONING_SIGMA, LengthDist

BENCHMARK_REQUESTS = {"lm-arena-chat": 1024, "gpqa": 198}
MAX_OUTPUT_TOKENS = {"lm-arena-chat": 4096, "gpqa": 32768}
OUTPUT_SIGMA = {"lm-arena-chat": FIRST_TURN.output.sigma, "gpqa": REASONING_SIGMA}
MAX_MODEL_LEN = {"lm-arena-chat": 20480, "gpqa": 51200}
MAX_MODEL_LEN_OF_MODEL = {("gpqa", "Qwen/Qwen3-8B"): 40960}
ENGINE_TOKEN_BUDGET = 8192  # max-num-batched-tokens
ENGINE_ASYNC_SCHEDULING = True  # async-scheduling
# The dataset's answers in a conversation's history: LMSYS-Chat-1M (Zheng et al., ICLR 2024, arXiv 2309.11998,
# Table 1; the Chatbot Arena's own conversations) averages 214.5 tokens per response, drawn lognormal with the
# simulator's answer spread (FIRST_TURN's sigma 0.7): median 214.5 / exp(0.7^2 / 2). Its user messages (69.5 tokens
# on average, the same table) are CHAT_FOLLOW_UP's, the first message of a conversation included.
ARENA_ANSWER = LengthDist(214.5 / math.exp(0.7**2 / 2), 0.7, 1, 4096)
# GPQA Diamond question, its four shuffled choices and the instruction (datasets.py GPQADataset): a few hundred
# tokens, small beside thousands of thinking tokens.
GPQA_PROMPT_TOKENS = 300
# num_request_repeats by (task, model, GPU), max_num_seqs -> repeats (1 where not listed): <gpu>/sweeps.yaml.
REPEATS = {
    ("lm-arena-chat", "meta-llama/Llama-3.1-8B-Instruct", "H100"): {256: 2, 384: 2, 512: 2, 768: 3, 1024: 3},
    ("lm-arena-chat", "meta-llama/Llama-3.1-8B-Instruct", "B200"):
        {128: 2, 256: 2, 512: 3, 1024: 4, 2048: 8, 4096: 16},
    ("lm-arena-chat", "meta-llama/Llama-3.1-70B-Instruct", "H100"): {512: 2, 768: 2, 1024: 2, 1536: 3, 2048: 3},
    ("lm-arena-chat", "meta-llama/Llama-3.1-70B-Instruct", "B200"):
        {512: 2, 1024: 2, 1536: 3, 2048: 3, 3072: 5},
    ("lm-arena-chat", "meta-llama/Llama-3.1-405B-Instruct-FP8", "B200"): {768: 2, 1024: 2},
    ("lm-arena-chat", "Qwen/Qwen3-8B", "B200"): {256: 2, 512: 2, 1024: 4, 1536: 4, 2048: 6},
    ("lm-arena-chat", "Qwen/Qwen3-30B-A3B-Instruct-2507", "H100"): {256: 2, 512: 2, 768: 2, 1024: 2, 1536: 3},
    ("lm-arena-chat", "Qwen/Qwen3-30B-A3B-Instruct-2507", "B200"):
        {256: 2, 512: 2, 768: 2, 1024: 2, 1536: 3, 2048: 4},
    ("gpqa", "Qwen/Qwen3-8B", "B200"): {256: 2},
    ("gpqa", "Qwen/Qwen3-30B-A3B-Thinking-2507", "H100"): {192: 2, 256: 2},
    ("gpqa", "Qwen/Qwen3-30B-A3B-Thinking-2507", "B200"): {256: 2, 512: 3, 1024: 6},
    ("gpqa", "openai/gpt-oss-120b", "H100"):
        {192: 2, 256: 2, 384: 3, 512: 4, 768: 5, 1024: 6, 1536: 9, 2048: 12},
    ("gpqa", "openai/gpt-oss-120b", "B200"):
        {128: 2, 256: 3, 512: 4, 1024: 7, 2048: 12, 3072: 18, 4096: 24},
}


def num_requests(row: dict) -> int:
    """Requests the benchmark sent in this row's run: the task's request count x the row's repeats."""
    repeats = REPEATS.get((row["task"], row["model"], row["gpu"]), {}).get(int(row["max_num_seqs"]), 1)
    return BENCHMARK_REQUESTS[row["task"]] * repeats


def max_model_len(row: dict, model_context: int) -> int:
    """The row's --max-model-len, within the context of the catalogue model that stands for it (Llama-3.1-8B is
    simulated as Llama-3-8B, whose context is 8,192 tokens: longer prompts are cut to fit, request_trace)."""
    return min(MAX_MODEL_LEN_OF_MODEL.get((row["task"], row["model"]), MAX_MODEL_LEN[row["task"]]), model_context)


def output_lengths(row: dict, rng: np.random.Generator, n: int) -> np.ndarray:
    """Each request's output: lognormal with the row's mean output and the task's spread, cut at the benchmark's
    max output tokens."""
    sigma = OUTPUT_SIGMA[row["task"]]
    median = float(row["avg_output_len"]) / math.exp(sigma**2 / 2)
    drawn = np.rint(rng.lognormal(math.log(median), sigma, size=n))
    return np.clip(drawn, 1, MAX_OUTPUT_TOKENS[row["task"]]).astype(np.int64)


def chat_prompt_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Prompt lengths of `n` lm-arena-chat requests sampled as the benchmark does: conversation after
    conversation, one request per turn, turn k's prompt the history u1 a1 ... u(k-1) a(k-1) then uk."""
    prompts: list[int] = []
    while len(prompts) < n:
        turns = int(rng.geometric(1.0 / CHAT_TURNS))  # at least 1, mean CHAT_TURNS
        history = 0
        for turn in range(turns):
            history += (ARENA_ANSWER.draw_one(rng) if turn else 0) + CHAT_FOLLOW_UP.draw_one(rng)
            prompts.append(history)
    return np.asarray(prompts[:n], dtype=np.int64)


def request_trace(row: dict, context: int, seed: int = 0) -> str:
    """The row's requests as a trace (arrival_s,prompt_tokens,output_tokens): all sent at t=0, each prompt and
    output within `context` tokens (the engine's max_model_len)."""
    rng = np.random.default_rng(seed)
    n = num_requests(row)
    if row["task"] == "lm-arena-chat":
        prompts = chat_prompt_lengths(rng, n)
    else:
        prompts = np.full(n, GPQA_PROMPT_TOKENS, dtype=np.int64)
    outputs = np.minimum(output_lengths(row, rng, n), context // 2)
    prompts = np.minimum(prompts, context - outputs)
    lines = [f"0,{p},{o}" for p, o in zip(prompts, outputs, strict=True)]
    return "arrival_s,prompt_tokens,output_tokens\n" + "\n".join(lines) + "\n"


def steady_window(first_token_s: np.ndarray, finish_s: np.ndarray, seats: int) -> tuple[float, float]:
    """The benchmark's steady state (RequestTracker): from the time the `seats`-th request received its first
    token to the time the (n - seats - 1)-th request finished."""
    n = len(finish_s)
    firsts = np.sort(first_token_s[np.isfinite(first_token_s)])
    ends = np.sort(finish_s[np.isfinite(finish_s)])
    start = float(firsts[min(seats, len(firsts)) - 1])
    end = float(ends[max(min(n - seats - 1, len(ends)), 1) - 1])
    return start, end
