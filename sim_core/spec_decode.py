"""Speculative decoding's parameters from a scenario (the engine side is kernel/spec_decode.py): the per-position
acceptance rates each method draws from, cited in sim_core/data/spec_decode.json (docs/SOURCES-mechanisms.md),
and the proposer's cost, from the target's own cost vector (EAGLE and MTP heads: one decoder layer of the
target's kind plus its lm head) or from a catalogue draft model's.

Acceptance, by method (each a per-position conditional rate: P(draft i accepted | drafts 1..i-1 accepted)):
  ngram, eagle  the rates SpecDecode-Bench profiled for vLLM on Llama-3.1-8B/H100 at k=5, per dataset: the
                workload preset picks the dataset (code: InstructCoder, rag: CNN/DailyMail, the rest ShareGPT);
                positions past 5 keep the fifth rate.
  mtp           DeepSeek-V3's reported second-token acceptance (85-90%: 0.875) for the first draft; later
                drafts at the one rate that gives Nebius's measured acceptance length of the original MTP module
                reused for 7 drafts (3.2 tokens per step at temperature 0).
  draft         a geometric rate fitted to a measured share of accepted drafts (llama.cpp, Llama-3-70B with an
                8B draft, 8 drafts: 58.68%).
`spec_acceptance` replaces any of them with one geometric rate.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np

from . import data
from .catalog import MODELS
from .kernel import cost_constants as CC
from .kernel import cost_model as C
from .kernel.spec_decode import (
    MAX_SPEC_TOKENS,
    N_SPEC_PARAMS,
    SP_CDF,
    SP_DISABLE_ABOVE,
    SP_GOODPUT,
    SP_K,
    SP_METHOD,
    SP_NGRAM_FRAC,
    SP_PASS_ACT_BYTES,
    SP_PASS_ATTN_FLOOR_S,
    SP_PASS_BW,
    SP_PASS_BYTES,
    SP_PASS_EXPERT_BYTES,
    SP_PASS_EXPERT_FRAC,
    SP_PASS_FIXED_S,
    SP_PASS_FLOPS,
    SP_PASS_KV_BYTES,
    SP_PASS_RATE,
    SP_PASSES_PER_DRAFT,
    SP_SEED,
    SPEC_METHODS,
    SPEC_NGRAM,
    goodput_table,
)

# Draft tokens per step when the scenario names a method but no count: DeepSeek-V3 serves MTP with one; vLLM's
# examples run EAGLE, n-gram and draft models with a few (SpecDecode-Bench profiles k = 3 and 5).
DEFAULT_SPEC_TOKENS = {"ngram": 3, "draft": 3, "eagle": 3, "mtp": 1}
DEFAULT_DRAFT_MODEL = "llama-3.2-1b"
# Which profiled dataset stands for a workload preset (SpecDecode-Bench's four); the rest are chat.
PRESET_DATASET = {"code": "InstructCoder", "rag": "CNN/DailyMail"}
CHAT_DATASET = "ShareGPT"
SOURCE_FILE = "spec_decode.json"


@cache
def _entries() -> tuple[dict, ...]:
    return tuple(data.read(SOURCE_FILE)["entries"])


def _entry(**match) -> dict:
    """The entry whose keys equal `match` (a dataset matches on its leading word); several that agree on the
    value (the same figure read from two configurations) count as one."""
    dataset = match.pop("dataset", None)
    found = [e for e in _entries() if all(e.get(k) == v for k, v in match.items())
             and (dataset is None or str(e.get("dataset", "")).startswith(dataset))]
    if len({repr(e["value"]) for e in found}) != 1:
        raise LookupError(f"{SOURCE_FILE}: {len(found)} entries match {match} dataset={dataset}")
    return found[0]


def _geometric_rate(length: float, first: float, drafts: int) -> float:
    """The rate b of drafts 2 .. `drafts` with 1 + first x (1 + b + ... + b^(drafts-1)) = length (tokens per
    step), by bisection."""
    goal = length - 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        b = (lo + hi) / 2
        if first * sum(b ** i for i in range(drafts)) < goal:
            lo = b
        else:
            hi = b
    return (lo + hi) / 2


@cache
def position_rates(method: str, workload: str) -> tuple[float, ...]:
    """MAX_SPEC_TOKENS per-position conditional acceptance rates of `method` on a workload preset (see above)."""
    if method in ("ngram", "eagle"):
        series = _entry(source_id="specdecode_bench_sim", method=method, unit="fraction", k=5,
                        dataset=PRESET_DATASET.get(workload, CHAT_DATASET))["value"]
        return tuple(series) + (series[-1],) * (MAX_SPEC_TOKENS - len(series))
    if method == "mtp":
        first = float(np.mean(_entry(source_id="deepseek_v3_report", unit="fraction")["value"]))
        reused = _entry(source_id="nebius_mtp_dsv3", method="mtp", what=_NEBIUS_T0)
        rest = _geometric_rate(reused["value"], first, reused["k"])
        return (first,) + (rest,) * (MAX_SPEC_TOKENS - 1)
    share = _entry(source_id="devquasar_spec_llamacpp", method="draft")  # accepted / drafted, k drafts a step
    rate = _fixed_point_rate(share["value"] * share["k"], share["k"])
    return (rate,) * MAX_SPEC_TOKENS


_NEBIUS_T0 = ("average acceptance length of DeepSeek-V3-0324's original MTP module reused autoregressively, "
              "temperature 0")


def _fixed_point_rate(accepted: float, drafts: int) -> float:
    """The geometric rate b with b + b^2 + ... + b^drafts = accepted (mean accepted drafts per step)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        b = (lo + hi) / 2
        if sum(b ** i for i in range(1, drafts + 1)) < accepted:
            lo = b
        else:
            hi = b
    return (lo + hi) / 2


def acceptance_cdf(rates, k: int) -> np.ndarray:
    """P(accepted <= j) for j = 0 .. MAX_SPEC_TOKENS when k drafts are proposed with these per-position rates."""
    reach = np.cumprod(np.asarray(rates[:k], np.float64))  # P(accepted >= j), j = 1 .. k
    cdf = np.ones(MAX_SPEC_TOKENS + 1)
    cdf[:k] = 1.0 - reach
    return cdf


def mean_acceptance_length(rates, k: int) -> float:
    """Expected tokens per verification step: 1 + sum of P(accepted >= j)."""
    return 1.0 + float(np.cumprod(np.asarray(rates[:k], np.float64)).sum())


def spec_tokens(scenario) -> int:
    """Draft tokens per step (0: speculative decoding off)."""
    if scenario.spec_method is None:
        return 0
    return DEFAULT_SPEC_TOKENS[scenario.spec_method] if scenario.spec_tokens is None else scenario.spec_tokens


def spec_params(scenario, resolved) -> np.ndarray:
    """The engine's speculative-decoding slots for a scenario: all zero when off."""
    p = np.zeros(N_SPEC_PARAMS)
    k = spec_tokens(scenario)
    if k == 0:
        return p
    method = scenario.spec_method
    rates = ((scenario.spec_acceptance,) * MAX_SPEC_TOKENS if scenario.spec_acceptance is not None
             else position_rates(method, scenario.workload))
    p[SP_K], p[SP_METHOD] = k, SPEC_METHODS[method]
    p[SP_SEED] = scenario.seed % 2147483647
    p[SP_DISABLE_ABOVE] = scenario.spec_disable_above
    p[SP_GOODPUT] = 1.0 if scenario.spec_k_policy == "goodput" else 0.0
    p[SP_CDF:SP_GOODPUT] = acceptance_cdf(rates, k)
    if SPEC_METHODS[method] == SPEC_NGRAM:
        p[SP_NGRAM_FRAC] = _entry(source_id="specdecode_bench_sim", method="ngram", unit="fraction",
                                  kind="proposer_cost")["value"]
        return p
    target = C.cost_params(resolved.setup, engine=scenario.engine)
    if method == "draft":
        name = scenario.spec_draft_model or DEFAULT_DRAFT_MODEL
        draft_setup = dataclasses.replace(resolved.setup, model=MODELS[name])
        _fill_pass(p, C.cost_params(draft_setup, engine=scenario.engine), 1.0)
    else:
        source = "eagle_repo" if method == "eagle" else "deepseek_v3_repo"
        layers = _entry(source_id=source, method=method, unit="layers")["value"]
        _fill_pass(p, target, layers / target[CC.LAYERS])
    p[SP_PASSES_PER_DRAFT] = 1.0
    return p


def _fill_pass(p: np.ndarray, c: np.ndarray, f: float) -> None:
    """One proposer pass: fraction f of the layers of the model whose cost vector is c, plus its whole lm head
    and sampler (EAGLE and MTP heads reuse the target's lm head), costed as cost_model costs a decode step."""
    launches = c[CC.GEMMS] * f + c[CC.LAYERS] * f + 1.0 + CC.SAMPLER_KERNELS
    fixed = launches * CC.GEMM_LAUNCH_FLOOR_S + c[CC.ELEMENTWISE_KERNELS] * f * CC.ELEMENTWISE_LAUNCH_FLOOR_S
    if c[CC.TP] > 1.0:
        fixed += 2.0 * c[CC.LAYERS] * f * CC.CUSTOM_ALLREDUCE_LATENCY_S
    # Its MoE layers' measured fixed time (cost_model's MOE_FIXED_S; + 0.0 unless measured).
    p[SP_PASS_FIXED_S] = fixed + c[CC.MOE_FIXED_S] * f
    # Weights whose kernels stream them below the streaming bandwidth (cost_model's DENSE_GEMM_BW, LM_HEAD_BW,
    # EXPERT_BW) count as the bytes that take as long at it (x 1.0 exactly where they are the same).
    stream = c[CC.STREAM_BW]
    p[SP_PASS_BYTES] = (c[CC.DENSE_WEIGHT_BYTES] * f * (stream / c[CC.DENSE_GEMM_BW])
                        + c[CC.LM_HEAD_BYTES] * (stream / c[CC.LM_HEAD_BW]))
    p[SP_PASS_EXPERT_BYTES] = c[CC.EXPERT_WEIGHT_BYTES] * f * (stream / c[CC.EXPERT_BW])
    p[SP_PASS_EXPERT_FRAC] = c[CC.EXPERTS_PER_TOKEN] / c[CC.EXPERTS] if c[CC.EXPERTS] > 1.0 else 0.0
    p[SP_PASS_ACT_BYTES] = ((c[CC.LINEAR_ACT_BYTES_PER_TOKEN] + c[CC.ELEMENTWISE_BYTES_PER_TOKEN]
                             + c[CC.ATTN_QO_BYTES_PER_TOKEN]) * f + c[CC.LOGITS_BYTES_PER_SAMPLE])
    p[SP_PASS_FLOPS] = c[CC.LINEAR_FLOPS_PER_TOKEN] * f + c[CC.LM_HEAD_FLOPS_PER_SAMPLE]
    p[SP_PASS_KV_BYTES] = c[CC.KV_BYTES_PER_TOKEN] * f * c[CC.DECODE_ATTN_SLOWDOWN]
    p[SP_PASS_BW] = stream
    p[SP_PASS_RATE] = c[CC.LINEAR_RATE]
    p[SP_PASS_ATTN_FLOOR_S] = c[CC.DECODE_ATTN_FLOOR_S] * f


def kv_blocks_beside_proposer(scenario, setup) -> int | None:
    """KV blocks an engine has when the proposer shares its GPUs (None when it holds no GPU memory: off or
    n-gram): its weights come out of the memory the KV cache would take, and its own KV grows with every token
    the target's does (one layer of the target's kind for EAGLE and MTP heads, the whole draft model's)."""
    if spec_tokens(scenario) == 0 or scenario.spec_method == "ngram":
        return None
    if scenario.spec_method == "draft":
        draft = dataclasses.replace(setup, model=MODELS[scenario.spec_draft_model or DEFAULT_DRAFT_MODEL])
        weights, kv_per_token = draft.weight_bytes_per_gpu, draft.kv_bytes_per_token_per_gpu
    else:
        source = "eagle_repo" if scenario.spec_method == "eagle" else "deepseek_v3_repo"
        f = _entry(source_id=source, method=scenario.spec_method, unit="layers")["value"] / setup.model.layers
        weights, kv_per_token = setup.weight_bytes_per_gpu * f, setup.kv_bytes_per_token_per_gpu * f
    free = setup.kv_free_bytes - setup.kv_reserved_bytes_per_gpu - weights
    return max(0, int(free // ((setup.kv_bytes_per_token_per_gpu + kv_per_token) * setup.block_size)))



def goodput_estimates(scenario, resolved, seqs: int, context: int) -> np.ndarray:
    """The engine's goodput estimate for a step of `seqs` decoding sequences of `context` tokens each, per draft
    count k = 0 .. spec_tokens: rows of (expected tokens per sequence, verification step s, proposer s). The
    spec_k_policy goodput pick is the k with the most seqs x tokens / (verification + proposer)."""
    out = np.zeros((spec_tokens(scenario) + 1, 3))
    goodput_table(spec_params(scenario, resolved), 0, C.cost_params(resolved.setup, engine=scenario.engine),
                  seqs, seqs * context, out)
    return out


def decode_step_parts_ms(scenario, resolved, seqs: list[int], context: int) -> dict[str, list[float]]:
    """What speculative decoding adds to decode-only steps of each batch size in `seqs` (sequences of `context`
    tokens each), in ms, as the engine costs it with spec_tokens drafts: the verification's extra over a plain
    decode step, and the proposer's passes. {} when off (the step-time figure's extra bands)."""
    if spec_tokens(scenario) == 0:
        return {}
    tables = [goodput_estimates(scenario, resolved, b, context) for b in seqs]
    return {"verify": [float(t[-1, 1] - t[0, 1]) * 1e3 for t in tables],
            "draft": [float(t[-1, 2]) * 1e3 for t in tables]}
