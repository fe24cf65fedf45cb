"""The scenario a dashboard page stands for when its URL leaves fields out: the page's own defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What a page shows with no query: seed 004's experiment, FCFS's inter-token stalls against chunked prefill, with
# the 8,192-token max_model_len the seed was written with while the page's own GPU and model stand (vLLM refuses
# llama-3.2-1b's 131k context on this GPU); a URL that picks its GPU or model takes the engine's default.
PAGE_DEFAULTS: dict[str, str] = {"hardware": "rtx3050", "workload": "rag", "duration": "20"}
SEED_SETTINGS: dict[str, str] = {"max_model_len": "8192"}
PAGE_SCHEDULERS: tuple[str, ...] = ("fcfs", "chunked")


def page_defaults(given: Mapping[str, Any]) -> dict[str, str]:
    own = not any(k in given for k in ("hardware", "model", "model_file"))
    return {**PAGE_DEFAULTS, **(SEED_SETTINGS if own else {})}


def form_defaults(values: Mapping[str, Any]) -> dict[str, str]:
    """The defaults a page's form stands at (a field holding one is not the user's setting, and does not unfold the
    "Advanced" group): PAGE_DEFAULTS, and the seed's settings while the form's GPU and model are the page's own (its
    canonical URL names the GPU, so `given` cannot tell)."""
    own = str(values.get("hardware") or PAGE_DEFAULTS["hardware"]) == PAGE_DEFAULTS["hardware"] and not any(
        values.get(k) for k in ("model", "model_file"))
    return {**PAGE_DEFAULTS, **(SEED_SETTINGS if own else {})}


# Written into every canonical query, even at the model's default, so a page URL means the same scenario
# to the pages (whose defaults are above) and to /api/run (whose defaults are the Scenario model's).
ALWAYS_IN_QUERY: tuple[str, ...] = ("hardware", "workload", "duration")
