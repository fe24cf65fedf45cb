"""What every group of the validation set shares: the directory of its tables, reading them, and the row a
prediction makes (Check); apart from validation.py, which gathers every group's rows and so imports their modules.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

VALIDATION_DIR = Path(__file__).resolve().parents[2] / "validation"
# A row's keys as `sched-sim validate --json` prints it, and as sim_core/data/validation_rows.json keeps it.
ROW_KEYS = ("group", "source", "what", "reference", "predicted", "unit", "error", "note")


@dataclass(frozen=True)
class Check:
    group: str
    source: str
    what: str
    reference: float
    unit: str
    predicted: float | None  # None: skipped, `note` says why
    note: str = ""
    # tp/fp8 rows: what a speed-up compares, and this row's side of it
    series: str = ""  # e.g. "Llama-2-7B on A100 80GB SXM4: end-to-end latency"
    variant: str = ""  # e.g. "tp=4", "fp8"
    point: tuple = ()  # InferenceX rows: an inferencex.Point (model, dtype, shape, level, GPU, TP, quantity)
    engine: str = ""  # offline rows: the engine profile simulated (sim_core/data/engines.json)

    @property
    def error(self) -> float | None:
        """Relative error of the prediction, (predicted - reference) / reference."""
        return None if self.predicted is None else self.predicted / self.reference - 1.0


def row_doc(c: Check) -> dict:
    """A row as `sched-sim validate --json` prints it (ROW_KEYS)."""
    return {k: getattr(c, k) for k in ROW_KEYS}


def int_of(text: str) -> int:
    return int(re.match(r"\s*(\d+)", text).group(1))


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def measured_rows(path: Path) -> list[tuple[int, dict, float]]:
    """(line, row, its `value` as a number) of each row of a gathered file (none if the file is absent); a value
    that is no number is a ValueError naming the file and the line."""
    if not path.is_file():
        return []
    out = []
    for line, row in enumerate(read_rows(path), start=2):
        try:
            out.append((line, row, float(row["value"])))
        except ValueError:
            raise ValueError(f"{path.name} line {line}: value {row['value']!r} is not a number") from None
    return out
