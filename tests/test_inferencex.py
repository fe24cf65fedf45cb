"""InferenceX's points (validation/inferencex.csv) as `sched-sim validate` predicts them: the names they map to, the
closed-loop run a point is, the site rows' frontier interpolation, and the frontier summary's arithmetic."""

from __future__ import annotations

import pytest

from sim_core.studies import inferencex, validation
from sim_core.studies.inferencex import Point
from sim_core.studies.validation import Check


def test_names_map_to_the_catalog():
    assert validation.hardware_key("H100-SXM-80GB (H100 DGXC)") == "h100"
    assert validation.hardware_key("H20") == "h20" and validation.hardware_key("H200") == "h200"
    assert validation.hardware_key("GB200 NVL72") == "gb200" and validation.hardware_key("B300") == "b300"
    assert validation.hardware_key("MI325X") == "mi325x" and validation.hardware_key("H800") is None
    assert validation.model_key("DeepSeek-R1-0528") == "deepseek-r1"
    assert validation.model_key("openai/gpt-oss-120b") == "gpt-oss-120b"
    assert validation.model_key("Llama-3.3-70B") == "llama-3-70b"
    assert validation.model_key("DeepSeek (V3/R1 family)") is None


def test_mxfp4_runs_weight_only_where_there_are_no_fp4_tensor_cores():
    assert inferencex.quantization_for("fp4 (MXFP4 weights)", "b200") == ("fp4", "")
    q, note = inferencex.quantization_for("fp4 (MXFP4 weights)", "h100")
    assert q == "int4" and "weight-only" in note
    assert inferencex.quantization_for("fp8", "mi325x")[0] == "fp8"
    assert inferencex.quantization_for("bf16", "h200")[0] == "bf16"


def test_measurements_map_to_the_quantity_they_measured():
    m = inferencex.measure_of
    assert m("total (input+output) tokens/s per GPU") == "tput_per_gpu"
    assert m("output tokens/s per GPU") == "output_tput_per_gpu"
    assert m("TTFT (statistic not stated in the sweep table)") == "ttft_mean"
    assert m("median TPOT") == "tpot_p50" and m("mean TPOT") == "tpot_mean"
    assert m("total tokens/s per GPU interpolated at 76 tok/s/user (output tokens/s per user)") == "tput_per_gpu"


def test_every_row_is_listed_and_quick_skips_with_the_reason():
    rows = inferencex.inferencex_checks(simulate=False)
    assert len(rows) == len(validation.read_rows(validation.VALIDATION_DIR / inferencex.FILE))
    assert all(c.predicted is None and c.note for c in rows)
    assert {c.group for c in rows} == {"inferencex_issue828_gptoss_h100", "inferencex_api_baselines",
                                       "inferencex_issue_experiments", "inferencex_site_compare"}
    # ~1000 users on one configuration: the site's B200 DeepSeek rows come from InferenceX's multi-node
    # disaggregated configuration with MTP, which the note names.
    beyond = [c for c in rows if "~1088" in c.what]
    assert beyond and all("disaggregated" in c.note and "MTP" in c.note for c in beyond)


def test_rows_run_with_their_frameworks_engine_profile():
    assert inferencex.engine_of("SGLang v0.5.12 (lmsysorg/sglang:v0.5.12-cu130)") == "sglang"
    assert inferencex.engine_of("TensorRT-LLM 1.3.0rc14") == "trtllm"
    assert inferencex.engine_of("vLLM v0.15.1 (vllm/vllm-openai:v0.15.1)") == "vllm"
    assert inferencex.engine_of("best available config per side (not stated on the page)") == "vllm"


def test_the_site_frontier_spans_inferencex_own_sweep_where_known():
    """DeepSeek-R1 on MI300X was swept at TP8 only, concurrency 4-64 (configs/amd-master.yaml), so the frontier
    runs nothing else; a page without a known sweep takes every TP over the whole concurrency grid."""
    assert inferencex.sweep("deepseek-r1", "mi300x", 8192, 1024) == (("sglang", 8, (4, 8, 16, 32, 64)),)
    b200 = inferencex.sweep("gpt-oss-120b", "b200", 1024, 1024)
    assert ("trtllm", 1, (256,)) in b200 and ("vllm", 8, (4, 8)) in b200
    unknown = inferencex.sweep("qwen3-8b", "h100", 1024, 1024)
    assert unknown == tuple(("vllm", tp, inferencex.FRONTIER_CONCURRENCY) for tp in inferencex.FRONTIER_TPS)


def test_a_point_is_inferencex_closed_loop_run():
    """A point runs CONC * 10 requests; its lengths are drawn from [0.8 L, L], so total over output tokens is the
    ISL/OSL ratio's (1 + ISL/OSL), and TPOT's inverse is the interactivity."""
    p = inferencex.run_point("h100", "llama-3-8b", "fp8", inferencex.Parallelism(1), (1024, 128), 4)
    assert p["completed"] == 4 * inferencex.PROMPTS_PER_USER
    assert p["tput_per_gpu"] / p["output_tput_per_gpu"] == pytest.approx(1 + 1024 / 128, rel=0.05)
    assert p["intvty"] == pytest.approx(1000 / p["tpot_p50"])


def test_frontier_interpolates_between_its_neighbours(monkeypatch):
    points = ((20.0, 1000.0, "TP1 concurrency 64"), (40.0, 600.0, "TP2 concurrency 16"))
    monkeypatch.setattr(inferencex, "frontier", lambda *a: points)
    value, config = inferencex.frontier_at("b200", "llama-3-70b", "fp8", 1024, 1024, 30.0)
    assert value == pytest.approx(800.0) and "TP1" in config and "TP2" in config
    value, why = inferencex.frontier_at("b200", "llama-3-70b", "fp8", 1024, 1024, 50.0)
    assert value is None and "outside the simulated frontier" in why


def _row(model, gpu, level, measured, predicted, quantity="tput_per_gpu"):
    return Check(group="g", source=inferencex.FILE, what=f"{model} {gpu}", reference=measured, unit="tok/s/GPU",
                 predicted=predicted, point=Point(model, "fp8", "1024/1024", level, gpu, 8, quantity))


def test_frontier_summary_counts_errors_ratios_and_pairs():
    rows = [_row("llama-3-70b", "b200", "c4", 100, 110), _row("llama-3-70b", "h200", "c4", 50, 40),
            _row("llama-3-70b", "mi300x", "c4", 80, 120),  # orders above b200: 2 of 3 pairs agree
            _row("deepseek-r1", "b200", "c4", 100, 300), _row("deepseek-r1", "h200", "c4", 10, 5, "ttft_mean")]
    s = inferencex.frontier_summary(rows)
    assert s["models"]["llama-3-70b"]["median_abs_error"] == pytest.approx(0.2)
    assert s["models"]["llama-3-70b"]["max_ratio"] == pytest.approx(1.5)
    assert {k: v for k, v in s["models"]["deepseek-r1"].items() if k != "matched"} == {
        "family": "MoE", "rows": 1, "median_abs_error": pytest.approx(2.0), "max_ratio": pytest.approx(3.0)}
    assert s["families"]["dense"]["rows"] == 3
    mi300x = next(g for g in s["gpus"] if g["gpu"] == "mi300x")
    assert mi300x["rows"] == 1 and mi300x["median_error"] == pytest.approx(0.5)
    assert (s["pairs"], s["pairs_agree"]) == (3, 2)  # deepseek has one throughput row: no pair
    assert any("2/3" in line for line in inferencex.frontier_lines(s))


def test_raw_runs_are_also_compared_at_the_interactivity_they_reached():
    """A deployment's runs at concurrency 4 and 8: the model's runs reach 100 and 50 tok/s/user with 1000 and 1600
    tok/s/GPU; the measured run at concurrency 8 reached 75 tok/s/user (TPOT 13.3 ms) with 1000 tok/s/GPU, where
    the model's curve gives 1300: +30% at matched interactivity (and +60% at matched concurrency)."""
    def run(level, tput, tput_predicted, tpot, tpot_predicted):
        return [_row("deepseek-r1", "h200", level, tput, tput_predicted),
                _row("deepseek-r1", "h200", level, tpot, tpot_predicted, "tpot_mean")]

    rows = run("concurrency 4", 700, 1000, 12.0, 10.0) + run("concurrency 8", 1000, 1600, 1000 / 75, 20.0)
    summary = inferencex.frontier_summary(rows)
    # Beside it, the runs' TPOT at their own concurrency: -16.7% and +50%, median |error| 33.3%.
    assert summary["families"]["MoE"]["tpot"]["median_abs_error"] == pytest.approx((1 / 6 + 0.5) / 2)
    assert any("median |error|: MoE 33.3% (2 rows)" in line for line in inferencex.frontier_lines(summary))
    s = summary["models"]["deepseek-r1"]
    assert s["rows"] == 2 and s["max_ratio"] == pytest.approx(1.6)
    # concurrency 4's measured 83 tok/s/user: 1000 + (100 - 83.3) / 50 * 600 = 1200 on the curve
    assert s["matched"]["rows"] == 2
    assert s["matched"]["max_ratio"] == pytest.approx(1200 / 700, rel=1e-3)
    assert inferencex._interpolate([(50.0, 1600.0), (100.0, 1000.0)], 75.0) == pytest.approx(1300.0)
    assert inferencex._interpolate([(50.0, 1600.0), (100.0, 1000.0)], 120.0) is None


def _raw(**changes):
    row = dict(source_id="g", hardware="B300", gpus="8", tp="8", ep="8", model="DeepSeek-R1-0528",
               dtype="fp4 (NVFP4 weights)", framework="SGLang v0.5.12", input_len="1024", output_len="1024",
               concurrency="4", measured_what="total (input+output) tokens/s per GPU", value="138.2",
               unit="tok/s/GPU", notes="")
    return row | changes


def test_expert_parallel_rows_run_with_their_ep_and_attention_tensor_parallel(monkeypatch):
    """InferenceX's SGLang DeepSeek EP runs pass --ep-size EP with --tensor-parallel-size TP and no DP attention:
    the row runs at that ep (experts whole over the TP GPUs); an EP other than TP would need attention
    data-parallel, which the rows do not record, so it is skipped with that reason rather than run as TP."""
    calls = []

    def fake_run(hw, model, quantization, parallel, *args, **kwargs):
        calls.append((parallel, kwargs))
        return {"tput_per_gpu": 140.0, "preemptions": 0}

    monkeypatch.setattr(inferencex, "run_point", fake_run)
    c = inferencex.raw_check(_raw(), simulate=True)
    assert calls == [((8, 8), {"engine": "sglang"})] and c.predicted == 140.0 and c.point.ep == 8
    skipped = inferencex.raw_check(_raw(ep="16"), simulate=True)
    assert skipped.predicted is None and "attention data-parallel" in skipped.note and len(calls) == 1
    assert inferencex.raw_check(_raw(ep=""), simulate=True).point.ep == 1


def test_matched_interactivity_keeps_each_ep_its_own_curve():
    """Two deployments that differ only in EP are two curves: their runs at the same concurrencies all count."""
    def row(level, ep, tput, tput_predicted, tpot, tpot_predicted):
        return [Check(group="g", source=inferencex.FILE, what=level, reference=ref, unit="u", predicted=pred,
                      point=Point("deepseek-r1", "fp4", "1024/1024", level, "b300", 8, q, ep))
                for q, ref, pred in (("tput_per_gpu", tput, tput_predicted), ("tpot_mean", tpot, tpot_predicted))]

    rows = (row("concurrency 4", 1, 700, 1000, 12.0, 10.0) + row("concurrency 8", 1, 1000, 1600, 1000 / 75, 20.0)
            + row("concurrency 4", 8, 800, 1100, 12.0, 10.0) + row("concurrency 8", 8, 1100, 1700, 1000 / 75, 20.0))
    assert inferencex.frontier_summary(rows)["models"]["deepseek-r1"]["matched"]["rows"] == 4


def test_matched_measure_is_split_by_gpu_maker():
    """The site rows (already at their interactivity) of b200 and h200 are NVIDIA's (+10%, -20%), of mi300x AMD's
    (+50%): each maker's median and largest ratio, and the table line that prints them."""
    level = "76 tok/s/user"
    rows = [_row("llama-3-70b", "b200", level, 100, 110), _row("llama-3-70b", "h200", level, 50, 40),
            _row("llama-3-70b", "mi300x", level, 80, 120), _row("deepseek-r1", "b200", level, 100, 300)]
    assert inferencex.vendor("mi300x") == "AMD" and inferencex.vendor("b200") == "NVIDIA"
    s = inferencex.frontier_summary(rows)
    assert s["vendors"]["AMD"]["dense"] == {"rows": 1, "median_abs_error": pytest.approx(0.5),
                                            "max_ratio": pytest.approx(1.5)}
    assert s["vendors"]["NVIDIA"]["dense"]["median_abs_error"] == pytest.approx(0.15)
    assert s["vendors"]["NVIDIA"]["MoE"]["rows"] == 1 and s["vendors"]["AMD"]["MoE"]["rows"] == 0
    assert "| AMD | dense | 1 | 50.0% | 1.50x |" in inferencex.frontier_lines(s)


def test_points_run_with_the_kv_cache_format_their_launcher_sets(monkeypatch):
    """InferenceX's SGLang DeepSeek-R1 launchers on the B200/B300/MI300X/MI325X pass --kv-cache-dtype fp8_e4m3; the
    H200's sets none, nor do its vLLM launchers."""
    seen = []
    metrics = {"gpus": 8, "total_token_throughput": 1.0, "output_throughput": 1.0, "ttft_ms": {"mean": 1.0},
               "tpot_ms": {"mean": 1.0, "p50": 1.0}, "completed": 3, "preemptions": 0}
    monkeypatch.setattr(inferencex, "run", lambda s: seen.append(s) or type("R", (), {"metrics": metrics}))
    for hw in ("b300", "h200"):  # concurrency 3: a point no other test caches
        inferencex.run_point(hw, "deepseek-r1", "fp8", inferencex.Parallelism(8), (1024, 1024), 3, 1, "sglang")
    inferencex.run_point("b200", "deepseek-r1", "fp8", inferencex.Parallelism(8), (1024, 1024), 3, 1, "vllm")
    assert [s.kv_cache_dtype for s in seen] == ["fp8", "auto", "auto"]
