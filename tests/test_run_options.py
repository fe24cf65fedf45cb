"""simulate_requests' options record (runner.RunOptions): run() builds it from its keywords, and a misspelt
option is refused by name before anything is simulated."""

from __future__ import annotations

import pytest

from sim_core import Scenario
from sim_core.runner import RunOptions, make_requests, resolve, run, simulate_requests

SMALL = {"scheduler": "chunked", "num_requests": 20, "seed": 3}


def test_run_hands_its_keywords_to_the_options_record():
    s = Scenario(**SMALL)
    r = resolve(s)
    direct = simulate_requests(s, r, make_requests(s, r), RunOptions(record_events=True, bounds=True))
    through_run = run(s, record_events=True, bounds=True)
    assert "bounds" in through_run.metrics and "bounds" not in run(s).metrics
    assert through_run.metrics == direct.metrics
    assert len(through_run.events) == len(direct.events) > 0


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match="record_event"):
        run(Scenario(**SMALL), record_event=True)
    with pytest.raises(TypeError, match="frames"):
        RunOptions(frames=3)
