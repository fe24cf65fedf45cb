"""`/docs`: the API reference, rendered on the server from FastAPI's OpenAPI schema (FastAPI's own Swagger UI
loads its JavaScript from a CDN, which a deployment without internet access cannot reach), and the reference of
every metric a run reports, rendered from `sim_core`'s metric catalogue (the one the CLI and dashboard tables
use)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sim_core.metric_catalog import METRICS

from .templating import templates

router = APIRouter(include_in_schema=False)


def _type_text(schema: dict) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_type_text(s) for s in schema["anyOf"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "")
    bounds = [f"{op} {schema[k]:g}" for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                                                   ("exclusiveMaximum", "<")) if isinstance(schema.get(k), int | float)]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _param(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "type": _type_text(schema), "default": schema.get("default"), "description": description}


def _operations(spec: dict) -> list[dict]:
    ops = []
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            params, notes = [], []
            for p in op.get("parameters", []):
                schema = p.get("schema", {})
                if schema.get("type") == "object" and p.get("explode"):  # the query string as one object (its rules)
                    notes.append(p.get("description", ""))
                    params += [_param(name, prop, prop.get("description", ""))
                               for name, prop in schema.get("properties", {}).items()]
                else:
                    params.append(_param(p["name"], schema, p.get("description", "")))
            errors = [(code, r.get("description", "")) for code, r in op.get("responses", {}).items()
                      if code[:1] in "45"]
            bodies = list((op.get("requestBody") or {}).get("content", {}))
            examples = {code: json.dumps(c["example"], indent=2)
                        for code, r in op.get("responses", {}).items()
                        for c in [r.get("content", {}).get("application/json", {})] if "example" in c}
            ops.append({"method": method.upper(), "path": path, "summary": op.get("summary", ""),
                        "description": op.get("description", ""), "params": params, "notes": notes,
                        "bodies": bodies, "examples": examples, "errors": errors})
    return ops


def _metric_groups() -> list[tuple[str, list]]:
    """The catalogue by table section, in catalogue order."""
    groups: dict[str, list] = {}
    for m in METRICS:
        groups.setdefault(m.group, []).append(m)
    return list(groups.items())


@router.get("/docs", response_class=HTMLResponse)
def docs(request: Request) -> HTMLResponse:
    spec = request.app.openapi()
    # The examples' address is the one this page was served from (behind a proxy: the public one, from its Host
    # and X-Forwarded-Proto), so they can be pasted as they are.
    base = str(request.base_url).rstrip("/")
    ctx = {"request": request, "base": base, "info": spec.get("info", {}), "operations": _operations(spec),
           "metric_groups": _metric_groups()}
    return templates.TemplateResponse(request, "docs.html", ctx)
