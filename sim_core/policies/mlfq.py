"""Skip-join multi-level feedback queue (FastServe, Wu et al., 2023): preemptive, and it needs no output-length
prediction. Level 0 is served first. Level i has a quantum of `mlfq_quantum` x 2^i decode iterations; a request
joins the highest-priority level whose quantum covers its prefill (a long prompt skips the top levels), and drops
one level each time it has used up its level's quantum of generated tokens. Within a level, arrival order; with
`aging_rate` (levels per second of waiting), old requests climb back, so none starves."""

from __future__ import annotations

from ..kernel.cost_model import step_cost
from ..kernel.jit import kernel
from .options import P_MLFQ_LEVELS, P_MLFQ_QUANTUM


@kernel
def mlfq_level(eng, r):
    cfg = eng.cfg
    levels = int(cfg.pol[P_MLFQ_LEVELS])
    quantum = cfg.pol[P_MLFQ_QUANTUM]
    # Skip-join: the prefill's time in decode iterations of this request (both from the cost model).
    p = eng.req.prompt_tokens[r]
    prefill_s = step_cost(cfg.cost, p, 1, p * (p + 1) // 2, 0, 0, 0, 1)[0]
    decode_s = step_cost(cfg.cost, 0, 0, 0, 0, 1, p, 1)[0]
    level = 0
    while level < levels - 1 and quantum * decode_s < prefill_s:
        level += 1
        quantum *= 2.0
    # Demotion: each level's quantum of generated tokens used up moves it one level down.
    used = float(eng.st.generated[r])
    while level < levels - 1 and used >= quantum:
        used -= quantum
        level += 1
        quantum *= 2.0
    return level
