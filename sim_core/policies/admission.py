"""Admission control: what happens to a request whose TTFT target is already out of reach when it could start
(admit anyway, shed it, or degrade: admit later with a relaxed target)."""

from __future__ import annotations

import numpy as np

from ..kernel.cost_model import step_cost
from ..kernel.jit import inline, kernel
from ..kernel.kv_pool import cached_prefix
from ..kernel.state import BUDGET_NOW
from .deadline import deadline_s
from .options import ADMIT, DEGRADE, P_ADMISSION, SHED


@inline
def admission_verdict(eng, r):
    """ADMIT, SHED or DEGRADE for waiting request r, about to be admitted. Only a request's first admission is
    judged: the earliest its first token can come if it starts now, against its deadline."""
    st = eng.st
    if eng.cfg.pol[P_ADMISSION] == ADMIT or st.generated[r] != 0 or not np.isnan(st.first_scheduled_s[r]):
        return ADMIT
    return _judge_first_admission(eng, r)


@kernel
def _judge_first_admission(eng, r):
    cfg, req, st, kv, loop = eng.cfg, eng.req, eng.st, eng.kv, eng.loop
    total = req.prompt_tokens[r] + st.generated[r]
    if cfg.prefix_caching:
        total -= cfg.block_size * cached_prefix(kv, req, r, total, cfg.block_size)[0]
    now = eng.now
    if cfg.chunked_prefill:
        budget = loop[BUDGET_NOW]
        steps_needed = (total + budget - 1) // budget
        earliest = now + steps_needed * eng.step_est
    else:
        earliest = now + step_cost(cfg.cost, total, 1, total * (total + 1) // 2, 0, 0, 0, 1)[0]
    if earliest <= deadline_s(eng, r):
        return ADMIT
    if cfg.pol[P_ADMISSION] == SHED:
        return SHED
    return ADMIT if st.degraded[r] else DEGRADE
