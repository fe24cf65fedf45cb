"""Correct by default (issue #35): a scenario that names only its model, GPU and load runs as the engine it names
would run it: the checkpoint's weight format on that GPU, the engine's budgets for that GPU, the model's context as
max_model_len (refused, naming the field and the largest length that fits, where vLLM would refuse); and a run that
rejects requests says so first, naming the setting that fixes it."""

from __future__ import annotations

import json
import re

import pytest

from sim_core import Scenario, run
from sim_core.catalog import GPUS, MODELS, SetupError
from sim_core.deployment import resolve
from sim_core.engines import ENGINES
from sim_core.scenario import parse_scenario
from sim_core.validity import REJECTED_PREFIX, rejection_warning, run_warnings

# vllm-project/vllm at 99d7eb5d, vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, the OpenAI API server's
# usage context: `if device_memory >= 70 * GiB_bytes and "a100" not in device_name:` 8192 batched tokens and 1024
# sequences, else 2048 and 256 (engines.json's vllm entry cites it).
VLLM_LARGE_GPU, VLLM_SMALL_GPU = (8192, 1024), (2048, 256)


@pytest.mark.parametrize("hardware, budgets", [("h100", VLLM_LARGE_GPU), ("h200", VLLM_LARGE_GPU),
                                               ("b200", VLLM_LARGE_GPU), ("mi300x", VLLM_LARGE_GPU),
                                               ("a100", VLLM_SMALL_GPU), ("a100-40gb", VLLM_SMALL_GPU),
                                               ("l40s", VLLM_SMALL_GPU), ("rtx3050", VLLM_SMALL_GPU)])
def test_vllm_takes_its_api_servers_budgets_for_the_gpu(hardware, budgets):
    s = Scenario(hardware=hardware, max_model_len=4096)  # engine vllm, scheduler chunked: both defaults
    assert s.engine == "vllm" and (s.token_budget, s.max_seqs) == (None, None)  # the URL does not spell them out
    r = resolve(s)
    assert (r.token_budget, r.max_seqs) == budgets
    assert (r.setup.token_budget, r.setup.max_num_seqs) == budgets  # the memory budget reserves for them too


def test_a_scenario_moved_to_another_gpu_takes_that_gpus_budgets():
    """The budgets are resolved with the deployment, not frozen into the scenario: a plan or a sweep that copies a
    scenario onto another GPU or scheduler gets the engine's budgets there."""
    h100 = Scenario(hardware="h100")
    a100 = h100.model_copy(update={"hardware": "a100"})
    assert (resolve(h100).token_budget, resolve(a100).token_budget) == (VLLM_LARGE_GPU[0], VLLM_SMALL_GPU[0])
    fcfs = h100.model_copy(update={"scheduler": "fcfs"})
    assert resolve(fcfs).token_budget == resolve(fcfs).max_model_len


def test_the_large_gpu_rule_is_read_from_memory_and_name_not_from_a_list_of_keys():
    vllm = ENGINES["vllm"]
    large = {k for k, g in GPUS.items() if vllm.is_large(g)}
    assert large == {k for k, g in GPUS.items() if g.mem_gib >= 70 and "a100" not in f"{k} {g.name}".lower()}
    assert "h100" in large and "a100" not in large and "l40s" not in large


def test_a_scheduler_that_prefills_whole_prompts_takes_max_model_len_as_its_budget():
    s = Scenario(hardware="h100", scheduler="fcfs")
    assert ENGINES["vllm"].budgets(GPUS["h100"], chunked_prefill=False)[0] is None
    r = resolve(s)
    assert r.token_budget == r.max_model_len == MODELS["llama-3-8b"].max_context


def test_explicit_budgets_win_and_survive_the_url():
    s = parse_scenario({"hardware": "h100", "token_budget": "512", "max_seqs": "256"})
    assert (resolve(s).token_budget, resolve(s).max_seqs) == (512, 256)
    assert Scenario.from_query(s.to_query()) == s and "token_budget=512" in s.to_query()


@pytest.mark.parametrize("model, hardware, tp, quantization, path", [
    ("deepseek-r1", "h200", 8, "fp8", "FP8 tensor cores"),
    ("deepseek-r1", "b200", 8, "fp8", "FP8 tensor cores"),
    ("gpt-oss-120b", "h100", 1, "int4", "weight-only"),
    ("gpt-oss-120b", "b200", 1, "fp4", "FP4 tensor cores"),
    ("llama-3-8b", "a100", 1, "fp16", "16-bit"),
])
def test_quantization_auto_runs_the_checkpoints_format_as_the_engine_does_on_that_gpu(model, hardware, tp,
                                                                                      quantization, path):
    s = Scenario(model=model, hardware=hardware, tp=tp, num_requests=4)
    assert s.quantization == "auto"
    r = resolve(s)
    assert r.setup.quantization == quantization
    assert path in r.weight_path and MODELS[model].checkpoint_format.upper() in r.weight_path


def test_a_named_format_is_run_as_named():
    r = resolve(Scenario(model="deepseek-r1", hardware="h200", tp=8, quantization="int4"))
    assert r.setup.quantization == "int4" and "weight-only" in r.weight_path


def test_the_checkpoint_run_from_the_cli_names_its_format_and_path(capsys):
    from app.cli import main

    main(["run", "--model", "deepseek-r1", "--hardware", "h200", "--tp", "8", "--num-requests", "3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    resolved = doc["schedulers"]["chunked"]["resolved"]
    assert resolved["quantization"] == "fp8" and "FP8 tensor cores" in resolved["weight_path"]
    main(["run", "--model", "gpt-oss-120b", "--hardware", "h100", "--num-requests", "3"])
    out = capsys.readouterr().out
    assert "Weights       int4: the checkpoint's MXFP4 weights, weight-only" in out


def test_the_issues_8k_run_completes_every_request_without_max_model_len():
    """`run --model deepseek-r1 --hardware b200 --tp 8 --quantization fp8 --workload random --concurrency 4 --isl
    8192 --osl 1024 --num-requests 40` completed 17 of 40 with max_model_len 8,192 by default."""
    res = run(Scenario(model="deepseek-r1", hardware="b200", tp=8, quantization="fp8", workload="random",
                       concurrency=4, isl=8192, osl=1024, num_requests=40))
    assert res.resolved.max_model_len == MODELS["deepseek-r1"].max_context
    assert res.metrics["completed"] == 40 and res.metrics["rejected"] == 0
    assert rejection_warning(res) is None


def test_vllm_refuses_a_context_the_kv_cache_cannot_hold_naming_the_field_and_what_fits():
    s = Scenario(hardware="rtx3050")  # llama-3.2-1b: 131,072 tokens of context in an 8 GB GPU
    with pytest.raises(SetupError) as e:
        resolve(s)
    assert e.value.field == "max_model_len"
    fits = int(re.search(r"at most ([\d,]+)", str(e.value)).group(1).replace(",", ""))
    assert 0 < fits < MODELS["llama-3.2-1b"].max_context
    assert resolve(Scenario(hardware="rtx3050", max_model_len=fits)).max_model_len == fits
    with pytest.raises(SetupError) as e:
        resolve(Scenario(hardware="rtx3050", max_model_len=fits + 64))  # set by hand: vLLM refuses it too
    assert e.value.field == "max_model_len" and f"{fits + 64:,} tokens" in str(e.value)
    # SGLang lowers the longest request it takes to what fits instead.
    assert resolve(Scenario(hardware="rtx3050", engine="sglang")).max_model_len < MODELS["llama-3.2-1b"].max_context


def test_a_kv_blocks_override_is_the_users_and_is_not_checked_against_the_context():
    r = resolve(Scenario(hardware="rtx3050", kv_blocks=500))
    assert r.max_model_len == MODELS["llama-3.2-1b"].max_context


def test_rejected_requests_are_said_first_with_the_setting_that_fixes_them(capsys):
    from app.cli import main

    main(["run", "--model", "deepseek-r1", "--hardware", "b200", "--tp", "8", "--workload", "random",
          "--concurrency", "4", "--isl", "8192", "--osl", "1024", "--num-requests", "20", "--max-model-len", "8192",
          "--length-range", "0.5"])
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("warning: " + REJECTED_PREFIX) and "max_model_len 8,192, which you set" in first
    assert out.count(REJECTED_PREFIX) == 1


def test_a_run_that_rejects_nothing_has_no_rejection_warning():
    res = run(Scenario(hardware="a100", num_requests=20))
    assert rejection_warning(res) is None
    assert not any(w.startswith(REJECTED_PREFIX) for w in run_warnings(res))


def test_a_hybrid_model_whose_state_would_fill_memory_runs_fewer_sequences_and_says_so():
    """vLLM takes each running request's linear-attention state from its KV pool, so qwen3.5-122b-a10b starts on
    two H100s with its default 1,024 sequences; the simulated pool reserves that state per sequence, which for 1,024
    would leave no KV cache: the run holds fewer and warns. An explicit max_seqs is the user's, refused as before."""
    s = Scenario(model="qwen3.5-122b-a10b", hardware="h100", tp=2, quantization="fp8", num_requests=3)
    r = resolve(s)
    assert 1 <= r.max_seqs < VLLM_LARGE_GPU[1] and r.num_blocks > 0
    res = run(s)
    assert res.metrics["completed"] == 3
    assert any(w.startswith("max_seqs: vllm's default of 1,024") for w in run_warnings(res))
    with pytest.raises(SetupError):
        resolve(s.model_copy(update={"max_seqs": 1024}))


def test_a_prefill_whole_scheduler_refused_at_the_models_context_is_told_the_largest_length_that_runs():
    """fcfs prefills whole prompts, so its budget is max_model_len: llama-3.2-1b's 131k context leaves the rtx3050
    no memory at all. The refusal names max_model_len and the largest value that does run, and that value runs
    while one block more is refused."""
    with pytest.raises(SetupError) as e:
        resolve(Scenario(hardware="rtx3050", scheduler="fcfs"))
    assert e.value.field == "max_model_len" and "prefills whole prompts" in str(e.value)
    fits = int(re.search(r"at most ([\d,]+)", str(e.value)).group(1).replace(",", ""))
    assert 0 < fits < MODELS["llama-3.2-1b"].max_context
    assert resolve(Scenario(hardware="rtx3050", scheduler="fcfs", max_model_len=fits)).max_model_len == fits
    with pytest.raises(SetupError):
        resolve(Scenario(hardware="rtx3050", scheduler="fcfs", max_model_len=fits + 16))


@pytest.mark.parametrize("hardware, budget", [("l4", 2048), ("rtx3050", 2048), ("l40s", 8192), ("h200", 8192),
                                              ("b200", 16384), ("mi300x", 16384)])
def test_sglang_takes_its_chunk_size_for_the_gpus_memory(hardware, budget):
    """sgl-project/sglang python/sglang/srt/server_args.py: chunked_prefill_size 2048 when the GPU has under 35 GB,
    8192 under 160 GB, 16384 above (engines.json's sglang entry cites it); for every scheduler, as SGLang chunks."""
    s = Scenario(engine="sglang", hardware=hardware, max_model_len=4096)
    assert resolve(s).token_budget == budget
    assert resolve(s.model_copy(update={"scheduler": "fcfs"})).token_budget == budget
