"""Models from Hugging Face config.json files (issue #22): the reader, the bundled configs, the KV arithmetic of each
attention kind against vLLM's, and --model-config on the command line."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from sim_core import MODELS, Scenario, ScenarioError, run
from sim_core.catalog import ServingSettings, SetupError, resolve_setup
from sim_core.data import read
from sim_core.deployment import resolve
from sim_core.hf_config import ModelConfigError, model_from_config, model_from_text
from sim_core.validity import run_warnings

CONFIGS = Path(__file__).resolve().parent.parent / "sim_core" / "data" / "hf_configs"
HF_ENTRIES = [e for e in read("models.json")["entries"] if "hf_config" in e]
SERVING = ServingSettings(gpu_memory_utilization=0.9, block_size=16, token_budget=512, max_num_seqs=256)


def config(key: str) -> dict:
    return json.loads((CONFIGS / f"{key}.json").read_text(encoding="utf-8"))


def test_every_bundled_config_is_a_catalogue_model_with_its_source():
    assert sorted(e["key"] for e in HF_ENTRIES) == sorted(p.stem for p in CONFIGS.glob("*.json"))
    for e in HF_ENTRIES:
        assert e["source"].startswith("https://huggingface.co/" + e["hf_name"]), e["key"]
        m = MODELS[e["key"]]
        assert m == model_from_config(config(e["key"]), e["key"], e["hf_name"], e["published_params_b"])


# (model, what its config says) -- read off each config.json by hand.
ARCHITECTURES = {
    "deepseek-v3": dict(layers=61, kv_lora_rank=512, qk_rope_head_dim=64, experts=256, experts_per_token=8,
                        dense_layers=3, expert_ffn=2048, shared_ffn=2048, window_layers=0, linear_layers=0),
    "qwen3-30b-a3b": dict(layers=48, experts=128, experts_per_token=8, expert_ffn=768, shared_ffn=0, dense_layers=0),
    "gpt-oss-120b": dict(layers=36, window_kind="sliding", window=128, window_layers=18, experts=128,
                         experts_per_token=4, qkv_bias=True),
    "llama-4-scout": dict(layers=48, window_kind="chunked", window=8192, window_layers=36, experts=16,
                          experts_per_token=1, dense_layers=0, shared_ffn=8192, ffn=16384),
    "llama-4-maverick": dict(experts=128, dense_layers=24, window_layers=36),
    "gemma-3-27b": dict(layers=62, window_kind="sliding", window=1024, window_layers=52, vocab=262208,
                        tie_embeddings=True, experts=1),
    "qwen3-next-80b-a3b": dict(layers=48, linear_layers=36, window_layers=0, experts=512, experts_per_token=10,
                               shared_ffn=512, attn_gate=True),
    # The late-2026 catalogue (issue #35).
    "llama-3.3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, max_context=131072, experts=1),
    "kimi-k2-instruct": dict(layers=61, heads=64, kv_lora_rank=512, qk_rope_head_dim=64, q_lora_rank=1536,
                             experts=384, experts_per_token=8, dense_layers=1, expert_ffn=2048, shared_ffn=2048,
                             max_context=131072, checkpoint_format="fp8", fp8_weight_block=128),
    "kimi-k2.5": dict(layers=61, heads=64, kv_lora_rank=512, experts=384, dense_layers=1, max_context=262144,
                      checkpoint_format="int4"),
    "qwen3-coder-480b-a35b": dict(layers=62, hidden=6144, heads=96, kv_heads=8, experts=160, experts_per_token=8,
                                  expert_ffn=2560, shared_ffn=0, dense_layers=0, max_context=262144),
    "minimax-m2.5": dict(layers=62, hidden=3072, heads=48, kv_heads=8, head_dim=128, experts=256, experts_per_token=8,
                         ffn=1536, expert_ffn=0, shared_ffn=0, dense_layers=0, window_layers=0, max_context=196608,
                         checkpoint_format="fp8"),
    "minimax-m2.7": dict(layers=62, experts=256, max_context=204800),
    "qwen3.5-397b-a17b": dict(layers=60, hidden=4096, heads=32, kv_heads=2, head_dim=256, linear_layers=45,
                              experts=512, experts_per_token=10, expert_ffn=1024, shared_ffn=1024, dense_layers=0,
                              attn_gate=True, max_context=262144),
    "qwen3.5-122b-a10b": dict(layers=48, linear_layers=36, experts=256, experts_per_token=8, attn_gate=True),
    "qwen3.5-35b-a3b": dict(layers=40, linear_layers=30, experts=256, experts_per_token=8, attn_gate=True),
}


@pytest.mark.parametrize("key", ARCHITECTURES)
def test_the_reader_reads_each_architecture(key):
    m = MODELS[key]
    assert {k: getattr(m, k) for k in ARCHITECTURES[key]} == ARCHITECTURES[key]


def test_active_parameters_match_the_published_active_counts():
    # Model cards: DeepSeek-V3 37B activated, gpt-oss-120b 5.1B and 20b 3.6B active, Qwen3-235B-A22B 22B,
    # Qwen3-30B-A3B 3.3B (ours leaves out the input embedding, 0.3B there), Llama 4 17B, Qwen3-Next 3B (+0.6B: ours
    # counts the untied lm head the card leaves out).
    for key, active_b, rel in (("deepseek-v3", 37, 0.02), ("gpt-oss-120b", 5.1, 0.02), ("gpt-oss-20b", 3.6, 0.02),
                               ("qwen3-235b-a22b", 22, 0.03), ("qwen3-30b-a3b", 3.3, 0.1),
                               ("llama-4-scout", 17, 0.06), ("llama-4-maverick", 17, 0.06),
                               ("qwen3-next-80b-a3b", 3.0, 0.2),
                               # Kimi K2 32B (card), Qwen3-Coder 35B, MiniMax-M2 10B (+0.6B: our untied lm head),
                               # Qwen3.5-397B 17B (ours leaves out the 1B input embedding).
                               ("kimi-k2-instruct", 32, 0.02), ("kimi-k2.5", 32, 0.02),
                               ("qwen3-coder-480b-a35b", 35, 0.02), ("minimax-m2.5", 10, 0.05),
                               ("qwen3.5-397b-a17b", 17, 0.05)):
        assert MODELS[key].active_params / 1e9 == pytest.approx(active_b, rel=rel), key


# ----- KV memory against vLLM's arithmetic (hand-computed from each config) -----
def setup(key, hardware="h200", tp=1, quantization="fp8", **serving):
    return resolve_setup(hardware, key, quantization, tp, ServingSettings(**{**SERVING.__dict__, **serving}))


def test_mla_caches_576_bytes_per_layer_per_token_on_every_rank():
    s = setup("deepseek-v3", tp=8)
    per_gpu = (512 + 64) * 61 * 2  # kv_lora_rank + qk_rope_head_dim, 61 layers, bf16: replicated, not split
    assert s.kv_growth_bytes_per_token_per_gpu == per_gpu
    assert s.kv_report()["kv_bytes_per_token"] == per_gpu * 8
    assert s.kv_report()["kv_bytes_per_sequence_fixed"] == 0
    # vLLM's "GPU KV cache size": the free memory over 576 x 61 x 2 bytes a token, in whole blocks.
    assert s.hybrid_kv_capacity_tokens == pytest.approx(s.kv_free_bytes / per_gpu, rel=0.01)
    assert s.num_kv_blocks * 16 == pytest.approx(s.kv_free_bytes / per_gpu, rel=0.01)
    fp8 = resolve_setup("h200", "deepseek-v3", "fp8", 8, SERVING, kv_cache_dtype="fp8")
    assert fp8.kv_growth_bytes_per_token_per_gpu == per_gpu / 2


def test_gqa_heads_split_over_tp_ranks():
    one, two = setup("qwen3-8b", tp=1, quantization="fp16"), setup("qwen3-8b", tp=2, quantization="fp16")
    assert one.kv_growth_bytes_per_token_per_gpu == 2 * 36 * 8 * 128 * 2
    assert two.kv_growth_bytes_per_token_per_gpu == one.kv_growth_bytes_per_token_per_gpu / 2
    assert two.kv_report()["kv_bytes_per_token"] == one.kv_report()["kv_bytes_per_token"]


def test_gpt_oss_grows_with_its_full_layers_and_holds_a_window_in_the_other_half():
    s = setup("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2  # k and v, 8 KV heads of 64, bf16
    assert s.kv_growth_bytes_per_token_per_gpu == 18 * per_layer  # half of 36 layers
    window_tokens = (-(-127 // 16) + 1) * 16  # vLLM: cdiv(sliding_window - 1, block_size) + 1 blocks
    assert s.kv_fixed_bytes_per_seq_per_gpu == 18 * per_layer * window_tokens
    assert s.hybrid_kv_capacity_tokens == pytest.approx(s.kv_free_bytes / (18 * per_layer), rel=0.01)
    # The engine pool reserves the tiny windows for max_seqs sequences rather than charging them per token.
    assert not s.kv_windows_per_token
    assert s.kv_reserved_bytes_per_gpu == 256 * s.kv_fixed_bytes_per_seq_per_gpu
    assert s.num_kv_blocks == int((s.kv_free_bytes - s.kv_reserved_bytes_per_gpu) // (18 * per_layer * 16))


def test_gemma_charges_its_wide_windows_per_token_when_that_leaves_more_blocks():
    s = setup("gemma-3-27b", quantization="fp16")
    per_layer = 2 * 16 * 128 * 2
    assert s.kv_growth_bytes_per_token_per_gpu == 10 * per_layer  # 1 global layer in 6: 10 of 62
    assert s.kv_window_bytes_per_token_per_gpu == 52 * per_layer
    assert s.kv_windows_per_token  # 256 sequences x 52 layers x 1040 tokens would not fit beside the weights
    assert s.num_kv_blocks == int(s.kv_free_bytes // (62 * per_layer * 16))
    assert "charged for every token" in s.kv_simplification()


def test_qwen3_next_linear_layers_keep_a_constant_state():
    per_layer_state = (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3) * 2  # recurrent + conv state, bf16
    fixed = 36 * per_layer_state
    for tp in (1, 2):
        s = setup("qwen3-next-80b-a3b", tp=tp, quantization="fp16" if tp == 2 else "fp8")
        assert s.kv_growth_bytes_per_token_per_gpu == 12 * 2 * (2 // min(2, tp)) * 256 * 2  # 12 full layers
        assert s.kv_report()["kv_bytes_per_sequence_fixed"] == fixed  # the same whatever the context or tp
        assert s.kv_reserved_bytes_per_gpu == 256 * fixed / tp
        assert s.hybrid_kv_capacity_tokens == pytest.approx(s.kv_free_bytes / s.kv_growth_bytes_per_token_per_gpu,
                                                            rel=0.01)
    longer = resolve(Scenario(hardware="h200", model="qwen3-next-80b-a3b", quantization="fp8", max_model_len=32768))
    assert longer.setup.kv_report()["kv_bytes_per_sequence_fixed"] == fixed


def test_llama4_chunked_layers_hold_one_chunk():
    s = setup("llama-4-scout")
    per_layer = 2 * 8 * 128 * 2
    assert s.kv_growth_bytes_per_token_per_gpu == 12 * per_layer  # the NoPE global layer of every 4
    assert s.kv_fixed_bytes_per_seq_per_gpu == 36 * per_layer * (8192 // 16 + 1) * 16


def test_a_model_that_cannot_fit_names_the_tp_that_does():
    with pytest.raises(SetupError, match=r"fits at tp=8 \(8 GPUs\)"):
        setup("deepseek-v3", tp=1)
    with pytest.raises(SetupError, match=r"fits at tp=2"):
        setup("qwen3-235b-a22b", tp=1)
    with pytest.raises(SetupError, match=r"fits at tp=16 \(16 GPUs: 2 nodes of 8\)"):
        setup("deepseek-v3", quantization="fp16", tp=8)


# Each bundled model on a GPU where it fits: (hardware, quantization, tp).
WHERE_IT_FITS = {
    "qwen3-8b": ("h100", "fp16", 1), "qwen3-30b-a3b": ("h100", "fp16", 1), "qwen3-235b-a22b": ("h200", "fp8", 2),
    "deepseek-v3": ("h200", "fp8", 8), "deepseek-r1": ("h200", "fp8", 8), "gpt-oss-20b": ("h100", "fp16", 1),
    "gpt-oss-120b": ("h100", "int4", 1), "llama-4-scout": ("h100", "fp8", 2), "llama-4-maverick": ("h200", "fp8", 4),
    "gemma-3-27b": ("h100", "fp16", 1), "qwen3-next-80b-a3b": ("h200", "fp8", 1),
    # The late-2026 catalogue, each in its published format where the simulator has it (Kimi-K2.5's INT4 experts
    # as int4, which it applies to all weights) and on GPUs whose memory holds it: 1.03T parameters in FP8 need
    # B200s' 8 x 180 GB.
    "llama-3.3-70b": ("h200", "fp8", 1), "kimi-k2-instruct": ("b200", "fp8", 8), "kimi-k2.5": ("h200", "int4", 8),
    "qwen3-coder-480b-a35b": ("h200", "fp8", 8), "minimax-m2.5": ("h100", "fp8", 4),
    "minimax-m2.7": ("h100", "fp8", 4), "qwen3.5-397b-a17b": ("h200", "fp8", 4),
    "qwen3.5-122b-a10b": ("h100", "fp8", 2), "qwen3.5-35b-a3b": ("h100", "fp8", 1),
}
# Settings pinned where the engine's defaults do not start there, at the values the table was written with:
# - llama-4-scout's 10M-token context is more than the KV cache of two H100s holds (784k tokens), which vLLM
#   refuses to start with; the max_model_len of 8,192 it ran with before.
# - qwen3.5-122b-a10b's linear-attention state is reserved for every one of max_seqs sequences (catalog.Setup's
#   conservative pool): at vLLM's 1,024 on an H100 that is 73 GB per GPU (its recurrent state in float32, the
#   config's mamba_ssm_dtype) and leaves no KV cache, though vLLM, which takes each running request's state from
#   the pool, starts; 128 sequences (9 GB), half the 256 it ran with while the state was taken as 16-bit.
PINNED = {"llama-4-scout": {"max_model_len": 8192}, "qwen3.5-122b-a10b": {"max_seqs": 128}}


def test_every_bundled_model_has_a_place_it_fits():
    assert set(WHERE_IT_FITS) == {e["key"] for e in HF_ENTRIES}


@pytest.mark.parametrize("key", WHERE_IT_FITS)
def test_each_bundled_model_runs_where_it_fits(key):
    hardware, quantization, tp = WHERE_IT_FITS[key]
    s = Scenario(hardware=hardware, model=key, quantization=quantization, tp=tp, num_requests=30,
                 **PINNED.get(key, {}))
    result = run(s)
    assert result.metrics["completed"] == 30, key
    m = result.resolved.setup.model
    assert m.key == key
    # A model the KV pool simplifies says so in the run's warnings.
    simplified = [w for w in run_warnings(result) if "KV pool is conservative" in w]
    assert len(simplified) == (1 if m.window_layers or m.linear_layers else 0), key


# ----- --model-config on the command line -----
def cli_json(capsys, argv):
    code = main([str(a) for a in argv] + ["--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_model_config_equals_the_bundled_model_byte_for_byte(capsys, tmp_path):
    path = tmp_path / "Qwen3-8B" / "config.json"
    path.parent.mkdir()
    path.write_text((CONFIGS / "qwen3-8b.json").read_text(encoding="utf-8"))
    base = ["run", "--hardware", "h100", "--num-requests", "60", "--prefix-cache"]
    by_name = cli_json(capsys, base + ["--model", "qwen3-8b"])
    by_file = cli_json(capsys, base + ["--model-config", path])
    assert json.dumps(by_file["schedulers"]["chunked"]["metrics"]) == \
        json.dumps(by_name["schedulers"]["chunked"]["metrics"])
    resolved = by_file["schedulers"]["chunked"]["resolved"]
    assert resolved["model"] == "Qwen3-8B"  # named after its folder, as the Hub lays a model out
    assert resolved["kv_bytes_per_token"] == 2 * 36 * 8 * 128 * 2
    assert resolved["kv_bytes_per_sequence_fixed"] == 0


def test_a_plan_takes_a_model_config(capsys):
    doc = cli_json(capsys, ["plan", "--model-config", CONFIGS / "qwen3-8b.json", "--workload", "chat", "--rate", "5",
                            "--gpus", "h100", "--tp", "1", "--duration", "10"])
    assert doc["plans"] and all("model_file=" in p["scenario"] for p in doc["plans"])  # each plan's scenario


def test_model_config_errors_name_the_flag_and_the_key(capsys, tmp_path):
    doc = config("qwen3-8b")
    del doc["num_attention_heads"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    code = main(["run", "--model-config", str(bad), "--num-requests", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "--model-config" in err and "num_attention_heads: missing" in err, err
    code = main(["run", "--model-config", str(tmp_path / "none.json"), "--num-requests", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "no such file" in err, err
    code = main(["run", "--model-config", str(bad), "--model", "qwen3-8b"])
    assert code == 2 and "leave model unset" in capsys.readouterr().err


def test_the_web_reads_no_config_path_of_the_server():
    from app.web.inputs import parse_request

    with pytest.raises(ScenarioError) as e:
        parse_request({"model_file": "/etc/hostname"})
    assert any(f == "model_file" for f, _ in e.value.problems)


# ----- clear errors -----
@pytest.mark.parametrize("edit, key", [
    (lambda d: d.update(model_type="mamba"), "model_type"),
    (lambda d: d.pop("model_type"), "model_type"),
    (lambda d: d.pop("num_hidden_layers"), "num_hidden_layers"),
    (lambda d: d.update(hidden_size="4096"), "hidden_size"),
    (lambda d: d.update(num_key_value_heads=5), "num_key_value_heads"),
    (lambda d: d.update(intermediate_size=-1), "intermediate_size"),
    (lambda d: d.update(tie_word_embeddings="no"), "tie_word_embeddings"),
])
def test_a_bad_config_names_the_key(edit, key):
    doc = config("qwen3-8b")
    edit(doc)
    with pytest.raises(ModelConfigError) as e:
        model_from_config(doc)
    assert e.value.key == key and str(e.value).startswith(key + ":")


def test_nested_configs_name_the_key_under_text_config():
    doc = config("gemma-3-27b")
    del doc["text_config"]["hidden_size"]
    with pytest.raises(ModelConfigError, match=r"^text_config\.hidden_size: missing"):
        model_from_config(doc)
    doc = config("deepseek-v3")
    del doc["kv_lora_rank"]
    with pytest.raises(ModelConfigError, match=r"^kv_lora_rank: missing"):
        model_from_config(doc)
    doc = config("gpt-oss-20b")
    doc["layer_types"] = doc["layer_types"][:-1]
    with pytest.raises(ModelConfigError, match=r"^layer_types: expected 24 entries"):
        model_from_config(doc)


def test_text_that_is_not_json_is_a_clear_error():
    with pytest.raises(ModelConfigError, match=r"^config\.json: not valid JSON"):
        model_from_text("{")


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 1 << 40) | st.floats(allow_nan=True) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
                    max_leaves=20)


def _model_or_clear_error(doc) -> None:
    try:
        m = model_from_config(doc)
    except ModelConfigError as e:
        assert e.key and str(e).startswith(e.key + ": ")
        return
    assert m.total_params > 0 and m.layers >= 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_json_gives_a_model_or_a_clear_error(doc):
    _model_or_clear_error(doc)


KEYS = sorted({k for e in HF_ENTRIES for k in config(e["key"])} | {k for k in config("gemma-3-27b")["text_config"]})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([e["key"] for e in HF_ENTRIES]),
       st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.integers(-3, 1 << 20) | st.booleans()
                          | st.text(max_size=4) | st.lists(st.integers(0, 3), max_size=3)), max_size=4),
       st.booleans())
def test_any_edit_of_a_real_config_gives_a_model_or_a_clear_error(key, edits, nested):
    doc = copy.deepcopy(config(key))
    target = doc.get("text_config", doc) if nested else doc
    for k, v in edits:
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v
    _model_or_clear_error(doc)
