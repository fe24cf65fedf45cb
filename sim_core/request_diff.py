"""Request-level A/B: two runs over the same requests (common random numbers: the same arrivals and lengths), and
what changed for each request between them, split by cause.

    d = request_diff(run(a), run(b))            # refuses runs whose requests differ (RequestsDiffer)
    d.change["e2el_ms"]                          # per request both runs served, B minus A, ms
    d.causes["e2el_ms"]                          # [request, part]: the change in each attribution part
    d.mean_change_ms()["e2el_ms"]                # == B's mean E2EL - A's, when both served the same requests
    d.to_json()

A change is B minus A: positive means B made the request wait longer (it lost), negative that it won. Each metric
with a split (CAUSE_METRICS) is split into the attribution parts (kernel/attribution.py: queue, prefill,
prefill_stall, decode, preemption, transport), whose changes sum to the request's change:

  e2el_ms  the parts of the whole latency (Result.attribution; the transport overhead in `transport`)
  ttft_ms  the parts as they stood at the request's first token (Result.attr_first; the overhead in `transport`)
  tpot_ms  the parts after the first token, over its output tokens - 1 (TPOT's own definition); 0 with one token

`max_itl_ms`, the request's longest gap between tokens, has no split: the engine keeps each request's longest
gap, not what the time of that one gap went to.

Requests are compared where both runs served them; `only_a` / `only_b` count those one run served and the other
did not (rejected, or shed by admission control), which are left out of every change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import timeline
from .energy import request_energy
from .json_text import number_chars, records, string_chars
from .kernel.attribution import AT_TRANSPORT, ATTRIBUTION_PARTS
from .metric_catalog import REQUEST_METRICS
from .metrics import request_latencies_s

METRICS = tuple(m.key for m in REQUEST_METRICS)  # ttft_ms, tpot_ms, max_itl_ms, e2el_ms
CAUSE_METRICS = ("ttft_ms", "tpot_ms", "e2el_ms")  # the metrics split into ATTRIBUTION_PARTS
# requests_text's rounding: 1 ns on the values in ms, 1 us on arrivals in s (a third faster than 9 places, and
# finer than anything a step-time model resolves).
TEXT_DECIMALS = 6
# The runs' own summary figures shown beside the per-request changes (B's minus A's): distribution stats of
# Result.metrics.
RUN_STATS = {"ttft_ms": ("mean", "p99"), "tpot_ms": ("mean", "p99"), "itl_ms": ("mean", "p99"),
             "e2el_ms": ("mean", "p99")}


class RequestsDiffer(ValueError):
    """The two runs were not over the same requests: a request-level A/B has nothing to pair."""


class NotCompared(ValueError):
    """The request picked to compare is not in the runs, or not served by both (its message names the range)."""


def check_same_requests(a, b) -> None:
    """Raise RequestsDiffer naming the first difference between the two runs' request tables: their number, each
    request's lengths, class and conversation (parent, think time), and the arrival of each open-loop request (a
    follow-up turn's arrival depends on when its parent ended, which is the scheduler's doing)."""
    ra, rb = a.requests, b.requests
    hint = ("an A/B pairs each request of A with the same request in B: give both the same workload, rate, "
            "duration or num_requests, seed and trace")
    if len(ra) != len(rb):
        raise RequestsDiffer(f"the runs have different requests: A has {len(ra):,}, B {len(rb):,} ({hint})")
    pa, pb = ra.parents(), rb.parents()
    open_loop = pa < 0
    columns = (("prompt_tokens", ra.prompt_tokens, rb.prompt_tokens), ("output_tokens", ra.output_tokens,
               rb.output_tokens), ("parent", pa, pb), ("think time", ra.think_times(), rb.think_times()),
               ("arrival_s", np.where(open_loop, ra.arrival_s, 0.0), np.where(pb < 0, rb.arrival_s, 0.0)))
    for name, x, y in columns:
        bad = np.flatnonzero(np.asarray(x) != np.asarray(y))
        if len(bad):
            r = int(bad[0])
            raise RequestsDiffer(f"the runs have different requests: request {r}'s {name} is {x[r]:g} in A and "
                                 f"{y[r]:g} in B ({len(bad):,} requests differ; {hint})")
    names_a = np.asarray(ra.class_names, dtype=object)[ra.request_class]
    names_b = np.asarray(rb.class_names, dtype=object)[rb.request_class]
    bad = np.flatnonzero(names_a != names_b)
    if len(bad):
        r = int(bad[0])
        raise RequestsDiffer(f"the runs have different requests: request {r}'s class is {names_a[r]} in A and "
                             f"{names_b[r]} in B ({hint})")


def request_values_ms(result) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Per request of one run: (each METRICS value in ms, each CAUSE_METRICS split [request, part] in ms, whether
    it was served). Values are the metrics' own (metrics.request_latencies_s); meaningful where served."""
    if result.attribution is None or getattr(result, "attr_first", None) is None:
        raise ValueError("this run carries no attribution (where each request's time went): run it with "
                         "sim_core.runner.run")
    lat = request_latencies_s(result)
    overhead_ms = float(result.scenario.transport_overhead_ms)
    whole = np.asarray(result.attribution, np.float64) * 1e3
    first = np.asarray(result.attr_first, np.float64) * 1e3
    out_tokens = np.asarray(result.requests.output_tokens)
    multi = np.asarray(lat["multi_token"])
    after = np.zeros_like(whole)
    after[multi] = (whole[multi] - first[multi]) / (out_tokens[multi] - 1)[:, None]
    whole[:, AT_TRANSPORT] += overhead_ms  # E2EL and TTFT count the client's transport overhead, as metrics do
    first[:, AT_TRANSPORT] += overhead_ms
    values = {"ttft_ms": lat["ttft"] * 1e3, "tpot_ms": lat["tpot"] * 1e3,
              "max_itl_ms": np.asarray(result.max_itl_s) * 1e3, "e2el_ms": lat["e2el"] * 1e3}
    return values, {"ttft_ms": first, "tpot_ms": after, "e2el_ms": whole}, np.asarray(lat["finished"])


@dataclass
class RequestDiff:
    """B minus A, per request both runs served (`ids`, in request order)."""

    ids: np.ndarray
    arrival_s: np.ndarray  # A's arrivals (the same as B's, but for follow-up turns)
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    request_class: np.ndarray  # class names
    a: dict[str, np.ndarray]  # METRICS -> A's value per compared request, ms
    b: dict[str, np.ndarray]
    change: dict[str, np.ndarray]  # METRICS -> B - A, ms
    causes: dict[str, np.ndarray]  # CAUSE_METRICS -> [request, part] B - A per attribution part, ms
    requests: int  # in each run
    only_a: int  # served by A, not by B
    only_b: int
    run_change_ms: dict[str, dict[str, float | None]]  # RUN_STATS: B's summary minus A's
    # Energy on in both runs (sim_core/energy.py request_energy): each compared request's GPU energy in A and B (J;
    # None where a run kept no event log to attribute by), and energy_json's run-level figures.
    energy_a: np.ndarray | None = None
    energy_b: np.ndarray | None = None
    energy_runs: dict | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def mean_change_ms(self) -> dict[str, float | None]:
        """The mean per-request change of each metric (None when no request is compared)."""
        return {m: float(v.mean()) if len(v) else None for m, v in self.change.items()}

    def causes_ms(self) -> dict[str, dict[str, float | None]]:
        """Per split metric, the mean change of each part over compared requests: they sum to its mean change."""
        return {m: {p: float(v[:, k].mean()) if len(v) else None for k, p in enumerate(ATTRIBUTION_PARTS)}
                for m, v in self.causes.items()}

    def counts(self, metric: str = "e2el_ms", tolerance_ms: float = 1e-6) -> dict[str, int]:
        """How many compared requests B made slower (`hurt`), faster (`helped`) or left alone, by `metric`."""
        c = self.change[metric]
        return {"hurt": int((c > tolerance_ms).sum()), "helped": int((c < -tolerance_ms).sum()),
                "unchanged": int((np.abs(c) <= tolerance_ms).sum())}

    def most_hurt(self, k: int = 10, metric: str = "e2el_ms") -> np.ndarray:
        """Positions (into ids) of the k requests whose `metric` grew the most, largest first; only those it grew."""
        c = self.change[metric]
        order = np.argsort(-c, kind="stable")[:k]
        return order[c[order] > 0]

    def most_helped(self, k: int = 10, metric: str = "e2el_ms") -> np.ndarray:
        c = self.change[metric]
        order = np.argsort(c, kind="stable")[:k]
        return order[c[order] < 0]

    def most_paid_more(self, k: int = 10) -> np.ndarray:
        """Positions (into ids) of the k requests whose GPU energy B raised the most, largest first (none without
        per-request energy on both sides)."""
        if self.energy_a is None or self.energy_b is None:
            return np.zeros(0, np.int64)
        c = self.energy_b - self.energy_a
        order = np.argsort(-c, kind="stable")[:k]
        return order[c[order] > 0]

    def request_json(self, i: int) -> dict:
        """One compared request (position i) as JSON: id, facts, A's and B's values, the changes and their parts."""
        return {"id": int(self.ids[i]), "arrival_s": float(self.arrival_s[i]),
                "prompt_tokens": int(self.prompt_tokens[i]), "output_tokens": int(self.output_tokens[i]),
                "class": str(self.request_class[i]),
                "a": {m: float(v[i]) for m, v in self.a.items()}, "b": {m: float(v[i]) for m, v in self.b.items()},
                "change_ms": {m: float(v[i]) for m, v in self.change.items()},
                "causes_ms": {m: dict(zip(ATTRIBUTION_PARTS, v[i].tolist(), strict=True))
                              for m, v in self.causes.items()}, **self._energy_json(i)}

    def _energy_json(self, i: int) -> dict:
        """`energy_j` of compared request i: A's, B's and B - A (J), where both runs attribute energy."""
        if self.energy_a is None or self.energy_b is None:
            return {}
        a, b = float(self.energy_a[i]), float(self.energy_b[i])
        return {"energy_j": {"a": a, "b": b, "change": b - a}}

    def summary_json(self) -> dict:
        """Everything but the per-request list."""
        return {"metrics": list(METRICS), "parts": list(ATTRIBUTION_PARTS), "requests_in_each_run": self.requests,
                "compared": len(self), "served_by_a_only": self.only_a, "served_by_b_only": self.only_b,
                "by_e2el": self.counts("e2el_ms"), "mean_change_ms": self.mean_change_ms(),
                "causes_ms": self.causes_ms(), "run_change_ms": self.run_change_ms,
                **({"energy": self.energy_runs} if self.energy_runs is not None else {})}

    def requests_json(self) -> list[dict]:
        """Every compared request as request_json gives it, built column by column. (The cyclic garbage collector
        is paused meanwhile: the ~8 containers per request set it off over and over, and it then spends more
        time scanning them than building them takes: 0.44 -> 0.24 s for 10k requests.)"""
        import gc

        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._requests_json()
        finally:
            if enabled:
                gc.enable()

    def _requests_json(self) -> list[dict]:
        cols = {"id": self.ids.tolist(), "arrival_s": np.asarray(self.arrival_s, np.float64).tolist(),
                "prompt_tokens": self.prompt_tokens.tolist(), "output_tokens": self.output_tokens.tolist(),
                "class": [str(c) for c in self.request_class]}
        a = [dict(zip(self.a, row, strict=True)) for row in zip(*(v.tolist() for v in self.a.values()), strict=True)]
        b = [dict(zip(self.b, row, strict=True)) for row in zip(*(v.tolist() for v in self.b.values()), strict=True)]
        change = [dict(zip(self.change, row, strict=True))
                  for row in zip(*(v.tolist() for v in self.change.values()), strict=True)]
        causes = [{m: dict(zip(ATTRIBUTION_PARTS, parts, strict=True)) for m, parts in zip(self.causes, row,
                                                                                          strict=True)}
                  for row in zip(*(v.tolist() for v in self.causes.values()), strict=True)]
        out = [{"id": i, "arrival_s": t, "prompt_tokens": p, "output_tokens": o, "class": c, "a": va, "b": vb,
                "change_ms": ch, "causes_ms": ca}
               for i, t, p, o, c, va, vb, ch, ca in zip(cols["id"], cols["arrival_s"], cols["prompt_tokens"],
                                                        cols["output_tokens"], cols["class"], a, b, change, causes,
                                                        strict=True)] if len(self) else []
        if self.energy_a is not None and self.energy_b is not None:
            for row, ea, eb in zip(out, self.energy_a.tolist(), self.energy_b.tolist(), strict=True):
                row["energy_j"] = {"a": ea, "b": eb, "change": eb - ea}
        return out

    def requests_text(self, sep: str = ",") -> str:
        """Every compared request as JSON text, the entries request_json gives joined by `sep` (no brackets), made
        column by column (json_text): values are rounded to TEXT_DECIMALS places, so a mean over them is the
        exact one within 5e-7 and each request's parts sum to its change within 4e-6; several times faster than
        requests_json and json.dumps (bench/bench_diff.py)."""
        return sep.join(self.requests_texts(sep))

    def requests_texts(self, sep: str = ",", chunk: int = 1024):
        """requests_text in pieces of `chunk` requests (to be joined by `sep`): the arrays each piece makes stay in
        the processor's cache, which makes them ~2x faster than one pass over every request."""
        for lo in range(0, len(self), chunk):
            yield self._text(slice(lo, lo + chunk), sep)

    def _text(self, rows: slice, sep: str) -> str:
        energy = [] if self.energy_a is None or self.energy_b is None else [
            self.energy_a[rows], self.energy_b[rows], self.energy_b[rows] - self.energy_a[rows]]
        floats = np.column_stack([self.arrival_s[rows], *(v[rows] for v in self.a.values()),
                                  *(v[rows] for v in self.b.values()), *(v[rows] for v in self.change.values()),
                                  *(v[rows] for v in self.causes.values()), *energy])
        n = len(floats)
        values = number_chars(floats, TEXT_DECIMALS).reshape(n, floats.shape[1], -1)
        ints = number_chars(np.column_stack([self.ids[rows], self.prompt_tokens[rows], self.output_tokens[rows]]),
                            0).reshape(n, 3, -1)
        parts = [b'{"id":', (ints, 0), b',"arrival_s":', (values, 0), b',"prompt_tokens":', (ints, 1),
                 b',"output_tokens":', (ints, 2), b',"class":', string_chars(self.request_class[rows])]
        col = 1
        for group, keys in (("a", self.a), ("b", self.b), ("change_ms", self.change)):
            for k, m in enumerate(keys):
                parts += [(f',"{group}":{{"{m}":' if k == 0 else f',"{m}":').encode(), (values, col)]
                col += 1
            parts.append(b"}")
        for i, m in enumerate(self.causes):
            for k, part in enumerate(ATTRIBUTION_PARTS):
                head = ((',"causes_ms":{' if i == 0 else ",") + f'"{m}":{{') if k == 0 else ","
                parts += [f'{head}"{part}":'.encode(), (values, col)]
                col += 1
            parts.append(b"}")
        parts.append(b"}")  # causes_ms
        for k, side in enumerate(("a", "b", "change") if energy else ()):
            parts += [(',"energy_j":{' if k == 0 else ",").encode() + f'"{side}":'.encode(), (values, col)]
            col += 1
        if energy:
            parts.append(b"}")
        return records([*parts, b"}"], sep.encode())

    def to_json(self) -> dict:
        """The A/B as JSON: summary_json plus `requests`, one entry per compared request (request_json)."""
        return {**self.summary_json(), "requests": self.requests_json()}


def _stat(metrics: dict, key: str, stat: str):
    v = (metrics.get(key) or {}).get(stat)
    return None if v is None else float(v)


def request_diff(a, b) -> RequestDiff:
    """B minus A per request (a, b: runner.Results over the same requests; RequestsDiffer otherwise)."""
    check_same_requests(a, b)
    va, ca, served_a = request_values_ms(a)
    vb, cb, served_b = request_values_ms(b)
    both = served_a & served_b
    ids = np.flatnonzero(both)
    reqs = a.requests
    run_change = {}
    for key, stats in RUN_STATS.items():
        run_change[key] = {}
        for stat in stats:
            x, y = _stat(a.metrics, key, stat), _stat(b.metrics, key, stat)
            run_change[key][stat] = None if x is None or y is None else y - x
    return RequestDiff(
        ids=ids, arrival_s=np.asarray(reqs.arrival_s)[ids], prompt_tokens=np.asarray(reqs.prompt_tokens)[ids],
        output_tokens=np.asarray(reqs.output_tokens)[ids],
        request_class=np.asarray(reqs.class_names, dtype=object)[np.asarray(reqs.request_class)[ids]],
        a={m: va[m][ids] for m in METRICS}, b={m: vb[m][ids] for m in METRICS},
        change={m: vb[m][ids] - va[m][ids] for m in METRICS},
        causes={m: cb[m][ids] - ca[m][ids] for m in CAUSE_METRICS},
        requests=len(reqs), only_a=int((served_a & ~served_b).sum()), only_b=int((served_b & ~served_a).sum()),
        run_change_ms=run_change, **energy_comparison(a, b, ids))


ENERGY_RUN_KEYS = ("energy_j", "gpu_energy_j", "idle_energy_j")  # metrics.energy's, compared side by side


def energy_comparison(a, b, ids: np.ndarray) -> dict:
    """RequestDiff's energy fields (all None unless a run has energy on): each compared request's GPU energy in
    A and B (sim_core/energy.py request_energy: each step's energy split among its batch by tokens; idle energy
    is no request's) and the runs' figures: both sides' metrics.energy totals, busy energy (the steps'), B - A,
    and the per-request totals, or a note saying why a side has none."""
    on = (bool(a.scenario.energy), bool(b.scenario.energy))
    if not any(on):
        return {}
    if not all(on):
        return {"energy_runs": {"note": f"energy is on in {'A' if on[0] else 'B'} only: turn it on in both runs to "
                                        "compare their energy"}}
    runs: dict = {}
    per: list[np.ndarray | None] = []
    for side, r in (("a", a), ("b", b)):
        m = r.metrics["energy"]
        runs[side] = {**{k: m[k] for k in ENERGY_RUN_KEYS}, "busy_energy_j": m["gpu_energy_j"] - m["idle_energy_j"]}
        try:
            per.append(request_energy(r).joules[ids])
        except ValueError as e:
            per.append(None)
            runs.setdefault("note", f"no per-request energy: run {side.upper()}: {e}")
    runs["change_j"] = {k: runs["b"][k] - runs["a"][k] for k in runs["a"]}
    ea, eb = per
    if ea is not None and eb is not None:
        c = eb - ea
        runs["requests"] = {"a_j": float(ea.sum()), "b_j": float(eb.sum()),
                            "mean_change_j": float(c.mean()) if len(c) else None,
                            "paid_more": int((c > 0).sum()), "paid_less": int((c < 0).sum())}
    return {"energy_a": ea if eb is not None else None, "energy_b": eb if ea is not None else None,
            "energy_runs": runs}



def request_timelines(result, ids) -> dict[int, list[tuple[str, float, float]]] | None:
    """What each of the requests `ids` was doing when in one run (sim_core.timeline's segments: kind, start_s,
    end_s), or None where the run cannot say (it recorded no events, or its logs were bounded)."""
    if not len(result.events) and len(ids):
        return None
    try:
        segs = timeline.request_segments(result, np.asarray(ids, np.int64))
    except ValueError:
        return None
    out: dict[int, list[tuple[str, float, float]]] = {int(r): [] for r in ids}
    for r, kind, start, end in segs:
        out[int(r)].append((timeline.SEGMENT_KINDS[kind], float(start), float(end)))
    return out


def picked_request(a, b, d: RequestDiff, rid: int) -> dict:
    """One request compared in full ("compare this request"): request_json's entry, each run's own split of its
    E2EL into the attribution parts (`parts_ms`: {"a": {part: ms}, "b": ...}, the split request_values_ms gives
    the metrics) and its timeline in each run (`timelines`, as diff_document's). NotCompared names the ids allowed
    when `rid` is outside the runs or was not served by both."""
    if not 0 <= rid < d.requests:
        raise NotCompared(f"must be a request id from 0 to {d.requests - 1} (got {rid})")
    at = np.searchsorted(d.ids, rid)
    if at >= len(d) or d.ids[at] != rid:
        raise NotCompared(f"request {rid} was not served by both runs (rejected or shed by one of them): pick one "
                          f"of the {len(d):,} requests both served, ids from 0 to {d.requests - 1}")
    parts = {}
    for side, run in (("a", a), ("b", b)):
        split = request_values_ms(run)[1]["e2el_ms"][rid]
        parts[side] = dict(zip(ATTRIBUTION_PARTS, split.tolist(), strict=True))
    ta, tb = request_timelines(a, [rid]), request_timelines(b, [rid])
    return {**d.request_json(int(at)), "parts_ms": parts, "timelines": {"a": ta and ta[rid], "b": tb and tb[rid]}}


def diff_document(a, b, *, top: int = 10, by: str = "e2el_ms", with_requests: bool = True, pick: int | None = None
                  ) -> tuple[dict, RequestDiff]:
    """The A/B as one JSON document (what `sched-sim diff --json` and /api/diff answer, less the two runs'
    scenarios), with the RequestDiff: to_json's keys, plus `ranked_by`, the `top` most hurt and most helped
    requests by `by` (ids), and both runs' timelines of those requests (`timelines`: id -> {"a": [[kind,
    start_s, end_s], ...], "b": ...}; null where a run recorded none). Without `with_requests`, no `requests` list
    (d.request_json(i) makes each entry when wanted). With `pick`, `picked`: that request compared in full
    (picked_request; NotCompared if it cannot be)."""
    if by not in METRICS:
        raise ValueError(f"by: must be one of {', '.join(METRICS)} (got {by!r})")
    d = request_diff(a, b)
    hurt, helped = d.most_hurt(top, by), d.most_helped(top, by)
    listed = [int(d.ids[i]) for i in (*hurt, *helped)]
    ta, tb = request_timelines(a, listed), request_timelines(b, listed)
    doc = {**d.summary_json(), "ranked_by": by,
           "most_hurt": [int(d.ids[i]) for i in hurt], "most_helped": [int(d.ids[i]) for i in helped],
           "timelines": {str(r): {"a": ta and ta[r], "b": tb and tb[r]} for r in listed}}
    if d.energy_a is not None:  # the requests B made draw the most energy more than A did (who paid for whom)
        doc["most_paid_more_energy"] = [int(d.ids[i]) for i in d.most_paid_more(top)]
    if pick is not None:
        doc["picked"] = picked_request(a, b, d, pick)
    if with_requests:
        doc["requests"] = d.requests_json()
    return doc, d
