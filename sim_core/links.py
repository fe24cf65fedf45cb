"""The links a disaggregated deployment moves KV caches over, from a prefill GPU to a decode GPU.

Each link: its line rate per direction per GPU, the fraction of it a large one-sided transfer reaches, and a fixed
cost per transfer (posting the RDMA writes of a request's blocks and signalling completion). Line rates are the
published ones; the efficiencies are what bandwidth tests measure on them. With tensor parallelism each rank
sends its own shard over its own link, in parallel.

The links are data: sim_core/data/kv_links.json, one object per link with its source (and a note where one says
more), read here into KvLink (KV_LINKS); an entry with a missing or unknown key is refused with the file, the
entry and the key named. The fixed costs per transfer are estimates shared across links and stay here, each with
its reasoning: an entry names one ("latency_s": "TRANSFER_SETUP_S"; LINK_CONSTANTS lists them), so each number
is defined once.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import data


@dataclass(frozen=True)
class KvLink:
    name: str
    line_gbs: float  # GB/s per direction per GPU, as published
    efficiency: float  # fraction of the line rate a large transfer reaches
    latency_s: float  # fixed cost per transfer
    source: str

    @property
    def bytes_per_s(self) -> float:
        return self.line_gbs * 1e9 * self.efficiency


# The fixed cost per transfer: one-sided RDMA write latency is 1-3 us on InfiniBand (ib_write_lat, perftest) and a
# few microseconds over NVLink or PCIe peer-to-peer; a KV transfer adds a completion notification to the decode
# side and a descriptor per block. 20 us is an estimate for that whole exchange, not a measurement.
TRANSFER_SETUP_S = 20e-6
# Over TCP the fixed cost is a datacenter round trip and the kernel's socket path: ~50-100 us; 100 us is an
# estimate, not a measurement.
TCP_SETUP_S = 100e-6

# The constants a kv_links.json entry may name in place of a number (its latency_s).
LINK_CONSTANTS: dict[str, float] = {"TRANSFER_SETUP_S": TRANSFER_SETUP_S, "TCP_SETUP_S": TCP_SETUP_S}
KV_LINKS_FILE = "kv_links.json"


def kv_links_from(doc) -> dict[str, KvLink]:
    """The links of a kv_links.json document by key, in the file's order."""
    return data.load(doc, KV_LINKS_FILE, KvLink, LINK_CONSTANTS)


KV_LINKS: dict[str, KvLink] = kv_links_from(data.read(KV_LINKS_FILE))
KV_LINK_NAMES = tuple(KV_LINKS)
