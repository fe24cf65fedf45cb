"""Seed 003's adaptive token budget (chunked-prefill schedulers only; the runner refuses the others): keep each
step under a fraction of the tightest ITL target."""

from __future__ import annotations

from ..kernel.jit import inline
from ..kernel.state import B_BUDGET_LEFT, BUDGET_NOW
from .options import P_ADAPTIVE, P_BUDGET_INCREASE, P_BUDGET_MAX, P_BUDGET_MIN, P_HEADROOM, P_ITL_TARGET_S


@inline
def initial_budget(cfg):
    """The controller starts low and grows while steps stay fast (a big first step would overshoot the bound
    before any measurement); without it the budget is fixed."""
    if cfg.pol[P_ADAPTIVE] != 0.0 and not cfg.static_batching:
        return int(cfg.pol[P_BUDGET_MIN])
    return cfg.token_budget


@inline
def adapt_budget(eng, seconds):
    """After a step of `seconds`: back off multiplicatively above the bound; grow additively while under it and
    the budget limited the step, but never past the budget this step's time scales to at the bound (step time
    grows at most in proportion to tokens, so that budget keeps the next step under the bound)."""
    pol, loop = eng.cfg.pol, eng.loop
    if pol[P_ADAPTIVE] == 0.0 or eng.cfg.static_batching:
        return
    budget_now = loop[BUDGET_NOW]
    bound = pol[P_HEADROOM] * pol[P_ITL_TARGET_S]
    if seconds > bound:
        loop[BUDGET_NOW] = max(int(pol[P_BUDGET_MIN]), int(budget_now * 0.8))
    elif eng.batch.n[B_BUDGET_LEFT] < 16 and budget_now < pol[P_BUDGET_MAX]:
        scaled = int(budget_now * bound / seconds)
        grown = min(budget_now + int(pol[P_BUDGET_INCREASE]), scaled, int(pol[P_BUDGET_MAX]))
        loop[BUDGET_NOW] = max(budget_now, grown)
