"""`/docs`: the API reference, rendered on the server from FastAPI's OpenAPI schema (FastAPI's own Swagger UI
loads its JavaScript from a CDN, which a deployment without internet access cannot reach), and the reference of
every metric a run reports, rendered from `sim_core`'s metric catalogue (the one the CLI and dashboard tables
use).

The schema itself is FastAPI's, completed here (`install`): the error answers each operation gives, and the rules
its input must follow across fields. OpenAPI can state rules that span parameters only inside one schema, so the
query string of the simulation routes is described as one exploded object parameter (`?a=1&b=2`, the same on the
wire) carrying them; a fuzzer or client working from the schema then sends what the validators accept."""

from __future__ import annotations

import inspect
import json

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute

from sim_core import SCHEDULER_NAMES
from sim_core.fields import field_info
from sim_core.metric_catalog import METRICS
from sim_core.scenario import BLOCK_SIZES, POOL_FIELDS
from sim_core.studies.sweep import MIN_SWEEP_RATE

from . import inputs
from .middleware import NO_WORK_PATHS
from .templating import templates

router = APIRouter(include_in_schema=False)

_DETAIL = {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}}
_PROBLEMS = {"type": "object", "required": ["detail"], "properties": {"detail": {
    "type": "array", "description": "one entry per problem; `loc` is [where, field], `msg` says what is allowed",
    "items": {"type": "object", "required": ["loc", "msg", "type"],
              "properties": {"loc": {"type": "array", "items": {"type": "string"}}, "msg": {"type": "string"},
                             "type": {"type": "string"}}}}}}
_RETRY = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}},
          "Queue-Ticket": {"description": "the request's place in the simulation lane's line: send the same request "
                                          "again with this header after Retry-After to resume it (the JSON's "
                                          "`queue` has it too, with the `position`)", "schema": {"type": "string"}}}
ERROR_RESPONSES = {
    "400": {"description": "the Host header names a host this server does not answer to (a DNS-rebinding guard; "
                           "`sched-sim serve --allowed-hosts` names more)",
            "content": {"application/json": {"schema": _DETAIL}}},
    "403": {"description": "a cross-site request: another site's page may not start work here (Origin or "
                           "Sec-Fetch-Site names another site); a link or frame on another site gets `reason` "
                           "`cross_site_navigation` and the URL to open directly in `open`",
            "content": {"application/json": {"schema": _DETAIL}}},
    "413": {"description": "the body is larger than a scenario can be",
            "content": {"application/json": {"schema": _DETAIL}}},
    "422": {"description": "invalid input: every problem, each naming its field; besides each field's own bounds, "
                           "the fields' combinations are checked (see the parameters' rules)",
            "content": {"application/json": {"schema": _PROBLEMS}}},
    "503": {"description": "the simulator's kernels are still compiling, or the server is busy with other "
                           "simulations (its place in line is `queue.position`; retry after Retry-After seconds with "
                           "header Queue-Ticket to keep it)",
            "headers": _RETRY, "content": {"application/json": {"schema": _DETAIL}}},
}
_HEALTH_503 = {"description": "status `error`: the simulator's kernels could not be compiled, so no simulation can run "
                              "until the server is restarted (`kernels_error` says why); status `retrying`: their "
                              "warm-up failed on the machine's state (a full disk: `kernels_retrying` says why) and "
                              "the server tries again by itself",
               "content": {"application/json": {"schema": {"type": "object", "required": ["status", "kernels_error"],
                                                           "properties": {"status": {"enum": ["error", "retrying"]},
                                                                          "kernels_error": {"type": ["string", "null"]},
                                                                          "kernels_retrying": {"type": ["string", "null"]}}}}}}
# The error answers each operation gives besides the ones every operation may give (ANY_OPERATION_ERRORS).
OPERATION_ERRORS = {
    ("get", "/api/run"): ("422", "503"), ("post", "/api/run"): ("413", "422", "503"),
    ("get", "/api/sweep"): ("422", "503"), ("get", "/api/step-time"): ("422",),
    ("post", "/api/model-config"): ("413", "422"), ("get", "/api/diff"): ("422", "503"),
}
# The Host check's 400 applies to every route, the cross-site check's 403 to every one that starts work or reads
# the API (all but the health check: middleware.NO_WORK_PATHS).
ANY_OPERATION_ERRORS = ("400", "403")

_RATE = field_info("rate")
_SWEEP_RATE = {"minimum": MIN_SWEEP_RATE, ("exclusiveMaximum" if _RATE.hi_exclusive else "maximum"): _RATE.hi}
# The web's own limits on single fields (inputs.py; the CLI has none), and the values a validator allows.
WEB_LIMITS = {"duration": {"maximum": inputs.MAX_DURATION_S}, "num_requests": {"maximum": inputs.MAX_REQUESTS},
              "seeds": {"maximum": inputs.MAX_API_SEEDS}, "block_size": {"enum": list(BLOCK_SIZES)},
              **dict.fromkeys(("rate_min", "rate_max"), _SWEEP_RATE)}  # a sweep's rates are scenario rates
_NAMES = "|".join(SCHEDULER_NAMES)
SCHEDULERS_PATTERN = f"^({_NAMES})(,({_NAMES}))*$"

# A blank value is "not given", as a blank form field is (inputs.parse_request drops it): "" in a query string,
# null or "" in a JSON body. Each field of the scenario routes takes one, and the rules read it as absent.
BLANK_QUERY = {"enum": [""], "description": "blank: the default"}
BLANK_BODY = {"enum": [None, ""], "description": "blank: the default"}
_GIVEN = {"not": {"enum": [None, ""]}}

# sim_core.Scenario's cross-field validators, in JSON Schema. A field left out has its default (the pools' replicas:
# 0).
_POOLS = ("prefill_replicas", "decode_replicas")
SCENARIO_RULES = [
    {"not": {"required": ["scheduler", "schedulers"], "properties": {"scheduler": _GIVEN, "schedulers": _GIVEN}}},
    {"anyOf": [  # both pools or neither
        {"properties": {p: {"enum": [0, None, ""]} for p in _POOLS}},
        {"required": list(_POOLS), "properties": {p: {"type": "integer", "minimum": 1} for p in _POOLS}}]},
    {"if": {"required": ["prefill_replicas"], "properties": {"prefill_replicas": {"type": "integer", "minimum": 1}}},
     "then": {"properties": {"replicas": {"maximum": 1}, "async_scheduling": {"enum": [False, None, ""]}}}},
    *({"if": {"required": [f], "properties": {f: _GIVEN}},  # a pool field given needs both pools
       "then": {"required": list(_POOLS), "properties": {"prefill_replicas": {"type": "integer", "minimum": 1}}}}
      for f in POOL_FIELDS),
]
SCENARIO_RULES_TEXT = ("A blank value (`field=`; null in a JSON body) is the field's default. "
                       "Give `schedulers` or `scheduler`, not both; `prefill_replicas` and `decode_replicas` "
                       "together (both at least 1) or neither, and then `replicas` 1 and no `async_scheduling`; "
                       f"{', '.join(f'`{f}`' for f in POOL_FIELDS)} only with both pools. Checked against the "
                       "catalogue, beyond the schema: the model must fit the GPU, `hardware_profile` must name this "
                       "deployment, and the web's work limits (`/api/catalog`).")
SWEEP_KEYS = ("rate_min", "rate_max", "rate_step")
SWEEP_RULES = [{"if": {"required": [k], "properties": {k: _GIVEN}},  # one given: all three given
                "then": {"required": list(SWEEP_KEYS), "properties": dict.fromkeys(SWEEP_KEYS, _GIVEN)}}
               for k in SWEEP_KEYS]
SWEEP_RULES_TEXT = ("`rate_min`, `rate_max` and `rate_step` all three (rate_min at most rate_max) or none (a range "
                    "around the scenario's rate is proposed).")
STEP_RULES = [{"anyOf": [{"required": [k], "properties": {k: {"minimum": 1}}} for k in ("prefill_tokens", "decode_seqs")]}]
STEP_RULES_TEXT = ("A step prefills (`prefill_tokens` at least 1) or decodes (`decode_seqs` at least 1), or both; "
                   "`hardware_profile` must name this deployment.")
QUERY_RULES = {  # operation: (rules, what they say), for its query string as one object
    ("get", "/api/run"): (SCENARIO_RULES, "Scenario fields (the dashboard's URLs work here too; `upload=<id>` "
                                          "replays an uploaded trace). " + SCENARIO_RULES_TEXT),
    ("get", "/api/sweep"): (SCENARIO_RULES + SWEEP_RULES, "Scenario fields and the rate range. "
                            + SCENARIO_RULES_TEXT + " " + SWEEP_RULES_TEXT),
    ("get", "/api/step-time"): (STEP_RULES, "The deployment and the step's batch. " + STEP_RULES_TEXT),
}


def _web_field(name: str, prop: dict) -> dict:
    limits = WEB_LIMITS.get(name, {})
    if not limits:
        return prop
    return {**prop, **limits, **({"anyOf": [a if a.get("type") == "null" else {**a, **limits} for a in prop["anyOf"]]}
                                 if "anyOf" in prop else {})}


def query_value(prop: dict) -> dict:
    """A field's schema as a query value: a query string cannot say null (the field is left out instead)."""
    prop = {k: v for k, v in prop.items() if k != "title" and not (k == "default" and v is None)}
    if "anyOf" in prop:
        alternatives = [a for a in prop.pop("anyOf") if a.get("type") != "null"]
        prop |= alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    return prop


def blank_or(prop: dict, blank: dict) -> dict:
    """A field's schema that also takes `blank` (in place of null; its description and default stay on top)."""
    meta = {k: prop[k] for k in ("description", "default") if k in prop}
    core = {k: v for k, v in prop.items() if k not in meta and k != "title"}
    if "anyOf" in core:
        rest = [a for a in core.pop("anyOf") if a.get("type") != "null"]
        core |= rest[0] if len(rest) == 1 else {"anyOf": rest}
    return {**meta, "anyOf": [core, blank]}


def query_object(params: list[dict], rules: list[dict], note: str, blanks: bool = False) -> list[dict]:
    """An operation's query parameters folded into one exploded object parameter with `rules` (each field taking
    a blank with `blanks`); the others (path, header) as they were."""
    properties = {}
    for p in params:
        if p.get("in") == "query":
            prop = _web_field(p["name"], query_value({**p.get("schema", {}), "description": p.get("description", "")}))
            if p["name"] == "schedulers":
                prop = {**prop, "pattern": SCHEDULERS_PATTERN}
            properties[p["name"]] = blank_or(prop, BLANK_QUERY) if blanks else prop
    folded = {"name": "query", "in": "query", "style": "form", "explode": True, "required": False,
              "description": note, "schema": {"type": "object", "additionalProperties": False,
                                              "properties": properties, "allOf": rules}}
    return [p for p in params if p.get("in") != "query"] + [folded]


def complete_schema(spec: dict) -> dict:
    """FastAPI's schema with the error answers and the cross-field rules (in place; returned)."""
    paths = spec.get("paths", {})
    for (method, path), (rules, note) in QUERY_RULES.items():
        op = paths.get(path, {}).get(method)
        if op is not None:
            op["parameters"] = query_object(op.get("parameters", []), rules, note, blanks=rules is not STEP_RULES)
    body = (paths.get("/api/run", {}).get("post", {}).get("requestBody", {}).get("content", {})
            .get("application/json", {}).get("schema"))
    if body is not None:
        body["properties"] = {k: _web_field(k, v) for k, v in body.get("properties", {}).items()}
        if "schedulers" in body["properties"]:
            body["properties"]["schedulers"] = {**body["properties"]["schedulers"], "minItems": 1}
        body["properties"] = {k: blank_or(v, BLANK_BODY) for k, v in body["properties"].items()}
        body.update(allOf=SCENARIO_RULES, description=SCENARIO_RULES_TEXT)
    for path, methods in paths.items():
        for method, op in methods.items():
            codes = [c for c in ANY_OPERATION_ERRORS if c != "403" or path not in NO_WORK_PATHS]
            responses = op.setdefault("responses", {})
            responses.update({code: ERROR_RESPONSES[code] for code in codes + list(OPERATION_ERRORS.get((method, path), ()))})
    if "/healthz" in paths:
        paths["/healthz"]["get"]["responses"]["503"] = _HEALTH_503
    return spec


def install(app: FastAPI) -> None:
    """`app.openapi()` (what /openapi.json serves) gives the completed schema."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            complete_schema(build())  # FastAPI's builder keeps its result in app.openapi_schema
        return app.openapi_schema

    app.openapi = openapi


def _type_text(schema: dict) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_type_text(s) for s in schema["anyOf"] if s not in (BLANK_QUERY, BLANK_BODY))
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


# Why an API route is kept out of /openapi.json, said on its /docs entry (its docstring says the rest).
UNLISTED_NOTE = ("Starts or follows background work, so it is not in /openapi.json (a fuzzer working from the schema "
                 "would start jobs); the route's own description follows.")


def _api_routes(routes) -> list:
    """Every route, those of included routers too (FastAPI >= 0.165 keeps an included router whole, as an object
    with its `original_router`; none of the app's is included under a prefix)."""
    out = []
    for r in routes:
        inner = getattr(r, "routes", None) or getattr(getattr(r, "original_router", None), "routes", None)
        out += _api_routes(inner) if inner and not isinstance(r, APIRoute) else [r]
    return out


def _unlisted_operations(app: FastAPI, spec: dict) -> list[dict]:
    """The /api routes the schema leaves out (the plan's and the frontier's jobs), from their docstrings: /docs
    lists every route a script may call."""
    ops = []
    for route in _api_routes(app.routes):
        if not isinstance(route, APIRoute) or not route.path.startswith("/api/") or route.path in spec.get("paths", {}):
            continue
        doc = inspect.getdoc(route.endpoint) or ""
        for method in sorted(route.methods - {"HEAD"}):
            ops.append({"method": method, "path": route.path, "summary": doc.split("\n\n")[0].replace("\n", " "),
                        "description": "", "params": [], "notes": [UNLISTED_NOTE], "bodies": [], "examples": {},
                        "errors": []})
    return ops


@router.get("/docs", response_class=HTMLResponse)
def docs(request: Request) -> HTMLResponse:
    spec = request.app.openapi()
    # The examples' address is the one this page was served from (behind a proxy: the public one, from its Host
    # and X-Forwarded-Proto), so they can be pasted as they are.
    base = str(request.base_url).rstrip("/")
    ctx = {"request": request, "base": base, "info": spec.get("info", {}), "operations": _operations(spec) + _unlisted_operations(request.app, spec),
           "metric_groups": _metric_groups()}
    return templates.TemplateResponse(request, "docs.html", ctx)
