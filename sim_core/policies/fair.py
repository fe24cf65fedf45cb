"""Weighted fair sharing across tenants: the Virtual Token Counter (VTC, Sheng et al., OSDI '24).

Each tenant has its own waiting heap (arrival order); the backlogged tenant with the least weighted service goes
next. Every scheduler charges service (so the step log shows it), but only `fair` has more than one tenant.
"""

from __future__ import annotations

from ..kernel.jit import inline, kernel


@inline
def next_tenant(q):
    """The tenant whose heap top is served next (least service among backlogged tenants); -1 if none."""
    best = -1
    for t in range(q.q_size.shape[0]):
        if q.q_size[t] > 0 and (best < 0 or q.vtc[t] < q.vtc[best]):
            best = t
    return best


@kernel
def lift_returning_tenant(q, t):
    """A tenant that returns from idle starts level with the least-served backlogged tenant, so it cannot spend
    service "saved" while it had nothing to run."""
    if q.q_size[t] != 0 or q.vtc.shape[0] <= 1:
        return
    lowest = -1.0
    for u in range(q.q_size.shape[0]):
        if u != t and q.q_size[u] > 0 and (lowest < 0.0 or q.vtc[u] < lowest):
            lowest = q.vtc[u]
    if lowest > q.vtc[t]:
        q.vtc[t] = lowest


@inline
def service_cost(input_cost, output_cost, weight, tokens, decoding):
    """What this step's work costs a tenant: a decode token, or `tokens` prompt tokens, over its weight
    (VTC's default counts an output token double an input token: options.P_FAIR_*_COST)."""
    if decoding:
        return output_cost / weight
    return tokens * input_cost / weight
