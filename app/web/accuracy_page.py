"""`/accuracy`: the cost model against public measurements, browsable. Per model x GPU x engine the error of its
throughput rows (what plans and frontiers rest on) with the optimistic ones marked, then every row `sched-sim
validate` predicts, filtered by model, GPU, engine and source (read from sim_core/data/validation_rows.json by
app/web/accuracy.py: nothing is simulated here). A plain GET form: the URL is the view."""

from __future__ import annotations

import statistics
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sim_core.studies.validation_rows import Accuracy, Combo, Row

from . import accuracy
from .templating import templates

router = APIRouter(include_in_schema=False)
FILTERS = (("model", "Model"), ("gpu", "GPU"), ("engine", "Engine"), ("source", "Source"))
MAX_ROWS_SHOWN = 400  # a page of the 1,400-odd rows; the filters narrow it down
MAX_FILTER_CHARS = 200


def _choices(acc: Accuracy) -> dict[str, list[str]]:
    return {name: sorted({getattr(r, name) for r in acc.rows if getattr(r, name)}) for name, _ in FILTERS}


def parse_filters(pairs: list[tuple[str, str]], acc: Accuracy) -> tuple[dict[str, str], dict]:
    """The filters asked for (blank: any) and an error per bad one, naming the values it takes."""
    asked = {name: "" for name, _ in FILTERS}
    errors: dict[str, str] = {}
    allowed = {name for name, _ in FILTERS}
    for k, v in pairs:
        if k not in allowed:
            errors[k] = f"not a filter of this page; it filters by {', '.join(n for n, _ in FILTERS)}"
        elif len(v) > MAX_FILTER_CHARS:
            errors[k] = f"at most {MAX_FILTER_CHARS} characters"
        else:
            asked[k] = v.strip()
    for name, values in _choices(acc).items():
        if asked[name] and asked[name] not in values:
            errors[name] = f"{asked[name]!r} is in no row; one of: {', '.join(values)}"
            asked[name] = ""
    return asked, errors


def _shown(acc: Accuracy, asked: dict[str, str]) -> list[Row]:
    return [r for r in acc.rows if all(not v or getattr(r, k) == v for k, v in asked.items())]


def _combos(acc: Accuracy, asked: dict[str, str]) -> list[Combo]:
    keys = ("model", "gpu", "engine")
    return [c for c in acc.combos.values() if all(not asked[k] or getattr(c, k) == asked[k] for k in keys)]


@router.get("/accuracy", response_class=HTMLResponse)
def accuracy_page(request: Request) -> HTMLResponse:
    acc = accuracy.known()
    asked, errors = parse_filters(list(request.query_params.multi_items()), acc)
    rows = _shown(acc, asked)
    ctx: dict[str, Any] = {"request": request, "asked": asked, "errors": errors, "filters": FILTERS,
                           "choices": _choices(acc), "combos": _combos(acc, asked), "rows": rows[:MAX_ROWS_SHOWN],
                           "total": len(rows), "typical": acc.optimistic_above, "summary": _summary(rows)}
    return templates.TemplateResponse(request, "accuracy.html", ctx, status_code=422 if errors else 200)


def _summary(rows: list[Row]) -> dict[str, Any]:
    """The shown rows' count, how many were predicted, and the median absolute error of those."""
    errors = [abs(r.error) for r in rows if r.error is not None]
    return {"predicted": len(errors), "median_abs_error": statistics.median(errors) if errors else None}
