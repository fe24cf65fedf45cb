"""Throughput per GPU against tokens/s per user: InferenceX's frontier, by a sweep of closed-loop concurrency.

One model on one or more GPUs (each with the scenario's tp, and whatever else the scenario sets: quantization,
engine options, expert parallelism), the `random` workload at fixed ISL/OSL, and at each concurrency C a closed
loop of C users, each sending its next request when its last one ends, C x REQUESTS_PER_USER requests in all:
InferenceX's client, `benchmark_serving.py --max-concurrency $CONC --num-prompts $(( $CONC * 10 ))
--request-rate inf` (the InferenceMAX README's "Benchmark Client Configuration"; jyothisambolu/InferenceMAX,
README.md).

The axes are InferenceX's own (SemiAnalysisAI/InferenceX, utils/process_result.py):
- throughput per GPU: `tput_per_gpu = total_token_throughput / tp`, prompt plus output tokens per second per GPU,
  and `output_tput_per_gpu = output_throughput / tp`. Its dashboard's headline chart ("vs. Interactivity",
  SemiAnalysisAI/InferenceX-app, packages/app/src/components/inference/metric-registry.ts, CHART_AXIS_CONFIG)
  plots `tput_per_gpu`, the total ("Token Throughput per GPU"; InferenceMAX issue #293 points out that the
  headline is total, not output, tokens; the app's y-axis menu also offers output tokens per GPU and, in its
  current version, preselects total tokens per $1 of TCO). So basis "total" is the default, "output" the other.
- interactivity, tokens/s per user: `intvty = 1000 / tpot_ms`, for each TPOT statistic; the chart's x axis is
  `median_intvty`, 1000 over the median TPOT (TPOT excludes the first token: (E2EL - TTFT) / (output - 1)).
- $/Mtok: the GPUs' on-demand price per hour (sim_core/data/prices.json) over the tokens they serve per hour, on
  the same basis as the throughput (InferenceX's "Cost per Million Total Tokens", or output tokens); None for a
  GPU with no price.

Random lengths: with `length_range` r the scenario draws each length from [L(1-r), L(1+r)] (vLLM's current
--random-range-ratio); InferenceX's copy of benchmark_serving.py draws from [L*r, L] (its RANDOM_RANGE_RATIO
0.8), so the two are not the same number: the frontier leaves lengths exact unless the scenario sets a range.

`simulate_point` is one (model, hardware, tp, isl, osl, concurrency) point, for other studies (validation against
InferenceX rows) to reuse; `frontier` sweeps the grid over GPUs; `pareto_front` and `cheapest_at` read it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..catalog import MODELS, SetupError
from ..runner import resolve, run
from ..scenario import MAX_CONCURRENCY, Scenario, ScenarioError
from ..workload import RANDOM_ISL, RANDOM_OSL, length_bounds

BASES = ("total", "output")
DEFAULT_BASIS = "total"  # InferenceX's headline: total (prompt + output) tokens per second per GPU
REQUESTS_PER_USER = 10  # InferenceX: --num-prompts $(( $CONC * 10 ))
MAX_REQUESTS_PER_USER = 1000
# The concurrency grid every face sweeps: powers of two from min to max (max itself included), as InferenceX's
# CONC lists double (4, 8, 16, 32, 64 ...). The default stops at 256, vLLM's default max_num_seqs: past it more
# users only queue.
DEFAULT_MIN_CONCURRENCY = 1
DEFAULT_MAX_CONCURRENCY = 256
MAX_POINTS = 64  # points per GPU


def concurrency_grid(lo: int = DEFAULT_MIN_CONCURRENCY, hi: int = DEFAULT_MAX_CONCURRENCY) -> list[int]:
    """lo, 2 lo, 4 lo, ... up to hi, and hi itself: the closed-loop user counts a frontier simulates.

    Raises ScenarioError naming min_concurrency or max_concurrency and what each allows."""
    problems = [(name, f"must be an integer from 1 to {MAX_CONCURRENCY:,} users (got {value!r})")
                for name, value in (("min_concurrency", lo), ("max_concurrency", hi))
                if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONCURRENCY)]
    if problems:
        raise ScenarioError(problems)
    if hi < lo:
        raise ScenarioError([("max_concurrency", f"must be at least min_concurrency, {lo} users (got {hi})")])
    grid, c = [], lo
    while c < hi:
        grid.append(c)
        c *= 2
    return grid + [hi]


# Open-loop arrival settings a closed loop has no use for (the scenario refuses them beside concurrency), and
# seeds: a frontier point is one run.
OPEN_LOOP_FIELDS = ("rate", "rate_schedule", "burstiness", "seeds")


def frontier_scenario(base: Scenario, hardware: str, concurrency: int,
                      requests_per_user: int = REQUESTS_PER_USER) -> Scenario:
    """`base` on `hardware` as a closed loop of `concurrency` users, `requests_per_user` requests each (its
    open-loop arrival settings dropped). Validated: raises ScenarioError naming a field the closed loop refuses."""
    from ..scenario import parse_scenario

    data = {k: v for k, v in base.model_dump(exclude_defaults=True).items() if k not in OPEN_LOOP_FIELDS}
    longest = _longest_request(base)
    if longest is not None and base.max_model_len is None:
        # Room for the longest request, as InferenceX's servers get a --max-model-len for their ISL/OSL (past the
        # model's own context the requests are rejected, and the point says how many).
        data["max_model_len"] = min(longest, MODELS[base.model].max_context)
    return parse_scenario({**data, "hardware": hardware, "concurrency": concurrency,
                           "num_requests": concurrency * requests_per_user})


def _longest_request(base: Scenario) -> int | None:
    """Prompt plus output tokens of the longest request the random workload draws (None: another workload, a
    trace, or a model read from a config file)."""
    if base.workload != "random" or base.trace is not None or base.model is None:
        return None
    ratio = base.length_range or 0.0
    return (length_bounds(RANDOM_ISL if base.isl is None else base.isl, ratio)[1]
            + length_bounds(RANDOM_OSL if base.osl is None else base.osl, ratio)[1])


def point_metrics(metrics: dict, basis: str = DEFAULT_BASIS) -> dict[str, Any]:
    """InferenceX's axes from one run's metrics (see the module's doc): tokens/s per user from the median TPOT,
    throughput per GPU on `basis`, and $/Mtok on the same basis (None without a price or without tokens)."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {', '.join(BASES)} (got {basis!r})")
    gpus = metrics["gpus"]
    total = metrics["total_token_throughput"] / gpus
    output = metrics["output_throughput"] / gpus
    tpot = metrics["tpot_ms"]["p50"]
    per_user = 1000.0 / tpot if tpot else None  # one output token each: no TPOT, no interactivity
    per_gpu = total if basis == "total" else output
    cost = metrics["cost_per_hour"]
    per_mtok = cost / gpus / (per_gpu * 3600) * 1e6 if cost is not None and per_gpu > 0 else None
    return {"gpus": gpus, "tokens_per_s_per_user": per_user, "throughput_per_gpu": per_gpu,
            "total_throughput_per_gpu": total, "output_throughput_per_gpu": output, "cost_per_mtok": per_mtok,
            "ttft_ms_p50": metrics["ttft_ms"]["p50"], "tpot_ms_p50": tpot, "e2el_ms_p50": metrics["e2el_ms"]["p50"],
            "completed": metrics["completed"], "rejected": metrics["rejected"]}


def simulate_point(model: str, hardware: str, tp: int, isl: int, osl: int, concurrency: int, *,
                   requests_per_user: int = REQUESTS_PER_USER, **fields) -> dict[str, Any]:
    """One frontier point: `model` on `hardware` with tensor parallelism `tp`, the random workload at `isl`/`osl`
    tokens, `concurrency` closed-loop users. `fields`: any other Scenario fields (quantization, ep, length_range,
    engine options). Returns point_metrics' dict: tokens_per_s_per_user, total_throughput_per_gpu (InferenceX's
    tput_per_gpu, also throughput_per_gpu) and output_throughput_per_gpu, cost_per_mtok (per total token), ...
    Raises ScenarioError or SetupError naming the field when the point cannot be simulated."""
    from ..scenario import parse_scenario

    base = parse_scenario({"model": model, "hardware": hardware, "tp": tp, "workload": "random", "isl": isl,
                           "osl": osl, **fields})
    return point_metrics(run(frontier_scenario(base, hardware, concurrency, requests_per_user)).metrics)


@dataclass
class FrontierResult:
    points: list[dict] = field(default_factory=list)  # every GPU's points, GPU by GPU, concurrency ascending
    infeasible: dict[str, str] = field(default_factory=dict)  # GPU -> why the model cannot run there


def _task(task: tuple[Scenario, str]) -> dict:
    scenario, basis = task
    return point_metrics(run(scenario).metrics, basis)


def frontier(base: Scenario, hardware: Sequence[str], concurrencies: Sequence[int], *,
             basis: str = DEFAULT_BASIS, requests_per_user: int = REQUESTS_PER_USER, executor=None,
             on_point: Callable[[int, int], None] | None = None) -> FrontierResult:
    """Every (GPU, concurrency) point of `base` (its workload, lengths, tp and other fields as they are), with
    each GPU's own Pareto front marked (`pareto`). A GPU the model does not fit is in `infeasible` with the
    reason. `executor` (sim_core.studies.executor) runs the points; without one they run here in turn."""
    if basis not in BASES:
        raise ScenarioError([("basis", f"must be one of {', '.join(BASES)} (got {basis!r})")])
    if not (1 <= requests_per_user <= MAX_REQUESTS_PER_USER):
        raise ScenarioError([("requests_per_user", f"must be from 1 to {MAX_REQUESTS_PER_USER} "
                                                   f"(got {requests_per_user!r})")])
    out = FrontierResult()
    jobs: list[Scenario] = []
    for hw in hardware:
        try:  # fail fast, here, on a deployment that does not fit (the largest point holds the most KV)
            resolve(frontier_scenario(base, hw, max(concurrencies), requests_per_user))
        except SetupError as e:
            out.infeasible[hw] = str(e)
            continue
        jobs += [frontier_scenario(base, hw, c, requests_per_user) for c in concurrencies]
    tasks = [(s, basis) for s in jobs]
    if executor is not None:
        found = executor.map(_task, tasks, on_point)
    else:
        found = []
        for k, t in enumerate(tasks):
            found.append(_task(t))
            if on_point:
                on_point(k + 1, len(tasks))
    for s, metrics in zip(jobs, found, strict=True):
        out.points.append({"hardware": s.hardware, "tp": s.tp, "concurrency": s.concurrency,
                           "scenario": s.to_query(), **metrics})
    for hw in hardware:
        mark_pareto([p for p in out.points if p["hardware"] == hw])
    return out


def _axes(p: dict) -> tuple[float, float]:
    return p["tokens_per_s_per_user"], p["throughput_per_gpu"]


def pareto_front(points: Sequence[dict]) -> list[dict]:
    """The points no other beats on both axes (at least as many tokens/s per user and per GPU, more of one), by
    tokens/s per user ascending: the frontier InferenceX draws. A point without tokens/s per user (no request
    completed with two tokens or more) is on no front."""
    points = [p for p in points if p["tokens_per_s_per_user"] is not None]
    front = []
    for p in points:
        x, y = _axes(p)
        if not any(_axes(q)[0] >= x and _axes(q)[1] >= y and _axes(q) != (x, y) for q in points if q is not p):
            front.append(p)
    return sorted(front, key=lambda p: _axes(p))


def mark_pareto(points: Sequence[dict]) -> None:
    front = {id(p) for p in pareto_front(points)}
    for p in points:
        p["pareto"] = id(p) in front


def cheapest_at(points: Sequence[dict], min_tokens_per_s_per_user: float) -> dict | None:
    """The priced point with the lowest $/Mtok among those serving every user at least this many tokens/s (the
    median user, as InferenceX's interactivity reads); None if none does."""
    ok = [p for p in points if p["cost_per_mtok"] is not None and p["tokens_per_s_per_user"] is not None
          and p["tokens_per_s_per_user"] >= min_tokens_per_s_per_user]
    return min(ok, key=lambda p: (p["cost_per_mtok"], -p["tokens_per_s_per_user"])) if ok else None
