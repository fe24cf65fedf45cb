"""How each scheduler orders its waiting queue, as codes (a Scheduler's `order`, the engine's `cfg.order`): apart
from the kernels that key the queue (ordering.py), so that the schedulers' registry loads without the engine."""

ORDER_ARRIVAL = 0  # first come, first served
ORDER_PROMPT_LENGTH = 1  # shortest prompt first (prompt length is the only size known before decoding)
ORDER_SLACK = 2  # least slack first: TTFT deadline minus the time its prefill still needs (seed 003)
ORDER_TENANT_SHARE = 3  # least-served tenant first (Virtual Token Counter), arrival order within a tenant
ORDER_CACHED_PREFIX = 4  # longest cached prefix first (SGLang's LPM) while the queue is short, else arrival
ORDER_DEADLINE = 5  # earliest TTFT deadline first (EDF)
ORDER_MLFQ = 6  # skip-join multi-level feedback queue on generated tokens (FastServe), arrival within a level
# SGLang stops matching prefixes for ordering past this many waiting requests (it costs more than it saves).
LPM_QUEUE_LIMIT = 128
