"""What GPUs cost: on-demand list prices per GPU-hour, each with its provider, offer, source and date, for the
cost metrics (cost per hour of a deployment, dollars per million output tokens).

Prices are a snapshot (the date says when); they move often and differ several-fold between a hyperscaler's
8-GPU node (networking included) and a GPU cloud's single-GPU pod. Where a hyperscaler sells the GPU on demand its
price is used, else a GPU cloud's list price. Gathered 2026-11 from the sources named; where a figure came from a
collection of provider prices rather than the provider's own page, the source is that collection.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPrice:
    usd_per_gpu_hour: float
    provider: str
    offer: str  # instance or plan, and the instance price when it holds several GPUs
    source: str  # where the price was read
    as_of: str  # when it applied


GPU_PRICES: dict[str, GpuPrice | None] = {
    "rtx3050": None,  # no rental offer found (2026-11); consumer card, bought not rented
    "rtx4090": GpuPrice(0.34, "RunPod (Community Cloud)", "1x RTX 4090 24GB pod, on-demand",
                    "https://deploybase.ai/articles/rtx-4090-cloud", "2026-03"),
    "l4": GpuPrice(0.7992, "Modal (serverless, per-second billing)", "1x L4 24GB (gpu='L4')",
                    "https://techbytes.app/posts/serverless-gpu-pricing-matrix-modal-replicate-lambda-2026/", "2026-05-07"),
    "a10g": GpuPrice(1.006, "AWS us-east-1", "g5.xlarge (1x A10G 24GB, 4 vCPU), Linux on-demand",
                    "https://www.factualminds.com/blog/amazon-ec2-on-demand-pricing-instance-families-2026/", "2026-06-17"),
    "l40s": GpuPrice(1.861, "AWS us-east-1", "g6e.xlarge (1x L40S 48GB, 4 vCPU), on-demand",
                    "https://modal.com/blog/nvidia-l40s-price-article", "2025-08-12"),
    "a100-40gb": GpuPrice(2.7447, "AWS us-east-1", "p4d.24xlarge (8x A100 SXM 40GB), on-demand, $21.9576/h for 8 GPUs",
                    "https://raw.githubusercontent.com/datareceipts/data-receipts/main/109-gpu-pricing/hyperscalers.json", "2026-11-09"),
    "a100": GpuPrice(3.4309, "AWS us-east-1", "p4de.24xlarge (8x A100 SXM 80GB), on-demand, $27.4471/h for 8 GPUs",
                    "https://raw.githubusercontent.com/datareceipts/data-receipts/main/109-gpu-pricing/hyperscalers.json", "2026-11-09"),
    "h100": GpuPrice(6.88, "AWS us-east-1", "p5.48xlarge (8x H100 SXM 80GB), on-demand, $55.04/h for 8 GPUs",
                    "https://raw.githubusercontent.com/datareceipts/data-receipts/main/109-gpu-pricing/hyperscalers.json", "2026-11-09"),
    "h100-pcie": GpuPrice(3.29, "Lambda", "1x H100 PCIe 80GB",
                    "https://raw.githubusercontent.com/tgarg01/silybench-data/main/derived/csv/gpu_prices.csv", "2026-09-25"),
    "h200": GpuPrice(7.912, "AWS us-east-1", "p5en.48xlarge (8x H200 141GB), on-demand, $63.296/h for 8 GPUs",
                    "https://github.com/dstackai/dstack/pull/4110", "2026-08-06"),
    "b200": GpuPrice(6.69, "Lambda", "8x NVIDIA B200 SXM6 (180GB per GPU), $53.52/h for 8 GPUs",
                    "https://raw.githubusercontent.com/api-evangelist/lambda-labs/refs/heads/main/plans/lambda-labs-plans-pricing.yml", "2026-09-20"),
    "mi300x": GpuPrice(2.59, "DigitalOcean", "gpu-mi300x1-192gb (1x MI300X) GPU Droplet, on-demand list",
                    "https://huggingface.co/datasets/tokenwatt/gpu-cloud-prices", "2026-10-07"),
}


def deployment_cost_per_hour(hardware: str, gpus: int) -> float | None:
    """Dollars per hour for `gpus` GPUs of this kind at its listed on-demand price (None: no price known)."""
    price = GPU_PRICES.get(hardware)
    return None if price is None else price.usd_per_gpu_hour * gpus
