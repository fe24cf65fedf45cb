"""`sched-sim calibrate --from-prometheus`: refit the cost model's constants to a vLLM or SGLang server's
Prometheus metrics (read by sim_core/prometheus_parse.py).

A scrape holds distributions, not the load that made them, so the user states the load as a scenario (model, GPU,
rate, lengths: `--scenario QUERY`); what it leaves out is derived from the scrape and reported as derived: the
mean prompt and output lengths from the length histograms' means (or the token counters over the request counter;
the random workload's isl/osl), the
arrival rate from the request counter over the window's seconds (only a series or a query answer has times), the
number of requests to replay from the request counter (at most FIT_MAX_REQUESTS, the fit's cost).

As a benchmark replay does (calibration.fit_bench), the fit simulates that load with candidate constants and
compares the same statistics computed the same way from the simulated run's metrics (prometheus_export.snapshot,
the metrics `run --metrics-out` writes): each histogram's mean (its _sum / _count, exact, unlike a bucketed
quantile) for TTFT, inter-token latency, E2E, queue, prefill and decode time and tokens per engine step, and the
TTFT and ITL histograms' cumulative fractions at their bucket bounds. It fits GEMM compute efficiency (prefill,
hence TTFT and prefill time) and bandwidth efficiency (decode steps, hence ITL): the best point of a coarse grid,
then a simplex search from it. The per-step
overhead is not fitted: at one load a decode step is overhead + bytes / bandwidth with nearly the same bytes in
every step, so the two trade off along a ridge the histograms cannot resolve (a round trip with both moved found
a 3 ms overhead at 4.4 ms and bandwidth 19% off, every mean within 1%); it keeps the catalog's value, attention
efficiency and the per-sequence overhead too.
What the fitted model still misses by more than DRIFT_PCT, and what the scrape holds that sched-sim does not
model, is the drift report.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict

import numpy as np

from ..hardware_profile import Profile, profile_document
from ..kernel.cost_constants import CONSTANT_BOUNDS, Constants, default_constants
from ..prometheus_export import Histogram, snapshot, time_averages
from ..prometheus_names import COUNTER, HISTOGRAM, flavour_of_engine
from ..prometheus_parse import HistogramWindow, ScrapeError, Window
from ..runner import make_requests, resolve, simulate_requests
from ..scenario import Scenario, parse_scenario
from .calibration import PRIOR_WEIGHT, nelder_mead, residual_summary, to_coord, with_coords

PROM_FITTED = ("compute_efficiency", "bandwidth_efficiency")
# The grid a fit starts from, as factors on the catalog's constants: a GPU a third as fast as the catalog's to one
# faster than it (an efficiency stops just under 1).
GRID_FACTORS = (0.2, 0.3, 0.45, 0.65, 1.0, 1.35)
# Simulations one fit may run (a simplex over two coordinates settles in well under this).
MAX_EVALS = 100
MEAN_CONCEPTS = ("ttft", "itl", "e2e", "queue", "prefill", "decode", "iteration_tokens")
# The means the fit minimises: queue and prefill time are reported, not fitted, because at light load they are a
# few ms that jump as step boundaries move (a 2.5% change in compute efficiency moved the queue mean by 20%), and a
# simplex stalls on such a surface.
FIT_CONCEPTS = ("ttft", "itl", "e2e", "decode", "iteration_tokens")
CDF_CONCEPTS = ("ttft", "itl")
# A bucket bound whose measured cumulative fraction is within this of 0 or 1 says little (all below or all above).
CDF_EDGE = 0.02
# The most requests a fit replays: each of its ~100-200 simulations replays them all.
FIT_MAX_REQUESTS = 2000
# A statistic the fitted model misses by more than this (percent; for a bucket fraction, this many hundredths) is
# reported as unexplained: a residual the three fitted constants cannot close, so something the model lacks.
DRIFT_PCT = 10.0
# Scenario fields that state the lengths or the arrivals; none given: the lengths (or rate) come from the scrape.
LENGTH_FIELDS = ("workload", "isl", "osl", "trace")
ARRIVAL_FIELDS = ("rate", "rate_schedule", "concurrency", "trace")


def run_window(result, flavour: str) -> Window:
    """A simulated run's end-of-run metrics as the window a scrape of it would give (series summed over labels);
    its gauges are their averages over the run, what a series' mean estimates (the end-of-run gauges are 0)."""
    hists: dict[str, HistogramWindow] = {}
    counters: dict[str, float] = {}
    for m, _, value in snapshot(result, flavour):
        if m.kind == HISTOGRAM:
            h: Histogram = value
            old = hists.get(m.concept)
            cum = tuple(np.add(old.cumulative, h.cumulative)) if old else h.cumulative
            hists[m.concept] = HistogramWindow(
                h.bounds, cum, h.sum + (old.sum if old else 0.0), h.count + (old.count if old else 0.0)
            )
        elif m.kind == COUNTER and m.concept != "requests":  # vLLM's counts aborts too: recounted below
            counters[m.concept] = counters.get(m.concept, 0.0) + float(value)
    counters["requests"] = float(result.finished.sum())
    return Window(flavour, hists, counters, time_averages(result), None, 1, ())


def statistics(w: Window) -> dict[str, float]:
    """What the fit compares: histogram means (seconds or tokens), and bucket fractions."""
    out = {}
    for c in MEAN_CONCEPTS:
        h = w.histograms.get(c)
        if h is not None and h.count > 0:
            out[f"mean_{c}{'' if c == 'iteration_tokens' else '_s'}"] = h.sum / h.count
    return out


def cdf_points(w: Window, concept: str) -> dict[float, float]:
    h = w.histograms.get(concept)
    if h is None or h.count <= 0:
        return {}
    return {b: c / h.count for b, c in zip(h.bounds, h.cumulative, strict=False)}


def derive_load(stated: Scenario, w: Window) -> tuple[Scenario, dict]:
    """The scenario to replay: the stated one (the fields the user gave: model_fields_set), with what it leaves out
    derived from the scrape (module docstring). ScrapeError when the scrape cannot give what is missing."""
    given = stated.model_fields_set
    engine = flavour_of_engine(stated.engine)
    if "engine" in given and engine != w.flavour:
        raise ScrapeError(
            f"the scrape holds {w.flavour}'s metrics ({w.flavour}:...) but the load states "
            f"engine={stated.engine}: give the engine that served it (engine={w.flavour})"
        )
    update, derived = {}, {}
    if "engine" not in given and w.flavour == "sglang":
        update["engine"] = derived["engine"] = "sglang"
    requests = w.counters.get("requests")
    if not any(f in given for f in LENGTH_FIELDS):
        for field, hist, counter in (
            ("isl", "prompt_len", "prompt_tokens"),
            ("osl", "output_len", "generation_tokens"),
        ):
            update[field] = derived[field] = mean_length(w, hist, counter)
        update["workload"] = derived["workload"] = "random"  # the preset isl and osl set
    if not any(f in given for f in ARRIVAL_FIELDS):
        if not (requests and w.seconds):
            raise ScrapeError(
                "the load states no arrival rate, and a single scrape carries no time to derive one "
                "from: state it (--scenario rate=R, requests/s) or give two timestamped scrapes "
                "or a query_range answer"
            )
        update["rate"] = derived["rate"] = requests / w.seconds
    if "num_requests" not in given and "duration" not in given and "trace" not in given and requests:
        update["num_requests"] = derived["num_requests"] = int(min(max(requests, 1), FIT_MAX_REQUESTS))
    # Validated again (ScenarioError naming a field): a derived length or rate may be out of a field's bounds.
    return parse_scenario({k: getattr(stated, k) for k in given} | update), derived


def mean_length(w: Window, hist: str, counter: str) -> int:
    """A request's mean length: its histogram's mean (both observed at a request's end, so a window's edges cut
    none in half), else the token counter over the request counter (a token is counted as it is computed, a request
    at its end: only right over a whole run)."""
    h = w.histograms.get(hist)
    if h is not None and h.count > 0:
        return max(1, round(h.sum / h.count))
    if not w.counters.get("requests") or counter not in w.counters:
        raise ScrapeError(
            f"the load states no lengths and the scrape has no {hist} histogram nor {counter} and "
            f"request counters to derive them from: state them (--scenario workload=random&isl=N&osl=M)"
        )
    return max(1, round(w.counters[counter] / w.counters["requests"]))


class PromReplay:
    """The load's requests, simulated under given constants, seen as a scrape would see them."""

    def __init__(self, scenario: Scenario, flavour: str):
        self.scenario = scenario
        self.flavour = flavour
        self.resolved = resolve(scenario)
        self.setup = self.resolved.setup
        self.requests = make_requests(scenario, self.resolved)

    def window(self, constants: Constants) -> Window:
        profile = Profile(
            self.setup.gpu.key, self.setup.model.key, self.setup.quantization, self.scenario.tp, constants
        )
        sc = self.scenario.model_copy(update={"hardware_profile": profile.compact()})
        return run_window(simulate_requests(sc, self.resolved, self.requests), self.flavour)


def fitted_keys(stats: dict[str, float]) -> list[str]:
    """The statistics the fit minimises (FIT_CONCEPTS' means), of those the scrape has."""
    return [k for c in FIT_CONCEPTS for k in (f"mean_{c}", f"mean_{c}_s") if k in stats]


def _compare(measured: Window, predicted: Window) -> np.ndarray:
    """Residuals: log-ratios of the histogram means. (The bucket fractions are step functions of the constants:
    a simplex stalls on their plateaus, so they are reported, not fitted.)"""
    ms, ps = statistics(measured), statistics(predicted)
    keys = fitted_keys(ms)
    return np.array([np.log(max(ps.get(k, 0.0), 1e-12) / max(ms[k], 1e-12)) for k in keys])


def fit_window(replay: PromReplay, measured: Window) -> tuple[Constants, Constants]:
    """(fitted constants, the catalog's)."""
    base = default_constants(replay.setup)
    names = PROM_FITTED
    x0 = np.array([to_coord(n, getattr(base, n)) for n in names])

    def objective(x: np.ndarray) -> float:
        r = _compare(measured, replay.window(with_coords(base, names, x)))
        return float(r @ r) + PRIOR_WEIGHT**2 * float((x - x0) @ (x - x0))

    x = nelder_mead(objective, grid_start(objective, base, names), step=0.3, max_evals=MAX_EVALS)
    x = nelder_mead(objective, x, step=0.05, max_evals=MAX_EVALS // 2)  # a restart: a simplex that collapsed
    return with_coords(base, names, x), base


def grid_start(objective, base: Constants, names: tuple[str, ...]) -> np.ndarray:
    """The best point of a coarse grid of GRID_FACTORS times the catalog's values: a simplex started at the catalog
    slid into a wrong valley on an A100's scrape read as an H100's (bandwidth down to 0.27, compute up to 0.83,
    residuals 20-55%), where the answer lay at a third of the compute."""
    axes = [
        sorted({to_coord(n, min(getattr(base, n) * f, CONSTANT_BOUNDS[n][1] * 0.999)) for f in GRID_FACTORS})
        for n in names
    ]
    points = [np.array(p) for p in itertools.product(*axes)]
    return min(points, key=objective)


def drift_report(measured: Window, predicted: Window, load: Scenario) -> dict:
    """Each compared statistic measured and predicted, those off by more than DRIFT_PCT, and the metrics the
    model does not explain at all."""
    ms, ps = statistics(measured), statistics(predicted)
    rows = {
        k: {
            "measured": v,
            "predicted": ps.get(k),
            "error_pct": (ps[k] / v - 1) * 100 if k in ps and v else None,
        }
        for k, v in ms.items()
    }
    for c in CDF_CONCEPTS:
        mp, pp = cdf_points(measured, c), cdf_points(predicted, c)
        for b, f in mp.items():
            if CDF_EDGE < f < 1 - CDF_EDGE:
                rows[f"fraction_{c}_le_{b:g}s"] = {
                    "measured": f,
                    "predicted": pp.get(b),
                    "error_pct": (pp.get(b, 0.0) - f) * 100,
                }
    rows |= _ratios(measured, predicted)
    unexplained = [
        k for k, row in rows.items() if row["error_pct"] is not None and abs(row["error_pct"]) > DRIFT_PCT
    ]
    return {
        "statistics": rows,
        "unexplained": unexplained,
        "threshold_pct": DRIFT_PCT,
        "not_modelled": list(measured.unknown),
        "not_in_scrape": sorted(set(predicted.histograms) - set(measured.histograms)),
    }


def _ratios(measured: Window, predicted: Window) -> dict:
    """Per-request ratios of counters (lengths, preemptions, prefix-cache hits), and with a window of several
    snapshots (a single scrape's gauge is one instant) the means of the KV-usage and running-requests gauges."""
    out = {}
    if measured.snapshots > 1:
        for key, gauge in (("mean_kv_cache_usage", "kv_usage"), ("mean_running_requests", "running")):
            mv, pv = measured.gauges.get(gauge), predicted.gauges.get(gauge)
            if mv is not None and pv is not None:
                out[key] = {"measured": mv, "predicted": pv, "error_pct": (pv / mv - 1) * 100 if mv else None}
    pairs = {
        "mean_prompt_tokens": ("prompt_tokens", "requests"),
        "mean_generation_tokens": ("generation_tokens", "requests"),
        "preemptions_per_request": ("preemptions", "requests"),
        "prefix_cache_hit_rate": ("prefix_hits", "prefix_queries"),
    }
    for key, (num, den) in pairs.items():
        m, p = measured.counters, predicted.counters
        if m.get(den) and num in m and p.get(den) and num in p:
            mv, pv = m[num] / m[den], p[num] / p[den]
            out[key] = {"measured": mv, "predicted": pv, "error_pct": (pv / mv - 1) * 100 if mv else None}
    return out


def calibrate_prometheus(stated: Scenario, window: Window, sources: list[str]) -> dict:
    """Fit a profile to a scrape's window; the profile document `--out` writes."""
    load, derived = derive_load(stated, window)
    replay = PromReplay(load, window.flavour)
    constants, catalog = fit_window(replay, window)
    fitted_run, catalog_run = replay.window(constants), replay.window(catalog)

    def residuals(pred: Window) -> dict:
        ms, ps = statistics(window), statistics(pred)
        keys = fitted_keys(ms)  # the others are the drift report's
        errors = np.array([abs(ps.get(k, 0.0) / ms[k] - 1) * 100 for k in keys])
        return residual_summary(errors, keys) | {"predicted": {k: ps.get(k) for k in keys}}

    setup = replay.setup
    profile = Profile(setup.gpu.key, setup.model.key, setup.quantization, load.tp, constants)
    info = {
        "source": ", ".join(sources),
        "kind": "prometheus",
        "engine_metrics": window.flavour,
        "fitted": list(PROM_FITTED),
        "catalog_constants": asdict(catalog),
        "method": "replay of the stated load in the simulator, a coarse grid then Nelder-Mead on the log-ratios of the histogram "
        "means (TTFT, ITL, E2E, decode time, tokens per step); fitted " + ", ".join(PROM_FITTED),
        "observations": len(_compare(window, fitted_run)),
        "snapshots": window.snapshots,
        "window_s": window.seconds,
        "load": {"scenario": load.to_query(), "derived": derived},
        "measured": statistics(window),
        "residuals": residuals(fitted_run),
        "catalog_residuals": residuals(catalog_run),
        "drift": drift_report(window, fitted_run, load),
    }
    return profile_document(profile, info)
