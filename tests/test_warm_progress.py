"""Progress while the simulator compiles (issue #41: "the compile card promises 'about half a minute' and shows no
progress"): sim_core.warm_up reports each of its steps as it starts them, the web's warm-up keeps the latest
(server._warm_up -> app.state.warm_progress), and the compile card and the API's 503 say which step of how many."""

from __future__ import annotations

import re
from types import SimpleNamespace

import sim_core
from app.web import pages, server
from app.web.warm_progress import WarmProgress


class Recording(SimpleNamespace):
    """An app.state that keeps every warm_progress set on it, in order."""

    def __setattr__(self, name, value):
        if name == "warm_progress":
            self.__dict__.setdefault("heard", []).append(value)
        super().__setattr__(name, value)


def test_the_warm_up_reports_its_steps_in_order_up_to_done():
    heard = []
    sim_core.warm_up(lambda done, total, what: heard.append((done, total, what)))
    steps = sim_core.warm_up_steps()
    assert heard[0] == (0, len(steps), steps[0]) and heard[-1] == (len(steps), len(steps), "done")
    dones = [d for d, _, _ in heard]
    assert dones == sorted(set(dones))  # each step once, in order
    assert all(total == len(steps) and (what in steps or what == "done") for _, total, what in heard)
    assert sum("scheduler" in what for _, _, what in heard) == len(sim_core.SCHEDULER_NAMES)


def test_the_servers_warm_up_keeps_the_latest_step_then_done():
    state = Recording(stopping=SimpleNamespace(wait=lambda s: True), kernels_ready=SimpleNamespace(set=lambda: None),
                      kernels_error=None, kernels_retrying=None)
    server._warm_up(SimpleNamespace(state=state))
    heard = state.heard
    total = len(sim_core.warm_up_steps()) + 1  # and the dashboard's KV grid
    assert {p.total for p in heard} == {total} and heard[-1] == WarmProgress(total, total, "done")
    assert any(p.what == "the dashboard's KV-cache grid" for p in heard)
    assert [p.done for p in heard] == sorted(p.done for p in heard)


def test_the_compile_card_and_the_api_say_which_step_of_how_many(client, monkeypatch):
    monkeypatch.setattr(pages, "kernels_ready", lambda request: False)
    monkeypatch.setattr(client.app.state, "warm_progress",
                        WarmProgress(2, 12, "the engine's loop with the chunked scheduler"), raising=False)
    html = client.get("/?schedulers=fcfs&duration=7").text
    card = re.search(r'<div class="card empty" id="warming".*?</div>', html, re.S).group(0)
    assert '<progress max="12" value="2"' in card
    assert "Compiling the simulator: step 3 of 12, the engine's loop with the chunked scheduler." in card.replace(
        "&#39;", "'")
    monkeypatch.setattr(client.app.state.kernels_ready, "is_set", lambda: False)
    r = client.get("/api/run?scheduler=fcfs&duration=7")
    assert r.status_code == 503
    assert r.json()["progress"] == {"done": 2, "total": 12, "what": "the engine's loop with the chunked scheduler",
                                    "text": "compiling the simulator: step 3 of 12, the engine's loop with the "
                                            "chunked scheduler"}
