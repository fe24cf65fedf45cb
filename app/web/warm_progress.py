"""How far the server's warm-up is, for the pages and answers that wait on it: server._warm_up keeps the latest
step sim_core.warm_up reports (then the dashboard's own kernels) in app.state.warm_progress."""

from __future__ import annotations

from typing import NamedTuple

from fastapi import Request


class WarmProgress(NamedTuple):
    """`done` steps of `total` finished, `what` the one under way (sim_core.warm_up_steps names them)."""

    done: int
    total: int
    what: str

    def text(self) -> str:
        if self.done >= self.total:
            return f"compiling the simulator: all {self.total} steps done"
        return f"compiling the simulator: step {self.done + 1} of {self.total}, {self.what}"


def warm_progress(request: Request) -> WarmProgress | None:
    return getattr(request.app.state, "warm_progress", None)
