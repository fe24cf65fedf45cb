"""validation/alltoall.csv predicted: DeepEP's published dispatch/combine tables (deepep_v2_readme, deepep_v1_legacy
in validation/SOURCES.md) against sim_core/expert_parallel.py's all-to-all model, each row in its own measure:

- "latency": the predicted seconds of one dispatch or combine;
- "RDMA bandwidth" (low-latency kernels): tokens x top-k x message bytes over that time (the table's EP8 row is
  this arithmetic: 128 x 8 x 7,408 B / 77 us = 98 GB/s);
- "bottleneck bandwidth" (V1 normal kernels): the bytes crossing the bottleneck link, NVLink within one node,
  the network across nodes, over that time;
- "bottleneck bandwidth (logical; includes local-rank traffic)" (V2): all the bytes, the GPU's own share too,
  over that time.

ALLTOALL_LATENCY_S was fitted on the two EP8 low-latency latency rows (their notes say so, and their bandwidth
twins', the same measurement); every other constant comes from elsewhere (expert_parallel.py), so the other 38
rows are checks of it."""

from __future__ import annotations

from pathlib import Path

from ..catalog import GPUS
from ..expert_parallel import (
    KV_LINKS,
    NODE_GPUS,
    NVLINK_ALLTOALL_EFFICIENCY,
    SCALE_OUT_LINK,
    AllToAllLinks,
    all_to_all_seconds,
    combine_bytes_per_copy,
    dispatch_bytes_per_copy,
    links_of,
    traffic_split,
)
from .check_rows import VALIDATION_DIR, Check, measured_rows

FILE = "alltoall.csv"
# H800 is not in the GPU catalogue: an H100 with NVLink cut to 400 GB/s bidirectional, 200 GB/s per direction
# (NVIDIA H800 SXM5 spec; DeepEP README: "H800 (~160 GB/s NVLink maximum bandwidth)", 0.8 of it).
H800_NVLINK_GBS = 200.0
H800_LINKS = AllToAllLinks(NODE_GPUS, H800_NVLINK_GBS * 1e9 * NVLINK_ALLTOALL_EFFICIENCY,
                           KV_LINKS[SCALE_OUT_LINK].bytes_per_s)
# The V2 README names architectures only: SM90 as the catalogue's H100 (its rows cross the network, which bounds
# them whatever the Hopper's NVLink), SM100 as the B200.
ARCHITECTURES = {"sm90": "h100", "sm100": "b200"}
FITTED_NOTE = "ALLTOALL_LATENCY_S was fitted on this row (with its latency or bandwidth twin)"


def row_links(hardware: str) -> tuple[AllToAllLinks, str]:
    """The links a row's GPU has, and what the note says of the mapping."""
    h = hardware.lower()
    if h.startswith("h800"):
        return H800_LINKS, "H800: NVLink 200 GB/s per direction"
    for arch, key in ARCHITECTURES.items():
        if h.startswith(arch):
            return links_of(GPUS[key]), f"{arch.upper()} as {key}"
    raise ValueError(f"{FILE}: hardware {hardware!r} is neither H800 nor an SM90/SM100 architecture")


def predicted(row: dict, links: AllToAllLinks) -> float:
    """The row's measure as the all-to-all model predicts it, in the row's unit."""
    ep, tokens, hidden, topk = (int(row[k]) for k in ("ep", "tokens_per_batch", "hidden", "topk"))
    per_copy = dispatch_bytes_per_copy(hidden) if row["op"] == "dispatch" else combine_bytes_per_copy(hidden)
    seconds = all_to_all_seconds(tokens, per_copy, topk, ep, links)
    sent = tokens * topk * per_copy
    nvlink, network = traffic_split(ep, links.domain)
    what = row["measured_what"]
    if what == "latency":
        return seconds * 1e6
    if what == "RDMA bandwidth" or what.startswith("bottleneck bandwidth (logical"):
        return sent / seconds / 1e9
    if what == "bottleneck bandwidth":
        return sent * (nvlink if ep <= links.domain else network) / seconds / 1e9
    raise ValueError(f"{FILE}: measured_what {what!r} is not one the all-to-all model predicts")


def alltoall_checks(directory: Path = VALIDATION_DIR) -> list[Check]:
    """Every row of validation/alltoall.csv, predicted, grouped by source_id."""
    out = []
    for _, r, reference in measured_rows(directory / FILE):
        links, mapping = row_links(r["hardware"])
        # The EP8 low-latency rows: the latency was fitted on them (a bandwidth row is its latency twin's bytes / time).
        fitted = r["ep"] == "8" and "low-latency" in r["kernel"]
        what = (f"{r['op']} EP{r['ep']} {r['tokens_per_batch']} tokens ({r['kernel']}) on {r['hardware']}, "
                f"{r['interconnect']}: {r['measured_what']}")
        out.append(Check(group=r["source_id"], source=FILE, what=what, reference=reference, unit=r["unit"],
                         predicted=predicted(r, links), note="; ".join([mapping] + [FITTED_NOTE] * fitted)))
    return out
