"""`sched-sim diff`: a request-level A/B of two runs over the same requests (two schedulers, or two whole
scenarios): each request's change in TTFT, TPOT, longest ITL and E2EL, split by where the time went
(sim_core/request_diff.py), the most-hurt and most-helped requests with both timelines, the cause totals."""

from __future__ import annotations

import argparse
import sys

from sim_core import Scenario, ScenarioError, SetupError, TraceError, parse_scenario
from sim_core.metric_catalog import REQUEST_METRICS
from sim_core.request_diff import RequestsDiffer, diff_document
from sim_core.views import ATTRIBUTION_PARTS

from .. import simulate
from ..flags import UsageError, query_scenario, scenario_error_text, setup_error_text, trace_error_text
from ..report import columns, jsonable, print_lines, scenario_doc

NAME = "diff"
RANK_METRICS = ("e2el_ms", "ttft_ms", "tpot_ms", "max_itl_ms")


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
    if not 1 <= n <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000 (got {n})")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--a", required=True, metavar="QUERY",
                   help="run A: a scenario as a query string or a whole dashboard URL (as --scenario takes; a query "
                        "naming several schedulers runs its first), e.g. 'scheduler=fcfs&workload=rag'")
    p.add_argument("--b", required=True, metavar="QUERY",
                   help="run B, over the same requests as A (same workload, rate, duration or num_requests, seed "
                        "and trace); changes are B minus A")
    p.add_argument("--top", type=_count, default=5, metavar="N",
                   help="how many most-hurt and most-helped requests to list with their timelines (default 5)")
    p.add_argument("--by", choices=RANK_METRICS, default="e2el_ms",
                   help="the change that ranks requests as hurt or helped (default e2el_ms)")
    p.add_argument("--no-timelines", action="store_true",
                   help="skip the listed requests' timelines: the runs then keep no event log (bench/bench_diff.py: "
                        "it is most of what the A/B adds to the two runs' time)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document: requests (each with its id, change_ms per metric and causes_ms), "
                        "mean_change_ms, causes_ms, and the listed requests' timelines")


def query_to_scenario(flag: str, text: str):
    """--a / --b QUERY -> a single-seed Scenario (the first seed of a query asking for several)."""
    try:
        fields, schedulers = query_scenario(text, has_trace_flag=False)  # a query's trace file is refused
    except UsageError as e:
        raise UsageError(str(e).replace("--scenario", flag, 1)) from None
    if schedulers and "scheduler" not in fields:
        fields["scheduler"] = schedulers[0]
        if len(schedulers) > 1:  # documented in --help, said here too: a copied dashboard URL names several
            print(f"note: {flag} names {len(schedulers)} schedulers ({', '.join(schedulers)}); the A/B runs its "
                  f"first, {schedulers[0]}", file=sys.stderr)
    seeds = fields.pop("seeds", None)
    if seeds not in (None, "", "1"):
        seed = fields.get("seed", Scenario.model_fields["seed"].default)
        print(f"note: {flag} asks for seeds={seeds}; the A/B compares the requests of one run, seed {seed}",
              file=sys.stderr)
    try:
        return parse_scenario(fields)
    except ScenarioError as e:
        raise UsageError(f"{flag}: {scenario_error_text(e)}") from None


def _run(flag: str, scenario, events: bool):
    try:
        simulate.check_setup(scenario)
        return simulate.run(scenario, record_events=events)
    except SetupError as e:
        raise UsageError(f"{flag}: {setup_error_text(e)}") from None
    except TraceError as e:
        raise UsageError(f"{flag}: {trace_error_text(e, scenario.trace)}") from None


def _query(scenario) -> str:
    """The scenario as a query with its scheduler named even where it is the default."""
    rest = scenario.model_copy(update={"scheduler": Scenario.model_fields["scheduler"].default}).to_query()
    return f"scheduler={scenario.scheduler}" + (f"&{rest}" if rest else "")


def ab_document(sa, sb, ra, rb, top: int, by: str) -> tuple[dict, object]:
    """The A/B's JSON document less its `requests` (sim_core.request_diff.diff_document, with each run's scenario)
    and its RequestDiff, whose requests_texts write them."""
    doc, d = diff_document(ra, rb, top=top, by=by, with_requests=False)
    return {"a": {"scheduler": sa.scheduler, "query": _query(sa), "scenario": scenario_doc(sa)},
            "b": {"scheduler": sb.scheduler, "query": _query(sb), "scenario": scenario_doc(sb)}, **doc}, d


def handle(args: argparse.Namespace) -> int:
    sa, sb = query_to_scenario("--a", args.a), query_to_scenario("--b", args.b)
    ra, rb = _run("--a", sa, not args.no_timelines), _run("--b", sb, not args.no_timelines)
    try:
        doc, d = ab_document(sa, sb, ra, rb, args.top, args.by)
    except RequestsDiffer as e:
        raise UsageError(f"--b: {e}") from None
    if args.json:
        print_document(doc, d)
    else:
        print_lines(report_lines(doc, d))
    return 0


def print_document(doc: dict, d) -> None:
    """The JSON document, indented as every command's, but one line per request: 10k requests indented would be
    300k lines. The requests are written as RequestDiff.requests_texts makes them, a piece at a time: through
    dicts and json.dumps they took longer than the two runs (bench/bench_diff.py)."""
    import json
    import sys

    head = json.dumps(jsonable(doc), indent=2, allow_nan=False)
    out = sys.stdout
    out.write(head[:-2] + ',\n  "requests": [')
    rows = "\n    "
    for piece in d.requests_texts(",\n    "):
        out.write(rows + piece)
        rows = ",\n    "
    out.write(("\n  " if rows != "\n    " else "") + "]\n}\n")


# ----- the tables -----
def _ms(v) -> str:
    return "-" if v is None else f"{v:+,.1f}"


def _timeline_text(segments) -> str:
    """`queued 1.200-1.350, prefill 1.350-1.610 (3 steps), decode ...`: back-to-back segments of one kind (a
    chunked prompt's steps) as one."""
    if segments is None:
        return "(no timeline: the run kept no event log, or a bounded one)"
    merged: list[list] = []
    for kind, start, end in segments:
        if merged and merged[-1][0] == kind and abs(merged[-1][2] - start) < 1e-12:
            merged[-1][2], merged[-1][3] = end, merged[-1][3] + 1
        else:
            merged.append([kind, start, end, 1])
    return ", ".join(f"{kind} {start:.3f}-{end:.3f}" + (f" ({n} steps)" if n > 1 else "")
                     for kind, start, end, n in merged) or "-"


def report_lines(doc: dict, d) -> list[str]:

    labels = {m.key: m.label for m in REQUEST_METRICS}
    out = [f"A: {doc['a']['query']}", f"B: {doc['b']['query']}",
           f"Requests: {doc['requests_in_each_run']:,} in each run; {doc['compared']:,} served by both "
           f"({doc['served_by_a_only']:,} by A only, {doc['served_by_b_only']:,} by B only)"]
    c = doc["by_e2el"]
    out.append(f"By E2EL, B hurt {c['hurt']:,} requests, helped {c['helped']:,}, left {c['unchanged']:,} as they "
               "were (changes are B - A: positive = slower under B)")
    out.append("")
    metrics = list(doc["metrics"])
    head = ["mean change per request (ms)", *(labels[m] for m in metrics)]
    rows = [["total", *(_ms(doc["mean_change_ms"][m]) for m in metrics)]]
    for part in ATTRIBUTION_PARTS:
        rows.append([f"  {part.replace('_', ' ')}",
                     *(_ms(doc["causes_ms"][m][part]) if m in doc["causes_ms"] else "" for m in metrics)])
    rows.append(["run's own mean, B - A", *(_ms(doc["run_change_ms"].get(m, {}).get("mean")) for m in metrics)])
    rows.append(["run's P99, B - A", *(_ms(doc["run_change_ms"].get("itl_ms" if m == "max_itl_ms" else m, {})
                                            .get("p99")) for m in metrics)])
    out += columns([*head, ""], [[*r, ""] for r in rows], set(range(1, len(head))))
    by = doc["ranked_by"]
    for title, ids in (("Most hurt", doc["most_hurt"]), ("Most helped", doc["most_helped"])):
        out += ["", f"{title} by {labels[by]} (B - A):" if ids else f"{title} by {labels[by]}: none"]
        if not ids:
            continue
        pos = {int(r): i for i, r in enumerate(d.ids)}
        rows = []
        for r in ids:
            i = pos[r]
            causes = d.causes.get(by)
            top = ""
            if causes is not None:
                order = sorted(range(len(ATTRIBUTION_PARTS)), key=lambda k: -abs(causes[i, k]))[:2]
                top = ", ".join(f"{ATTRIBUTION_PARTS[k].replace('_', ' ')} {causes[i, k]:+,.1f}" for k in order
                                if abs(causes[i, k]) > 1e-6)
            rows.append([str(r), f"{d.arrival_s[i]:.3f}", str(d.prompt_tokens[i]), str(d.output_tokens[i]),
                         f"{d.a[by][i]:,.1f}", f"{d.b[by][i]:,.1f}", _ms(d.change[by][i]), top])
        out += columns(["request", "arrival_s", "prompt", "output", f"A {labels[by]}", f"B {labels[by]}",
                        "change", "biggest causes (ms)"], rows, {0, 1, 2, 3, 4, 5, 6})
        for r in ids:
            t = doc["timelines"][str(r)]
            out += [f"  request {r} timeline (s):", f"    A  {_timeline_text(t['a'])}", f"    B  {_timeline_text(t['b'])}"]
    return out + energy_lines(doc, d)


def energy_lines(doc: dict, d) -> list[str]:
    """The runs' GPU energy, and each request's (who paid for whom), where energy is on."""
    e = doc.get("energy")
    if e is None:
        return []
    if "a" not in e:
        return ["", f"Energy: {e['note']}"]
    out = ["", "Energy, GPU boards (J): A {:,.1f}, B {:,.1f}, B - A {:+,.1f}; of which idle: A {:,.1f}, B {:,.1f}".format(
        e["a"]["gpu_energy_j"], e["b"]["gpu_energy_j"], e["change_j"]["gpu_energy_j"], e["a"]["idle_energy_j"],
        e["b"]["idle_energy_j"])]
    if "requests" not in e:
        return [*out, f"  {e['note']}"]
    q = e["requests"]
    out.append(f"  per request, each step's energy split by its batch's tokens: mean change {q['mean_change_j']:+,.3f} "
               f"J; B made {q['paid_more']:,} requests pay more, {q['paid_less']:,} less")
    pos = {int(r): i for i, r in enumerate(d.ids)}
    rows = [[str(r), f"{d.energy_a[pos[r]]:,.3f}", f"{d.energy_b[pos[r]]:,.3f}",
             f"{d.energy_b[pos[r]] - d.energy_a[pos[r]]:+,.3f}"] for r in doc.get("most_paid_more_energy", [])]
    if rows:
        out += ["  paid the most more under B:", *columns(["request", "A J", "B J", "change"], rows, {0, 1, 2, 3})]
    return out

