"""validation/lora_serving.csv predicted: S-LoRA's throughput against the number of adapters (arXiv 2311.03285,
Table 3 and the "Number of Adapters" figure; slora_table3 and slora_fig_num_adapters in validation/SOURCES.md),
each row simulated as S-LoRA's benchmark ran it (benchmarks/run_exp.py, trace.py, exp_suite.py in S-LoRA/S-LoRA):

- req_rate x duration requests, Poisson arrivals (gamma gaps with cv 1), prompt and output lengths uniform in
  [8, 512) (here the `random` preset's [8, 512]: isl = osl = 260, length_range 252/260);
- each request's adapter drawn uniformly (np.random.power(alpha=1) is uniform on [0, 1)): lora_zipf 0;
- throughput = requests / the time the last one finished (run_exp.py's len(per_req_latency) / benchmark_time);
- the engine: S-LoRA keeps every adapter in host memory from start-up (`--swap`; lora_layer_weight.py copies them
  to pinned host memory when the server loads) and copies to the GPU those the running batch uses: max_cpu_loras
  = max_loras = n and no disk read; its KV pool is the server's --num-token tokens (kv_blocks = num-token / 16);
  its router (LightLLM's) runs prefill batches on their own, without chunking, and admits a request only while
  the pool holds every running request's prompt and max_new_tokens: scheduler fcfs (no chunked prefill), with
  preemption none (vLLM-style reservation of the whole request);
- Llama-7B / Llama-13B as the catalogue's llama-2-7b / llama-2-13b (the same layer shapes; only the context
  length differs); adapters on q, k, v and o (S-LoRA's LoraLayerWeight), of the setting's mean rank where its
  adapters mix ranks (S2: 8, 16, 32, 64 cycled -> 30; S4: 16, 32, 64 -> 37): the modelled LoRA cost is linear in
  the rank but for a per-kernel launch floor.

Nothing here was fitted to these rows. `shape` compares the curve: each series' throughput relative to its
smallest adapter count (n >= 1), measured and predicted (issue #23: within 20% at each measured point)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..kernel import state as E
from ..runner import run
from ..scenario import Scenario
from .check_rows import VALIDATION_DIR, Check, measured_rows

FILE = "lora_serving.csv"
HARDWARE = {"A10G (24GB)": "a10g", "A100 (40GB)": "a100-40gb", "A100 (80GB)": "a100"}
MODELS = {"Llama-7B": "llama-2-7b", "Llama-13B": "llama-2-13b"}
# S-LoRA's [8, 512) lengths as the random preset's uniform [floor(L(1-r)), ceil(L(1+r))] = [8, 512].
LENGTH, LENGTH_RANGE = 260, 252 / 260
# S-LoRA sizes its pool by --num-token, not by a share of memory: the cap on kv_blocks only has to let that
# through (Llama-13B's 14,000 tokens on the 40 GB A100 need more than vLLM's default 0.9).
GPU_MEMORY_UTILIZATION = 0.98
SEED = 42  # run_exp.py's default seed (the draws differ: another generator)
MAPPING_NOTE = ("Llama-7B/13B as llama-2-7b/13b; fcfs without chunking, preemption none, uniform adapters, "
                "all in host memory")


def mean_rank(ranks: str) -> int:
    values = [int(r) for r in ranks.split(";") if r]
    return round(sum(values) / len(values)) if values else 0


@cache
def simulated_throughput(hardware: str, model: str, rank: int, adapters: int, rate: float, duration: float,
                         kv_tokens: int) -> float:
    """Requests per second over the whole run (to the last finish), as S-LoRA's run_exp.py measures it."""
    kw = dict(workload="random", isl=LENGTH, osl=LENGTH, length_range=LENGTH_RANGE, rate=rate,
              num_requests=int(rate * duration), seed=SEED, hardware=hardware, model=model, scheduler="fcfs",
              preemption="none", kv_blocks=kv_tokens // 16, gpu_memory_utilization=GPU_MEMORY_UTILIZATION)
    if adapters:
        kw.update(lora_adapters=adapters, lora_rank=rank, lora_zipf=0.0, max_loras=adapters,
                  max_cpu_loras=adapters, lora_disk_load_s=0.0)
    res = run(Scenario(**kw))
    done = res.status == E.FINISHED
    return float(done.sum()) / float(res.finish_s[done].max())


def lora_check(row: dict, simulate: bool) -> Check:
    n = int(row["num_adapters"])
    what = (f"{row['series']}, {n} adapters (ranks {row['adapter_ranks'] or '-'}), {row['req_rate']} req/s for "
            f"{row['duration_s']} s: {row['measured_what']}")
    base = dict(group=row["source_id"], source=FILE, what=what, reference=float(row["value"]), unit=row["unit"])
    if not simulate:
        return Check(predicted=None, note="simulated (skipped by --quick)", **base)
    rate = simulated_throughput(HARDWARE[row["hardware"]], MODELS[row["model"]], mean_rank(row["adapter_ranks"]), n,
                                float(row["req_rate"]), float(row["duration_s"]), int(row["kv_tokens"]))
    return Check(predicted=rate, note=MAPPING_NOTE, **base)


def lora_checks(directory: Path = VALIDATION_DIR, simulate: bool = True) -> list[Check]:
    """Every row of validation/lora_serving.csv, grouped by source_id (simulated unless simulate is False)."""
    out = []
    for i, r, _ in measured_rows(directory / FILE):
        unknown = [v for v, known in ((r["hardware"], HARDWARE), (r["model"], MODELS)) if v not in known]
        if unknown:
            raise ValueError(f"{FILE} line {i}: {unknown[0]!r} has no catalogue entry here")
        out.append(lora_check(r, simulate))
    return out


def shape(rows: list[Check]) -> list[dict]:
    """Per series (group and setting), each adapter count's throughput over the series' smallest count's (n >= 1,
    the base-model rows apart), measured and predicted."""
    series: dict[tuple, list[tuple[int, Check]]] = {}
    for c in rows:
        if c.source != FILE or c.predicted is None or "base model" in c.what:
            continue
        name, count = c.what.split(", ")[0], int(c.what.split(", ")[1].split()[0])
        series.setdefault((c.group, name), []).append((count, c))
    out = []
    for (group, name), points in series.items():
        points.sort(key=lambda p: p[0])
        first = points[0][1]
        for count, c in points:
            measured, predicted = c.reference / first.reference, c.predicted / first.predicted
            out.append({"group": group, "series": name, "adapters": count, "measured": measured,
                        "predicted": predicted, "error": predicted / measured - 1})
    return out
