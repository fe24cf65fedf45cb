"""Expert parallelism (issue #22 item 3): a mixture-of-experts model's routed experts spread whole over `ep` GPUs,
with its attention either tensor-parallel over the same GPUs or data-parallel (DeepSeek-style: each of ep / tp
data-parallel ranks of `tp` GPUs schedules its own batch), and the all-to-all that carries each token to the GPUs
holding its experts (dispatch) and its experts' outputs back (combine).

What it changes, against plain tensor parallelism (`ep` = 1, today's model, unchanged):
- Memory: each GPU holds ceil(E / ep) whole experts per MoE layer and, with attention data-parallel, a whole copy
  of the attention and dense weights split over its DP rank's `tp` GPUs only. What is left is that GPU's KV cache,
  for its own rank's sequences: with MLA (whose latent vLLM keeps whole on every TP rank) attention DP holds ep/tp
  times the sequences TP does, the reason DeepSeek deployments use it.
- Step cost (attention data-parallel): the experts see every rank's batch at once, so the distinct experts a step
  touches on one GPU follow E(1 - (1 - k/E)^(dp T)) over the dp ranks' T tokens each; the busiest GPU's share of
  routed tokens is `moe_imbalance` times the mean (1: uniform routing; a measured factor as an option); and each
  MoE layer pays a dispatch and a combine (all_to_all_seconds below).
- With attention tensor-parallel (ep = tp), vLLM's --enable-expert-parallel at one DP rank (EP size = TP x DP):
  every TP rank holds every token after the attention all-reduce, runs its own experts on them, and the MoE
  output is all-reduced as under TP (vLLM docs, "Data Parallel Deployment" and "Expert Parallel Deployment"), so
  the step costs what TP's does; only the experts' placement (whole experts, same bytes per GPU) differs.

The simulator runs each DP rank as its own engine behind the scenario's router (SGLang's DP attention hands
requests out round-robin by default), each step's cost computed as if every rank ran a batch like its own. vLLM
and SGLang step the ranks in lockstep (an idle rank runs dummy passes: vLLM "Data Parallel Deployment"); the
symmetric batch is the simplification, and `moe_imbalance` is where a measured skew goes.

All-to-all, per MoE layer and per direction (dispatch, then combine), for T tokens a rank sends:
    bytes = T x k x message bytes, split 1/ep to itself (free), (D - 1)/ep to the other GPUs of its NVLink domain
    (D = min(ep, domain size)) and (ep - D)/ep over the scale-out network; the two links run at once, so
    seconds = ALLTOALL_LATENCY_S + max(NVLink bytes / NVLink rate, network bytes / network rate).
Every token is sent once per expert (DeepEP's low-latency kernels do so; its normal kernels send a token once per
GPU, fewer bytes: an upper bound there). The constants, each with what it stands on, are below;
sim_core/studies/alltoall_checks.py checks the model against DeepEP's published tables (validation/alltoall.csv).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .links import KV_LINKS

if TYPE_CHECKING:
    from .architecture import Model
    from .gpu import GPU

# ---------------------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------------------
# Bytes of one dispatch message per token per expert: DeepEP dispatches in FP8 with one fp32 scale per 128 channels
# and a 16-byte header (csrc/kernels/internode_ll.cu: num_bytes_per_msg = sizeof(int4) + kHidden + num_scales *
# sizeof(float), num_scales = kHidden / 128). Combine returns BF16 (DeepEP README: "FP8 dispatching and BF16
# combining"; the SGLang large-scale EP blog and vLLM's wide-EP deployment run DeepEP so). Check: DeepEP's EP8
# low-latency row, 128 tokens x top-8 x 7,408 B in 77 us = 98.5 GB/s, the table's "98 GB/s".
DISPATCH_HEADER_BYTES = 16
FP8_SCALE_BLOCK = 128
FP8_SCALE_BYTES = 4
COMBINE_BYTES_PER_ELEM = 2.0
# NVFP4 activations carry one E4M3 scale (1 byte) per 16 FP4 values (NVIDIA, "Introducing NVFP4 for Efficient and
# Accurate Low-Precision Inference", 2025: "a high-precision scale encoded in FP8 E4M3 to each 16-value micro-block").
NVFP4_SCALE_BLOCK = 16
NVFP4_SCALE_BYTES = 1
# MX formats (MXFP8, MXFP4) carry one E8M0 scale (1 byte) per 32 values (OCP Microscaling Formats (MX) v1.0).
MX_SCALE_BLOCK = 32
# A token's routing as TensorRT-LLM's fused MoE gathers it with the activations: token_selected_experts (int32) and
# token_final_scales (fp32), one each per expert it goes to.
ROUTING_BYTES_PER_EXPERT = 8
# Fraction of the per-direction NVLink line rate an all-to-all reaches: DeepEP's README gives H800's "~160 GB/s
# NVLink maximum bandwidth" (H800 NVLink: 400 GB/s bidirectional, 200 per direction), 0.8; its intranode normal
# kernels reach 153-158 GB/s of it (validation/alltoall.csv).
NVLINK_ALLTOALL_EFFICIENCY = 0.8
# The scale-out network between NVLink domains, a GPU's own unless the scenario picks one (scale_out_link): one
# 400 Gb/s ConnectX-7 per GPU (DGX/HGX H100, H200, B200: NVIDIA's DGX user guides, "8x single-port ConnectX-7 ...
# 400 Gb/s"; the DeepEP tables' "CX7 IB 400 Gb/s ~50 GB/s"), one 800 Gb/s ConnectX-8 SuperNIC per GPU on B300 and
# GB300 (NVIDIA HGX B300 and GB300 NVL72 specifications), at the efficiency sim_core/data/kv_links.json gives each.
SCALE_OUT_LINK = "ib400"
SCALE_OUT_LINK_BY_GPU = {"b300": "ib800", "gb300": "ib800"}
# Fixed cost of one dispatch or combine: DeepEP's EP8 low-latency rows (128 tokens, all over NVLink) take 77 and
# 114 us, of which their bytes at 160 GB/s are 41 and 80 us; 35 us is the rest (fitted on those two rows, the only
# constant fitted on the table; the other rows check it).
ALLTOALL_LATENCY_S = 35e-6
# GPUs one NVLink domain joins: an HGX/DGX node's 8, a GB200/GB300 NVL72 rack's 72 (NVIDIA GB200 NVL72: "72 GPUs in
# one NVLink domain"). Parts without NVLink reach their peers over PCIe: a domain of the node's 8 at tp_link_gbs.
NODE_GPUS = 8
NVLINK_DOMAIN_GPUS = {"gb200": 72, "gb300": 72}
# The largest expert-parallel degree a scenario may ask for: an NVL72 domain, or nine 8-GPU nodes (the SGLang
# large-scale EP blog's decode deployment, EP72).
MAX_EP = 72
# Degrees `_what_fits` tries for a model too big for one node at tensor parallelism.
EP_CANDIDATES = (8, 16, 32, 64, 72)


@dataclass(frozen=True)
class ExpertParallel:
    """How a MoE deployment spreads its experts: ep GPUs hold them whole; attention_dp: attention data-parallel
    (ep / tp ranks of tp GPUs each, each with its own batch) instead of tensor-parallel over the ep GPUs;
    imbalance: the busiest GPU's routed tokens over the mean."""

    ep: int = 1
    attention_dp: bool = False
    imbalance: float = 1.0

    @property
    def enabled(self) -> bool:
        return self.ep > 1

    def dp(self, tp: int) -> int:
        """Attention data-parallel ranks (1 with attention tensor-parallel)."""
        return self.ep // tp if self.attention_dp else 1


NO_EP = ExpertParallel()


def expert_parallel(ep: int, attention_dp: bool = False, imbalance: float | None = None) -> ExpertParallel:
    """The plan a scenario's or a step shape's fields ask for: NO_EP at ep 1; an unset imbalance is uniform."""
    return NO_EP if ep == 1 else ExpertParallel(ep, attention_dp, imbalance or 1.0)


def experts_per_gpu(model: Model, ep: int) -> int:
    """Routed experts each GPU holds per MoE layer: all of them spread whole, the last GPUs one fewer when ep does
    not divide them (memory is sized for the fullest)."""
    return math.ceil(model.experts / ep)


def expert_bytes_per_gpu(model: Model, ep: int, bytes_per_param: float) -> float:
    """Routed-expert weight bytes on the fullest GPU."""
    return model.moe_layers * experts_per_gpu(model, ep) * model.expert_params_per_layer * bytes_per_param


def weight_bytes_per_gpu(model: Model, plan: ExpertParallel, tp: int, all_bytes: float,
                         bytes_per_param: float) -> float:
    """One GPU's weights under expert parallelism: everything but the routed experts split over the attention TP
    group (`all_bytes` is the whole model's), the routed experts over the ep GPUs."""
    experts = model.expert_matmul_params * bytes_per_param
    return (all_bytes - experts) / tp + expert_bytes_per_gpu(model, plan.ep, bytes_per_param)


def dispatch_bytes_per_copy(hidden: int) -> float:
    """One token's dispatch message to one expert: FP8 values, their fp32 scales, the header."""
    return DISPATCH_HEADER_BYTES + hidden + hidden // FP8_SCALE_BLOCK * FP8_SCALE_BYTES


def combine_bytes_per_copy(hidden: int) -> float:
    return hidden * COMBINE_BYTES_PER_ELEM


def gathered_bytes_per_copy(hidden: int, topk: int, activation_bytes: float, scale_block: int) -> float:
    """One token as an all-gather carries it to one GPU (TensorRT-LLM's fused MoE without all-to-all gathers the
    activations already quantized for the experts' GEMMs): `activation_bytes` per value, one scale per
    `scale_block` values (0: none; 4-byte fp32 scales per 128 values for FP8 block scales, a 1-byte scale per 16
    for NVFP4 and per 32 for the MX formats), and the token's routing, its top-k expert ids (int32) and weights (fp32)."""
    scale = 0.0
    if scale_block:
        scale = hidden / scale_block * (FP8_SCALE_BYTES if scale_block == FP8_SCALE_BLOCK else NVFP4_SCALE_BYTES)
    return hidden * activation_bytes + scale + topk * ROUTING_BYTES_PER_EXPERT


def domain_gpus(gpu: GPU) -> int:
    return NVLINK_DOMAIN_GPUS.get(gpu.key, NODE_GPUS)


@dataclass(frozen=True)
class AllToAllLinks:
    """The rates an all-to-all crosses: within the NVLink domain, and beyond it."""

    domain: int  # GPUs one NVLink domain joins
    nvlink_bytes_per_s: float
    network_bytes_per_s: float
    latency_s: float = ALLTOALL_LATENCY_S


def scale_out_link_of(gpu: GPU, chosen: str | None = None) -> str:
    """The key of the link between NVLink domains: the scenario's choice, or the GPU's own NIC."""
    return chosen or SCALE_OUT_LINK_BY_GPU.get(gpu.key, SCALE_OUT_LINK)


def links_of(gpu: GPU, scale_out: str | None = None) -> AllToAllLinks:
    """A catalogue GPU's all-to-all links: its GPU-to-GPU link at NVLINK_ALLTOALL_EFFICIENCY inside its domain, the
    scale-out network beyond (`scale_out`, or the GPU's own)."""
    return AllToAllLinks(domain_gpus(gpu), gpu.tp_link_gbs * 1e9 * NVLINK_ALLTOALL_EFFICIENCY,
                         KV_LINKS[scale_out_link_of(gpu, scale_out)].bytes_per_s)


def traffic_split(ep: int, domain: int) -> tuple[float, float]:
    """(fraction over NVLink, fraction over the network) of what a rank sends, routing uniform over the ep GPUs;
    the rest (1/ep) stays on the GPU."""
    inside = min(ep, domain)
    return (inside - 1) / ep, (ep - inside) / ep


def all_to_all_seconds(tokens: float, bytes_per_copy: float, topk: int, ep: int, links: AllToAllLinks,
                       imbalance: float = 1.0) -> float:
    """One dispatch or combine of `tokens` tokens per rank, each to `topk` experts, among `ep` GPUs: the busiest
    GPU's bytes (imbalance x the mean) over the slower of its two links, plus the fixed cost."""
    nvl, net = traffic_split(ep, links.domain)
    sent = tokens * topk * bytes_per_copy * imbalance
    return links.latency_s + max(sent * nvl / links.nvlink_bytes_per_s, sent * net / links.network_bytes_per_s)


def ep_that_fits(model: Model, setup_of) -> str | None:
    """For a MoE model too big for tensor parallelism within one node: the smallest expert-parallel degree (attention
    data-parallel, one GPU per rank) at which `setup_of(plan)`'s Setup leaves room for a KV cache, as a sentence;
    None for a dense model or when none of EP_CANDIDATES fits."""
    if model.experts <= 1:
        return None
    for ep in EP_CANDIDATES:
        s = setup_of(ExpertParallel(ep, attention_dp=True))
        if s.weight_bytes_per_gpu + s.reserve_bytes < s.usable_bytes and s.num_kv_blocks >= 1:
            domain = domain_gpus(s.gpu)
            where = (f"{math.ceil(ep / domain)} NVLink domains of {domain}" if ep > domain
                     else f"one NVLink domain of {domain}")
            return f"with expert parallelism it fits at ep={ep} and attention_dp (tp=1: {ep} GPUs, {where})"
    return None


def ep_report(model: Model, plan: ExpertParallel, tp: int) -> dict:
    """What a run's `resolved` adds under expert parallelism ({} without it)."""
    if not plan.enabled:
        return {}
    return {"ep": plan.ep, "attention_dp": plan.attention_dp, "dp_ranks": plan.dp(tp),
            "experts_per_gpu": experts_per_gpu(model, plan.ep), "moe_imbalance": plan.imbalance}


def ep_text(model: Model, plan: ExpertParallel, tp: int) -> str:
    """The set-up's line on expert parallelism."""
    attention = (f"attention data-parallel: {plan.dp(tp)} ranks of {tp} GPU{'s' * (tp > 1)}, each its own engine"
                 if plan.attention_dp else f"attention tensor-parallel over the {tp} GPUs")
    skew = f", busiest GPU x{plan.imbalance:g} the mean routed tokens" if plan.imbalance != 1.0 else ""
    return (f"ep={plan.ep} ({plan.ep} GPUs): {experts_per_gpu(model, plan.ep)} of {model.experts} experts per GPU "
            f"per layer, {attention}{skew}")


def pool_ranks_text(scenario) -> str:
    """Prefill/decode pools whose replicas are several attention-DP ranks, one clause each (", decode replicas of
    8 attention-DP ranks (EP8)"; "" for none): the CLI's set-up and the dashboard's summary say it alike."""
    return "".join(f", {p} replicas of {scenario.pool_ranks(p)} attention-DP ranks (EP{scenario.pool_ep(p)})"
                   for p in ("prefill", "decode") if scenario.pool_ranks(p) > 1)


def shape_error(ep: int, tp: int, attention_dp: bool, imbalance: float | None) -> tuple[str, str] | None:
    """(field, why) when ep, tp, attention_dp and moe_imbalance do not make a deployment; None when they do."""
    if ep == 1:
        for name, value in (("attention_dp", attention_dp), ("moe_imbalance", imbalance)):
            if value not in (False, None):
                return name, "applies to expert parallelism; set ep > 1 with it (or leave it unset)"
        return None
    if not attention_dp and ep != tp:
        return "ep", (f"with attention tensor-parallel the experts spread over the engine's tp GPUs: set ep = tp "
                      f"({tp}), or attention_dp true for ep / tp data-parallel ranks")
    if attention_dp and (ep % tp or ep == tp):
        return "ep", (f"with attention_dp, ep / tp data-parallel ranks of tp GPUs each: ep must be a multiple of "
                      f"tp={tp} above it (got {ep})")
    return None
