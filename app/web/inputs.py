"""Web input -> a validated request: the scenario, the schedulers to compare, an uploaded trace, a rate sweep.

Pages and the JSON API share this parser. Every problem is reported as (field, message) through
`ScenarioError`, each message saying what is allowed. The web applies limits of its own on top of the
scenario model's (a simulation must fit in one HTTP request), and never accepts a server-side trace path.
Nothing here runs a simulation; `resolve()` checks that each deployment is possible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from sim_core import (
    PRESETS,
    SCHEDULER_NAMES,
    Scenario,
    ScenarioError,
    SetupError,
    TraceError,
    parse_scenario,
    resolve,
)
from sim_core.deployment import max_seqs_of
from sim_core.fields import field_info, number_text
from sim_core.quoting import quote
from sim_core.runner import least_engine_steps
from sim_core.scenario import query_value
from sim_core.studies.sweep import rate_grid

from . import model_uploads
from .page_scenario import ALWAYS_IN_QUERY, PAGE_DEFAULTS, PAGE_SCHEDULERS, SEED_SETTINGS, page_defaults  # noqa: F401
from .run_budget import memory_problem

# Limits for one web request (the CLI has none of these).
MAX_REQUESTS = 20_000  # per scheduler
MAX_DURATION_S = 600.0  # seconds of arrivals
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_UPLOAD_ROWS = 100_000
MAX_SWEEP_POINTS = 16  # rates per scheduler
MAX_SWEEP_REQUESTS = 200_000  # summed over every (scheduler, rate, seed) point
# Seeds one request may average over (each is a full run of every scheduler): the dashboard's figures show the
# first seed and its table the means with 95% intervals; the JSON API reports the same means and intervals.
MAX_PAGE_SEEDS = 5
MAX_API_SEEDS = 10
# The engine sizes a block table of max_seqs x (blocks of the longest request); keep it under ~256 MB.
MAX_BLOCK_TABLE_ENTRIES = 32 * 1024 * 1024
# One request's whole work (every scheduler x seed), estimated before any of it runs (budget.py): requests in all,
# and engine steps in all (least steps x engines: 16 replicas at 33 req/s, 104k estimated, 124k run). The web
# simulates and draws ~100 us a request and ~12 us a step (9 schedulers x 20,000 requests: 37 s on a loaded 2-core
# box), so an accepted request answers within REQUEST_TIME_LIMIT_S.
MAX_REQUEST_REQUESTS = 200_000
MAX_REQUEST_STEPS = 4_000_000
REQUEST_TIME_LIMIT_S = 120.0  # a simulating request still running after this long is stopped (503: ask less)
MAX_QUEUED_SWEEPS = 4  # background sweeps running or queued; past it: 503 with Retry-After

SWEEP_KEYS = ("rate_min", "rate_max", "rate_step")

def web_range_text(name: str) -> str | None:
    """The bounds of a field whose web limit is tighter than the model's, as a phrase after "must be"; None for
    the other fields (their bounds are the model's, sim_core.fields.range_text)."""
    if name == "duration":
        return f"greater than {number_text(field_info(name).lo)} and at most {MAX_DURATION_S:g} s on the web"
    return None


def _with_web_bounds(problems: list[tuple[str, str]], fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The model states its own bounds (the CLI's); where the web's are tighter, an out-of-range value is told
    the web's, so that a fix the message suggests is one the web accepts."""
    out = []
    for name, message in problems:
        web = web_range_text(name)
        if web and message.startswith("must be") and name in fields:
            message = f"must be {web} (got {quote(fields[name])}); the CLI has no such limit"
        out.append((name, message))
    return out


@dataclass(frozen=True)
class TraceInfo:
    """What the input checks need to know about an uploaded trace."""

    rows: int
    span_s: float  # last arrival - first arrival
    longest_tokens: int  # max prompt + output of one request
    own_rate: float | None = None  # its recorded mean arrival rate (traces.own_rate); None: all at one instant


@dataclass(frozen=True)
class RateRange:
    rate_min: float
    rate_max: float
    rate_step: float

    def rates(self) -> list[float]:
        return rate_grid(self.rate_min, self.rate_max, self.rate_step, max_points=MAX_SWEEP_POINTS)

    def query_pairs(self) -> list[tuple[str, str]]:
        return [(k, f"{getattr(self, k):g}") for k in SWEEP_KEYS]


@dataclass(frozen=True)
class WebRequest:
    """A validated request: one scenario run under each of `schedulers`."""

    scenario: Scenario  # scheduler = schedulers[0]
    schedulers: tuple[str, ...]
    upload: str | None = None
    sweep: RateRange | None = None

    def for_scheduler(self, name: str) -> Scenario:
        return self.scenario.model_copy(update={"scheduler": name})

    def scenario_pairs(self) -> list[tuple[str, str]]:
        return scenario_query_pairs(self.scenario)

    def query(self, *, sweep: bool = True) -> str:
        """The canonical query string: schedulers, upload, scenario fields in declaration order, sweep."""
        pairs = [("schedulers", ",".join(self.schedulers))]
        if self.upload:
            pairs.append(("upload", self.upload))
        pairs += self.scenario_pairs()
        if sweep and self.sweep:
            pairs += self.sweep.query_pairs()
        return urlencode(pairs, safe=",")

    def run_key(self, scheduler: str) -> str:
        """Identifies one scheduler's run (results are deterministic, so this is a cache key)."""
        pairs = [("scheduler", scheduler)] + ([("upload", self.upload)] if self.upload else [])
        return urlencode(pairs + self.scenario_pairs())


def scenario_query_pairs(s: Scenario) -> list[tuple[str, str]]:
    """`Scenario.to_query()`'s fields plus ALWAYS_IN_QUERY, in declaration order, without the scheduler."""
    explicit = {k for k, _ in parse_qsl(s.to_query())}  # an engine's own defaults stay out, as in to_query
    out = []
    for name in Scenario.model_fields:
        if name == "scheduler":
            continue
        if name in explicit or name in ALWAYS_IN_QUERY:
            value = getattr(s, name)
            if name == "model_file" and value is not None:
                value = model_uploads.web_value(value)  # an upload's id, never the server's path
            if value is not None:
                out.append((name, query_value(value)))
    return out


def query_to_dict(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Group query pairs; only `schedulers` may repeat (a form's checkboxes send it once per box)."""
    data: dict[str, Any] = {}
    problems = []
    for k, v in pairs:
        if k == "schedulers":
            data.setdefault(k, []).append(v)
        elif k in data:
            problems.append((k, f"given more than once (use {k}=... once)"))
        else:
            data[k] = v
    if problems:
        raise ScenarioError(problems)
    return data


def parse_request(data: Mapping[str, Any], *, defaults: Mapping[str, str] | None = None,
                  default_schedulers: tuple[str, ...] | None = None,
                  uploads: Callable[[str], TraceInfo | None] | None = None,
                  max_seeds: int = MAX_PAGE_SEEDS) -> WebRequest:
    """Validate web input (query values or a JSON object) into a WebRequest, or raise ScenarioError listing
    every problem. `defaults` fill scenario fields the input leaves out (the pages' defaults);
    `default_schedulers` apply when neither `schedulers` nor `scheduler` is given (else the model's scheduler).
    `uploads(id)` looks up an uploaded trace."""
    problems: list[tuple[str, str]] = []
    data = {k: v for k, v in data.items() if v is not None and v != ""}

    if "trace" in data:
        problems.append(("trace", "a trace file path on the server cannot be given over the web; upload the CSV "
                                  "instead (POST /upload, or multipart POST /api/run with a 'trace' file)"))
        data.pop("trace")
    if "model_file" in data:  # like a trace path: the web reads no file of the server's a request names
        value = str(data.pop("model_file"))
        config = model_uploads.get(value)  # the web's model_file is an uploaded config.json's id
        if config is None:
            problems.append(("model_file", model_uploads.missing_text(value)))
        else:
            data["model_file"] = config.path
    schedulers = _parse_schedulers(data.pop("schedulers", None), data.get("scheduler"), default_schedulers,
                                   problems)
    upload = data.pop("upload", None)
    trace_info = None
    if upload is not None:
        upload = str(upload)
        trace_info = uploads(upload) if uploads else None
        if trace_info is None:
            problems.append(("upload", "this uploaded trace is not on the server (it keeps the most recently used "
                                       "uploads); upload the CSV again"))
    sweep_raw = {k: data.pop(k) for k in SWEEP_KEYS if k in data}

    fields = {k: v for k, v in (defaults or {}).items() if k not in data}
    fields.update(data)
    if schedulers:
        fields["scheduler"] = schedulers[0]
    scenario = None
    try:
        scenario = parse_scenario(fields)
    except ScenarioError as e:
        problems += _with_web_bounds(e.problems, fields)
    sweep = _parse_sweep(sweep_raw, problems) if sweep_raw else None

    if scenario is not None and schedulers:
        if not problems:
            problems += _setup_problems(scenario, schedulers)
        if not problems:
            problems += _size_problems(scenario, schedulers, trace_info, sweep, max_seeds)
    if problems:
        raise ScenarioError(_dedupe(problems))
    return WebRequest(scenario, schedulers, upload, sweep)


def _parse_schedulers(raw: Any, single: Any, default: tuple[str, ...] | None,
                      problems: list[tuple[str, str]]) -> tuple[str, ...]:
    if raw is None:
        if single is not None:
            return (str(single),)  # validated with the scenario
        return default or (Scenario.model_fields["scheduler"].default,)
    if single is not None:
        problems.append(("scheduler", "give either schedulers (a list) or scheduler (one), not both"))
    items = raw if isinstance(raw, list | tuple) else [raw]
    names: list[str] = []
    for item in items:
        for name in str(item).split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    unknown = [n for n in names if n not in SCHEDULER_NAMES]
    if unknown:
        problems.append(("schedulers", f"unknown scheduler {quote(', '.join(unknown))}; choose from "
                                       f"{', '.join(SCHEDULER_NAMES)}"))
        return ()
    if not names:
        problems.append(("schedulers", f"pick at least one of {', '.join(SCHEDULER_NAMES)}"))
    return tuple(names)


def _parse_sweep(raw: dict[str, Any], problems: list[tuple[str, str]]) -> RateRange | None:
    values: dict[str, float] = {}
    for k in SWEEP_KEYS:
        if k not in raw:
            problems.append((k, "a rate sweep needs rate_min, rate_max and rate_step (requests/s)"))
            continue
        try:
            values[k] = float(raw[k])
        except (TypeError, ValueError):
            problems.append((k, f"must be a number of requests/s (got {quote(raw[k])})"))
    if len(values) < 3:
        return None
    try:  # the core's grid checks the values, and the web's own limit on the number of rates
        rate_grid(values["rate_min"], values["rate_max"], values["rate_step"], max_points=MAX_SWEEP_POINTS)
    except ScenarioError as e:
        problems += e.problems
        return None
    return RateRange(values["rate_min"], values["rate_max"], values["rate_step"])


def problems_of(error: ScenarioError | SetupError | TraceError) -> list[tuple[str, str]]:
    """(field, message) pairs for any input error the core can raise."""
    if isinstance(error, ScenarioError):
        return error.problems
    if isinstance(error, TraceError):
        return [("upload", str(error))]
    return [(error.field, str(error))]


def _setup_problems(scenario: Scenario, schedulers: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each scheduler's deployment must be possible (the token budget changes the activation reserve)."""
    failures: dict[tuple[str, str], list[str]] = {}
    for name in schedulers:
        try:
            resolve(scenario.model_copy(update={"scheduler": name}))
        except SetupError as e:
            failures.setdefault((e.field, str(e)), []).append(name)
    if sum(len(names) for names in failures.values()) == len(schedulers):  # none can run: one reason is enough
        return [next(iter(failures))]
    return [(field, f"with {', '.join(names)}: {m}") for (field, m), names in failures.items()]


def expected_requests(s: Scenario, trace: TraceInfo | None = None) -> tuple[float, float]:
    """(requests, seconds of arrivals) a scenario will simulate, estimated before running it."""
    if trace is not None:
        n = min(trace.rows, s.num_requests or trace.rows)
        return n, (n / s.rate if s.rate else trace.span_s * n / max(1, trace.rows))  # rate: its gaps scaled
    rate = s.offered_rate()
    if s.num_requests is not None:
        return s.num_requests, s.num_requests / rate
    return rate * s.duration, s.duration


def _size_problems(s: Scenario, schedulers: tuple[str, ...], trace: TraceInfo | None,
                   sweep: RateRange | None, max_seeds: int = MAX_PAGE_SEEDS) -> list[tuple[str, str]]:
    """Whether the request fits the web's limits: seeds, then the requests one run simulates, then a sweep's."""
    out = _seeds_problems(s, trace, max_seeds)
    limit = f"the web runs at most {MAX_REQUESTS:,} requests per scheduler (the CLI has no such limit)"
    if trace is None and s.num_requests is None and s.duration > MAX_DURATION_S:
        return [("duration", f"must be at most {MAX_DURATION_S:g} s on the web (got {s.duration:g}); "
                             "the CLI has no such limit")]
    out += _run_size_problems(s, trace, limit)
    if out or sweep is None:
        return out
    return _sweep_size_problems(s, schedulers, trace, sweep.rates(), limit)


def _seeds_problems(s: Scenario, trace: TraceInfo | None, max_seeds: int) -> list[tuple[str, str]]:
    if s.seeds > max_seeds:
        where = ("in the JSON API" if max_seeds == MAX_API_SEEDS else "on the dashboard (the JSON API takes up to "
                 f"{MAX_API_SEEDS}, the CLI more)")
        return [("seeds", f"must be at most {max_seeds} {where}: each seed is a full run of every scheduler "
                          f"(got {s.seeds})")]
    if s.seeds > 1 and (trace is not None or s.trace is not None):
        return [("seeds", f"must be 1 for a trace replay (got {s.seeds}): a trace's arrivals and lengths are "
                          "fixed, so every seed would give the same run")]
    return []


def _run_size_problems(s: Scenario, trace: TraceInfo | None, limit: str) -> list[tuple[str, str]]:
    """One run's requests and span of arrivals (and, for a trace, its block tables) within the web's limits."""
    n, span = expected_requests(s, trace)
    if trace is not None:
        if n > MAX_REQUESTS:
            return [("num_requests", f"the uploaded trace has {trace.rows:,} requests; {limit} — set "
                                     f"num_requests to at most {MAX_REQUESTS:,} to replay its first ones")]
        if span > MAX_DURATION_S:
            return [("upload", f"the trace's arrivals span {span:,.0f} s; the web simulates at most "
                               f"{MAX_DURATION_S:g} s of arrivals — set num_requests to replay fewer")]
        blocks = -(-trace.longest_tokens // s.block_size)
        if s.engines * max_seqs_of(s) * blocks > MAX_BLOCK_TABLE_ENTRIES:  # each engine has its own table
            return [_block_table_problem(s, blocks, "the trace's longest request")]
        return []
    if s.num_requests is not None:
        rate = s.offered_rate()
        if n > MAX_REQUESTS:
            return [("num_requests", f"must be at most {MAX_REQUESTS:,} on the web (got {n:,})")]
        if span > MAX_DURATION_S:
            return [("num_requests", f"at {rate:g} req/s, {n:,} requests arrive over {span:,.0f} s; the web "
                                     f"simulates at most {MAX_DURATION_S:g} s of arrivals — at most "
                                     f"{int(rate * MAX_DURATION_S):,} requests at this rate")]
        return []
    if n <= MAX_REQUESTS:
        return []
    if s.rate is not None:
        return [("rate", f"rate x duration would make about {n:,.0f} requests; {limit} — with duration "
                         f"{s.duration:g} s, rate must be at most {MAX_REQUESTS / s.duration:.4g} req/s")]
    if s.rate_schedule is not None:
        return [("rate_schedule", f"the schedule's mean rate of {s.offered_rate():.4g} req/s over {s.duration:g} s "
                                  f"makes about {n:,.0f} requests; {limit} — lower its rates or the duration")]
    rate = PRESETS[s.workload].rate
    return [("duration", f"at the {s.workload} preset's {rate:g} req/s this makes about {n:,.0f} "
                         f"requests; {limit} — duration must be at most {MAX_REQUESTS / rate:.4g} s")]


def _sweep_size_problems(s: Scenario, schedulers: tuple[str, ...], trace: TraceInfo | None, rates: list[float],
                         limit: str) -> list[tuple[str, str]]:
    """A sweep's largest point and all its points together within the web's limits."""
    if trace is not None:
        return _trace_sweep_problems(s, schedulers, trace, rates, limit)
    per_point = [s.num_requests or r * s.duration for r in rates]
    if max(per_point) > MAX_REQUESTS:
        cap = MAX_REQUESTS / s.duration
        return [("rate_max", f"at {max(rates):g} req/s the sweep's largest point has about {max(per_point):,.0f} "
                             f"requests; {limit} — with duration {s.duration:g} s, rate_max must be at most "
                             f"{cap:.4g} req/s")]
    total = sum(per_point) * len(schedulers) * s.seeds
    if total > MAX_SWEEP_REQUESTS:
        seeds = f" x {s.seeds} seeds" if s.seeds > 1 else ""
        return [("rate_max", f"the sweep would simulate about {total:,.0f} requests in all ({len(rates)} rates x "
                             f"{len(schedulers)} schedulers{seeds}); the web sweeps at most {MAX_SWEEP_REQUESTS:,} — "
                             "lower rate_max, raise rate_step, shorten duration or compare fewer schedulers")]
    return []


MAX_WEB_STEPS = 5_000_000
# A sweep runs in the background, one point after another: its work summed over every (scheduler, rate) point.
MAX_SWEEP_STEPS = 4 * MAX_WEB_STEPS


def _block_table_problem(s: Scenario, blocks: int, what: str) -> tuple[str, str]:
    """max_seqs too large for the block tables of every engine (one table per engine of a cluster)."""
    per_engine = "" if s.engines == 1 else f" on each of the {s.engines} engines"
    return ("max_seqs", f"{what} needs {blocks:,} KV blocks; with max_seqs {max_seqs_of(s)}{per_engine} the block "
                        f"tables would be too large for the web — max_seqs must be at most "
                        f"{max(1, MAX_BLOCK_TABLE_ENTRIES // (blocks * s.engines)):,}")


def work_problems(s: Scenario, token_budget: int, reqs) -> list[tuple[str, str]]:
    """Checks on the workload as generated, before it is simulated: the request count (agent sessions count every
    turn, which the arrival rate alone does not show) and the work, which the request count alone does not bound
    (a few long prompts at a tiny token budget take millions of steps).

    A cluster's limits are the whole cluster's: its requests are all the engines' requests, and the step bound
    holds for the engines' steps summed (whichever engine computes a token, a step computes at most token_budget
    of them; a disaggregated request's prompt is computed on one pool and its output on the other, once each).
    Each engine sizes its own block table, so a cluster's tables are checked together."""
    n = len(reqs)
    if n > MAX_REQUESTS:
        field = "num_requests" if s.num_requests is not None else ("rate" if s.rate is not None else "duration")
        return [(field, f"this workload makes {n:,} requests (agent sessions count every turn); the web runs at "
                        f"most {MAX_REQUESTS:,} per scheduler — lower it (the CLI has no such limit)")]
    if s.engines > 1 and n:
        blocks = -(-int((reqs.prompt_tokens + reqs.output_tokens).max()) // s.block_size)
        if s.engines * max_seqs_of(s) * blocks > MAX_BLOCK_TABLE_ENTRIES:
            return [_block_table_problem(s, blocks, "this workload's longest request")]
    memory = memory_problem(s, reqs)  # every mechanism's arrays (sim_core.run_cost), before any is allocated
    if memory:
        return [memory]
    steps = least_engine_steps(reqs, token_budget)
    if steps > MAX_WEB_STEPS:
        tokens = int(reqs.prompt_tokens.sum() + reqs.output_tokens.sum())
        least = -(-tokens // MAX_WEB_STEPS)
        return [("token_budget", f"{tokens:,} tokens at {token_budget:,} per step is at least {steps:,.0f} engine "
                                 f"steps; the web runs at most {MAX_WEB_STEPS:,} — token_budget must be at least "
                                 f"{least:,}, or simulate fewer requests (the CLI has no such limit)")]
    return []


def sweep_work_problems(req: WebRequest, workload_at: Callable[[Scenario], Any],
                        token_budget: Callable[[Scenario], int]) -> list[tuple[str, str]]:
    """Checks on a sweep's work before it starts. The request estimate in parse_request sees neither agent
    sessions' turns nor token lengths, so the workload of the largest point is generated (`workload_at`, a
    fraction of a second) and checked as one run; the other points' tokens scale with their rate (sessions
    arrive in proportion to it), and the engine steps summed over every (scheduler, rate) point must stay
    within MAX_SWEEP_STEPS."""
    assert req.sweep is not None
    rates = req.sweep.rates()
    top = req.scenario.model_copy(update={"rate": max(rates)})
    reqs = workload_at(top)
    total_steps = 0.0
    for name in req.schedulers:
        budget = token_budget(top.model_copy(update={"scheduler": name}))
        problems = work_problems(top, budget, reqs)
        if problems:
            field, message = problems[0]
            return [("rate_max", f"the sweep's point at {top.rate:g} req/s is too large ({field}: {message})")]
        # A preset's points hold requests in proportion to their rate; a trace's each hold all of its requests.
        points = len(rates) if req.upload else sum(rates) / top.rate
        total_steps += least_engine_steps(reqs, budget) * points * top.seeds
    if total_steps > MAX_SWEEP_STEPS:
        seeds = f" x {top.seeds} seeds" if top.seeds > 1 else ""
        return [("rate_max", f"the sweep is about {total_steps:,.0f} engine steps in all ({len(rates)} rates x "
                             f"{len(req.schedulers)} schedulers{seeds}); the web sweeps at most {MAX_SWEEP_STEPS:,} — lower "
                             "rate_max, raise rate_step, shorten duration, raise token_budget or compare fewer "
                             "schedulers (the CLI has no such limit)")]
    return []


def _dedupe(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen, out = set(), []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _trace_sweep_problems(s: Scenario, schedulers: tuple[str, ...], trace: TraceInfo, rates: list[float],
                          limit: str) -> list[tuple[str, str]]:
    """A sweep over an uploaded trace replays all of it at each rate, its gaps scaled (traces.at_rate): every
    point has the trace's requests, and the slower the rate, the longer its arrivals span."""
    if trace.own_rate is None:
        return [("upload", NO_TRACE_RATE)]
    n, _ = expected_requests(s, trace)
    if min(rates) < _least_trace_rate(s, trace):
        return [("rate_min", f"at {min(rates):g} req/s the trace's {n:,} requests would arrive over "
                             f"{(n - 1) / min(rates):,.0f} s; the web simulates at most {MAX_DURATION_S:g} s of "
                             f"arrivals — rate_min must be at least {_least_trace_rate(s, trace):.4g} req/s, or set "
                             "num_requests to replay fewer")]
    total = n * len(rates) * len(schedulers)
    if total > MAX_SWEEP_REQUESTS:
        return [("rate_step", f"the sweep would replay the trace's {n:,} requests {len(rates)} times x "
                              f"{len(schedulers)} schedulers, about {total:,} in all; the web sweeps at most "
                              f"{MAX_SWEEP_REQUESTS:,} — raise rate_step, compare fewer schedulers or set "
                              f"num_requests to replay fewer ({limit})")]
    return []


NO_TRACE_RATE = ("this trace's requests all arrive at one instant, so it has no arrival rate to sweep: a sweep "
                 "replays a trace at other rates by scaling the gaps between its arrivals")


def _least_trace_rate(s: Scenario, trace: TraceInfo) -> float:
    """The lowest rate whose replay of the trace the web still simulates: its n - 1 gaps (at least the open-loop
    arrivals') within MAX_DURATION_S."""
    n, _ = expected_requests(s, trace)
    return (n - 1) / MAX_DURATION_S
