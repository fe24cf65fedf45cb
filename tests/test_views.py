"""sim_core.views, what faces read instead of the engine's columns and codes: each named column is the engine's
own column of that name, the enums hold the codes the engine writes, and each engine of a cluster is named with
its pool, step log and the requests it served, as the run's own per-engine metrics count them."""

from __future__ import annotations

import numpy as np
import pytest

from sim_core import BlockState, EventKind, RequestState, Scenario, run, views


@pytest.fixture(scope="module")
def single():
    return run(Scenario(scheduler="chunked", hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40, seed=2,
                        preemption="swap", kv_blocks=300, swap_space_gb=0.5), record_events=True, kv_frames=20)


def test_step_columns_are_the_step_log_by_name(single):
    cols = views.step_columns(single)
    assert tuple(cols) == views.STEP_COLUMNS and len(cols) == single.steps.shape[1]
    for name, values in cols.items():
        assert np.array_equal(values, single.step_column(name), equal_nan=True), name
    assert len(cols["start_s"]) > 0 and (np.diff(cols["start_s"]) >= 0).all()
    # time runs on: each step starts no earlier than the previous one ended
    assert (cols["start_s"][1:] >= (cols["start_s"] + cols["duration_s"])[:-1] - 1e-12).all()


def test_request_states_and_event_kinds_are_what_the_run_records(single):
    assert set(np.unique(single.status)) <= {RequestState.FINISHED, RequestState.REJECTED}
    assert np.array_equal(single.status == RequestState.FINISHED, single.finished)
    ev = views.event_columns(single)
    assert set(ev) == {"request", "step", "kind", "tokens"} and len(ev["kind"]) == len(single.events)
    kinds = {EventKind(k) for k in np.unique(ev["kind"])}
    assert EventKind.PREFILL in kinds and EventKind.SWAP_OUT in kinds  # this pool is small enough to swap
    # every swap-out names a request that was admitted (has a first schedule) and a logged step
    out = ev["kind"] == EventKind.SWAP_OUT
    assert np.isfinite(single.first_scheduled_s[ev["request"][out]]).all()
    assert (ev["step"][out] < len(views.step_columns(single)["start_s"])).all()
    assert {BlockState(s) for s in np.unique(single.kv_frame_state)} <= set(BlockState)
    assert BlockState.USED in {BlockState(s) for s in np.unique(single.kv_frame_state)}


def test_a_single_engine_has_no_engine_logs(single):
    assert views.engine_logs(single) == []


@pytest.mark.parametrize("cluster", [dict(replicas=3), dict(prefill_replicas=1, decode_replicas=2)],
                         ids=["replicas", "pools"])
def test_engine_logs_name_each_engine_and_the_requests_it_served(cluster):
    res = run(Scenario(scheduler="fcfs", hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=50, seed=4, **cluster))
    engines = views.engine_logs(res)
    assert [e.name for e in engines] == [log.name for log in res.engine_logs]
    rows = res.metrics["replicas"]
    for e, row, log in zip(engines, rows, res.engine_logs, strict=True):
        assert e.pool == row["pool"] == log.pool and e.num_blocks == log.num_blocks > 0
        assert int(e.served.sum()) == row["requests"]
        assert int((e.served & (res.status == RequestState.FINISHED)).sum()) == row["completed"]
        assert np.array_equal(e.steps["waiting"], log.steps[:, views.STEP_COLUMNS.index("waiting")])
    if "replicas" in cluster:  # each request went to exactly one replica
        assert (np.sum([e.served for e in engines], axis=0) == 1).all()
    # Each request's engines by name: the ones whose `served` holds it, prefill engine first.
    named = views.request_engines(res)
    assert len(named) == len(res.requests)
    for r in range(len(res.requests)):
        mine = [e.name for e in engines if e.served[r]]
        assert named[r] == " → ".join(mine), (r, named[r], mine)
    assert all(named)  # every request of these runs reached an engine
    if "replicas" not in cluster:
        assert any("prefill 0 → decode" in text for text in named)


def test_a_single_engine_serves_every_request_itself(single):
    assert views.request_engines(single) is None


def test_a_log_of_the_wrong_shape_is_refused_naming_its_columns():
    with pytest.raises(ValueError, match="14 columns"):
        views.columns_of_steps(np.zeros((3, 5)))


def test_named_views_read_the_results_arrays_without_copying(single):
    assert np.shares_memory(views.step_columns(single)["duration_s"], single.steps)
    assert np.shares_memory(views.event_columns(single)["kind"], single.events)
