"""A plan's search space and target as users give them: the CLI's `plan` flags, the dashboard's Plan form and
/api/plan all parse into `PlanInputs` here, so each input has one definition of what it accepts.

List inputs (gpus, tp, schedulers, token_budgets, topologies) are comma-separated (or repeated, as a form's
checkboxes send them); a token budget has the Scenario field's bounds; max_gpus and attainment are bounded here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..catalog import GPUS
from ..fields import field_info, range_text
from ..policies import SCHEDULER_NAMES
from ..quoting import quote
from ..scenario import ScenarioError, describe_error
from ..tensor_parallel import ACROSS_NODE_TP
from .planner import COLOCATED, SearchSpace, parse_topology

# Powers of two up to two nodes: 16 spans two 8-GPU nodes (sim_core/tensor_parallel.py), for a model one node cannot
# hold; larger groups are the scenario's to ask for, not a search's.
TP_DEGREES = (1, 2, 4, 8, ACROSS_NODE_TP[0])
# The bound of --power-budget-kw: a 1,024-GPU plan (max_gpus' bound) at 2 kW per GPU with its host, under PUE 3.
MAX_POWER_BUDGET_KW = 1024 * 2.0 * 3.0
LIST_INPUTS = ("gpus", "tp", "schedulers", "token_budgets", "topologies")


class PlanInputs(BaseModel):
    """What a plan searches over, and the SLO attainment every plan must reach."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: tuple[str, ...] = Field(("a100", "h100"), min_length=1, description="GPUs to consider")
    tp: tuple[int, ...] = Field((1,), min_length=1, description="tensor-parallel degrees to consider: "
                                + ", ".join(str(t) for t in TP_DEGREES))
    schedulers: tuple[str, ...] = Field(("chunked",), min_length=1, description="schedulers to consider")
    token_budgets: tuple[int, ...] = Field((), description="token budgets per step to consider (none: the "
                                                           "scenario's, else each scheduler's own)")
    topologies: tuple[str, ...] = Field((COLOCATED,), min_length=1,
                                        description="colocated engines and/or disaggregated prefill:decode ratios "
                                                    "P:D, e.g. colocated,1:1,1:2")
    max_gpus: int = Field(64, ge=1, le=1024, description="most GPUs a plan may use")
    attainment: float = Field(0.9, ge=0, le=1, description="SLO attainment a plan must reach, 0-1")
    min_tokens_per_s_per_user: float | None = Field(
        None, ge=0.001, le=100_000, description="tokens/s each user must get at least (1000 / TPOT, InferenceX's "
                                                "interactivity): the TPOT target becomes at most 1000/X ms")

    power_budget_kw: float | None = Field(
        None, ge=0.001, le=MAX_POWER_BUDGET_KW, description="most power a plan may draw, kW: its GPUs' modelled "
                                                            "average power over the verifying run (host power and "
                                                            "PUE where set; sim_core/energy.py)")

    def space(self) -> SearchSpace:
        return SearchSpace(self.gpus, self.tp, self.schedulers, self.token_budgets or (None,), self.topologies,
                           self.max_gpus, self.min_tokens_per_s_per_user, self.power_budget_kw)

    def candidates(self) -> int:
        return (len(self.gpus) * len(self.tp) * len(self.schedulers) * max(1, len(self.token_budgets))
                * len(self.topologies))

    def query_pairs(self) -> list[tuple[str, str]]:
        """The inputs that differ from the defaults, as a query string spells them."""
        out = []
        for name in PlanInputs.model_fields:
            value = getattr(self, name)
            if value != PlanInputs.model_fields[name].default:
                out.append((name, ",".join(str(v) for v in value) if isinstance(value, tuple) else f"{value:g}"))
        return out


def _items(raw: Any) -> list[str]:
    values = raw if isinstance(raw, list | tuple) else [raw]
    return [w.strip() for v in values for w in str(v).split(",") if w.strip()]


def _one(name: str, word: str) -> Any:
    """One item of a list input, or ValueError saying what is allowed."""
    if name == "gpus":
        if word not in GPUS:
            raise ValueError(f"unknown GPU {quote(word)}; choose from {', '.join(GPUS)}")
        return word
    if name == "schedulers":
        if word not in SCHEDULER_NAMES:
            raise ValueError(f"unknown scheduler {quote(word)}; choose from {', '.join(SCHEDULER_NAMES)}")
        return word
    if name == "topologies":
        return parse_topology(word)

    try:
        value = int(word)
    except ValueError:
        value = None
    if name == "tp":
        if value not in TP_DEGREES:
            raise ValueError(f"each must be one of {', '.join(str(t) for t in TP_DEGREES)} (got {quote(word)})")
        return value
    info = field_info("token_budget")
    if value is None or not info.lo <= value <= info.hi:
        raise ValueError(f"each must be an integer {range_text('token_budget')} tokens per step (got {quote(word)})")
    return value


def parse_plan_inputs(data: Mapping[str, Any]) -> PlanInputs:
    """Validate raw inputs (strings, comma-separated or repeated lists) into PlanInputs, or raise ScenarioError
    naming each bad input and what it allows."""
    problems: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    for name, raw in data.items():
        if raw is None or raw == "" or raw == []:
            continue
        if name not in LIST_INPUTS:
            values[name] = raw
            continue
        items = []
        for word in _items(raw):
            try:
                item = _one(name, word)
            except ValueError as e:
                problems.append((name, str(e)))
                break
            if item in items:
                problems.append((name, f"{word} is given more than once"))
                break
            items.append(item)
        else:
            if items:
                values[name] = tuple(items)
    try:
        inputs = PlanInputs.model_validate(values)
    except ValidationError as e:
        problems += [(".".join(str(x) for x in err["loc"]) or "plan", describe_error(err, PlanInputs))
                     for err in e.errors()]
        inputs = None
    if problems:
        raise ScenarioError(problems)
    return inputs
