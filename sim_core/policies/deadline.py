"""Deadline-driven ordering: least slack first (`slo`, seed 003) and earliest deadline first (`edf`)."""

from __future__ import annotations

from ..kernel.jit import inline, kernel
from ..kernel.state import BUDGET_NOW
from .options import P_DEGRADE_FACTOR, P_TRANSPORT_S


@inline
def deadline_s(eng, r):
    """When request r must have its first token, in device time (client target minus transport overhead)."""
    target = eng.cfg.class_ttft_s[eng.req.request_class[r]]
    if eng.st.degraded[r]:
        target *= eng.cfg.pol[P_DEGRADE_FACTOR]
    return eng.req.arrival_s[r] + target - eng.cfg.pol[P_TRANSPORT_S]


@kernel
def slack_key(eng, r):
    """Deadline minus the time its prefill still needs at the current budget and measured step time: slack + now,
    and "now" is common to every request."""
    remaining = eng.req.prompt_tokens[r] + eng.st.generated[r]
    chunk = eng.loop[BUDGET_NOW]
    steps_needed = (remaining + chunk - 1) // chunk
    return deadline_s(eng, r) - steps_needed * eng.step_est
