"""The links a disaggregated deployment moves KV caches over, from a prefill GPU to a decode GPU.

Each link: its line rate per direction per GPU, the fraction of it a large one-sided transfer reaches, and a fixed
cost per transfer (posting the RDMA writes of a request's blocks and signalling completion). Line rates are the
published ones; the efficiencies are what bandwidth tests measure on them. With tensor parallelism each rank
sends its own shard over its own link, in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass


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

KV_LINKS: dict[str, KvLink] = {
    "nvlink4": KvLink("NVLink 4 (H100/H200 in one node)", 450.0, 0.85, TRANSFER_SETUP_S,
                      "NVIDIA H100 datasheet: 900 GB/s bidirectional per GPU; nccl-tests p2p reach ~370-390 GB/s "
                      "per direction"),
    "nvlink3": KvLink("NVLink 3 (A100 in one node)", 300.0, 0.85, TRANSFER_SETUP_S,
                      "NVIDIA A100 datasheet: 600 GB/s bidirectional per GPU"),
    "pcie4": KvLink("PCIe Gen4 x16", 31.5, 0.8, TRANSFER_SETUP_S,
                    "PCI-SIG: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per direction; pinned copies reach ~25 GB/s"),
    "pcie5": KvLink("PCIe Gen5 x16", 63.0, 0.8, TRANSFER_SETUP_S,
                    "PCI-SIG: 32 GT/s x 16 lanes = 63 GB/s per direction; pinned copies reach ~50 GB/s"),
    "ib200": KvLink("InfiniBand HDR / RoCE 200 Gb/s per GPU", 25.0, 0.95, TRANSFER_SETUP_S,
                    "IBTA HDR 200 Gb/s = 25 GB/s; ib_write_bw reaches ~23.5-24 GB/s"),
    "ib400": KvLink("InfiniBand NDR / RoCE 400 Gb/s per GPU", 50.0, 0.95, TRANSFER_SETUP_S,
                    "IBTA NDR 400 Gb/s = 50 GB/s; ib_write_bw reaches ~47-48 GB/s (ConnectX-7)"),
    # A cloud node without RDMA: the KV goes over the host's TCP stack. A slow link, for comparison.
    "eth25": KvLink("Ethernet 25 Gb/s, TCP (no RDMA)", 3.125, 0.9, TCP_SETUP_S,
                    "IEEE 802.3by 25GBASE-R = 3.125 GB/s; iperf3 single-host transfers reach ~22-23.5 Gb/s"),
}
KV_LINK_NAMES = tuple(KV_LINKS)
