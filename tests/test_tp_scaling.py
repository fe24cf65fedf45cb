"""TP scaling of a 2048-token prefill against measurements (issue 9: "TP scaling of a 2048-token prefill ... land[s]
in the measured ranges of your validation set"), with the same source's 1024- and 4096-token prompts beside it.

The measured series are the `splitwise_perf_model` rows of validation/tp_fp8.csv (validation/SOURCES.md): Llama-2-70B,
batch 1, TTFT at TP 2/4/8 on DGX-A100 and DGX-H100, median of five runs. TP1 is absent (70B in 16-bit does not fit
one 80 GB GPU), so each series' baseline is TP2.

Tolerance: a speed-up is the ratio of two step times; the issue holds step rows to a median error of 10%, and the
ratio is held to the same 10%. (At 1024 and 2048 tokens the five runs spread the measured ratios by less than that,
e.g. TP2->TP8 at 2048: H100 2.19-2.30x, A100 2.50-2.52x; at 4096 by more: H100 1.52-2.01x.) Misses are strict
xfails carrying their numbers: a change to the model that fixes one fails here until the mark is removed.
"""

from __future__ import annotations

import pytest

from sim_core.studies import validation
from sim_core.studies.validation import Check

TOLERANCE = 0.10
H100 = "Llama-2-70B on H100-SXM-80GB (DGX-H100): TTFT, {}-token prompt"
A100 = "Llama-2-70B on A100-80GB (DGX-A100): TTFT, {}-token prompt"


@pytest.fixture(scope="module")
def speedups():
    rows = validation.checks(simulate=False)
    return {(s["series"], s["variant"]): s for s in validation.speedups(rows)}


@pytest.mark.parametrize("prompt", [1024, 2048, 4096])
def test_prefill_tp_series_are_in_the_set_with_tp2_as_baseline(speedups, prompt):
    for series in (H100.format(prompt), A100.format(prompt)):
        for variant in ("tp=4", "tp=8"):
            s = speedups[(series, variant)]
            assert s["baseline"] == "tp=2"
            assert s["measured"] > 1.0 and s["predicted"] > 1.0
        assert speedups[(series, "tp=8")]["measured"] > speedups[(series, "tp=4")]["measured"]


# Misses (measured vs predicted speed-up over TP2), analysed in validation/SOURCES.md (splitwise_perf_model): the model's
# kernel terms scale with TP as a sum of Vidur's kernel medians does; the measured TTFTs hold time outside any kernel
# that does not shrink with TP (A100 at 2048 tokens: -9, +8, +21 ms at TP 2/4/8; at 4096 tokens +100 to +210 ms).
MISS_2048_A100 = "A100 2048 TP2->TP8: measured 2.51x, predicted 2.82x (+12%)"
MISS_4096 = {
    (H100, "tp=4"): "H100 4096 TP2->TP4: measured 1.39x, predicted 1.65x (+19%)",
    (H100, "tp=8"): "H100 4096 TP2->TP8: measured 1.65x, predicted 2.48x (+50%)",
    (A100, "tp=4"): "A100 4096 TP2->TP4: measured 1.54x, predicted 1.77x (+15%)",
    (A100, "tp=8"): "A100 4096 TP2->TP8: measured 2.25x, predicted 2.91x (+29%)",
}


def _cases():
    for prompt in (1024, 2048, 4096):
        for gpu in (H100, A100):
            for variant in ("tp=4", "tp=8"):
                reason = (MISS_4096.get((gpu, variant)) if prompt == 4096 else
                          MISS_2048_A100 if (prompt, gpu, variant) == (2048, A100, "tp=8") else None)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(gpu.format(prompt), variant, marks=marks, id=f"{gpu[15:19]}-{prompt}-{variant}")


@pytest.mark.parametrize("series,variant", list(_cases()))
def test_prefill_tp_speedup_is_within_10_percent_of_the_measured_one(speedups, series, variant):
    s = speedups[(series, variant)]
    assert abs(s["predicted"] / s["measured"] - 1.0) <= TOLERANCE, s


def _check(series: str, variant: str, reference: float, predicted: float) -> Check:
    return Check(group="tp/fp8", source="x", what="x", reference=reference, unit="ms", predicted=predicted,
                 series=series, variant=variant)


def test_speedups_take_the_smallest_tp_of_a_series_as_baseline():
    rows = [_check("a", "tp=8", 25.0, 20.0), _check("a", "tp=2", 100.0, 80.0), _check("a", "tp=4", 50.0, 40.0),
            _check("b", "tp=1", 10.0, 10.0), _check("b", "tp=2", 5.0, 8.0),
            _check("c", "bf16", 30.0, 30.0), _check("c", "fp8", 20.0, 15.0)]
    got = {(s["series"], s["variant"]): (s["baseline"], s["measured"], s["predicted"]) for s in validation.speedups(rows)}
    assert got == {("a", "tp=8"): ("tp=2", 4.0, 4.0), ("a", "tp=4"): ("tp=2", 2.0, 2.0),
                   ("b", "tp=2"): ("tp=1", 2.0, 1.25), ("c", "fp8"): ("bf16", 1.5, 2.0)}
