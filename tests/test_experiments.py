"""The preset gallery's classic experiments (sim_core/studies/experiments.py): each one's stated outcome holds in its own
simulated metrics, and each is a valid dashboard scenario."""

from __future__ import annotations

import pytest

from app.web.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict
from sim_core.studies.experiments import BY_KEY, EXPERIMENTS, run_query, split_query

CLASSICS = {"orca", "sarathi", "spf", "aging", "slo", "vtc", "cache", "spec", "offload", "lora"}


def test_the_gallery_has_the_classic_experiments():
    assert set(BY_KEY) == CLASSICS and len(EXPERIMENTS) == len(CLASSICS)


@pytest.mark.parametrize("key", sorted(CLASSICS))
def test_each_experiments_stated_outcome_holds(key):
    e = BY_KEY[key]
    claims = e.claims(run_query)
    assert len(claims) >= 2
    assert all(ok for _, ok in claims), claims


@pytest.mark.parametrize("key", sorted(CLASSICS))
def test_each_experiment_is_a_dashboard_scenario_as_written(key):
    """The page reads the query with its own defaults; the experiment names every field where they differ, so the
    page simulates what the check ran."""
    from urllib.parse import parse_qsl

    e = BY_KEY[key]
    schedulers, rest = split_query(e.query)
    req = parse_request(query_to_dict(parse_qsl(e.query)), defaults=PAGE_DEFAULTS,
                        default_schedulers=PAGE_SCHEDULERS)
    assert list(req.schedulers) == schedulers
    assert {k for k, _ in parse_qsl(rest)} >= set(PAGE_DEFAULTS)


def test_a_claim_fails_when_its_outcome_does_not_hold():
    """The checks compare, so they can fail: swap the schedulers' metrics and Orca's claims all fail."""
    e = BY_KEY["orca"]
    real = run_query(e.query)
    swapped = {"static": real["fcfs"], "fcfs": real["static"]}
    assert not any(ok for _, ok in e.claims(lambda q: swapped))
