"""One step's predicted time and its breakdown, for `sched-sim step-time` and GET /api/step-time.

The input is a `StepShape`: a deployment (hardware, model, quantization, tp: the Scenario's own fields, bounds
and all) plus a batch: one prefill chunk of `prefill_tokens` tokens whose request already has `context_tokens`
cached, and `decode_seqs` sequences decoding one token each with `decode_context` tokens of context.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .catalog import ServingSettings, resolve_setup
from .deployment import max_seqs_of
from .energy import capped_constants
from .energy_fields import power_problem
from .expert_parallel import expert_parallel, shape_error
from .fields import range_text
from .hardware_profile import canonical, profile_constants
from .kernel.cost_constants import (
    COMPONENTS,
    DENSE_GEMM_BW,
    DENSE_WEIGHT_BYTES,
    LINEAR_FLOPS_PER_TOKEN,
    LINEAR_RATE,
)
from .kernel.cost_model import cost_params, step_aggregates, step_breakdown, step_time
from .quoting import quote
from .scenario import (
    EngineName,
    HardwareName,
    KvCacheDtype,
    ModelName,
    Quantization,
    ScaleOutLinkName,
    Scenario,
    ScenarioError,
    describe_error,
    model_error_field,
    profile_mismatch,
)
from .tensor_parallel import TensorParallelDegree, tp_report
from .validity import coverage_warnings

# Largest context a step may describe: the largest max_model_len a scenario accepts.
MAX_CONTEXT_TOKENS = 2_097_152


class StepShape(BaseModel):
    """A deployment and one step's batch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hardware: HardwareName = Scenario.model_fields["hardware"]
    model: ModelName | None = Scenario.model_fields["model"]
    quantization: Quantization = Scenario.model_fields["quantization"]
    tp: TensorParallelDegree = Scenario.model_fields["tp"]
    scale_out_link: ScaleOutLinkName | None = Scenario.model_fields["scale_out_link"]
    kv_cache_dtype: KvCacheDtype = Scenario.model_fields["kv_cache_dtype"]
    hardware_profile: str | None = Scenario.model_fields["hardware_profile"]
    async_scheduling: bool = Scenario.model_fields["async_scheduling"]
    ep: int = Scenario.model_fields["ep"]
    attention_dp: bool = Scenario.model_fields["attention_dp"]
    moe_imbalance: float | None = Scenario.model_fields["moe_imbalance"]
    engine: EngineName = Scenario.model_fields["engine"]
    power_cap_w: float | None = Scenario.model_fields["power_cap_w"]
    prefill_tokens: int = Field(0, ge=0, le=1 << 20, description="prompt tokens of the prefill chunk")
    context_tokens: int = Field(0, ge=0, le=MAX_CONTEXT_TOKENS,
                                description="tokens the chunk's request already has cached before the chunk")
    decode_seqs: int = Field(0, ge=0, le=4096, description="sequences decoding one token each")
    decode_context: int = Field(0, ge=0, le=MAX_CONTEXT_TOKENS,
                                description="context tokens of each decoding sequence")

    @model_validator(mode="after")
    def _something_runs(self) -> StepShape:
        if self.prefill_tokens == 0 and self.decode_seqs == 0:
            raise ValueError("a step needs prefill_tokens or decode_seqs above 0")
        why = profile_mismatch(self)
        if why:
            raise ValueError(f"hardware_profile: {why}")
        problem = shape_error(self.ep, self.tp, self.attention_dp, self.moe_imbalance)
        if problem:
            raise ValueError(": ".join(problem))
        if self.power_cap_w is not None:
            capped = power_problem(self.hardware, self.power_cap_w)
            if capped:
                raise ValueError(capped)
        return self

    @field_validator("hardware_profile")
    @classmethod
    def _profile_parses(cls, v: str | None) -> str | None:
        return canonical(v)


def parse_step_shape(data: dict) -> StepShape:
    """Validate raw input (strings allowed) into a StepShape, or raise ScenarioError naming each bad field."""
    try:
        return StepShape.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field, err = model_error_field(err, "prefill_tokens", Scenario)
            message = describe_error(err, StepShape)
            if err["type"] in ("int_parsing", "int_from_float", "int_type") and field in StepShape.model_fields:
                got = f" (got {quote(err['input'])})" if err.get("input") is not None else ""
                message = f"must be an integer {range_text(field, StepShape)}{got}"
            problems.append((field, message))
        raise ScenarioError(problems) from None


def _setup(shape: StepShape, prefill_tokens: int, decode_seqs: int):
    defaults = Scenario(hardware=shape.hardware, engine=shape.engine)
    serving = ServingSettings(defaults.gpu_memory_utilization, defaults.block_size, max(512, prefill_tokens),
                              max(max_seqs_of(defaults), decode_seqs))
    plan = expert_parallel(shape.ep, shape.attention_dp, shape.moe_imbalance)
    return resolve_setup(shape.hardware, shape.model, shape.quantization, shape.tp, serving, shape.kv_cache_dtype,
                         plan, shape.scale_out_link)


def _constants(setup, shape: StepShape):
    """The cost model's constants for the shape: its hardware profile's, at the clock its power cap leaves."""
    return capped_constants(setup, profile_constants(shape.hardware_profile), shape.power_cap_w)


def step_time_doc(shape: StepShape) -> dict:
    """The step's time, its components (they sum to step_ms), MBU, MFU and which resource bounds it.
    SetupError if the deployment cannot run (the model does not fit, tp does not divide the heads)."""
    setup = _setup(shape, shape.prefill_tokens, shape.decode_seqs)
    st = step_time(setup, shape.prefill_tokens, shape.context_tokens, shape.decode_seqs, shape.decode_context,
                   _constants(setup, shape), cpu_overlap=shape.async_scheduling, engine=shape.engine)
    return {
        "hardware": setup.gpu.key, "model": setup.model.key, "quantization": setup.quantization, "tp": shape.tp,
        "kv_cache_dtype": shape.kv_cache_dtype,
        "hardware_profile": shape.hardware_profile, "async_scheduling": shape.async_scheduling, "engine": shape.engine,
        **({"power_cap_w": shape.power_cap_w} if shape.power_cap_w is not None else {}),
        **({"ep": shape.ep, "attention_dp": shape.attention_dp} if shape.ep > 1 else {}),
        **tp_report(setup.gpu, setup.tp, setup.scale_out_link),
        "prefill_tokens": shape.prefill_tokens, "context_tokens": shape.context_tokens,
        "decode_seqs": shape.decode_seqs, "decode_context": shape.decode_context,
        "step_ms": st.seconds * 1e3,
        "components_ms": {k: v * 1e3 for k, v in st.components_s.items()},
        "mbu": st.mbu, "mfu": st.mfu, "bound": st.bound,
        "warnings": coverage_warnings(setup.gpu.key, setup.model.key, setup.quantization, shape.engine) + _batch_warnings(
            setup, shape),
    }


def _batch_warnings(setup, shape: StepShape) -> list[str]:
    """A batch this deployment could not hold: more KV than its pool, a context past the model's."""
    out = []
    kv_tokens = shape.decode_seqs * (shape.decode_context + 1) + shape.context_tokens + shape.prefill_tokens
    pool_tokens = setup.num_kv_blocks * setup.block_size
    if kv_tokens > pool_tokens:
        out.append(f"the batch holds {kv_tokens:,} tokens of KV; {setup.gpu.key} at tp={setup.tp} has room for "
                   f"{pool_tokens:,}: no engine would run this step")
    longest = max(shape.context_tokens + shape.prefill_tokens, shape.decode_context + 1 if shape.decode_seqs else 0)
    if longest > setup.model.max_context:
        out.append(f"a sequence of {longest:,} tokens exceeds {setup.model.key}'s context of "
                   f"{setup.model.max_context:,}")
    return out


# The kinds of step the curves draw, by what fills a batch of N tokens.
CURVE_KINDS = {
    "prefill": "one prefill chunk of N tokens",
    "decode": "N sequences decoding one token each",
    "mixed": "a chunked-prefill step: N/2 decoding sequences and a prefill chunk of the other N/2 tokens",
}


def step_time_curves(shape: StepShape, max_tokens: int, points: int = 40) -> dict:
    """Step time against the tokens a step batches, for each kind of step (CURVE_KINDS) on `shape`'s deployment;
    decoding sequences hold `shape.decode_context` tokens of context. Batch sizes run geometrically from 1 to
    `max_tokens`; a batch whose decoding sequences' KV would not fit the deployment's pool has no value (None).
    Also the GEMMs' ridge point: the batch at which reading the weights takes as long as the arithmetic (fewer
    tokens: memory-bound; more: compute-bound)."""
    setup = _setup(shape, 0, 0)  # the default budget and batch: what is reserved for them sizes the KV pool
    max_decode_seqs = setup.num_kv_blocks * setup.block_size // (shape.decode_context + 1)
    p = cost_params(setup, _constants(setup, shape), shape.async_scheduling, engine=shape.engine)
    tokens = sorted({int(round(x)) for x in np.geomspace(1, max(1, max_tokens), points)})
    ctx = shape.decode_context
    batches = {"prefill": lambda n: (n, 0, 0, ctx), "decode": lambda n: (0, 0, n, ctx),
               "mixed": lambda n: (n - n // 2, 0, n // 2, ctx)}
    kinds = {}
    for kind, batch in batches.items():
        parts = [step_breakdown(p, *step_aggregates(*batch(n)))[:len(COMPONENTS)]
                 if batch(n)[2] <= max_decode_seqs else None for n in tokens]
        kinds[kind] = {"step_ms": [float(sum(x)) * 1e3 if x else None for x in parts],
                       "components_ms": {c: [float(x[k]) * 1e3 if x else None for x in parts]
                                         for k, c in enumerate(COMPONENTS)}}
    ridge = float(p[DENSE_WEIGHT_BYTES] * p[LINEAR_RATE] / (p[DENSE_GEMM_BW] * p[LINEAR_FLOPS_PER_TOKEN]))
    return {"tokens": tokens, "decode_context": ctx, "kinds": kinds, "ridge_tokens": ridge,
            "max_decode_seqs": max_decode_seqs}
