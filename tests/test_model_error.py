"""The model's own error bars: residuals read from the validation rows, their random-effects spread, the ensemble
of step-time models, its intervals, the order-flip warnings, and the faces (CLI and API) that report them."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from sim_core import Scenario, resolve
from sim_core.kernel.cost_constants import STEP_TIME_SCALE
from sim_core.kernel.cost_model import cost_params, step_cost
from sim_core.runner import make_requests, simulate_requests
from sim_core.studies import model_error
from sim_core.studies.model_error import Ensemble, Residual, Spread, spread
from sim_core.studies.validation import Check

ROOT = Path(__file__).resolve().parent.parent
SMALL = Scenario(scheduler="chunked", workload="chat", hardware="a100", model="llama-3-8b", rate=6, duration=20)


def _residuals(values: dict[str, list[float]], group: str = "serving") -> list[Residual]:
    return [Residual(src, group, f"{src} row {i}", v) for src, vs in values.items() for i, v in enumerate(vs)]


def test_residual_is_the_log_of_the_step_time_factor_for_times_and_throughputs():
    """A time measured 2x the prediction and a throughput measured half of it both say: steps take 2x as long."""
    base = dict(source="s", what="w", reference=0.0, unit="")
    slow_time = Check(**{**base, "group": "step", "reference": 20.0, "unit": "ms", "predicted": 10.0})
    slow_rate = Check(**{**base, "group": "serving", "reference": 500.0, "unit": "tok/s/GPU", "predicted": 1000.0})
    assert model_error.residual_of(slow_time).log_factor == pytest.approx(math.log(2))
    assert model_error.residual_of(slow_rate).log_factor == pytest.approx(math.log(2))
    kernel = Check(**{**base, "group": "kernel", "reference": 2.0, "unit": "ms", "predicted": 1.0})
    skipped = Check(**{**base, "group": "step", "reference": 2.0, "unit": "ms", "predicted": None})
    ratio = Check(**{**base, "group": "serving", "reference": 2.0, "unit": "x", "predicted": 1.0})
    assert model_error.residual_of(kernel) is model_error.residual_of(skipped) is model_error.residual_of(ratio) \
        is None


def test_spread_separates_sources_from_rows_within_them():
    """Two sources at -0.1 and +0.3 (means), each row +-0.1 around its source: between-source sd is the sd of
    the two means, within-source sd the pooled deviation (n - sources degrees of freedom)."""
    s = spread(_residuals({"a": [-0.2, 0.0], "b": [0.2, 0.4]}))
    assert s.mean == pytest.approx(0.1)
    assert s.between_sd == pytest.approx(np.std([-0.1, 0.3], ddof=1))
    assert s.within_sd == pytest.approx(math.sqrt(4 * 0.01 / 2))
    assert (s.sources, s.rows) == (2, 4)
    assert s.sd == pytest.approx(math.hypot(s.between_sd, s.within_sd))
    with pytest.raises(ValueError, match="two sources"):
        spread(_residuals({"a": [0.1, 0.2]}))
    assert spread(_residuals({"a": [0.0], "b": [1.0], "c": [5.0]}), exclude_source="c").mean == pytest.approx(0.5)


def test_ensemble_factors_are_stratified_normal_quantiles_around_the_mean():
    s = Spread(mean=0.1, between_sd=0.3, within_sd=0.4, sources=5, rows=50)
    f = s.factors(16)
    assert len(f) == 16 and np.all(np.diff(f) > 0)
    assert math.sqrt(f[7] * f[8]) == pytest.approx(math.exp(0.1))  # symmetric in the log around the mean
    low, high = s.interval(0.9)
    assert math.log(f[0]) < low < high < math.log(f[-1])  # 16 strata reach past the 5% and 95% points
    assert high - low == pytest.approx(2 * 1.6448536 * 0.5, rel=1e-6)


def test_held_out_coverage_counts_rows_against_intervals_built_without_their_source():
    rows = _residuals({"a": [0.0, 0.05, 2.0], "b": [0.1, -0.1], "c": [0.0, 0.02]})
    covered, total = model_error.held_out_coverage(rows)
    assert total == 7
    # a's 2.0 is far outside what b and c spread; every other row is inside its interval
    assert covered == 6


def test_step_time_scale_multiplies_the_step_exactly_and_one_changes_nothing():
    setup = resolve(SMALL).setup
    p = cost_params(setup)
    assert p[STEP_TIME_SCALE] == 1.0
    shape = (512, 1, 512 * 513 // 2, 0, 32, 32 * 900, 33)
    base = step_cost(p, *shape)
    scaled = cost_params(setup, time_scale=1.75)
    out = step_cost(scaled, *shape)
    assert out[0] == base[0] * 1.75 and out[1:] == base[1:]  # bytes and FLOPs do not change


def test_a_member_scales_an_offline_run_exactly():
    """Every request at t=0: the schedule does not depend on the clock, so a member's step-time factor f scales
    every finish time by f exactly (what makes the held-out coverage of throughput rows the ensemble's)."""
    trace = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"0,{200 + 37 * i},{20 + 5 * i}\n" for i in range(40))
    sc = SMALL.model_copy(update={"scheduler": "fcfs", "rate": None})
    r = resolve(sc)
    reqs = make_requests(sc, r, trace)
    one = simulate_requests(sc, r, reqs)
    twice = simulate_requests(sc, dataclasses.replace(r, step_time_scale=2.0), reqs)
    np.testing.assert_allclose(twice.finish_s, 2.0 * one.finish_s, rtol=1e-12)
    assert twice.metrics["steps"] == one.metrics["steps"]


def test_ensemble_interval_has_the_keys_of_ci95_and_brackets_the_members():
    e = model_error.ensemble(SMALL, members=8)
    assert len(e.members) == 8 and np.all(np.diff(e.factors) > 0)
    from sim_core.statistics import aggregate

    _, ci = aggregate(e.members[:2])  # what ci95 would hold for two runs of these metrics
    assert _keys(e.interval) == _keys(ci)
    means = [m["e2el_ms"]["mean"] for m in e.members]
    low, high = e.interval["e2el_ms"]["mean"]
    assert min(means) <= low <= high <= max(means)
    assert means[-1] > means[0]  # the slowest model's requests take longer than the fastest's


def _keys(doc: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in doc.items():
        out |= _keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
    return out


def _ensemble(values: list[float]) -> Ensemble:
    return Ensemble(np.linspace(0.5, 2, len(values)), [{"goodput": v, "ttft_ms": {"mean": 1.0}} for v in values],
                    0.9)


def test_order_flips_compare_members_pairwise_and_ignore_ties():
    a, b = _ensemble([5, 4, 3, 2]), _ensemble([4, 3, 2, 1])  # a ahead in every member, though intervals overlap
    assert model_error.order_flips({"a": a, "b": b}) == []
    c = _ensemble([6, 3, 2, 2])  # ahead of a in one member, behind in two, level in one
    flips = model_error.order_flips({"a": a, "c": c})
    assert flips == ["a and c swap places on goodput within the model's error "
                     "(2 of 4 ensemble members put a higher)"]
    assert model_error.flips_about(flips, "c") == flips and model_error.flips_about(flips, "b") == []


def test_the_residual_file_lists_the_step_and_serving_rows():
    residuals = model_error.load()
    assert {r.group for r in residuals} == set(model_error.GROUPS)
    assert len({r.source for r in residuals}) >= 5
    assert all(abs(r.log_factor) < math.log(5) for r in residuals)


def test_model_md_quotes_the_held_out_coverage_the_residuals_give():
    """docs/MODEL.md quotes the nominal 90% interval's held-out coverage of the serving rows; it must be the
    figure the current residual file gives."""
    covered, total = model_error.held_out_coverage(model_error.load())
    text = (ROOT / "docs" / "MODEL.md").read_text(encoding="utf-8")
    m = re.search(r"covers (\d+) of (\d+) serving rows", text)
    assert m is not None, "docs/MODEL.md must quote the held-out coverage"
    assert (int(m.group(1)), int(m.group(2))) == (covered, total)


def test_cli_json_reports_model_ci_and_the_table_prints_the_interval(capsys):
    flags = ["--workload", "chat", "--hardware", "a100", "--rate", "6", "--duration", "20"]
    assert main(["compare", "--schedulers", "fcfs,chunked", *flags, "--model-uncertainty", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for entry in doc["schedulers"].values():
        assert _keys(entry["model_ci"]) and entry["model_ensemble"]["level"] == model_error.LEVEL
        assert len(entry["model_ensemble"]["step_time_factors"]) == model_error.MEMBERS
        low, high = entry["model_ci"]["goodput"]
        assert low <= high
    assert main(["run", *flags]) == 0
    assert "Model interval" not in capsys.readouterr().out
    assert main(["run", *flags, "--model-uncertainty"]) == 0
    assert "Model interval (90% of 16 step-time models" in capsys.readouterr().out


def test_api_run_reports_model_ci_with_the_keys_of_ci95():
    from fastapi.testclient import TestClient

    from app.web import app

    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        query = "schedulers=fcfs,chunked&workload=chat&hardware=a100&rate=6&duration=20"
        plain = c.get(f"/api/run?{query}").json()
        assert all("model_ci" not in e for e in plain["schedulers"].values())
        doc = c.get(f"/api/run?{query}&model_uncertainty=1").json()
        seeds = c.get(f"/api/run?{query}&seeds=2").json()
    for name, entry in doc["schedulers"].items():
        assert _keys(entry["model_ci"]) <= _keys(entry["metrics"])
        assert {"goodput", "ttft_ms.mean", "e2el_ms.p99"} <= _keys(entry["model_ci"])
        assert entry["metrics"] == plain["schedulers"][name]["metrics"]  # the run itself is unchanged
        assert set(entry["model_ci"]) == set(seeds["schedulers"][name]["ci95"])
