"""The scenario resolved into a deployment: every default filled in, and the deployment as a list of pools of
alike engines (one engine: a pool of one; replicas: a pool of N; disaggregated serving: a prefill pool, then a
decode pool), each with its GPUs and KV pool. `resolve` refuses impossible set-ups, naming the field."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from .catalog import (
    GIB,
    GPUS,
    MODELS,
    Model,
    ServingSettings,
    Setup,
    SetupError,
    resolve_setup,
    weight_format,
)
from .engines import ENGINES
from .expert_parallel import ExpertParallel, expert_parallel
from .hf_config import ModelConfigError, model_from_text
from .hybrid_blocks import kv_block_size
from .input_files import input_file_problem
from .policies import BY_NAME, SCHEDULERS, Scheduler
from .rate_schedule import RateSchedule
from .rate_schedule import parse as parse_schedule
from .scenario import MAX_REQUESTS, Scenario, ScenarioError
from .spec_decode import kv_blocks_beside_proposer
from .workload import PRESETS, Preset, random_preset

MAX_MODEL_FILE_BYTES = 1 << 20  # a config.json is a few kB; it is read whole


@dataclass(frozen=True)
class Resolved:
    """The scenario with every default filled in."""

    scheduler: Scheduler
    preset: Preset
    max_model_len: int
    token_budget: int
    rate: float
    burstiness: float
    slo_ttft_ms: float  # the preset's (or the scenario's) default target
    slo_tpot_ms: float
    admission: str
    prefix_cache: bool
    # The deployment as a list of pools, whatever its shape: one engine is a pool of one, replicas one pool of
    # N, disaggregated serving a prefill pool then a decode pool.
    deployment: tuple[PoolSetup, ...] = ()
    # Every step takes this many times the model's time: 1, except in sim_core.studies.model_error's ensemble.
    step_time_scale: float = 1.0
    # The arrival rate over time (scenario.rate_schedule), None for a constant rate; `rate` is then its mean over
    # the scenario's duration.
    schedule: RateSchedule | None = None
    # How the first pool runs its weights, in words (catalog.weight_format: quantization auto's choice and path).
    weight_path: str = ""
    # Most sequences one step runs (the scenario's max_seqs, or the engine's for the GPU).
    max_seqs: int = 256

    @property
    def setup(self) -> Setup:
        """The first pool's GPUs and model (the prefill pool's in disaggregated serving)."""
        return self.deployment[0].setup

    @property
    def num_blocks(self) -> int:
        """KV blocks of each engine of the first pool."""
        return self.deployment[0].num_blocks

    @property
    def swap_blocks(self) -> int:
        return self.deployment[0].swap_blocks

    def on_pool(self, k: int) -> Resolved:
        """The same settings with pool k first: what its engines' Config is built from."""
        return dataclasses.replace(self, deployment=(self.deployment[k],))

    @property
    def pools(self) -> tuple[PoolSetup, PoolSetup] | None:
        """Disaggregated serving: the (prefill, decode) pools; None for colocated engines."""
        return self.deployment if len(self.deployment) == 2 else None


@dataclass(frozen=True)
class PoolSetup:
    """A pool of alike engines: its GPUs, the KV pool and swap space each engine has, its role and its size."""

    setup: Setup
    num_blocks: int
    swap_blocks: int
    role: str = "replicas"  # "replicas" (each engine serves its requests whole), "prefill" or "decode"
    engines: int = 1
    # Engines in a row that step in lock-step: a deployment's attention data-parallel ranks (ep / tp; each MoE
    # layer's all-to-all is a collective across them: pool_steps.step_together). 1: each engine steps on its own.
    lockstep: int = 1

    @property
    def engine_names(self) -> list[str]:
        """What faces call its engines: "replica 2", "prefill 0", "decode 1"."""
        word = "replica" if self.role == "replicas" else self.role
        return [f"{word} {k}" for k in range(self.engines)]


def engine_budgets(s: Scenario, chunked_prefill: bool) -> tuple[int | None, int]:
    """(token_budget, max_seqs): the scenario's, or its engine's on its GPU where it leaves them unset (token_budget
    None: the scheduler's own default, or max_model_len)."""
    budget, seqs = ENGINES[s.engine].budgets(GPUS[s.hardware], chunked_prefill)
    return s.token_budget or budget, s.max_seqs or seqs


def max_seqs_of(s: Scenario) -> int:
    return engine_budgets(s, True)[1]


def _pool_setup(s: Scenario, hardware: str, tp: int, model: Model, budgets: tuple[int, int], hw_field: str,
                tp_field: str, plan: ExpertParallel | None = None) -> PoolSetup:
    """One deployment's setup and KV pool (SetupError names the field that sets it); `plan`: its expert
    parallelism (None: the scenario's)."""
    try:
        block = kv_block_size(s.block_size, s.hybrid_blocks, model, tp, s.kv_cache_dtype)
        serving = ServingSettings(s.gpu_memory_utilization, block, *budgets, ENGINES[s.engine].windowed_kv)
        setup = resolve_setup(hardware, model, s.quantization, tp, serving, s.kv_cache_dtype,
                              expert_parallel_of(s) if plan is None else plan, s.scale_out_link)
    except SetupError as e:
        if e.field in ("tp", "ep", "model", "quantization") and (hw_field, tp_field) != ("hardware", "tp"):
            field = {"tp": tp_field, "ep": tp_field.removesuffix("tp") + "ep", "model": hw_field}.get(e.field,
                                                                                                    e.field)
            raise SetupError(f"{hw_field}={hardware}, {tp_field}={tp}: {e}", field) from None
        raise
    capacity = setup.num_kv_blocks
    beside = kv_blocks_beside_proposer(s, setup)  # speculative decoding's proposer takes its share
    if beside is not None:
        if beside == 0:
            raise SetupError(f"spec_method={s.spec_method}: the proposer's weights and KV leave no memory for the "
                             f"KV cache of {model.key} on {hardware} (tp={tp})", "spec_method")
        capacity = beside
    if s.kv_blocks is not None and s.kv_blocks > capacity:
        raise SetupError(f"kv_blocks must be at most {capacity}, what {model.key} on {hardware} (tp={tp}) leaves for "
                         f"the KV cache (got {s.kv_blocks})", "kv_blocks")
    return PoolSetup(setup, s.kv_blocks or capacity, int(s.swap_space_gb * GIB // setup.kv_bytes_per_block))


def _disaggregated_pool(s: Scenario, pool: str, model: Model, budgets: tuple[int, int]) -> PoolSetup:
    """The "prefill" or "decode" pool: its GPUs, tp and ep; with attention_dp and ep > 1 each replica is ep / tp
    ranks in lock-step (a SetupError names the pool's field)."""
    ep = s.pool_ep(pool)
    plan = expert_parallel(ep, s.attention_dp and ep > 1, s.moe_imbalance if ep > 1 else None)
    setup = _pool_setup(s, *s.pool_deployment(pool), model, budgets, f"{pool}_hardware", f"{pool}_tp", plan)
    ranks = s.pool_ranks(pool)
    return dataclasses.replace(setup, role=pool, engines=getattr(s, f"{pool}_replicas") * ranks, lockstep=ranks)


def _pools(s: Scenario, model: Model, budgets: tuple[int, int]) -> tuple[tuple[PoolSetup, ...], int]:
    """(the pools, the max_seqs they run). A model with windowed or linear-attention layers reserves their state
    for max_seqs sequences (catalog.Setup's simplification); vLLM takes each running request's state from the KV
    pool instead, so with max_seqs left at the engine's default it starts even where that reservation would fill
    memory, running as many sequences as the pool holds. Then max_seqs is lowered to the most that leave a KV
    cache (halving, as the reservation is linear in it), and Resolved.max_seqs says so."""
    try:
        return _deployment(s, model, budgets), budgets[1]
    except SetupError:
        if s.max_seqs is not None or not (model.window_layers or model.linear_layers):
            raise
        seqs = budgets[1]
        while seqs > 1:
            seqs //= 2
            try:
                return _deployment(s, model, (budgets[0], seqs)), seqs
            except SetupError:
                continue
        raise  # not even one sequence leaves a KV cache: the default's own error


def _deployment(s: Scenario, model: Model, budgets: tuple[int, int]) -> tuple[PoolSetup, ...]:
    """The scenario's pools. A scheduler that prefills whole prompts reserves activations for max_model_len tokens
    per step; when that leaves no memory and max_model_len was left at the model's context, max_model_len is the
    setting to name."""
    try:
        if s.disaggregated:
            pools = tuple(_disaggregated_pool(s, pool, model, budgets) for pool in ("prefill", "decode"))
            blocks = [p.setup.block_size for p in pools]
            if blocks[0] != blocks[1]:  # a prompt's KV crosses in whole blocks of one size
                raise SetupError(f"hybrid_blocks: vLLM's rule pages {model.key}'s KV in blocks of {blocks[0]} tokens "
                                 f"on the prefill pool and {blocks[1]} on the decode pool (their tp differ); give "
                                 "both pools the same tp, or unset hybrid_blocks", "hybrid_blocks")
            return pools
        return (dataclasses.replace(_pool_setup(s, s.hardware, s.tp, model, budgets, "hardware", "tp"),
                                    engines=s.engines, lockstep=s.ep // s.tp if s.attention_dp else 1),)
    except SetupError as e:
        if e.field != "model" or s.max_model_len is not None or budgets[0] != model.max_context:
            raise
        fits = _longest_whole_prefill(s, model, budgets[1])
        fix = f"set max_model_len to at most {fits:,}" if fits else "set max_model_len (and so the token budget) lower"
        raise SetupError(f"unset, it is {model.key}'s context of {model.max_context:,} tokens, and {s.scheduler} "
                         f"prefills whole prompts, so each step may take that many tokens, whose activations leave "
                         f"no room ({e}): {fix}, or pick a scheduler that chunks prefills", "max_model_len") from None


def _longest_whole_prefill(s: Scenario, model: Model, max_seqs: int) -> int:
    """The largest max_model_len (in whole blocks) whose budget of as many tokens still leaves a KV cache that holds
    one sequence that long, for a scheduler that prefills whole prompts; 0 when not even one block does."""
    def fits(length: int) -> bool:
        try:
            pools = _deployment(s.model_copy(update={"max_model_len": length}), model, (length, max_seqs))
        except SetupError:
            return False
        return s.kv_blocks is not None or all(p.setup.longest_sequence_tokens >= length for p in pools)

    block = kv_block_size(s.block_size, s.hybrid_blocks, model, s.tp, s.kv_cache_dtype)
    lo, hi = 0, model.max_context // block  # in blocks: fits(lo * block) holds, fits(hi * block) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid * block) else (lo, mid)
    return lo * block


def _length_that_fits(s: Scenario, length: int, model: Model, deployment: tuple[PoolSetup, ...]) -> int:
    """max_model_len (the scenario's, or the model's context when unset) limited as the engine limits it when the
    KV cache one engine has, sized by memory, cannot hold one sequence that long: vLLM refuses to start, naming the
    largest length that fits; SGLang lowers the longest request it takes to what fits (engines.json's
    max_model_len_rule). A kv_blocks override is the user's own: vLLM checks memory before applying
    num_gpu_blocks_override."""
    pool = min(deployment, key=lambda p: p.setup.longest_sequence_tokens)
    fits = pool.setup.longest_sequence_tokens
    if s.kv_blocks is not None or length <= fits:
        return length
    engine = ENGINES[s.engine]
    if engine.max_model_len_rule == "cap":
        return fits
    where = f"{pool.setup.gpu.key} (tp={pool.setup.tp})" + (f", the {pool.role} pool" if pool.role != "replicas"
                                                            else "")
    what = (f"{length:,} tokens" if s.max_model_len is not None
            else f"unset, it is {model.key}'s context of {length:,} tokens")
    raise SetupError(f"{what}, but the KV cache on {where} holds {fits:,} tokens, less than one such sequence, and "
                     f"{engine.name} refuses to start so: set max_model_len to at most {fits:,}, or free memory for "
                     f"the KV cache (more GPUs, gpu_memory_utilization, kv_cache_dtype fp8)", "max_model_len")


def expert_parallel_of(s: Scenario) -> ExpertParallel:
    """The scenario's expert parallelism (NO_EP at ep 1; resolve_setup refuses it on a dense model)."""
    return expert_parallel(s.ep, s.attention_dp, s.moe_imbalance)


def scenario_model(s: Scenario) -> Model:
    """The scenario's model: read from its model_file (a Hugging Face config.json), or the catalogue's."""
    if s.model_file is None:
        return MODELS[s.model or GPUS[s.hardware].default_model]
    path = Path(s.model_file)
    problem = input_file_problem(s.model_file, "a Hugging Face config.json")  # a FIFO would block the read
    if problem == "no such file":
        raise ScenarioError([("model_file", f"no such file {s.model_file!r} (a Hugging Face config.json)")])
    if problem:
        raise ScenarioError([("model_file", f"{s.model_file!r} {problem}")])
    stat = path.stat()
    if stat.st_size > MAX_MODEL_FILE_BYTES:
        raise ScenarioError([("model_file", f"{path.name}: larger than {MAX_MODEL_FILE_BYTES:,} bytes, too large "
                                            f"for a config.json (one is a few kB)")])
    try:
        return _model_file(str(path), stat.st_mtime_ns, stat.st_size)
    except ModelConfigError as e:
        raise ScenarioError([("model_file", f"{path.name}: {e}")]) from None


@functools.lru_cache(maxsize=32)
def _model_file(path: str, mtime_ns: int, size: int) -> Model:
    """The model a config file describes, read once per version of the file (sweeps resolve many scenarios)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ModelConfigError("config.json", f"cannot be read ({e.__class__.__name__})") from None
    p = Path(path)
    # Its name in reports: the file's, or its folder's for a config.json as the Hub names it.
    key = p.parent.name if p.stem == "config" and p.parent.name else p.stem
    return model_from_text(text, key or "model_file")


def resolve(s: Scenario) -> Resolved:
    """Fill defaults and check the deployment is possible (raises SetupError with a message saying why not)."""
    sched = BY_NAME[s.scheduler]
    # The random preset's lengths are the scenario's (isl, osl, length_range, length_range_mode).
    preset = (random_preset(s.isl, s.osl, s.length_range, s.length_range_mode) if s.workload == "random"
              else PRESETS[s.workload])
    model = scenario_model(s)
    max_model_len = s.max_model_len or model.max_context
    if max_model_len > model.max_context:
        raise SetupError(f"max_model_len must be at most {model.max_context} for {model.key} (got {max_model_len})",
                         "max_model_len")
    token_budget, max_seqs = engine_budgets(s, sched.chunked_prefill)
    token_budget = token_budget or sched.default_token_budget or max_model_len
    deployment, max_seqs = _pools(s, model, (token_budget, max_seqs))
    max_model_len = _length_that_fits(s, max_model_len, model, deployment)
    if s.adaptive_budget and not sched.chunked_prefill:
        # Without chunking a prompt is prefilled whole: the token budget cannot bound the step time.
        chunking = ", ".join(x.name for x in SCHEDULERS if x.chunked_prefill)
        raise ScenarioError([("adaptive_budget", f"needs a chunked-prefill scheduler ({chunking}); "
                                                 f"{s.scheduler} prefills each prompt whole")])
    schedule = parse_schedule(s.rate_schedule) if s.rate_schedule is not None else None
    rate = schedule.mean_rate(s.duration) if schedule is not None else s.rate or preset.rate
    if s.trace is None and s.num_requests is None and rate * s.duration > MAX_REQUESTS:
        raise ScenarioError([("duration", f"rate x duration must stay under {MAX_REQUESTS:,} requests (got "
                                          f"{rate:g}/s x {s.duration:g} s); shorten it or set num_requests")])
    return Resolved(sched, preset, max_model_len, token_budget,
                    rate, s.burstiness or preset.burstiness,
                    s.slo_ttft_ms or preset.slo_ttft_ms, s.slo_tpot_ms or preset.slo_tpot_ms,
                    s.admission or sched.default_admission,
                    (s.prefix_cache or sched.needs_prefix_cache) and not sched.static_batching, deployment,
                    schedule=schedule, weight_path=weight_format(s.quantization, model, deployment[0].setup.gpu).path,
                    max_seqs=max_seqs)
