"""The scenario's `replay` field: how a trace's requests are sent (issue #39). A base of sim_core.scenario.Scenario,
as energy_fields.py is; unset, a trace replays as it always did (its recorded times, or a closed loop with
concurrency), so runs without it report exactly what they did before.

- timestamps: open loop, each request at its recorded arrival, whatever the server does meanwhile.
- sessions: each request when what it waited for was answered, plus its recorded think time, each session from
  its recorded arrival (sim_core/trace_formats/sessions.py: Weka subagents, Bailian parent_chat_id, session ids).
- closed: a closed loop of `concurrency` users sending the trace's requests in order (workload.closed_loop)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

REPLAY_MODES = ("timestamps", "sessions", "closed")
ReplayMode = Literal[REPLAY_MODES]  # type: ignore[valid-type]


class ReplayFields(BaseModel):
    replay: ReplayMode | None = Field(
        None,
        description="how a trace's requests are sent: timestamps (at their recorded times, open loop), sessions "
        "(each when the request it waited for was answered plus its recorded think time; subagents fork and "
        "join), closed (a closed loop of concurrency users); default: timestamps, or closed with concurrency",
    )

    @model_validator(mode="after")
    def _replay_needs(self):
        mode = self.replay
        if mode is None:
            return self
        if getattr(self, "trace", None) is None:
            raise ValueError(
                f"replay: says how a trace's requests are sent; set trace with it (replay is {mode})"
            )
        closed = getattr(self, "concurrency", None) is not None
        if mode == "closed" and not closed:
            raise ValueError(
                "replay: closed sends the trace's requests from concurrency users; set concurrency"
            )
        if mode != "closed" and closed:
            raise ValueError(
                f"replay: {mode} sends requests by the trace's own timing; unset concurrency (or use "
                "replay closed)"
            )
        return self
