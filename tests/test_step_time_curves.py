"""The dashboard's Step time panel: the cost model's step time against batch tokens for a prefill-only, a
decode-only and a mixed step (sim_core.step_time.step_time_curves), and its figure (app/web/figures/step_time.py)."""

from __future__ import annotations

import pytest

from app.web.figures.step_time import COMPONENT_STYLE, steptime_figure, typical_decode_context
from sim_core.kernel.cost_constants import COMPONENTS
from sim_core.step_time import CURVE_KINDS, StepShape, step_time_curves, step_time_doc

SHAPE = dict(hardware="a100", model="llama-3-8b", decode_seqs=1, decode_context=900)


def test_each_point_is_the_step_time_the_api_reports_for_that_batch():
    curves = step_time_curves(StepShape(**SHAPE), 2048)
    tokens = curves["tokens"]
    assert tokens[0] == 1 and tokens[-1] == 2048 and tokens == sorted(set(tokens))
    batch = {"prefill": lambda n: dict(prefill_tokens=n, decode_seqs=0),
             "decode": lambda n: dict(prefill_tokens=0, decode_seqs=n),
             "mixed": lambda n: dict(prefill_tokens=n - n // 2, decode_seqs=n // 2)}
    assert set(curves["kinds"]) == set(batch) == set(CURVE_KINDS)
    for kind, shape_of in batch.items():
        kind_curves = curves["kinds"][kind]
        drawn = [k for k, y in enumerate(kind_curves["step_ms"]) if y is not None]
        assert len(drawn) > len(tokens) // 2
        for k in (drawn[0], drawn[len(drawn) // 2], drawn[-1]):
            doc = step_time_doc(StepShape(**{**SHAPE, **shape_of(tokens[k])}))
            assert kind_curves["step_ms"][k] == pytest.approx(doc["step_ms"], rel=1e-12)
            for c in COMPONENTS:
                assert kind_curves["components_ms"][c][k] == pytest.approx(doc["components_ms"][c], rel=1e-12,
                                                                           abs=1e-12)
    # More tokens never make a step faster.
    for kind in CURVE_KINDS:
        ys = [y for y in curves["kinds"][kind]["step_ms"] if y is not None]
        assert all(b >= a for a, b in zip(ys, ys[1:], strict=False))


def test_the_ridge_is_where_the_gemms_stop_waiting_on_weights():
    """Below the ridge a step's GEMM time barely grows with tokens (weights dominate); above it, it grows in
    proportion. Prefill-only GEMM time at 4x the ridge is far more than 4x that at a quarter of it."""
    curves = step_time_curves(StepShape(**SHAPE), 8192)
    ridge = curves["ridge_tokens"]
    assert 50 < ridge < 500  # A100 fp16: ~312 TFLOP/s x efficiency over ~2 TB/s x efficiency, 2 FLOPs per byte
    tokens, linear = curves["tokens"], curves["kinds"]["prefill"]["components_ms"]["linear"]
    lo = max(k for k, n in enumerate(tokens) if n <= ridge / 4)
    hi = min(k for k, n in enumerate(tokens) if n >= ridge * 4)
    growth = linear[hi] / linear[lo]
    assert growth > 0.5 * tokens[hi] / tokens[lo] / 4  # compute-bound above: time follows tokens
    small = [linear[k] for k, n in enumerate(tokens) if n <= ridge / 8]
    assert max(small) / min(small) < 1.3  # memory-bound below: the weights' read dominates


def test_decode_batches_past_the_kv_pool_are_not_drawn():
    shape = StepShape(**{**SHAPE, "decode_context": 30_000})
    curves = step_time_curves(shape, 8192)
    limit = curves["max_decode_seqs"]
    assert 0 < limit < 8192
    for n, y in zip(curves["tokens"], curves["kinds"]["decode"]["step_ms"], strict=True):
        assert (y is None) == (n > limit)
    assert None not in curves["kinds"]["prefill"]["step_ms"]


def test_async_scheduling_hides_the_cpu_overhead_in_the_curves():
    sync = step_time_curves(StepShape(**SHAPE), 512)
    overlapped = step_time_curves(StepShape(**SHAPE, async_scheduling=True), 512)
    assert all(y == 0.0 for y in overlapped["kinds"]["decode"]["components_ms"]["overhead"] if y is not None)
    assert sync["kinds"]["decode"]["components_ms"]["overhead"][0] > 1.0


def test_the_figure_stacks_each_components_band_in_three_panels_with_the_ridge():
    curves = step_time_curves(StepShape(**SHAPE), 2048)
    fig = steptime_figure(curves)
    assert len(fig["data"]) == len(CURVE_KINDS) * len(COMPONENTS)
    assert {t["name"] for t in fig["data"] if t["showlegend"]} == {label for label, _ in COMPONENT_STYLE.values()}
    assert len({t["stackgroup"] for t in fig["data"]}) == len(CURVE_KINDS)
    assert len(fig["layout"]["shapes"]) == 3 and all(s["x0"] == curves["ridge_tokens"]
                                                      for s in fig["layout"]["shapes"])
    assert fig["layout"]["xaxis"]["type"] == "log"


def test_typical_context_is_the_runs_mean_prompt_plus_half_its_mean_output():
    assert typical_decode_context({"num_requests": 10, "prefill_tokens": 6000, "prefill_tokens_saved": 1000,
                                   "decode_tokens": 2000}) == 800
    assert typical_decode_context({"num_requests": 0}) == 1


def test_the_decode_panel_stacks_the_runs_speculation_and_lora_parts_as_the_engine_costs_them():
    """With EAGLE and LoRA on, the decode panel gains three bands (verification, proposer, LoRA kernels); the
    verification's extra grows with the batch; a plain run's figure has none."""
    from types import SimpleNamespace

    from app.web.figures.step_time import EXTRA_STYLE, steptime_context
    from sim_core import Scenario

    view = SimpleNamespace(metrics={"num_requests": 0}, setup={"token_budget": 1024})
    on = Scenario(hardware="a100", model="llama-3-8b", spec_method="eagle", spec_tokens=4, lora_adapters=16,
                  max_loras=4)
    fig = steptime_context(on, view)["figure"]
    extra = {t["name"]: t for t in fig["data"] if t["name"] in {label for label, _ in EXTRA_STYLE.values()}}
    assert set(extra) == {label for label, _ in EXTRA_STYLE.values()}
    assert all(t["xaxis"] == "x2" for t in extra.values())  # the decode panel only
    verify = extra["verifying drafts"]["y"]
    assert verify[0] > 0 and verify[-1] > verify[0]
    plain = steptime_context(Scenario(hardware="a100", model="llama-3-8b"), view)["figure"]
    assert len(plain["data"]) == len(CURVE_KINDS) * len(COMPONENTS)
