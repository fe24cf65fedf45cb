"""The kernel terms added to the step model: the engine's one-kernel NVLink all-reduce, elementwise kernels at
their own kind's bandwidth, and the FP8 KV cache."""

import json

import pytest

from sim_core import Scenario, resolve, run
from sim_core.catalog import ServingSettings, resolve_setup
from sim_core.kernel.cost_constants import (
    ALLREDUCE_BUS_BW,
    ALLREDUCE_BYTES_PER_TOKEN,
    ALLREDUCE_LATENCY_S,
    ATTN_FLOPS_PER_PAIR,
    CUSTOM_ALLREDUCE_LATENCY_S,
    CUSTOM_ALLREDUCE_MAX_BYTES,
    DECODE_ATTN_FLOPS_PER_PAIR,
    ELEMENTWISE_BW,
    KV_BYTES_PER_TOKEN,
    PAGED_ATTENTION_SLOWDOWN,
    PEAK_BW,
    STREAM_BW,
)
from sim_core.kernel.cost_model import allreduce_s, cost_params, engine_allreduce_s, step_breakdown, step_time
from sim_core.kernel.layer_kernels import (
    ACTIVATION_BW_EFFICIENCY,
    NORM_BW_EFFICIENCY,
    ROPE_BW_EFFICIENCY,
    STREAM_COPY_BW_EFFICIENCY,
)
from sim_core.studies.validation import checks

ATTENTION, ELEMENTWISE, COMMUNICATION = 1, 2, 4


def setup(hw="h100", model="llama-3-70b", quant="fp16", tp=4, kv="auto"):
    return resolve_setup(hw, model, quant, tp, ServingSettings(0.9, 16, 8192, 256), kv)


def decode_parts(p, seqs, ctx):
    return step_breakdown(p, 0, 0, 0, 0, seqs, seqs * ctx, seqs)


def test_small_all_reduces_take_the_engines_nvlink_kernel_not_nccls_ring():
    s = setup()
    p = cost_params(s)
    row = p[ALLREDUCE_BYTES_PER_TOKEN]
    # A decode step of 8 sequences all-reduces 8 x 16 KB: the custom kernel's latency plus the ring's bytes.
    ring = 2 * 3 / 4 * 8 * row / p[ALLREDUCE_BUS_BW]
    assert engine_allreduce_s(p, 8, row) == pytest.approx(CUSTOM_ALLREDUCE_LATENCY_S + ring)
    assert engine_allreduce_s(p, 8, row) < allreduce_s(p, 8, row) == pytest.approx(p[ALLREDUCE_LATENCY_S] + ring)
    assert decode_parts(p, 8, 1024)[COMMUNICATION] == pytest.approx(2 * 80 * (CUSTOM_ALLREDUCE_LATENCY_S + ring))
    # Past vLLM's 8 MiB buffer (a 2048-token prefill moves 32 MiB per all-reduce) NCCL's ring takes over.
    rows = 2048
    assert rows * row > CUSTOM_ALLREDUCE_MAX_BYTES
    assert engine_allreduce_s(p, rows, row) == allreduce_s(p, rows, row)
    # No NVLink (PCIe parts): NCCL only.
    pcie = cost_params(resolve_setup("h100-pcie", "llama-3-8b", "fp16", 2, ServingSettings(0.9, 16, 8192, 256)))
    assert engine_allreduce_s(pcie, 1, 8192.0) == allreduce_s(pcie, 1, 8192.0)


def test_batch_one_decode_at_tp4_is_not_dominated_by_all_reduce_latency():
    # 160 all-reduces of 16 KB per token: ~1.5 ms with the engine's kernel, where NCCL's 38 us floor made 6 ms.
    t = step_time(setup(), 0, 0, 1, 3072)
    assert t.components_s["communication"] < 0.15 * t.seconds
    assert t.components_s["communication"] == pytest.approx(160 * CUSTOM_ALLREDUCE_LATENCY_S, rel=0.1)


def test_elementwise_kernels_run_at_their_own_kinds_bandwidth():
    p = cost_params(setup("a100", "llama-3-8b", tp=1))
    effective = p[ELEMENTWISE_BW] / p[PEAK_BW]
    # The mix is slower than a plain stream (the add) and faster than the slowest kind (RMSNorm).
    assert NORM_BW_EFFICIENCY < effective < STREAM_COPY_BW_EFFICIENCY
    assert NORM_BW_EFFICIENCY < ACTIVATION_BW_EFFICIENCY < STREAM_COPY_BW_EFFICIENCY
    # The step's elementwise time is each kind's bytes at its own efficiency (Llama-3-8B: hidden 4096, 32 query
    # and 8 KV heads of 128, MLP 14336; 16-bit activations and KV).
    norm, add, rope, act, kv = 2 * 2 * 4096 * 2, 2 * 3 * 4096 * 2, 2 * 40 * 128 * 2, 3 * 14336 * 2, 2 * (1024 * 2) * 2
    per_token = 32 * (norm / NORM_BW_EFFICIENCY + add / STREAM_COPY_BW_EFFICIENCY + rope / ROPE_BW_EFFICIENCY
                      + act / ACTIVATION_BW_EFFICIENCY + kv / STREAM_COPY_BW_EFFICIENCY) / p[PEAK_BW]
    big, small = (step_breakdown(p, n, 1, 0, 0, 0, 0, 1)[ELEMENTWISE] for n in (4096, 2048))
    assert big - small == pytest.approx(2048 * per_token, rel=1e-6)


def test_vidur_elementwise_rows_on_h100_are_predicted_from_the_a100_efficiencies():
    rows = [c for c in checks(simulate=False) if c.group == "kernel" and "tokens=" in c.what]
    assert {c.what.split(":")[1].split()[0] for c in rows} == {"input_layernorm", "attn_rope", "mlp_act", "add"}
    assert all("h100" in c.what for c in rows)  # the efficiencies come from A100: these rows are a check
    assert max(abs(c.error) for c in rows) <= 0.25


def test_fp8_kv_cache_halves_kv_bytes_and_attention_reads_and_doubles_the_pool():
    bf, f8 = setup("h100", "llama-3-8b", tp=1), setup("h100", "llama-3-8b", tp=1, kv="fp8")
    assert f8.kv_bytes_per_token_per_gpu == bf.kv_bytes_per_token_per_gpu / 2
    assert f8.num_kv_blocks == pytest.approx(2 * bf.num_kv_blocks, rel=0.01)
    pb, p8 = cost_params(bf), cost_params(f8)
    assert p8[KV_BYTES_PER_TOKEN] == pb[KV_BYTES_PER_TOKEN] / 2
    short_b, long_b = decode_parts(pb, 64, 512)[ATTENTION], decode_parts(pb, 64, 4096)[ATTENTION]
    short_8, long_8 = decode_parts(p8, 64, 512)[ATTENTION], decode_parts(p8, 64, 4096)[ATTENTION]
    extra = 64 * (4096 - 512) * p8[KV_BYTES_PER_TOKEN] * PAGED_ATTENTION_SLOWDOWN / p8[STREAM_BW]
    assert long_8 - short_8 == pytest.approx(extra, rel=0.01)
    assert long_8 - short_8 == pytest.approx((long_b - short_b) / 2, rel=0.01)
    # The cache write still reads 16-bit k and v: less elementwise traffic, but not half of the KV part.
    assert decode_parts(p8, 64, 512)[ELEMENTWISE] < decode_parts(pb, 64, 512)[ELEMENTWISE]


def test_kv_cache_dtype_is_a_scenario_field_and_more_fits_in_fp8():
    assert Scenario().kv_cache_dtype == "auto"
    base = dict(hardware="rtx3050", max_model_len=8192, workload="rag", rate=1.0, duration=10, seed=3)
    auto, fp8 = resolve(Scenario(**base)), resolve(Scenario(kv_cache_dtype="fp8", **base))
    assert fp8.num_blocks > 1.9 * auto.num_blocks
    assert fp8.setup.kv_bytes_per_token_per_gpu == auto.setup.kv_bytes_per_token_per_gpu / 2
    assert run(Scenario(kv_cache_dtype="fp8", **base)).metrics["completed"] > 0
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        Scenario(kv_cache_dtype="int3")


def test_step_time_command_and_api_take_the_kv_cache_format(capsys):
    from app.cli import main

    args = ["step-time", "--hardware", "h100", "--model", "llama-3-8b", "--decode-seqs", "64",
            "--decode-context", "4096", "--json"]
    assert main(args) == 0
    auto = json.loads(capsys.readouterr().out)
    assert main(args + ["--kv-cache-dtype", "fp8"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert (auto["kv_cache_dtype"], fp8["kv_cache_dtype"]) == ("auto", "fp8")
    assert fp8["components_ms"]["attention"] < 0.55 * auto["components_ms"]["attention"]
    assert fp8["components_ms"]["linear"] == auto["components_ms"]["linear"]
    assert main(args[:-1] + ["--kv-cache-dtype", "fp8"]) == 0
    assert "fp8 KV cache" in capsys.readouterr().out


def test_dashboard_form_offers_the_kv_cache_format():
    from app.web.present import build_form

    form = build_form({}, {}, page_defaults={})
    fields = {f.name: f for _, group in form.groups for f in group} | {f.name: f for f in form.advanced}
    f = fields["kv_cache_dtype"]
    assert f.label == "KV cache format" and [v for v, _ in f.options] == ["auto", "fp8"]


@pytest.mark.parametrize("key, gemms, elementwise", [
    # A dense layer launches 4 GEMMs (QKV, O, gate/up, down) and 5 elementwise kernels.
    ("llama-3-8b", 32 * 4, 32 * 5),
    # gpt-oss-120b: 36 MoE layers without shared experts, dense attention: 2 + 3 GEMMs, 5 + 3 elementwise.
    ("gpt-oss-120b", 36 * (2 + 3), 36 * (5 + 3)),
    # DeepSeek-R1: 61 MLA layers (5 GEMMs, 2 latent norms), 3 dense MLPs and 58 MoE layers with shared experts
    # (3 + 2 GEMMs; 3 routing kernels and the shared experts' activation).
    ("deepseek-r1", 61 * 5 + 3 * 2 + 58 * (3 + 2), 61 * (5 + 2) + 58 * (3 + 1)),
])
def test_each_layer_kind_pays_a_launch_floor_per_kernel_it_launches(key, gemms, elementwise):
    from sim_core.catalog import MODELS
    from sim_core.kernel.layer_kernels import elementwise_kernels, gemm_kernels

    assert (gemm_kernels(MODELS[key]), elementwise_kernels(MODELS[key])) == (gemms, elementwise)


def test_a_moe_models_small_batch_step_is_mostly_launch_floors():
    """DeepSeek-R1 FP8 on 8 B200s decoding one sequence: its weights' read takes under 1 ms, the step several;
    InferenceX measures 7.18 ms per output token there (SGLang, validation/inferencex.csv)."""
    setup = resolve_setup("b200", "deepseek-r1", "fp8", 8, ServingSettings(0.9, 16, 8192, 256))
    st = step_time(setup, 0, 0, 1, 1500, engine="sglang", cpu_overlap=True)
    assert st.seconds * 1e3 == pytest.approx(7.18, rel=0.25)


def test_mla_decode_attends_in_the_latent_space_with_its_flops():
    """A decoding MLA query runs the absorbed form (MQA over the 512-wide latent plus the 64-wide RoPE key, values
    the latent): per head and cached token 2 (512 + 64) + 2 x 512 FLOPs, 2.8x the expanded form's 2 x 192 + 2 x
    192 that prefill is charged; a GQA model's decode keeps its prefill's count."""
    s = setup("h200", "deepseek-r1", "fp8", 8)
    p = cost_params(s)
    m = s.model
    assert (m.kv_lora_rank, m.qk_rope_head_dim, m.heads) == (512, 64, 128)
    per_pair = 2 * m.full_attn_layers * m.heads * (2 * 512 + 64) / 8
    assert p[DECODE_ATTN_FLOPS_PER_PAIR] == pytest.approx(per_pair, rel=1e-12)
    assert p[DECODE_ATTN_FLOPS_PER_PAIR] > 2.5 * p[ATTN_FLOPS_PER_PAIR]
    dense = cost_params(setup())
    assert dense[DECODE_ATTN_FLOPS_PER_PAIR] == dense[ATTN_FLOPS_PER_PAIR]
    flops = step_breakdown(p, 0, 0, 0, 0, 64, 64 * 4096, 64)[7]
    assert flops >= 64 * 4096 * per_pair
