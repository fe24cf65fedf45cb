"""Scenario against scenario on the web: /vs shows two scenarios side by side, each possibly comparing several
schedulers, in the URL form of /diff:

    /vs?a=<QUERY A>&b=<QUERY B>

(QUERY: what the dashboard's URL carries after `?`, URL-encoded as one value; blank fields take the dashboard's
defaults, as on the main page.) Each side's figures are the registry's (app/web/figures/) built for that side,
their axes shared across the pair: the time axes span both sides' runs (the pair's `span`, as the results page's
span covers every scheduler), and every other numeric axis gets the union of the two sides' ranges (share_axes).
With one scheduler a side, the pair links to /diff (the same a and b), which compares the two runs request by
request.

A form may change single fields of a side with `a.FIELD=value` / `b.FIELD=value` (blank: unchanged): the page
folds them into that side's query and redirects to the canonical a/b URL, so a shared link only ever holds a and b.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sim_core import SCHEDULER_NAMES, ScenarioError, SetupError, TraceError
from sim_core.quoting import quote
from sim_core.runner import Cancelled

from . import charts, figures, frontier_page, present, service
from .api import kernels_ready
from .figures.kv import kv_figure, kv_frames
from .http import CLIENT_CLOSED, errors_by_field, run_until_disconnect
from .inputs import (
    MAX_PAGE_SEEDS,
    MAX_REQUESTS,
    PAGE_DEFAULTS,
    SWEEP_KEYS,
    WebRequest,
    expected_requests,
    problems_of,
)
from .templating import templates
from .variant_names import DEFAULT_NAMES, NAME_PARAMS, SIDES, parse_names

router = APIRouter(include_in_schema=False)

# How a page was viewed (KV playback time and engine) or swept, not what it ran: dropped from a side's query.
NOT_SCENARIO = ("t", "engine", "rate_min", "rate_max", "rate_step")
EXAMPLE_A = "schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20&token_budget=512&max_model_len=8192"
EXAMPLE_B = EXAMPLE_A.replace("rtx3050", "a100")
# The fields B's form shows first; every other scenario field follows in its group (any works in the URL as
# a.FIELD or b.FIELD too).
QUICK_FIELDS = ("hardware", "model", "token_budget", "replicas", "workload", "rate", "max_seqs")
# One pair is one page's worth of work: what the largest comparison the dashboard allows simulates (every
# scheduler, the most seeds, the most requests each), summed over both sides.
MAX_PAIR_REQUESTS = len(SCHEDULER_NAMES) * MAX_PAGE_SEEDS * MAX_REQUESTS
# Figures the pair draws: the registry's plotly figures (generic card), the metrics table, the KV player (a player
# a side, on one grid) and the Gantt panels (a pair per scheduler). The goodput sweep is a background job of its
# own; each side's own results page has it.
PAIR_TEMPLATES = ("_figure_card.html", "_figure_metrics.html", "_figure_kv.html", "_figure_gantt.html")
# The pair's own goodput and frontier cards (vs_curves.py: both variants' curves on one plot) read these from /vs's
# URL: the shared rate grid and the frontier card's inputs, each as the main page's cards name them.
CURVE_PARAMS = SWEEP_KEYS + frontier_page.INPUTS


@dataclass(frozen=True)
class VsRequest:
    a: WebRequest
    b: WebRequest
    names: tuple[str, str] = ("A", "B")

    def side(self, name: str) -> WebRequest:
        return self.a if name == "a" else self.b

    def label(self, side: str) -> str:
        return self.names[SIDES.index(side)]

    def query(self) -> str:
        """The canonical URL query: each side's canonical scenario query as one value, then any name given."""
        named = [(NAME_PARAMS[s], self.label(s)) for s in SIDES if self.label(s) != DEFAULT_NAMES[s]]
        return "&".join(q for q in (self.runs_query(), urlencode(named)) if q)

    def runs_query(self) -> str:
        """The two scenarios alone (what /diff reads)."""
        return urlencode([(s, self.side(s).query(sweep=False)) for s in SIDES])

    @property
    def one_each(self) -> bool:
        """One scheduler a side: /diff can compare the two runs request by request."""
        return len(self.a.schedulers) == len(self.b.schedulers) == 1


def side_pairs(text: str, overrides: dict[str, str]) -> list[tuple[str, str]]:
    """A side's query text (a whole URL is fine: what follows `?`) as scenario pairs, with `overrides` set."""
    pairs = parse_qsl(text.partition("?")[2] if "?" in text else text, keep_blank_values=True)
    pairs = [(k, v) for k, v in pairs if k not in NOT_SCENARIO]
    for field, value in overrides.items():
        drop = {field, "scheduler", "schedulers"} if field in ("scheduler", "schedulers") else {field}
        pairs = [(k, v) for k, v in pairs if k not in drop] + [(field, value)]
    return pairs


def split_params(pairs: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, dict[str, str]], list]:
    """(side texts, per side its FIELD overrides, problems with unknown or repeated parameters)."""
    texts: dict[str, str] = {}
    overrides: dict[str, dict[str, str]] = {s: {} for s in SIDES}
    problems: list[tuple[str, str]] = []
    for k, v in pairs:
        side, dot, field = k.partition(".")
        if k in SIDES:
            if k in texts:
                problems.append((k, f"given more than once: give run {k.upper()} as one scenario query"))
            texts[k] = v
        elif k in CURVE_PARAMS or k in NAME_PARAMS.values():  # the curve cards' (vs_curves.py), the names
            continue
        elif dot and side in SIDES and field:
            if v.strip():  # the quick form's blank field: left as the side's query has it
                overrides[side][field] = v.strip()
        else:
            problems.append((k, "is not a parameter here: give each scenario as one query, a=... and b=... "
                                "(URL-encoded), or change one field of a side with a.FIELD=... or b.FIELD=..."))
    return texts, overrides, problems


def side_text(texts: dict[str, str], overrides: dict[str, dict[str, str]], side: str) -> str:
    """A side's query; a side given only as changes (b.FIELD=... without b) is the other side's, changed."""
    text = (texts.get(side) or "").strip()
    if not text and overrides[side]:
        text = (texts.get("b" if side == "a" else "a") or "").strip()
    return text


def parse_vs(pairs: list[tuple[str, str]]) -> VsRequest:
    """/vs's query -> VsRequest, or ScenarioError whose problems are (side, "field: message"): each bad field
    named with its side (a or b), and any unknown parameter by its name."""
    texts, overrides, problems = split_params(pairs)
    reqs: dict[str, WebRequest] = {}
    for side in SIDES:
        text = side_text(texts, overrides, side)
        if not text and not overrides[side]:
            problems.append((side, f"give scenario {side.upper()} as one query in {side}, URL-encoded (a query "
                                   f"such as {EXAMPLE_A})"))
            continue
        query = text.partition("?")[2] if "?" in text else text
        loose = [part for part in query.split("&") if part and "=" not in part]
        if loose:  # parse_qsl would take it as a blank field, which the defaults then fill without a word
            problems.append((side, f"{quote(unquote(loose[0])[:40])}: is not a field=value pair; give scenario "
                                   f"{side.upper()} as a query such as {EXAMPLE_A}"))
            continue
        try:
            reqs[side] = service.page_request(side_pairs(text, overrides[side]))
        except ScenarioError as e:
            problems += [(side, f"{field}: {msg}") for field, msg in e.problems]
    names = parse_names(pairs, problems)
    if not problems:
        problems += pair_work_problems(reqs["a"], reqs["b"])
    if problems:
        raise ScenarioError(problems)
    return VsRequest(reqs["a"], reqs["b"], names)


def side_work(req: WebRequest) -> float:
    """About how many requests a side simulates: per scheduler and seed, its run's."""
    trace = service.upload_info(req.upload) if req.upload else None
    return len(req.schedulers) * req.scenario.seeds * expected_requests(req.scenario, trace)[0]


def pair_work_problems(a: WebRequest, b: WebRequest) -> list[tuple[str, str]]:
    """Each side is within the web's limits (parse_request); the pair together within one page's."""
    wa, wb = side_work(a), side_work(b)
    if wa + wb <= MAX_PAIR_REQUESTS:
        return []
    return [("b", f"schedulers: the pair would simulate about {wa + wb:,.0f} requests in all (A {wa:,.0f}, B "
                  f"{wb:,.0f}: schedulers x seeds x requests a run); the web simulates at most "
                  f"{MAX_PAIR_REQUESTS:,} for one page — compare fewer schedulers or seeds, or shorter runs")]


# ----- the pair's figures, on shared axes -----
@dataclass
class Side:
    name: str  # a or b
    req: WebRequest
    results: figures.Results
    summary: list[str]
    takeaway: str
    seeds_note: str
    label: str = ""  # the variant's name (VsRequest.names)


def _compare_side(vs: VsRequest, side: str, cancel, min_cell: int = 1) -> service.SeedViews:
    try:
        return service.compare_seeds(vs.side(side), cancel, min_cell)
    except (ScenarioError, SetupError, TraceError) as e:  # found only when simulating (the workload's size)
        raise ScenarioError([(side, f"{field}: {msg}") for field, msg in problems_of(e)]) from None


def compute(vs: VsRequest, cancel=None) -> list[Side]:
    """Both sides' comparisons (service.compare_seeds: cached, limited like the results page's), on the pair's
    time span."""
    compared = [_compare_side(vs, s, cancel) for s in SIDES]
    # Both sides' KV grids at one scale (issue #41: one cell per 28 blocks beside one per 7): the finer side is
    # drawn again at the coarser side's cell size.
    cell = max(c.views[0].kv["k"] for c in compared)
    compared = [c if c.views[0].kv["k"] == cell else _compare_side(vs, s, cancel, cell)
                for s, c in zip(SIDES, compared, strict=True)]
    span = charts.time_range([v for c in compared for v in c.views])
    out = []
    for s, c in zip(SIDES, compared, strict=True):
        req = vs.side(s)
        means = [replace(v, metrics=m) for v, m in zip(c.views, c.means, strict=True)]
        upload = service.get_upload(req.upload) if req.upload else None
        out.append(Side(s, req, figures.Results(req, c.views, means, c.ci95, span),
                        present.scenario_summary(req, c.views, upload), present.takeaway(means),
                        present.seeds_note(req.scenario), vs.label(s)))
    return out


def pair_cards(sides: list[Side]) -> list[dict]:
    """Per figure the pair draws: its figure and each side's card (None: not drawn for that side)."""
    out = []
    for fig in figures.all_figures():
        if fig.template not in PAIR_TEMPLATES:
            continue
        cards = [fig.card(s.results) if fig.shown(s.results) else None for s in sides]
        cards = [c if c is not None and c.data is not None else None for c in cards]
        if not any(cards):
            continue
        if fig.template == "_figure_gantt.html":
            out += gantt_pairs(fig, cards)
            continue
        if fig.template == "_figure_kv.html":
            out += kv_pair(fig, sides)
            continue
        if fig.template == "_figure_card.html" and all(cards):
            share_axes([c.data for c in cards])
        out.append({"figure": fig, "name": fig.name, "title": fig.title,
                    "cards": dict(zip(SIDES, cards, strict=True)), "explain": next(c.explain for c in cards if c)})
    return out


def kv_pair(fig, sides: list[Side]) -> list[dict]:
    """The KV view of each side, a player each, on one grid (the same cells a row, so the larger pool is the
    longer grid) and the pair's time span. A side of several engines (its pool per engine, the cluster view) is
    left to its own page."""
    if any(s.results.cluster or not s.results.views for s in sides):
        return []
    spec = kv_figure([v for s in sides for v in s.results.views])
    cols = spec["grid"]["cols"]
    cards = []
    for s in sides:
        frames = kv_frames(s.results.views, s.results.span)
        for entry in frames["schedulers"]:
            entry.update(cols=cols, rows=math.ceil(entry["cells"] / cols))
        cards.append({"kv": spec, "frames": frames, "k": s.results.views[0].kv["k"]})
    return [{"figure": fig, "name": fig.name, "title": fig.title, "cards": dict(zip(SIDES, cards, strict=True)),
             "explain": "Each side's block pools played over the pair's time, on one grid at one scale: one cell "
                        "per block (or per k blocks, the same on both sides), coloured by state; a larger pool is "
                        "a longer grid.",
             "states": spec["states"]}]


def gantt_pairs(fig, cards: list) -> list[dict]:
    """The Gantt card per scheduler either side ran: A's panel beside B's (None where a side did not run it or has
    no timeline), on one time axis (the pair's span) and one request axis (the union of the rows either shows,
    first request at the top)."""
    panels = [{p["name"]: p for p in c.data} if c else {} for c in cards]
    names = list(dict.fromkeys(n for side in panels for n in side))
    out = []
    for name in names:
        pair = [side.get(name) if side.get(name) and side[name]["figure"] else None for side in panels]
        drawn = [p["figure"]["layout"] for p in pair if p]
        ys = [ax["yaxis"]["range"] for ax in drawn if "range" in ax["yaxis"]]
        if len(ys) == len(drawn) > 1:  # a reversed axis: [last row, first row]
            for ax in drawn:
                ax["yaxis"]["range"] = [max(r[0] for r in ys), min(r[1] for r in ys)]
        out.append({"figure": fig, "name": f"gantt-{name}", "title": f"Requests under {name}", "scheduler": name,
                    "cards": dict(zip(SIDES, pair, strict=True)), "explain": cards[0].explain if cards[0] else
                    cards[1].explain})
    return out


AXIS_KEY = re.compile(r"^([xy])axis(\d*)$")


def share_axes(figs: list[dict]) -> None:
    """Give every numeric axis the figures have in common (xaxis, yaxis2, ...) one range, the union of theirs:
    an axis's explicit range where the figure sets one, else its data's extent (stacks summed, as plotly draws
    them). Category axes, reversed ones and axes that follow another (`matches`) are left alone. Custom ticks
    (tickvals) are merged, so each figure labels the whole shared range."""
    common = set.intersection(*({k for k in f["layout"] if AXIS_KEY.match(k)} for f in figs))
    for key in sorted(common):
        axes = [f["layout"][key] for f in figs]
        kinds = {ax.get("type", "linear") for ax in axes}
        if (len(kinds) > 1 or kinds & {"category", "date", "multicategory"}
                or any(ax.get("matches") or ax.get("autorange") == "reversed" for ax in axes)):
            continue
        extents = [axis_extent(f, key) for f in figs]
        if any(e == "category" for e in extents):
            continue
        known = [e for e in extents if e is not None]
        if not known:
            continue
        lo, hi = min(e[0] for e in known), max(e[1] for e in known)
        log = "log" in kinds
        ticks = merged_ticks(axes, lo, hi, log)
        for ax in axes:
            ax.update(range=[lo, hi], autorange=False, **ticks)


def merged_ticks(axes: list[dict], lo: float, hi: float, log: bool) -> dict:
    if not any("tickvals" in ax for ax in axes):
        return {}
    labels: dict[float, Any] = {}
    for ax in axes:
        texts = ax.get("ticktext") or ax.get("tickvals") or []
        for v, t in zip(ax.get("tickvals") or [], texts, strict=False):
            if isinstance(v, int | float):
                labels.setdefault(float(v), t)
    inside = sorted(v for v in labels if lo <= (math.log10(v) if log and v > 0 else v) <= hi)
    return {"tickmode": "array", "tickvals": inside, "ticktext": [labels[v] for v in inside]}


def _numbers(values) -> list[float] | str:
    out = []
    for v in values or []:
        if v is None:
            continue
        if isinstance(v, str):
            return "category"
        if isinstance(v, int | float) and math.isfinite(v):
            out.append(float(v))
    return out


def axis_extent(fig: dict, key: str) -> tuple[float, float] | str | None:
    """The range plotly would autorange `key` to (in axis units: log10 on a log axis), with 5% padding away from
    zero; the axis's own range where it sets one; "category" for text values; None with no data on it."""
    ax = fig["layout"][key]
    if isinstance(ax.get("range"), list | tuple) and len(ax["range"]) == 2 and ax.get("autorange") is not True:
        return float(ax["range"][0]), float(ax["range"][1])
    letter, suffix = AXIS_KEY.match(key).groups()
    ref = letter + suffix
    stacked_bars = fig["layout"].get("barmode") in ("stack", "relative")
    values: list[float] = []
    stacks: dict[tuple, float] = {}
    zero = ax.get("rangemode") == "tozero"
    for t in fig.get("data", []):
        if t.get(f"{letter}axis", letter) != ref:
            continue
        mine = _numbers(t.get(letter))
        if mine == "category":
            return "category"
        bar = t.get("type") == "bar"
        along = "x" if bar and t.get("orientation") == "h" else "y"  # the dimension a bar or a stack grows in
        zero |= bar and along == letter
        stack = (bar and stacked_bars) or (t.get("stackgroup") is not None and t.get("type", "scatter") == "scatter")
        if stack and along == letter:
            group = t.get("stackgroup") or "bars"
            other = "y" if letter == "x" else "x"
            for pos, v in zip(t.get(other) or range(len(t.get(letter) or [])), t.get(letter) or [], strict=False):
                if isinstance(v, int | float) and math.isfinite(v):
                    sign = v >= 0
                    stacks[(group, str(pos), sign)] = stacks.get((group, str(pos), sign), 0.0) + float(v)
        else:
            values += mine
    values += list(stacks.values())
    if ax.get("type") == "log":
        values = [math.log10(v) for v in values if v > 0]
        zero = False
    if not values:
        return None
    lo, hi = min(values), max(values)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    pad = 0.05 * (hi - lo) if hi > lo else max(0.5, abs(hi) * 0.1)
    return (lo if zero and lo == 0.0 else lo - pad), (hi if zero and hi == 0.0 else hi + pad)


def scenario_changes(vs: VsRequest) -> list[tuple[str, str, str]]:
    """(field, A's value, B's value) for every field the two scenarios set differently."""
    def fields(req: WebRequest) -> dict[str, str]:
        out = dict(req.scenario_pairs())
        out.pop("scheduler", None)
        out["schedulers"] = ", ".join(req.schedulers)
        out["seeds"] = str(req.scenario.seeds)
        if req.upload:
            out["upload"] = req.upload
        return out
    fa, fb = fields(vs.a), fields(vs.b)
    return [(k, fa.get(k, "default"), fb.get(k, "default")) for k in dict.fromkeys([*fa, *fb])
            if fa.get(k) != fb.get(k)]


def curve_problems(vs: VsRequest, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The curve cards' inputs in the URL (vs_curves.py), checked as those cards check them, each side's
    scenario with them: a bad one is the page's 422 naming it."""
    problems: list[tuple[str, str]] = []
    for parse, keys in ((service.page_request, SWEEP_KEYS), (frontier_page.parse_frontier_request, frontier_page.INPUTS)):
        given = [(k, v) for k, v in pairs if k in keys]
        for side in SIDES if given else ():
            try:
                parse(parse_qsl(vs.side(side).query(sweep=False)) + given)
            except ScenarioError as e:
                problems += [p for p in e.problems if p not in problems]
    return problems


def quick_form(req: WebRequest | None) -> list[dict]:
    """B's form: every field of the dashboard's form, shown blank (unchanged) with B's value as the placeholder;
    first QUICK_FIELDS, then the rest in the dashboard's groups and mechanism sections (folded), so any setting,
    speculative decoding or a KV tier say, is changed in the form (issue #41: B's spec decoding needed URL
    editing)."""
    values: dict[str, Any] = dict(req.scenario_pairs()) if req else dict(PAGE_DEFAULTS)
    form = present.build_form(values, {}, page_defaults=PAGE_DEFAULTS)
    by_name = {f.name: f for _, fs in form.groups for f in fs} | {f.name: f for f in form.advanced}
    groups = [{"key": "quick", "title": "", "explanation": "", "fields": [by_name[n] for n in QUICK_FIELDS]}]
    groups += [{"key": title.lower().replace(" ", "-"), "title": title, "explanation": "",
                "fields": [f for f in fs if f.name not in QUICK_FIELDS]} for title, fs in form.groups]
    groups += [{"key": sec.key, "title": sec.title, "explanation": sec.explanation,
                "fields": [f for f in sec.fields if f.name not in QUICK_FIELDS]} for sec in form.sections]
    return [g for g in groups if g["fields"]]


# ----- /vs -----
def page_context(request: Request, cancel) -> tuple[dict, int]:
    pairs = list(request.query_params.multi_items())
    texts, overrides, _ = split_params(pairs)
    ctx: dict[str, Any] = {"request": request, "values": {s: texts.get(s, "") for s in SIDES}, "errors": {},
                           "vs": None, "sides": [], "cards": [], "changes": [], "quick": quick_form(None),
                           "names": {s: next((v for k, v in pairs if k == NAME_PARAMS[s]), "") for s in SIDES}}
    if not pairs:
        ctx["values"] = {"a": EXAMPLE_A, "b": EXAMPLE_B}
        return ctx, 200
    try:
        vs = parse_vs(pairs)
    except ScenarioError as e:
        ctx["errors"] = errors_by_field(e.problems)
        # The textareas show each side as it was asked for: with the quick form's changes folded in.
        ctx["values"] = {s: urlencode(side_pairs(side_text(texts, overrides, s), overrides[s]), safe=",")
                         if overrides[s] else texts.get(s, "") for s in SIDES}
        return ctx, 422
    if any(overrides.values()):
        ctx["redirect"] = "/vs?" + vs.query()  # the quick form's changes, folded into the canonical URL
        return ctx, 303
    ctx.update(vs=vs, values={s: vs.side(s).query(sweep=False) for s in SIDES}, query=vs.query(),
               changes=scenario_changes(vs), quick=quick_form(vs.b),
               curves_query=urlencode([(k, v) for k, v in pairs if k in CURVE_PARAMS], safe=","))
    if problems := curve_problems(vs, pairs):
        ctx["errors"] = errors_by_field(problems)
        return ctx, 422
    if not kernels_ready(request):
        ctx["errors"] = {"other": "the simulator's kernels are still compiling; reload in a few seconds"}
        return ctx, 503
    try:
        sides = compute(vs, cancel)
    except ScenarioError as e:
        ctx["errors"] = errors_by_field(e.problems)
        return ctx, 422
    except service.BusyError as e:
        ctx["errors"] = {"other": str(e)}
        return ctx, 503
    ctx.update(sides=sides, cards=pair_cards(sides))
    return ctx, 200


def _page(request: Request, cancel) -> Response:
    try:
        ctx, status = page_context(request, cancel)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    if status == 303:
        return RedirectResponse(ctx["redirect"], 303)
    headers = {"Retry-After": "5"} if status == 503 else None
    return templates.TemplateResponse(request, "vs.html", ctx, status_code=status, headers=headers)


def _simulates(pairs: list[tuple[str, str]]) -> bool:
    """Whether answering may simulate: not for the example form (no query) nor an invalid pair (its 422, answered
    at once, never behind the simulation lane's line). Parsing takes microseconds: asked on the event loop."""
    if not pairs:
        return False
    try:
        parse_vs(pairs)
    except (ScenarioError, SetupError, TraceError):
        return False
    return True


@router.get("/vs", response_class=HTMLResponse)
async def vs_page(request: Request) -> Response:
    quick = not _simulates(list(request.query_params.multi_items()))
    return await run_until_disconnect(request, _page, request, quick=quick)
