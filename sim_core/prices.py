"""What GPUs cost: on-demand list prices per GPU-hour, each with its provider, offer, source and date, for the
cost metrics (cost per hour of a deployment, dollars per million output tokens).

Prices are a snapshot (the date says when); they move often and differ several-fold between a hyperscaler's
8-GPU node (networking included) and a GPU cloud's single-GPU pod. Where a hyperscaler sells the GPU on demand its
price is used, else a GPU cloud's list price. Gathered 2026-11 from the sources named; where a figure came from a
collection of provider prices rather than the provider's own page, the source is that collection.

The rows are data: sim_core/data/prices.json, one per catalogue GPU (a GPU with no offer has usd_per_gpu_hour
null and a note saying why), read here into GpuPrice (GPU_PRICES); a row with a missing or unknown key, or a GPU
without a row, is refused with the file, the entry and the key named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import data
from .catalog import GPUS
from .data import CatalogDataError


@dataclass(frozen=True)
class GpuPrice:
    usd_per_gpu_hour: float
    provider: str
    offer: str  # instance or plan, and the instance price when it holds several GPUs
    source: str  # where the price was read
    as_of: str  # when it applied


PRICES_FILE = "prices.json"
# The keys of a row without a price: the GPU, usd_per_gpu_hour null, and a note saying why there is none.
NO_PRICE_KEYS = ("gpu", "usd_per_gpu_hour", "note")


def prices_from(doc, gpus: Mapping[str, object]) -> dict[str, GpuPrice | None]:
    """The prices of a prices.json document by GPU key, in the file's order: one row for each GPU in `gpus`."""
    prices: dict[str, GpuPrice | None] = {}
    for gpu, label, row in data.entries(doc, PRICES_FILE, key="gpu"):
        if gpu not in gpus:
            raise CatalogDataError(f"{label}: key 'gpu': {gpu!r} is not a catalogue GPU ({', '.join(gpus)})")
        if "usd_per_gpu_hour" in row and row["usd_per_gpu_hour"] is None:
            prices[gpu] = None
            for k in row:
                if k not in NO_PRICE_KEYS:
                    raise CatalogDataError(f"{label}: unknown key {k!r} in a row without a price; such a row has "
                                           f"keys {', '.join(NO_PRICE_KEYS)}")
            if not isinstance(row.get("note"), str) or not row["note"]:
                raise CatalogDataError(f"{label}: missing key 'note' (why no price is known)")
        else:
            prices[gpu] = data.build(row, label, GpuPrice, key="gpu")
    for gpu in gpus:
        if gpu not in prices:
            raise CatalogDataError(f"{data.where(PRICES_FILE)}: no row for GPU {gpu!r}; add one (usd_per_gpu_hour "
                                   "null, with a note, where no offer is known)")
    return prices


GPU_PRICES: dict[str, GpuPrice | None] = prices_from(data.read(PRICES_FILE), GPUS)


def deployment_cost_per_hour(hardware: str, gpus: int) -> float | None:
    """Dollars per hour for `gpus` GPUs of this kind at its listed on-demand price (None: no price known)."""
    price = GPU_PRICES.get(hardware)
    return None if price is None else price.usd_per_gpu_hour * gpus
