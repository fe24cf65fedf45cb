"""Record vLLM v1's own scheduling decisions, step by step, as fixtures sched-sim must reproduce.

Runs with vLLM installed in a separate virtual environment (sched-sim never imports vLLM); see README.md here:

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 /work/vllm-venv/bin/python validation/vllm_v1/record.py

vLLM's scheduler is driven on CPU the way its unit tests drive it (tests/v1/core/test_scheduler.py): a Scheduler
over a KV cache of `num_blocks` blocks, every request added at t=0, then schedule() and update_from_output() with
a fake model output per step. The fake model samples, for each request whose scheduled tokens reach the end of its
known tokens, the next token of the request's own output text, so its generated text (and hence the prefix-cache
content of a follow-up turn that repeats it) is known in advance. A follow-up turn of a session is added right
after its parent finishes (think time 0), before the next schedule().

Each case's requests are lists of content segments [segment id, tokens]: equal ids mean equal tokens, as sched-sim's
workload content (sim_core/workload.Requests) describes them, so both sides see the same prompts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VOCAB = 30_000


def segment_tokens(seg_id: int, length: int) -> list[int]:
    """The tokens of content segment `seg_id` (distinct segments never share a block's tokens)."""
    return [10 + (seg_id * 7919 + i * 104_729 + (seg_id * i) % 97) % VOCAB for i in range(length)]


def tokens_of(segments) -> list[int]:
    out: list[int] = []
    for seg_id, length in segments:
        out += segment_tokens(seg_id, length)
    return out


# ----- the cases -----
def _lengths(seed: int, n: int, lo: int, hi: int) -> list[int]:
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(lo + x % (hi - lo + 1))
    return out


def _plain_requests(seed: int, n: int, prompt: tuple[int, int], output: tuple[int, int], system: int = 0):
    """n independent requests, each with its own prompt and output text (after a shared system prompt)."""
    reqs = []
    for i, (p, o) in enumerate(zip(_lengths(seed, n, *prompt), _lengths(seed + 1, n, *output), strict=True)):
        segs = ([[1, system]] if system else []) + [[1000 + 2 * i, p]]
        reqs.append({"id": i, "prompt": segs, "output": [[1001 + 2 * i, o]], "parent": -1})
    return reqs


def _sessions(seed: int, n_sessions: int, turns: int, user: tuple[int, int], output: tuple[int, int],
              system: int):
    """Multi-turn sessions: turn k's prompt is turn k-1's prompt and answer, then new user text."""
    reqs = []
    users = _lengths(seed, n_sessions * turns, *user)
    outs = _lengths(seed + 1, n_sessions * turns, *output)
    for s in range(n_sessions):
        history = [[1, system]]
        parent = -1
        for t in range(turns):
            i = len(reqs)
            k = s * turns + t
            prompt = history + [[5000 + 2 * k, users[k]]]
            answer = [[5001 + 2 * k, outs[k]]]
            reqs.append({"id": i, "prompt": prompt, "output": answer, "parent": parent})
            history = prompt + answer
            parent = i
    # open-loop requests first (every session's first turn), then the follow-ups, as sched-sim orders them
    return _renumber(reqs)


def _documents(seed: int, n: int, docs: list[int], question: tuple[int, int], output: tuple[int, int]):
    """Questions over a few shared documents, every other one the document alone: a prompt that is exactly a
    cached document (a whole number of blocks) still computes its last block, so the pool holds two copies of it."""
    qs, outs = _lengths(seed, n, *question), _lengths(seed + 1, n, *output)
    reqs = []
    for i in range(n):
        d = i % len(docs)
        prompt = [[100 + d, docs[d]]] + ([[3000 + 2 * i, qs[i]]] if i % 2 else [])
        reqs.append({"id": i, "prompt": prompt, "output": [[3001 + 2 * i, outs[i]]], "parent": -1})
    return reqs


def _renumber(reqs):
    order = [r for r in reqs if r["parent"] < 0] + [r for r in reqs if r["parent"] >= 0]
    new_id = {r["id"]: k for k, r in enumerate(order)}
    return [{**r, "id": new_id[r["id"]], "parent": new_id[r["parent"]] if r["parent"] >= 0 else -1} for r in order]


CASES = {
    # name: (config overrides, requests)
    "nochunk_roomy": ({"enable_chunked_prefill": False, "max_num_batched_tokens": 2048, "max_model_len": 2048, "num_blocks": 1000,
                       "enable_prefix_caching": False},
                      _plain_requests(11, 10, (40, 600), (5, 60))),
    "nochunk_tight": ({"enable_chunked_prefill": False, "max_num_batched_tokens": 2048, "max_model_len": 2048, "num_blocks": 90,
                       "enable_prefix_caching": False},
                      _plain_requests(12, 10, (40, 500), (20, 120))),
    "chunked_roomy": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 1000,
                       "enable_prefix_caching": False},
                      _plain_requests(13, 12, (20, 900), (5, 80))),
    "chunked_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 100,
                       "enable_prefix_caching": False},
                      _plain_requests(14, 12, (40, 500), (30, 150))),
    "chunked_tight_prefix_cache": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 100,
                                    "enable_prefix_caching": True},
                                   _plain_requests(14, 12, (40, 500), (30, 150))),
    "system_prompt_roomy": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 512, "num_blocks": 1000,
                             "enable_prefix_caching": True},
                            _plain_requests(15, 12, (10, 200), (5, 60), system=300)),
    "system_prompt_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 120,
                             "enable_prefix_caching": True},
                            _plain_requests(16, 14, (10, 200), (20, 120), system=200)),
    "documents_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 80,
                         "enable_prefix_caching": True},
                        _documents(22, 18, [160, 192, 224], (10, 80), (20, 100))),
    "async_chunked_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 100,
                             "enable_prefix_caching": False, "async_scheduling": True},
                            _plain_requests(14, 12, (40, 500), (30, 150))),
    "async_system_prompt_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 120,
                                   "enable_prefix_caching": True, "async_scheduling": True},
                                  _plain_requests(16, 14, (10, 200), (20, 120), system=200)),
    "multiturn_roomy": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 512, "num_blocks": 1000,
                         "enable_prefix_caching": True},
                        _sessions(17, 4, 3, (10, 120), (10, 60), system=100)),
    "multiturn_tight": ({"enable_chunked_prefill": True, "max_num_batched_tokens": 256, "num_blocks": 110,
                         "enable_prefix_caching": True},
                        _sessions(18, 5, 3, (10, 150), (20, 80), system=120)),
}
BASE = {"block_size": 16, "max_num_seqs": 128, "max_model_len": 4096, "async_scheduling": False}


# ----- driving vLLM -----
def make_scheduler(cfg: dict):
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    model_dir = Path(tempfile.mkdtemp())  # a tiny model's config, so nothing is fetched from a hub
    (model_dir / "config.json").write_text(encoding="utf-8", data=json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1, "vocab_size": VOCAB + 100,
        "max_position_embeddings": cfg["max_model_len"], "torch_dtype": "float16"}))
    sched_cfg = SchedulerConfig(max_num_seqs=cfg["max_num_seqs"], max_num_batched_tokens=cfg["max_num_batched_tokens"],
                                max_model_len=cfg["max_model_len"], is_encoder_decoder=False,
                                enable_chunked_prefill=cfg["enable_chunked_prefill"],
                                async_scheduling=cfg["async_scheduling"])
    model_cfg = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, dtype="float16",
                            max_model_len=cfg["max_model_len"])
    cache_cfg = CacheConfig(block_size=cfg["block_size"], enable_prefix_caching=cfg["enable_prefix_caching"])
    vllm_cfg = VllmConfig(scheduler_config=sched_cfg, model_config=model_cfg, cache_config=cache_cfg)
    # vLLM's num_blocks includes its null block (block 0, never handed out): one more than sched-sim's kv_blocks.
    kv_cfg = KVCacheConfig(num_blocks=cfg["num_blocks"] + 1, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=cfg["block_size"], num_kv_heads=1, head_size=1,
                                                      dtype=torch.float32))])
    cache_cfg.num_gpu_blocks = cfg["num_blocks"] + 1
    cls = AsyncScheduler if cfg["async_scheduling"] else Scheduler
    sched = cls(vllm_config=vllm_cfg, kv_cache_config=kv_cfg, log_stats=True,
                structured_output_manager=StructuredOutputManager(vllm_cfg), block_size=cfg["block_size"])
    return sched, vllm_cfg


def make_request(r: dict, cfg: dict):
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    hasher = None
    if cfg["enable_prefix_caching"]:
        init_none_hash(sha256)
        hasher = get_request_block_hasher(cfg["block_size"], sha256)
    out_len = sum(n for _, n in r["output"])
    params = SamplingParams(max_tokens=out_len, ignore_eos=True)
    return Request(request_id=str(r["id"]), prompt_token_ids=tokens_of(r["prompt"]), sampling_params=params,
                   pooling_params=None, arrival_time=0.0, block_hasher=hasher)


def snapshot(sched) -> dict:
    """Each request's state before a schedule(): status, computed tokens, known tokens, tokens sampled, and tokens
    still being sampled by steps in flight (asynchronous scheduling's placeholders)."""
    return {rid: (q.status.name, q.num_computed_tokens, q.num_tokens, len(q.output_token_ids),
                  q.num_output_placeholders) for rid, q in sched.requests.items()}


def fake_output(out, sched, before, answers):
    """What the model returns for a step: one token for each request whose scheduled tokens reach the end of its
    tokens (the next token of its own answer), none for a prompt chunk that stops short."""
    from vllm.v1.outputs import ModelRunnerOutput

    ids = list(out.num_scheduled_tokens)
    sampled = []
    for rid in ids:
        _, _, num_tokens, n_out, in_flight = before[rid]
        reached = sched.requests[rid].num_computed_tokens >= num_tokens + in_flight  # (prefix-cache hits included)
        sampled.append([answers[rid][n_out + in_flight]] if reached else [])
    return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                             sampled_token_ids=sampled)


def record_step(out, sched, before):
    """The step's decisions: prompt tokens per request, decode count, preempted ids, prefix-cache hits."""
    prefill, hits = {}, {}
    decodes = 0
    for rid, n in out.num_scheduled_tokens.items():
        status, computed, num_tokens, n_out, in_flight = before[rid]
        req = sched.requests[rid]
        fresh = status != "RUNNING"
        if fresh:
            # computed after scheduling = prefix-cache hits + what this step computes
            got = req.num_computed_tokens - n
            if got > 0:
                hits[rid] = got
        # a decode: one token after the last one sampled (a prompt's last token alone is a prefill chunk)
        if not fresh and n_out + in_flight > 0 and n == 1 and computed == num_tokens + in_flight - 1:
            decodes += 1
        else:
            prefill[rid] = n
    preempted = sorted(out.preempted_req_ids or [], key=int)
    return {"prefill": prefill, "decode": decodes, "preempted": preempted, "cache_hits": hits}


def _finished(engine_out, done, children, sched, cfg):
    for outputs in engine_out.values():
        for o in outputs.outputs:
            if o.finish_reason is not None:
                done.add(int(o.request_id))
                child = children.get(int(o.request_id))
                if child is not None:
                    sched.add_request(make_request(child, cfg))


def drive(name, sched, cfg, reqs, answers) -> list[dict]:
    """Steps until every request has finished, as vLLM's engine core runs them: one schedule() then its
    update_from_output() (step); with asynchronous scheduling, a queue of two batches, so step n+1 is scheduled
    before step n's output is processed (step_with_batch_queue)."""
    children = {r["parent"]: r for r in reqs if r["parent"] >= 0}
    steps, done, queue = [], set(), []
    depth = 2 if cfg["async_scheduling"] else 1
    while len(done) < len(reqs):
        if sched.has_requests():
            before = snapshot(sched)
            out = sched.schedule()
            if out.total_num_scheduled_tokens > 0:
                steps.append(record_step(out, sched, before))
            queue.append((out, fake_output(out, sched, before, answers)))
            if len(queue) < depth:
                continue
        if not queue:
            raise RuntimeError(f"{name}: nothing to run with {len(reqs) - len(done)} requests left")
        out, model_out = queue.pop(0)
        _finished(sched.update_from_output(out, model_out), done, children, sched, cfg)
        if len(steps) > 20_000:
            raise RuntimeError(f"{name}: no end after 20,000 steps")
    return steps


def run_case(name: str, overrides: dict, reqs: list[dict]) -> dict:
    cfg = {**BASE, **overrides}
    sched, vllm_cfg = make_scheduler(cfg)
    answers = {str(r["id"]): tokens_of(r["output"]) for r in reqs}
    for r in reqs:
        if r["parent"] < 0:
            sched.add_request(make_request(r, cfg))
    steps = drive(name, sched, cfg, reqs, answers)
    import vllm

    resolved = {"async_scheduling": bool(vllm_cfg.scheduler_config.async_scheduling),
                "watermark": vllm_cfg.scheduler_config.watermark,
                "scheduler_reserve_full_isl": vllm_cfg.scheduler_config.scheduler_reserve_full_isl,
                "policy": vllm_cfg.scheduler_config.policy,
                "long_prefill_token_threshold": vllm_cfg.scheduler_config.long_prefill_token_threshold}
    return {"case": name, "vllm_version": vllm.__version__, "scheduler_class": type(sched).__name__,
            "config": cfg, "vllm_defaults_in_force": resolved,
            "note": "num_blocks counts usable blocks (vLLM's KVCacheConfig got num_blocks + 1: its null block)",
            "requests": reqs, "steps": steps}


def main(argv: list[str]) -> int:
    names = argv or list(CASES)
    for name in names:
        overrides, reqs = CASES[name]
        fixture = run_case(name, overrides, reqs)
        path = HERE / f"{name}.json"
        path.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")
        n_pre = sum(len(s["preempted"]) for s in fixture["steps"])
        n_hit = sum(sum(s["cache_hits"].values()) for s in fixture["steps"])
        print(f"{name}: {len(fixture['steps'])} steps, {n_pre} preemptions, {n_hit} cached tokens -> {path.name}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main(sys.argv[1:]))
