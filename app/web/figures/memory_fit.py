"""Memory fit: what each GPU's memory holds (weights, KV cache, activations and runtime reserve, what is left) and
how many tokens and concurrent requests of this workload the KV pool fits, per scheduler (each has its own token
budget, so its own activations and KV pool) and pool. sim_core.memory_fit reads the memory budget the engine ran
with (one definition: catalog.Setup and the pool's blocks); this card only lays it out."""

from __future__ import annotations

from dataclasses import asdict

from sim_core.memory_fit import memory_fit

from . import Figure, Results

NAME = "memory-fit"
# The bar's parts, left to right, as the card names them (PoolFit fields, bytes per GPU).
PARTS = (("weight_bytes", "weights"), ("kv_pool_bytes", "KV cache"), ("kv_reserved_bytes", "KV state per sequence"),
         ("activation_bytes", "activations"), ("runtime_reserve_bytes", "runtime reserve"), ("free_bytes", "free"))


def keep(result) -> list[dict]:
    return [asdict(f) for f in memory_fit(result.resolved, result.requests)]


def rows(results: Results) -> dict | None:
    """The card's columns (PARTS) and a row per scheduler and pool: its PoolFit, and the parts of its bar (each
    present part's key, name, bytes and share of the usable memory)."""
    out = []
    for v in results.views:
        for fit in v.kept.get(NAME) or []:
            bar = [(key, label, fit[key], 100.0 * fit[key] / fit["usable_bytes"]) for key, label in PARTS
                   if fit[key] > 0]
            out.append({"scheduler": v.scheduler, **fit, "bar": bar})
    return {"parts": PARTS, "rows": out} if out else None


def _explain(results: Results, data: list[dict] | None) -> str:
    return ("Per GPU, what the engine's memory holds: gpu_memory_utilization of the GPU's memory, less the weights, "
            "the runtime reserve and the activations of one forward pass over the token budget, is the KV cache. "
            "Requests that fit: the KV pool's tokens over this workload's mean context at a request's end (in whole "
            "blocks, without prefix sharing); at most max_seqs run in one step.")


FIGURE = Figure(name=NAME, title="Memory fit", explain=_explain, order=41, build=rows, keep=keep,
                template="_figure_memory_fit.html", embeds=False)
