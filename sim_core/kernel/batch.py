"""The step being scheduled (`Batch` record, state.py): who runs and how many tokens each computes."""

from __future__ import annotations

from .jit import inline
from .state import B_BUDGET_LEFT, B_SCHEDULED


@inline
def add_to_batch(batch, r, tokens, admitted):
    """Schedule `tokens` tokens of request r this step, out of the step's token budget."""
    k = batch.n[B_SCHEDULED]
    batch.req[k] = r
    batch.tokens[k] = tokens
    batch.admitted[k] = admitted
    batch.n[B_SCHEDULED] = k + 1
    batch.n[B_BUDGET_LEFT] -= tokens
