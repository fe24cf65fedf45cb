"""The cost model's validated error where decisions are made: every row `sched-sim validate` predicts
(sim_core.studies.validation.checks), each placed by model, GPU and engine, and per model x GPU x engine the
error of its throughput rows, for the Accuracy page (`/accuracy`) and for the plan and frontier rows, which show
their combination's error, "not validated", and a badge where the model is known to be optimistic there.

A row's engine is the one it names or ran as: the engine profile an offline row simulated, an InferenceX point's
framework, else an engine its source or note names (TensorRT-LLM's published tables, SGLang's), else the cost
model's default profile (vllm), which predicted it. "Optimistic": the combination's median throughput row
overstates the measured throughput by more than the validation set's own median absolute error on throughput
rows, i.e. worse than the model's typical error and in the direction that makes a deployment look cheaper.

The checks simulate benchmark runs (about half a minute on a warm server), so they run once per process, on a
thread of their own started by the first page that needs them; `current()` says what is known so far."""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from sim_core.engines import DEFAULT_ENGINE, ENGINE_NAMES
from sim_core.studies import validation
from sim_core.studies.row_names import hardware_key, model_key

THROUGHPUT_UNITS = ("tok/s", "req/s")  # the rows a plan's or a frontier's choice rests on
# How the sources spell the engines, as they appear in a row's source id or note.
ENGINE_SPELLINGS = {"vllm": ("vllm",), "sglang": ("sglang",), "trtllm": ("trtllm", "tensorrt-llm")}


@dataclass(frozen=True)
class Row:
    group: str
    source: str
    what: str
    reference: float
    predicted: float | None
    unit: str
    error: float | None
    note: str
    model: str  # catalogue key, "" where the row names none (a kernel of no model)
    gpu: str
    engine: str


@dataclass(frozen=True)
class Combo:
    model: str
    gpu: str
    engine: str
    rows: int  # throughput rows predicted
    median_error: float  # signed: + the model predicts more throughput than measured
    median_abs_error: float
    optimistic: bool


@dataclass(frozen=True)
class Accuracy:
    rows: tuple[Row, ...]
    combos: dict[tuple[str, str, str], Combo]
    optimistic_above: float  # the validation set's median absolute error on throughput rows


def engine_of_check(c) -> str:
    """The engine a check names or ran as (see the module's doc)."""
    named = c.engine or (c.point.engine if c.point else "")
    if named:
        return named
    text = f"{c.source} {c.note}".lower()
    found = [e for e in ENGINE_NAMES if any(s in text for s in ENGINE_SPELLINGS.get(e, (e,)))]
    return found[0] if len(found) == 1 else DEFAULT_ENGINE


def classify(c) -> Row:
    model = c.point.model if c.point else model_key(c.what)
    gpu = c.point.gpu if c.point else hardware_key(c.what)
    return Row(c.group, c.source, c.what, c.reference, c.predicted, c.unit, c.error, c.note, model or "",
               gpu or "", engine_of_check(c))


def is_throughput(row: Row) -> bool:
    return row.error is not None and any(u in row.unit for u in THROUGHPUT_UNITS)


def build(checks) -> Accuracy:
    rows = tuple(classify(c) for c in checks)
    tput = [r for r in rows if is_throughput(r) and r.model and r.gpu]
    typical = statistics.median(abs(r.error) for r in tput) if tput else 0.0
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in tput:
        groups.setdefault((r.model, r.gpu, r.engine), []).append(r.error)
    combos = {key: Combo(*key, len(errors), statistics.median(errors), statistics.median(abs(e) for e in errors),
                         statistics.median(errors) > typical)
              for key, errors in sorted(groups.items())}
    return Accuracy(rows, combos, typical)


# ----- computed once per process, off the request threads -----
_lock = threading.Lock()
_state: dict = {"result": None, "error": "", "started": None}


def _compute() -> None:
    try:
        result = build(validation.checks(simulate=True))
        with _lock:
            _state["result"] = result
    except Exception as e:  # noqa: BLE001 (the page says what failed; a restart retries)
        with _lock:
            _state["error"] = f"{e.__class__.__name__}: {e}"


def current(start: bool = True) -> dict:
    """{"result": Accuracy or None, "error": text, "running_s": seconds since the checks started or None},
    starting the checks (once) where `start` and nothing is known yet."""
    with _lock:
        if start and _state["started"] is None:
            _state["started"] = time.monotonic()
            threading.Thread(target=_compute, name="accuracy-checks", daemon=True).start()
        started = _state["started"]
        done = _state["result"] is not None or _state["error"]
        return {"result": _state["result"], "error": _state["error"],
                "running_s": None if done or started is None else time.monotonic() - started}


def verdict(model: str | None, gpu: str, engine: str) -> dict:
    """What a plan's or a frontier's row says of its model x GPU x engine (`link`: its rows on /accuracy): its
    validated error, or "not
    validated" (naming the engines validated there, if any); `optimistic` where that combination is known to be,
    or, not validated itself, where another engine's on the same model and GPU is; `pending` while the checks
    run, with `poll`, the URL of this verdict as a fragment (the row's cell asks it again until it is known)."""
    link = "/accuracy?" + urlencode({"model": model or "", "gpu": gpu})
    known = current()
    acc = known["result"]
    if acc is None:
        return {"text": "validation being checked" if not known["error"] else "validation unavailable",
                "optimistic": False, "title": known["error"], "pending": not known["error"], "link": link,
                "poll": "/accuracy/verdict?" + urlencode({"model": model or "", "gpu": gpu, "engine": engine})}
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
    return {"text": text, "optimistic": bool(optimistic), "pending": False, "link": link,
            "title": (title + f"; optimistic: above the set's typical {acc.optimistic_above:.0%}")
            if optimistic else title}
