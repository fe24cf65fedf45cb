"""sim_core/studies/offline.py step_gap: a measured offline rate spread over a simulated run's steps
(scripts/moe_step_gap.py, issue #35)."""

import pytest

from sim_core.studies.offline import step_gap


def test_step_gap_spreads_the_missing_time_over_steps_tokens_and_pairs():
    # 1,000 tokens in 100 simulated steps taking 10 s; measured at 50 tok/s, i.e. 20 s: 10 s missing.
    gap = step_gap(steps=100, predicted_s=10.0, output_tokens=1000, measured_rate=50.0, pairs_per_token=4.0)
    assert gap.predicted_step_s == pytest.approx(0.1)
    assert gap.implied_step_s == pytest.approx(0.2)
    assert gap.missing_per_token_s == pytest.approx(0.01)
    assert gap.missing_per_pair_s == pytest.approx(0.0025)


def test_step_gap_is_zero_where_the_simulation_matches_and_negative_where_it_is_slow():
    exact = step_gap(steps=10, predicted_s=4.0, output_tokens=800, measured_rate=200.0, pairs_per_token=8.0)
    assert exact.missing_per_token_s == pytest.approx(0.0)
    assert exact.implied_step_s == pytest.approx(exact.predicted_step_s)
    slow = step_gap(steps=10, predicted_s=4.0, output_tokens=800, measured_rate=400.0, pairs_per_token=8.0)
    assert slow.missing_per_token_s == pytest.approx(-2.0 / 800)


def test_step_gap_of_a_dense_model_has_no_per_pair_figure():
    assert step_gap(steps=1, predicted_s=1.0, output_tokens=10, measured_rate=5.0,
                    pairs_per_token=0.0).missing_per_pair_s == 0.0
