"""Cluster over time (issue #24 item 5): sim_core's queue per window against a brute-force count; what the figure
keeps of a run equals the autoscaled run's own metrics (replicas_over_time, slo_attainment_by_window) and, for a
static deployment, its engines serving throughout; /cluster-time's query parses to one run per policy (the static
one without the autoscaler's fields), round-trips through its canonical query, and refuses bad input naming the
field; the results page of an autoscaled scenario shows the card (and only such a page) with its link to the
comparison, every row of its figure on one time axis."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import pytest

from app.web import charts, figures, service
from app.web.cluster_time_page import comparison, parse_cluster_time
from app.web.figures.cluster_time import NAME, over_time
from app.web.inputs import PAGE_DEFAULTS, parse_request, query_to_dict
from sim_core import ScenarioError, run
from sim_core.kernel.state import FINISHED
from sim_core.queue_by_window import waiting_by_window

# A step in load that outruns one replica for a while (autoscale_target and autoscale_replica_rate given: no
# capacity search, so the runs take a second).
SCENARIO = ("schedulers=fcfs&hardware=a100&workload=chat&rate_schedule=0:1,60:6,150:1&duration=240&max_replicas=4"
            "&provision_delay_s=30&autoscale_target=8&autoscale_replica_rate=2.5")


def scenario(query: str):
    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS)
    return req.for_scheduler(req.schedulers[0])


@pytest.fixture(scope="module")
def autoscaled():
    return run(scenario(SCENARIO + "&autoscaler=utilization"))


def test_the_queue_per_window_is_the_time_requests_waited_in_it():
    res = run(scenario("hardware=rtx3050&max_model_len=8192&workload=rag&rate=4&duration=150&seed=2"))  # queues: past its knee
    out = waiting_by_window(res, res.end_s)
    done = res.status == FINISHED
    begin, until = res.requests.arrival_s[done], res.first_scheduled_s[done]
    assert len(out["start_s"]) == int(np.ceil(res.end_s / 60.0))
    for start, waiting in zip(out["start_s"], out["waiting"], strict=True):
        end = min(start + 60.0, res.end_s)
        overlap = np.clip(np.minimum(until, end) - np.maximum(begin, start), 0.0, None).sum()
        assert waiting == pytest.approx(overlap / (end - start), rel=1e-9, abs=1e-9)
    assert max(out["waiting"]) > 1  # the check saw a queue


def test_what_the_figure_keeps_is_the_runs_own_metrics(autoscaled):
    kept = over_time(autoscaled)
    m = autoscaled.metrics
    for state in ("provisioning", "serving", "draining"):
        assert kept[state] == m["replicas_over_time"][state]
    assert kept["attainment"] == m["slo_attainment_by_window"]["attainment"]
    assert kept["start_s"] == m["replicas_over_time"]["start_s"] == m["slo_attainment_by_window"]["start_s"]
    assert kept["gpu_hours"] == m["gpu_hours"] and kept["provisioned"] == m["autoscaler"]["replicas_provisioned"]
    assert max(kept["provisioning"]) > 0  # the step made it scale
    static = run(scenario(SCENARIO.split("&max_replicas")[0] + "&replicas=3"))
    fixed = over_time(static)
    assert set(fixed["serving"]) == {3.0} and set(fixed["provisioning"]) == set(fixed["draining"]) == {0.0}
    assert fixed["gpu_hours"] == pytest.approx(static.metrics["gpus"] * static.end_s / 3600)
    assert len(fixed["waiting"]) == len(fixed["attainment"]) == len(fixed["start_s"])


def test_a_comparison_is_one_run_per_policy_and_its_query_round_trips():
    pairs = parse_qsl(SCENARIO + "&schedulers=chunked&autoscalers=predictive,static,predictive")
    ct = parse_cluster_time(pairs)
    assert ct.policies == ("predictive", "static") and ct.base.schedulers == ("fcfs",)
    predictive, static = ct.runs
    assert predictive.req.scenario.autoscaler == "predictive" and predictive.req.scenario.max_replicas == 4
    # The static deployment: the autoscalers' most replicas, none of their fields.
    assert static.label == "static 4 replicas" and static.req.scenario.replicas == 4
    assert static.req.scenario.autoscaler is None and static.req.scenario.provision_delay_s is None
    assert parse_cluster_time(parse_qsl(ct.query())) == ct
    sized = parse_cluster_time(parse_qsl(ct.query() + "&static_replicas=2"))
    assert sized.runs[1].req.scenario.replicas == 2 and "static_replicas=2" in sized.query()
    every = parse_cluster_time(parse_qsl(SCENARIO))  # none asked for: every autoscaler and a static deployment
    assert [r.policy for r in parse_cluster_time(parse_qsl(SCENARIO + "&autoscaler=")).runs] == [
        "utilization", "predictive", "static"]  # a blank autoscaler is none
    alone = parse_cluster_time(parse_qsl(SCENARIO + "&autoscalers=static"))  # the autoscalers' fields: their size
    assert [(r.label, r.req.scenario.autoscaler) for r in alone.runs] == [("static 4 replicas", None)]
    plain = parse_cluster_time(parse_qsl("hardware=a100&replicas=3&autoscalers=static"))  # none: its own replicas
    assert plain.runs[0].req.scenario.replicas == 3 and plain.base.scenario.autoscaler is None
    assert [r.policy for r in every.runs] == ["utilization", "predictive", "static"]


@pytest.mark.parametrize("extra, field", [("&autoscalers=utilization,hpa", "autoscalers"),
                                          ("&static_replicas=0", "static_replicas"),
                                          ("&static_replicas=two", "static_replicas"),
                                          ("&min_replicas=5", "min_replicas")])
def test_bad_input_is_refused_naming_the_field(extra, field):
    with pytest.raises(ScenarioError) as e:
        parse_cluster_time(parse_qsl(SCENARIO + extra))
    assert field in [name for name, _ in e.value.problems]


def test_the_results_page_card_of_an_autoscaled_scenario_links_its_comparison():
    req = parse_request(query_to_dict(parse_qsl(SCENARIO + "&autoscaler=utilization")), defaults=PAGE_DEFAULTS)
    views = service.compare_seeds(req).views
    results = figures.Results(req, views, span=charts.time_range(views))
    figure = figures.get(NAME)
    assert figure.shown(results) and NAME in figures.embeddable()
    assert not figure.shown(figures.Results(parse_request(query_to_dict(parse_qsl(SCENARIO.split("&max_")[0])))))
    card = figure.card(results)
    fig = card.data["figure"]
    xs = sorted(k for k in fig["layout"] if k.startswith("xaxis"))
    assert all(fig["layout"][k].get("matches") == "x" for k in xs[1:])  # one time axis
    assert [fig["layout"]["y" + k[1:]]["title"]["text"] for k in xs] == [  # a unit under its row's title
        "offered<br>(req/s)", "fcfs", "waiting<br>(req)", "SLO met<br>(%)"]
    assert fig["export"]["title"] == "Cluster over time"  # exported like every figure: titled, captioned
    ct = parse_cluster_time(parse_qsl(card.data["compare"]))  # its link: the autoscalers and a static deployment
    assert [r.label for r in ct.runs] == ["utilization", "predictive", "static 4 replicas"]
    assert ct.base.scenario == req.scenario


def test_a_default_whose_capacity_search_is_past_the_webs_budget_is_refused_naming_the_field():
    """300 s at a 100 req/s peak: 30,000 requests a run of the search, past the web's 20,000 a run."""
    peak = SCENARIO.replace("0:1,60:6,150:1", "0:1,60:100")
    for given, asked, named in ((("autoscale_target", "autoscale_replica_rate"), "utilization,predictive", []),
                                (("autoscale_target",), "utilization,predictive", ["autoscale_replica_rate"]),
                                (("autoscale_replica_rate",), "predictive,static", []),
                                ((), "utilization", ["autoscale_target"])):
        query = "&".join(kv for kv in peak.split("&") if kv.split("=")[0] not in {"autoscale_target",
                                                                                 "autoscale_replica_rate"} - set(given))
        try:
            parse_cluster_time(parse_qsl(query + "&autoscalers=" + asked))
            refused = []
        except ScenarioError as e:
            refused = [name for name, _ in e.problems]
        assert refused == named, (given, asked)


def test_a_policy_no_replica_can_serve_is_refused_naming_the_field():
    """The capacity search finds no rate within a 1 ms TTFT target: an input error naming the field to set (the
    web answers 422), not a server error."""
    ct = parse_cluster_time(parse_qsl("schedulers=fcfs&hardware=a100&duration=60&rate=2&slo_ttft_ms=1"
                                      "&autoscalers=predictive"))
    with pytest.raises(ScenarioError) as e:
        comparison(ct)
    assert [name for name, _ in e.value.problems] == ["autoscale_replica_rate"]


def test_the_form_can_set_max_model_len_which_the_rtx3050s_default_model_needs():
    """llama-3.2-1b's 131k context does not fit the rtx3050's KV cache, so a /cluster-time URL naming that GPU is
    refused naming max_model_len: the page's form must offer the field to fix it (it did not), and the page's own
    deployment (no GPU or model in the URL) keeps the seed's 8,192 as the landing page does."""
    from app.web.cluster_time_page import _form

    fields = [f.name for f in _form([("hardware", "rtx3050")], {})["fields"]]
    assert "max_model_len" in fields
    with pytest.raises(ScenarioError) as e:
        parse_cluster_time(parse_qsl("hardware=rtx3050&workload=chat&autoscaler=utilization"))
    assert "max_model_len" in dict(e.value.problems)
    assert parse_cluster_time(parse_qsl("workload=chat&autoscaler=utilization")).base.scenario.max_model_len == 8192
