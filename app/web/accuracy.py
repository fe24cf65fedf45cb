"""The cost model's validated error where decisions are made: the rows `sched-sim validate` predicts, placed by
model, GPU and engine (sim_core/studies/validation_rows.py), for the Accuracy page (`/accuracy`) and for the plan
and frontier rows, which show their combination's error, "not validated", and a badge where the model is known to
be optimistic there.

The rows are read from sim_core/data/validation_rows.json, which scripts/gen_validation_md.py writes with
docs/VALIDATION.md: nothing is simulated at request time, and the file is read once per process."""

from __future__ import annotations

from functools import cache
from urllib.parse import urlencode

from sim_core.studies import validation_rows
from sim_core.studies.validation_rows import Accuracy


@cache
def known() -> Accuracy:
    """The placed rows and their combinations (read on first use)."""
    return validation_rows.load()


def verdict(model: str | None, gpu: str, engine: str) -> dict:
    """What a plan's or a frontier's row says of its model x GPU x engine (`link`: its rows on /accuracy): its
    validated error, or "not validated" (naming the engines validated there, if any); `optimistic` where that
    combination is known to be, or, not validated itself, where another engine's on the same model and GPU is."""
    acc = known()
    link = "/accuracy?" + urlencode({"model": model or "", "gpu": gpu})
    combo = acc.combos.get((model or "", gpu, engine))
    others = [c for (m, g, e), c in acc.combos.items() if (m, g) == (model, gpu) and e != engine]
    optimistic = [c for c in ([combo] if combo else others) if c.optimistic]  # its own engine's, where validated
    title = "; ".join(f"{c.engine}: median {c.median_error:+.0%} over {c.rows} throughput rows"
                      for c in ([combo] if combo else []) + others)
    if combo:
        text = f"validated {combo.median_error:+.0%} ({combo.rows} rows)"
    else:
        text = "not validated" + (f" on {engine} (" + ", ".join(
            f"{c.engine} {c.median_error:+.0%}" for c in others) + ")" if others else "")
    # `pending` stays for /api/plan's `validation`, which has always carried it: the error is known from the start.
    return {"text": text, "optimistic": bool(optimistic), "pending": False, "link": link,
            "title": (title + f"; optimistic: above the set's typical {acc.optimistic_above:.0%}")
            if optimistic else title}
