"""Every mechanism's fields at their bounds (issue #37): whatever the web accepts it answers, never with a 5xx; an
uploaded config.json is either refused at upload or runs. A short run here (FUZZ_LIMITS_CASES, default 40 requests
and 10 uploads); `bench/fuzz.py limits N` runs N requests and N / 10 uploads and prints the counts."""

from __future__ import annotations

import json
import os
import random
from collections import Counter

import pytest
from fastapi.testclient import TestClient

from app.web import app
from sim_core import Scenario
from sim_core.fields import field_info

CASES = int(os.environ.get("FUZZ_LIMITS_CASES", "40"))
# Each mechanism: the fields it needs to be on, and its numeric fields drawn at their bounds.
MECHANISMS = {
    "plain": ({}, ["rate", "duration", "token_budget", "max_seqs", "gpu_memory_utilization", "kv_blocks"]),
    "replicas": ({}, ["replicas", "router_staleness_ms"]),
    "pd": ({"prefill_replicas": "1", "decode_replicas": "1"}, ["prefill_replicas", "decode_replicas"]),
    "autoscaled": ({"autoscaler": "predictive"}, ["max_replicas", "autoscale_interval_s", "autoscale_replica_rate",
                                                  "provision_delay_s"]),
    "utilization": ({"autoscaler": "utilization"}, ["max_replicas", "autoscale_interval_s", "autoscale_cooldown_s"]),
    "spec": ({"spec_method": "ngram"}, ["spec_tokens", "spec_acceptance", "spec_disable_above"]),
    "lora": ({}, ["lora_adapters", "lora_rank", "max_loras", "max_cpu_loras", "lora_zipf"]),
    "offload": ({"prefix_cache": "true"}, ["kv_offload_cpu_gb", "kv_offload_disk_gb", "kv_offload_host_gbs"]),
    "ep": ({"model": "qwen3-30b-a3b", "hardware": "h100"}, ["ep", "moe_imbalance"]),
}
SMALL = {"schedulers": "chunked", "model": "llama-3.2-1b", "duration": "2", "rate": "2"}
CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "head_dim",
               "intermediate_size", "vocab_size")
BASE_CONFIG = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_hidden_layers": 16, "intermediate_size": 8192, "vocab_size": 128256,
               "max_position_embeddings": 8192, "tie_word_embeddings": True}
COUNTS: Counter = Counter()


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        yield c
    if os.environ.get("FUZZ_LIMITS_CASES"):
        print(f"\nlimits fuzz: {dict(COUNTS)}")


def _at_bound(rng: random.Random, name: str) -> str:
    """The field's least or largest value, or one between (an open bound: just inside it)."""
    info = field_info(name, Scenario)
    lo = info.lo if info.lo is not None else 0
    hi = info.hi if info.hi is not None else 1_000_000
    lo = lo + (1 if info.is_int else 1e-3) if info.lo_exclusive else lo
    hi = hi - (1 if info.is_int else 1e-3) if info.hi_exclusive else hi
    between = rng.randint(int(lo), int(hi)) if info.is_int else rng.uniform(float(lo), float(hi))
    value = rng.choice([lo, hi, between])
    return str(int(value)) if info.is_int else f"{float(value):.6g}"


def _query(rng: random.Random) -> dict[str, str]:
    on, fields = MECHANISMS[rng.choice(list(MECHANISMS))]
    query = {**SMALL, **on}
    for name in rng.sample(fields, k=rng.randint(1, min(3, len(fields)))):
        query[name] = _at_bound(rng, name)
    return query


def test_every_mechanisms_bounds_answer_without_a_server_error(client):
    rng = random.Random(int(os.environ.get("FUZZ_LIMITS_SEED", "37")))
    for _ in range(CASES):
        query = _query(rng)
        r = client.get("/api/run", params=query)
        COUNTS[f"run {r.status_code}"] += 1
        assert r.status_code < 500 or (r.status_code == 503 and "limit" in r.text), (query, r.text[:500])


def test_an_uploaded_config_is_refused_at_upload_or_runs(client):
    rng = random.Random(int(os.environ.get("FUZZ_LIMITS_SEED", "37")))
    for _ in range(max(1, CASES // 4)):
        doc = dict(BASE_CONFIG)
        for key in rng.sample(CONFIG_KEYS, k=rng.randint(1, 3)):
            doc[key] = rng.choice([1, 2, 3, 7, 64, 4096, 1 << 16, rng.randint(1, 1 << 20)])
        up = client.post("/api/model-config", files={"config": ("c.json", json.dumps(doc), "application/json")})
        COUNTS[f"upload {up.status_code}"] += 1
        assert up.status_code in (200, 422), up.text[:500]
        if up.status_code == 200:
            r = client.get("/api/run", params={**SMALL, "model": "", "model_file": up.json()["model_file"]})
            COUNTS[f"upload-run {r.status_code}"] += 1
            assert r.status_code < 500 or (r.status_code == 503 and "limit" in r.text), (doc, r.text[:500])
