"""The 2025-2026 measurements gathered into validation/ (issue #22 point 7; validation/SOURCES.md) that the cost
model does not predict yet (inferencex.csv is predicted: studies/inferencex.py): `sched-sim validate` lists their rows, skipped with what a prediction needs, in one
group per source, so what is waiting shows and the files are parsed (a malformed row fails here, not later)."""

from __future__ import annotations

from pathlib import Path

from .alltoall_checks import alltoall_checks
from .check_rows import VALIDATION_DIR, Check, measured_rows
from .row_names import hardware_key, model_key

# Each gathered file, with what a prediction of its rows needs.
GATHERED = {
    "moe_serving.csv": "multi-node expert-parallel serving: needs EPLB, two-batch-overlap and P/D-disaggregation "
                       "costs (the EP all-to-all is modelled: sim_core/expert_parallel.py)",
}
# Sources in those files whose rows need something else than their file's reason.
GATHERED_SOURCE_REASONS = {
    "amd_mi355x_vs_b200_vllm": "a throughput ratio aggregated over a concurrency sweep (the points are only plotted)",
}


def gathered_checks(directory: Path = VALIDATION_DIR) -> list[Check]:
    """The GATHERED files' rows, each skipped with its reason, grouped by source_id; then alltoall.csv's, predicted
    (sim_core/studies/alltoall_checks.py)."""
    out = []
    for name, reason in GATHERED.items():
        for _, r, reference in measured_rows(directory / name):
            missing = [what for what, known in (("GPU", hardware_key(r["hardware"])),
                                                ("model", model_key(r.get("model", "")) if "model" in r else True))
                       if known is None]
            shape = (f", TP{r['tp']} EP{r['ep']}" if r.get("tp") else "") + \
                (f", {r['gpus']} GPUs ({r['parallelism']})" if r.get("parallelism") else "") + \
                (f", {r['input_len']}/{r['output_len']}" if r.get("output_len") else
                 f", {r['input_len']}-token prompts" if r.get("input_len") else "") + \
                (f", concurrency {r['concurrency']}" if r.get("concurrency") else "")
            subject = (f"{r['model']} {r['dtype']}" if "model" in r else
                       f"{r['op']} EP{r['ep']} {r['tokens_per_batch']} tokens ({r['kernel']})")
            what = f"{subject} on {r['hardware']}{shape}: {r['measured_what']}"
            note = "; ".join([GATHERED_SOURCE_REASONS.get(r["source_id"], reason)]
                             + [f"{m} not in the catalog" for m in missing])
            out.append(Check(group=r["source_id"], source=name, what=what, reference=reference, unit=r["unit"],
                             predicted=None, note=note))
    return out + alltoall_checks(directory)
