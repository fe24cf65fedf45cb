"""Tensor parallelism beyond one NVLink domain: which degrees a scenario may ask for, how many nodes (or NVLink
domains) a group spans, the network between them, and what an all-reduce costs across them.

Within one NVLink domain (an HGX/DGX node's 8 GPUs, a GB200/GB300 NVL72 rack's 72: expert_parallel.domain_gpus) a
tensor-parallel all-reduce runs over NVLink as before. A group larger than the domain spans ceil(tp / domain) of
them, joined by one NIC per GPU (the scale-out link, sim_core/data/kv_links.json: the same links a KV transfer
crosses). Its all-reduce is hierarchical, as NCCL runs it across nodes (its tree and ring algorithms keep the
intra-node hops on NVLink and put one hop per node pair on the NIC; NVIDIA, "Massively Scale Your Deep Learning
Training with NCCL 2.4"): a reduce-scatter over NVLink inside each domain, an all-reduce of each GPU's 1/g shard
with its peers of the same local rank over their own NICs (rail-aligned), an all-gather over NVLink. NCCL cuts the
message into chunks over several channels, so the three phases of successive chunks overlap: the bytes cost the
slower of the NVLink share and the NIC share, not their sum. For S bytes, g GPUs a domain and N domains:

    NVLink share  2 (g-1)/g x S / B_nvlink        NIC share  2 (N-1)/N x S / g / B_nic

Check (large messages, where the latency is negligible): two DGX H100 nodes (8 x 400 Gb/s NDR each) at H100's
NVLink bus bandwidth (450 GB/s x 0.8) and ib400 (50 GB/s x 0.95) give 386 GB/s of nccl-tests bus bandwidth;
published 2-node H100/H200 NDR all_reduce_perf runs reach 400-450 GB/s (Saturn Cloud, "Validating Multi-Node GPU
Clusters with NCCL Tests", expected bus bandwidth for 8 GB messages). Summing the phases instead would give
250 GB/s, well under what is measured.

The kernel's all-reduce (kernel/cost_model.py allreduce_s) is latency + 2(n-1)/n x S / bus bandwidth; a group
across domains gets the bus bandwidth that gives the time above (nccl-tests' own definition of bus bandwidth) and
the latency plus the network hops NCCL's tree adds: 2 log2(N) hops (up and down the inter-node tree) of
NET_HOP_LATENCY_US each.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator

from .expert_parallel import NODE_GPUS, domain_gpus, scale_out_link_of
from .links import KV_LINKS

if TYPE_CHECKING:
    from .gpu import GPU

# The largest tensor-parallel degree a scenario may ask for: eight 8-GPU nodes, or the largest power of two in one
# NVL72 domain. Above one node's 8 GPUs, groups come in whole nodes and powers of two (the heads and the hidden size
# split evenly: SGLang's and vLLM's multi-node examples run DeepSeek-R1 at --tp 16 over 2 x 8 GPUs).
MAX_TP = 64
ACROSS_NODE_TP = tuple(2 ** k for k in range(4, int(math.log2(MAX_TP)) + 1))  # 16, 32, 64
ALLOWED_TP_TEXT = (f"between 1 and {NODE_GPUS} (one node), or {', '.join(map(str, ACROSS_NODE_TP[:-1]))} or "
                   f"{ACROSS_NODE_TP[-1]} (whole nodes, or one NVL72 domain)")

# The scale-out links a tensor-parallel group (and expert parallelism's all-to-all) may cross between domains, all
# entries of kv_links.json: one ConnectX NIC per GPU at 200, 400 or 800 Gb/s (InfiniBand or RoCE).
SCALE_OUT_LINK_NAMES = ("ib200", "ib400", "ib800")
# One inter-node hop of a small all-reduce: NCCL's own latency model (src/graph/tuning.cc, hwLat[NET][Tree][LL],
# the low-latency protocol it picks for the small messages decode steps all-reduce) charges 5 us a network hop.
NET_HOP_LATENCY_US = 5.0


def tp_problem(tp: int) -> str | None:
    """Why `tp` is not a degree a deployment may have (its range is the field's bounds); None when it is."""
    if 1 <= tp <= NODE_GPUS or tp in ACROSS_NODE_TP:
        return None
    return f"must be {ALLOWED_TP_TEXT} (got {tp})"


OUT_OF_RANGE = ("greater_than_equal", "less_than_equal")  # pydantic's error types for a value outside ge/le


def _allowed_tp(value: object, handler: ValidatorFunctionWrapHandler) -> int:
    """An int within the field's bounds (ge=1, le=MAX_TP) that is one of the degrees above; out of the bounds too,
    the message names every degree allowed, not the bounds alone."""
    try:
        tp = handler(value)
    except ValidationError as e:
        if all(err["type"] not in OUT_OF_RANGE for err in e.errors()):
            raise
        raise ValueError(f"must be {ALLOWED_TP_TEXT} (got {value})") from None
    problem = tp_problem(tp)
    if problem:
        raise ValueError(problem)
    return tp


# A tensor-parallel degree field (its bounds given where it is declared, as every field's).
TensorParallelDegree = Annotated[int, WrapValidator(_allowed_tp)]


def domains(tp: int, gpu: GPU) -> int:
    """NVLink domains (nodes, or NVL72 racks) a tensor-parallel group of `tp` GPUs spans."""
    return math.ceil(tp / domain_gpus(gpu))


def hierarchical_allreduce_s(nbytes: float, tp: int, domain: int, nvlink_bus_bw: float, nic_bw: float) -> float:
    """Seconds the bytes of one all-reduce of `nbytes` among `tp` GPUs, `domain` to an NVLink domain, take (no
    latency): the slower of the NVLink reduce-scatter + all-gather and the NIC all-reduce of each GPU's shard."""
    g = min(tp, domain)
    n = math.ceil(tp / domain)
    nvlink = 2.0 * (g - 1) / g * nbytes / nvlink_bus_bw
    network = 2.0 * (n - 1) / n * nbytes / g / nic_bw
    return max(nvlink, network)


def allreduce_bus_bw(tp: int, domain: int, nvlink_bus_bw: float, nic_bw: float) -> float:
    """The bus bandwidth (nccl-tests' 2(n-1)/n x bytes / time) of the all-reduce among `tp` GPUs: NVLink's own
    within one domain (returned as is: every output within a node stays as it was), the hierarchical one across."""
    if tp <= domain:
        return nvlink_bus_bw
    return 2.0 * (tp - 1) / tp / hierarchical_allreduce_s(1.0, tp, domain, nvlink_bus_bw, nic_bw)


def network_latency_us(tp: int, domain: int) -> float:
    """What the hops between domains add to one all-reduce's latency: 2 log2(N) of NET_HOP_LATENCY_US."""
    n = math.ceil(tp / domain)
    return 2.0 * math.log2(n) * NET_HOP_LATENCY_US if n > 1 else 0.0


def allreduce_terms(gpu: GPU, tp: int, scale_out: str | None, nvlink_bus_bw: float,
                    nvlink_latency_s: float) -> tuple[float, float]:
    """(bus bandwidth in bytes/s, latency in s) of the kernel's all-reduce among `tp` GPUs of `gpu`: the NVLink
    figures given within one domain, the hierarchical ones over the scale-out link across domains."""
    domain = domain_gpus(gpu)
    nic = KV_LINKS[scale_out_link_of(gpu, scale_out)].bytes_per_s
    return (allreduce_bus_bw(tp, domain, nvlink_bus_bw, nic),
            nvlink_latency_s + network_latency_us(tp, domain) * 1e-6)


def tp_report(gpu: GPU, tp: int, scale_out: str | None) -> dict:
    """What a run's `resolved` adds for a group across NVLink domains ({} within one)."""
    n = domains(tp, gpu)
    if n == 1:
        return {}
    return {"tp_domains": n, "tp_domain_gpus": domain_gpus(gpu), "scale_out_link": scale_out_link_of(gpu, scale_out),
            "tensor_parallel": tp_text(gpu, tp, scale_out)}


def tp_text(gpu: GPU, tp: int, scale_out: str | None) -> str:
    """"tensor parallel 16 over 2 nodes of 8 (NVLink within, InfiniBand NDR / RoCE 400 Gb/s per GPU between)"."""
    domain = domain_gpus(gpu)
    unit = "nodes" if domain == NODE_GPUS else "NVLink domains"
    within = "NVLink" if gpu.tp_link_is_nvlink else "PCIe"
    return (f"tensor parallel {tp} over {domains(tp, gpu)} {unit} of {domain} ({within} within, "
            f"{KV_LINKS[scale_out_link_of(gpu, scale_out)].name} between)")
