"""Policy parameters: one float64 vector (like the cost parameters) that every policy reads its options from.

`policy_params` fills it from a scenario; a policy with options of its own adds its slots here.
"""

from __future__ import annotations

import numpy as np

from ..kernel.spec_decode import N_SPEC_PARAMS
from ..spec_decode import spec_params as fill

(P_AGING, P_ADMISSION, P_DEGRADE_FACTOR, P_TRANSPORT_S, P_ADAPTIVE, P_HEADROOM, P_ITL_TARGET_S, P_BUDGET_MIN,
 P_BUDGET_MAX, P_BUDGET_INCREASE, P_FAIR_INPUT_COST, P_FAIR_OUTPUT_COST, P_MLFQ_QUANTUM, P_MLFQ_LEVELS,
 P_WATERMARK_BLOCKS, P_ASYNC) = range(16)
# Speculative decoding's slots follow (kernel/spec_decode.py SP_*, filled by sim_core/spec_decode.py).
P_SPEC = 16
N_POLICY_PARAMS = P_SPEC + N_SPEC_PARAMS
# Admission control for a request whose TTFT target is already out of reach when it could start.
ADMIT, SHED, DEGRADE = 0, 1, 2
ADMISSION_CODES = {"admit": ADMIT, "reject": SHED, "degrade": DEGRADE}


def policy_params(scenario, resolved, class_tpot_s: np.ndarray) -> np.ndarray:
    """The vector for a scenario and its resolved defaults (deployment.Resolved)."""
    s, r = scenario, resolved
    p = np.zeros(N_POLICY_PARAMS)
    p[P_AGING] = s.aging_rate
    p[P_ADMISSION] = ADMISSION_CODES[r.admission]
    p[P_DEGRADE_FACTOR] = s.degrade_factor
    p[P_TRANSPORT_S] = s.transport_overhead_ms / 1e3
    p[P_ADAPTIVE] = 1.0 if s.adaptive_budget else 0.0
    p[P_HEADROOM] = s.controller_headroom
    p[P_ITL_TARGET_S] = float(class_tpot_s.min())  # the tightest class sets the bound
    # The controller never goes below one decode token per sequence slot (or the configured budget, if
    # smaller), nor above one max-length prompt per step.
    p[P_BUDGET_MIN] = min(r.token_budget, r.max_seqs)
    p[P_BUDGET_MAX] = max(r.token_budget, r.max_model_len)
    p[P_BUDGET_INCREASE] = 32
    # Virtual Token Counter costs: an output token counts double an input token (VTC's default w_q = 2 w_p).
    p[P_FAIR_INPUT_COST] = 1.0
    p[P_FAIR_OUTPUT_COST] = 2.0
    p[P_MLFQ_QUANTUM] = s.mlfq_quantum
    p[P_MLFQ_LEVELS] = s.mlfq_levels
    p[P_WATERMARK_BLOCKS] = int(s.watermark * r.num_blocks)
    p[P_ASYNC] = 1.0 if s.async_scheduling else 0.0  # as vLLM v0 counts its watermark blocks
    p[P_SPEC:] = spec_params(s, r)
    return p


def spec_params(scenario, resolved) -> np.ndarray:
    return fill(scenario, resolved)
