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

Configurations: as InferenceX sweeps each GPU's search space (its configs' `search-space` entries: `{ tp: 8 }`,
`{ tp: 4, ep: 4, dp-attn: true }`, `spec-decoding: mtp`; SemiAnalysisAI/InferenceX, configs/nvidia-master.yaml)
and draws each GPU's best, a frontier runs every viable parallel configuration of the model on each GPU: tensor
parallelism over 1, 2, 4 or 8 GPUs of one node, and for a mixture-of-experts model its experts spread over the
same GPUs (ep = tp) or attention data-parallel over ep GPUs (ep / tp ranks of tp each), and with the scenario's
spec_method each of them with and without speculative decoding. A configuration is viable when it resolves
(catalog.resolve_setup's fit check, the scenario's own shape rules); the rest are listed with the reason. Each
configuration draws its own curve over the concurrencies; each GPU's Pareto envelope over all of its
configurations' points (`pareto`) is its frontier.

Random lengths: with `length_range` r the scenario draws each length from [L(1-r), L(1+r)] (vLLM's current
--random-range-ratio), or with length_range_mode "inferencex" from [rL, L] as InferenceX's client does (its
RANDOM_RANGE_RATIO 0.8); the frontier leaves lengths exact unless the scenario sets a range. Each point's server
gets room for its longest request (max_model_len; InferenceX's launchers pass --max-model-len ISL + OSL + 20, e.g.
benchmarks/70b_fp8_h200_slurm.sh).

`simulate_point` is one (model, hardware, tp, isl, osl, concurrency) point, for other studies (validation against
InferenceX rows) to reuse; `frontier` sweeps the grid over GPUs and configurations; `pareto_front` and
`cheapest_at` read it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..catalog import GPUS, MAX_TP, MODELS, SetupError
from ..deployment import scenario_model
from ..fields import field_info, range_text
from ..runner import resolve, run
from ..scenario import MAX_CONCURRENCY, Scenario, ScenarioError, parse_scenario
from ..workload import RANDOM_ISL, RANDOM_OSL, length_bounds
from .executor import map_in_process

BASES = ("total", "output")
DEFAULT_BASIS = "total"  # InferenceX's headline: total (prompt + output) tokens per second per GPU
REQUESTS_PER_USER = 10  # InferenceX: --num-prompts $(( $CONC * 10 ))
MAX_REQUESTS_PER_USER = 1000
# The concurrency grid every face sweeps: powers of two from min to max (max itself included), as InferenceX's
# CONC lists double (4, 8, 16, 32, 64 ...). The default stops at 256, vLLM's default max_num_seqs: past it more
# users only queue.
DEFAULT_MIN_CONCURRENCY = 1
DEFAULT_MAX_CONCURRENCY = 256
# The tensor-parallel degrees a frontier tries: InferenceX's tp-list [1, 2, 4, 8], within the GPUs of one node
# (MAX_TP); expert-parallel degrees with attention data-parallel come from the same list.
TP_CHOICES = tuple(t for t in (1, 2, 4, 8) if t <= MAX_TP)


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


@dataclass(frozen=True)
class Config:
    """One way to serve the model on a GPU, an entry of InferenceX's search space: tensor parallelism over tp GPUs,
    the routed experts over ep of them (attention tensor-parallel when ep = tp, data-parallel in ep / tp ranks
    with attention_dp), speculative decoding by spec_method or none."""
    tp: int
    ep: int = 1
    attention_dp: bool = False
    spec_method: str | None = None

    @property
    def label(self) -> str:
        """As the scenario's fields read: "tp4", "tp4 ep4", "tp1 ep8 dp-attn", "tp8 +mtp"."""
        return (f"tp{self.tp}" + (f" ep{self.ep}" if self.ep > 1 else "") + (" dp-attn" if self.attention_dp else "")
                + (f" +{self.spec_method}" if self.spec_method else ""))

    def describe(self) -> dict[str, Any]:
        return {"config": self.label, "tp": self.tp, "ep": self.ep, "attention_dp": self.attention_dp,
                "spec_method": self.spec_method}


def _checked_degrees(name: str, values: Sequence[int] | None) -> list[int] | None:
    """`values` sorted, each checked against the scenario field `name`'s bounds (ScenarioError naming it)."""
    if values is None:
        return None
    f = field_info(name)
    # A frontier searches within one node (TP_CHOICES): a scenario's tp may span nodes (tensor_parallel.py).
    hi = min(f.hi, max(TP_CHOICES)) if name == "tp" else f.hi
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or not f.lo <= v <= hi]
    if bad or not values:
        got = repr(bad[0]) if bad else "none"
        allowed = f"between {f.lo} and {hi}" if name == "tp" else range_text(name)
        raise ScenarioError([(name, f"each value must be an integer {allowed} (got {got})")])
    return sorted(set(values))


def parallel_configs(moe: bool, tps: Sequence[int] | None = None, eps: Sequence[int] | None = None,
                     spec_method: str | None = None) -> list[Config]:
    """The configurations a frontier tries, tp ascending: each tp of `tps` (default TP_CHOICES) with its experts
    split tensor-parallel (ep 1) and, for a mixture-of-experts model (`moe`), spread over the tp GPUs (ep = tp)
    and attention data-parallel over ep GPUs (ep a multiple of tp above it); only ep values in `eps` when given
    (default: TP_CHOICES for attention-DP). With `spec_method` each also with speculative decoding. Raises
    ScenarioError naming tp or ep for a value out of bounds, or when the lists leave no configuration."""
    tps, eps = _checked_degrees("tp", tps), _checked_degrees("ep", eps)
    out = []
    for tp in TP_CHOICES if tps is None else tps:
        shapes = [(1, False)]
        if moe:
            shapes += [(tp, False)] if tp > 1 else []
            shapes += [(ep, True) for ep in (TP_CHOICES if eps is None else eps) if ep > tp and ep % tp == 0]
        for ep, dp in shapes:
            if eps is None or ep in eps:
                out += [Config(tp, ep, dp)] + ([Config(tp, ep, dp, spec_method)] if spec_method else [])
    if not out:
        raise ScenarioError([("ep", f"no configuration has ep in {', '.join(map(str, eps or []))} with tp in "
                                    f"{', '.join(map(str, tps or TP_CHOICES))}: ep > 1 spreads a mixture-of-experts "
                                    f"model's experts, over the tp GPUs (ep = tp) or with attention data-parallel "
                                    f"(ep a multiple of tp above it)" + ("" if moe else "; this model is dense"))])
    return out


class ConfigSearch(NamedTuple):
    """The degrees a frontier may try (the CLI's --tp and --ep lists); None: all of parallel_configs'."""
    tps: Sequence[int] | None = None
    eps: Sequence[int] | None = None


EVERY_CONFIG = ConfigSearch()

# Open-loop arrival settings a closed loop has no use for (the scenario refuses them beside concurrency), and
# seeds: a frontier point is one run.
OPEN_LOOP_FIELDS = ("rate", "rate_schedule", "burstiness", "seeds")


def frontier_scenario(base: Scenario, hardware: str, concurrency: int, requests_per_user: int = REQUESTS_PER_USER,
                      config: Config | None = None) -> Scenario:
    """`base` on `hardware` as a closed loop of `concurrency` users, `requests_per_user` requests each (its
    open-loop arrival settings dropped), in `config` (None: base's own tp, ep and speculative decoding).
    Validated: raises ScenarioError naming a field the closed loop or the configuration refuses."""
    data = {k: v for k, v in base.model_dump(exclude_defaults=True).items() if k not in OPEN_LOOP_FIELDS}
    if config is not None:
        data.update(tp=config.tp, ep=config.ep, attention_dp=config.attention_dp)
        if config.ep == 1:
            data.pop("moe_imbalance", None)  # an expert-parallel setting
        if config.spec_method is None:
            data = {k: v for k, v in data.items() if not k.startswith("spec_")}
    longest = _longest_request(base)
    if longest is not None and base.max_model_len is None:
        # Room for the longest request, as InferenceX's servers get a --max-model-len for their ISL/OSL (past the
        # model's own context the requests are rejected, and the point says how many).
        data["max_model_len"] = min(longest, MODELS[base.model].max_context)
    if GPUS[hardware].idle_power_w is not None:  # energy where the GPU's power is modelled (sim_core/energy.py)
        data["energy"] = True
    return parse_scenario({**data, "hardware": hardware, "concurrency": concurrency,
                           "num_requests": concurrency * requests_per_user})


def _longest_request(base: Scenario) -> int | None:
    """Prompt plus output tokens of the longest request the random workload draws (None: another workload, a
    trace, or a model read from a config file)."""
    if base.workload != "random" or base.trace is not None or base.model is None:
        return None
    mode = base.length_range_mode
    return (length_bounds(RANDOM_ISL if base.isl is None else base.isl, base.length_range, mode)[1]
            + length_bounds(RANDOM_OSL if base.osl is None else base.osl, base.length_range, mode)[1])


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
    energy = metrics.get("energy", {})
    joules = energy.get("joules_per_token" if basis == "total" else "joules_per_output_token")
    return {"gpus": gpus, "tokens_per_s_per_user": per_user, "throughput_per_gpu": per_gpu,
            "total_throughput_per_gpu": total, "output_throughput_per_gpu": output, "cost_per_mtok": per_mtok,
            "ttft_ms_p50": metrics["ttft_ms"]["p50"], "tpot_ms_p50": tpot, "e2el_ms_p50": metrics["e2el_ms"]["p50"],
            "completed": metrics["completed"], "rejected": metrics["rejected"],
            # InferenceX's energy axes, on the same token basis: J per token, and tokens/s per MW (= 1e6 / J/token)
            "joules_per_token": joules, "tokens_per_mw": 1e6 / joules if joules else None}


def simulate_point(model: str, hardware: str, tp: int, isl: int, osl: int, concurrency: int, *,
                   requests_per_user: int = REQUESTS_PER_USER, **fields) -> dict[str, Any]:
    """One frontier point: `model` on `hardware` with tensor parallelism `tp`, the random workload at `isl`/`osl`
    tokens, `concurrency` closed-loop users. `fields`: any other Scenario fields (quantization, ep, length_range,
    engine options). Returns point_metrics' dict: tokens_per_s_per_user, total_throughput_per_gpu (InferenceX's
    tput_per_gpu, also throughput_per_gpu) and output_throughput_per_gpu, cost_per_mtok (per total token), ...
    Raises ScenarioError or SetupError naming the field when the point cannot be simulated."""
    base = parse_scenario({"model": model, "hardware": hardware, "tp": tp, "workload": "random", "isl": isl,
                           "osl": osl, **fields})
    return point_metrics(run(frontier_scenario(base, hardware, concurrency, requests_per_user)).metrics)


@dataclass
class FrontierPlan:
    """What a frontier will simulate: a (GPU, configuration) per viable pair, each with its concurrencies'
    scenarios, and the pairs ruled out."""
    sweeps: list[tuple[str, Config, list[Scenario]]] = field(default_factory=list)
    ruled_out: list[dict] = field(default_factory=list)  # hardware, the configuration's fields, reason
    infeasible: dict[str, str] = field(default_factory=dict)  # GPU -> why no configuration runs there

    @property
    def points(self) -> int:
        return sum(len(jobs) for _, _, jobs in self.sweeps)


def plan_frontier(base: Scenario, hardware: Sequence[str], concurrencies: Sequence[int],
                  requests_per_user: int = REQUESTS_PER_USER, search: ConfigSearch = EVERY_CONFIG) -> FrontierPlan:
    """Each GPU's viable configurations of parallel_configs (narrowed by `search`): those whose largest
    point resolves (catalog.resolve_setup's fit check, the scenario's shape rules); the others are ruled out
    with the reason, and a GPU none fits is infeasible with the reason of its configuration of the most GPUs."""
    configs = parallel_configs(scenario_model(base).experts > 1, search.tps, search.eps, base.spec_method)
    plan = FrontierPlan()
    for hw in hardware:
        fits = 0
        for config in configs:
            try:  # fail fast, here, on a deployment that does not fit (the largest point holds the most KV)
                resolve(frontier_scenario(base, hw, max(concurrencies), requests_per_user, config))
            except (SetupError, ScenarioError) as e:
                plan.ruled_out.append({"hardware": hw, **config.describe(), "reason": _reason(e)})
                continue
            fits += 1
            plan.sweeps.append((hw, config, [frontier_scenario(base, hw, c, requests_per_user, config)
                                             for c in concurrencies]))
        if not fits:
            mine = [r for r in plan.ruled_out if r["hardware"] == hw]
            plan.infeasible[hw] = max(mine, key=lambda r: r["ep"] if r["attention_dp"] else r["tp"])["reason"]
    return plan


def _reason(e: SetupError | ScenarioError) -> str:
    return "; ".join(f"{k}: {m}" for k, m in e.problems) if isinstance(e, ScenarioError) else str(e)


@dataclass
class FrontierResult:
    points: list[dict] = field(default_factory=list)  # GPU by GPU, configuration by configuration, users ascending
    infeasible: dict[str, str] = field(default_factory=dict)  # GPU -> why no configuration runs there
    configs: list[dict] = field(default_factory=list)  # each (GPU, configuration) swept: hardware, config, tp ...
    ruled_out: list[dict] = field(default_factory=list)  # each (GPU, configuration) that cannot run, and why

    def curves(self) -> list[dict]:
        """Each swept configuration's curve, its points by concurrency as columns (`front`: on its own front)."""
        out = []
        for c in self.configs:
            mine = [p for p in self.points if p["hardware"] == c["hardware"] and p["config"] == c["config"]]
            out.append({**c, "concurrencies": [p["concurrency"] for p in mine],
                        "tokens_per_s_per_user": [p["tokens_per_s_per_user"] for p in mine],
                        "throughput_per_gpu": [p["throughput_per_gpu"] for p in mine],
                        "front": [p["config_pareto"] for p in mine]})
        return out

    def envelope(self) -> dict[str, list[dict]]:
        """Each GPU's envelope (`envelope`) over all its configurations' points."""
        keys = ("config", "concurrency", "tokens_per_s_per_user", "throughput_per_gpu", "cost_per_mtok")
        return {hw: [{k: p[k] for k in keys} for p in envelope([q for q in self.points if q["hardware"] == hw])]
                for hw in dict.fromkeys(p["hardware"] for p in self.points)}


def _task(task: tuple[Scenario, str]) -> dict:
    scenario, basis = task
    return point_metrics(run(scenario).metrics, basis)


def frontier(base: Scenario, hardware: Sequence[str], concurrencies: Sequence[int], *,
             basis: str = DEFAULT_BASIS, requests_per_user: int = REQUESTS_PER_USER, executor=None,
             on_point: Callable[[int, int], None] | None = None, search: ConfigSearch = EVERY_CONFIG
             ) -> FrontierResult:
    """Every (GPU, viable configuration, concurrency) point of `base` (its workload, lengths and other fields as
    they are; plan_frontier's configurations, narrowed by `search`), each marked on its GPU's envelope
    (`pareto`) and on its configuration's own front (`config_pareto`). A GPU the model fits in no configuration
    is in `infeasible` with the reason. `executor` (sim_core.studies.executor) runs the points; without one they
    run here in turn."""
    if basis not in BASES:
        raise ScenarioError([("basis", f"must be one of {', '.join(BASES)} (got {basis!r})")])
    if not (1 <= requests_per_user <= MAX_REQUESTS_PER_USER):
        raise ScenarioError([("requests_per_user", f"must be from 1 to {MAX_REQUESTS_PER_USER} "
                                                   f"(got {requests_per_user!r})")])
    plan = plan_frontier(base, hardware, concurrencies, requests_per_user, search)
    labelled = [(hw, config, s) for hw, config, jobs in plan.sweeps for s in jobs]
    tasks = [(s, basis) for _, _, s in labelled]
    found = (executor.map if executor is not None else map_in_process)(_task, tasks, on_point)
    out = FrontierResult(infeasible=plan.infeasible, ruled_out=plan.ruled_out,
                         configs=[{"hardware": hw, **c.describe(), "gpus": jobs[0].engines * jobs[0].tp}
                                  for hw, c, jobs in plan.sweeps])
    for (hw, config, s), metrics in zip(labelled, found, strict=True):
        out.points.append({"hardware": hw, **config.describe(), "concurrency": s.concurrency,
                           "scenario": s.to_query(), **metrics})
    for hw in hardware:
        mine = [p for p in out.points if p["hardware"] == hw]
        mark_pareto(mine)
        for config in dict.fromkeys(p["config"] for p in mine):
            mark_pareto([p for p in mine if p["config"] == config], "config_pareto")
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


def envelope(points: Sequence[dict]) -> list[dict]:
    """pareto_front drawn as a line: of points that tie on both axes (tp2 and tp2 ep2 can), the first only."""
    front = pareto_front(points)
    return [p for n, p in enumerate(front) if n == 0 or _axes(p) != _axes(front[n - 1])]


def mark_pareto(points: Sequence[dict], key: str = "pareto") -> None:
    front = {id(p) for p in pareto_front(points)}
    for p in points:
        p[key] = id(p) in front


def cheapest_at(points: Sequence[dict], min_tokens_per_s_per_user: float) -> dict | None:
    """The priced point with the lowest $/Mtok among those serving every user at least this many tokens/s (the
    median user, as InferenceX's interactivity reads); None if none does."""
    ok = [p for p in points if p["cost_per_mtok"] is not None and p["tokens_per_s_per_user"] is not None
          and p["tokens_per_s_per_user"] >= min_tokens_per_s_per_user]
    return min(ok, key=lambda p: (p["cost_per_mtok"], -p["tokens_per_s_per_user"])) if ok else None
