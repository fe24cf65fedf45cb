"""Every row `sched-sim validate` predicts, placed by model, GPU and engine, and per model x GPU x engine the error
of its throughput rows: what the Accuracy page (`/accuracy`) lists and what the plan and frontier rows quote
("validated +5% (12 rows)", "not validated", the optimistic badge; app/web/accuracy.py).

The placed rows are kept in `sim_core/data/validation_rows.json`, written by scripts/gen_validation_md.py from
the same validation run as docs/VALIDATION.md and model_error.json (tests/test_validation.py keeps all three
current and the file's rows equal to `validate --json`'s): the checks simulate benchmark runs (minutes on a
loaded machine), which a page must not wait for. Each row of the file is `validate --json`'s row
(check_rows.ROW_KEYS) plus PLACE_KEYS, as a list in the order of COLUMNS; the combinations are computed from the rows as they are read (`build`).

A row's engine is the one it names or ran as: the engine profile an offline row simulated, an InferenceX point's
framework, else an engine its source or note names (TensorRT-LLM's published tables, SGLang's), else the cost
model's default profile (vllm), which predicted it. "Optimistic": the combination's median throughput row
overstates the measured throughput by more than the validation set's own median absolute error on throughput
rows, i.e. worse than the model's typical error and in the direction that makes a deployment look cheaper."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..data import CatalogDataError
from ..engines import DEFAULT_ENGINE, ENGINE_NAMES
from .check_rows import ROW_KEYS, row_doc
from .row_names import hardware_key, model_key

PATH = Path(__file__).resolve().parents[1] / "data" / "validation_rows.json"
PLACE_KEYS = ("model", "gpu", "engine")  # where a row is placed, beside validate --json's keys
COLUMNS = ROW_KEYS + PLACE_KEYS  # a row of the file, and the fields of Row
NUMBERS = ("reference", "predicted", "error")
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


def place(c) -> dict:
    """A validation Check -> its row as the file keeps it: validate --json's keys, then PLACE_KEYS."""
    model = c.point.model if c.point else model_key(c.what)
    gpu = c.point.gpu if c.point else hardware_key(c.what)
    return {**row_doc(c), "model": model or "", "gpu": gpu or "", "engine": engine_of_check(c)}


def is_throughput(row: Row) -> bool:
    return row.error is not None and any(u in row.unit for u in THROUGHPUT_UNITS)


def build(rows: Iterable[Row]) -> Accuracy:
    rows = tuple(rows)
    tput = [r for r in rows if is_throughput(r) and r.model and r.gpu]
    typical = statistics.median(abs(r.error) for r in tput) if tput else 0.0
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in tput:
        groups.setdefault((r.model, r.gpu, r.engine), []).append(r.error)
    combos = {key: Combo(*key, len(errors), statistics.median(errors), statistics.median(abs(e) for e in errors),
                         statistics.median(errors) > typical)
              for key, errors in sorted(groups.items())}
    return Accuracy(rows, combos, typical)


def _number(value):
    """A row's number as plain JSON (validate --json's: a numpy scalar as a float, a non-finite one as null)."""
    if value is None or isinstance(value, str):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def document(checks: Iterable) -> str:
    """The text of sim_core/data/validation_rows.json for these validation checks: COLUMNS once, then each row's
    values in that order, one row a line (a regenerated file's diff shows the rows that moved)."""
    rows = [[_number(v) if k in NUMBERS else v for k, v in place(c).items()] for c in checks]
    about = ("every row `sched-sim validate --json` prints, placed by model, GPU and engine; written by "
             "scripts/gen_validation_md.py, read by sim_core/studies/validation_rows.py")
    lines = [json.dumps(r, allow_nan=False) for r in rows]
    return ('{\n "about": ' + json.dumps(about) + ',\n "columns": ' + json.dumps(list(COLUMNS))
            + ',\n "rows": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")


def load(path: Path = PATH) -> Accuracy:
    """The placed rows of the file and their combinations; a file not of this shape is refused naming it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if tuple(doc["columns"]) != COLUMNS:
            raise ValueError(f"its columns are {doc['columns']}, not {list(COLUMNS)}")
        rows = [Row(*r) for r in doc["rows"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CatalogDataError(f"{path.name}: not a file of placed validation rows ({e.__class__.__name__}: {e}); "
                               f"run python scripts/gen_validation_md.py") from None
    return build(rows)
