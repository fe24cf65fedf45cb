"""`sched-sim calibrate`: refit the cost model's measured constants (cost_constants.Constants) on a user's own
deployment, from one of two kinds of measurement (read by measurements.py).

Measured steps (CSV: prefill_tokens,context_tokens,decode_seqs,decode_context,step_ms, the batch shapes of
`sched-sim step-time`). Each row is one observation of the step-time model; all five constants are fitted by
least squares on the log of predicted / measured time (relative error: a 2 ms decode step and a 300 ms prefill
count alike), with Levenberg-Marquardt. Each constant moves in a logistic coordinate between its physical bounds
(cost_constants.CONSTANT_BOUNDS), so a fit can never leave them, and a weak pull toward the catalog's value keeps a
constant the rows cannot see (no long prefill: attention efficiency) where the catalog has it instead of letting it
drift.

A `vllm bench serve --save-result --save-detailed` JSON. It has no step shapes, only per-request lengths, TTFTs and
inter-token latencies of a whole serving run, so the fit replays the benchmark: its requests (their input and
output lengths; arriving all at once for request rate inf, else as a gamma process at the measured rate and
burstiness, with our own draws: the benchmark's seed is not saved) through the simulator on a chunked-prefill
scheduler, and compares the same statistics computed the same way on both sides: TTFT mean, median and p90, and
per-request TPOT (time after the first token / (output tokens - 1)) mean, median and p90. A simplex search
(Nelder-Mead, in the same bounded coordinates) minimises the squared log-ratios. Six summary statistics cannot
separate five constants, so it fits three: GEMM compute efficiency (prefill, hence TTFT), bandwidth efficiency
(decode steps, hence TPOT) and the per-step overhead; attention efficiency and the per-sequence overhead keep the
catalog's values. With max_concurrency below the number of prompts the benchmark queued requests in the client
(TTFT counts from its send), which our open-loop replay cannot reproduce: the engine's max_seqs is capped at
the concurrency and only TPOT is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..catalog import ServingSettings, Setup, resolve_setup
from ..deployment import max_seqs_of
from ..hardware_profile import CONSTANT_NAMES, Profile, profile_document
from ..kernel.cost_constants import CONSTANT_BOUNDS, Constants, default_constants
from ..kernel.cost_model import cost_params, step_aggregates, step_cost
from ..runner import resolve, simulate_requests
from ..scenario import HardwareName, ModelName, Quantization, Scenario, ScenarioError, describe_error
from ..workload import Requests
from .measurements import Bench, CalibrationError, Steps, read_steps_csv, read_vllm_bench

# What the replay of a benchmark fits (see the module docstring for why not all five).
BENCH_FITTED = ("compute_efficiency", "bandwidth_efficiency", "step_overhead_ms")
# Weight of the pull toward the catalog's value, per unit of the logistic coordinate. A residual of 1% on one
# row weighs 1e-4; moving a constant by a factor e in the middle of its range weighs 1e-4 x ~4: the data decide
# wherever they say anything.
PRIOR_WEIGHT = 0.01
BENCH_QUANTILES = (50, 90)


class CalibrationTarget(BaseModel):
    """The deployment the measurements were taken on (the Scenario's own fields, bounds and all), and for a
    benchmark replay the engine's batch limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hardware: HardwareName = Scenario.model_fields["hardware"]
    model: ModelName | None = Scenario.model_fields["model"]
    quantization: Quantization = Scenario.model_fields["quantization"]
    tp: int = Scenario.model_fields["tp"]
    token_budget: int | None = Scenario.model_fields["token_budget"]
    max_seqs: int | None = Scenario.model_fields["max_seqs"]


def parse_target(data: dict) -> CalibrationTarget:
    try:
        return CalibrationTarget.model_validate(data)
    except ValidationError as e:
        raise ScenarioError([(".".join(str(x) for x in err["loc"]) or "hardware", describe_error(err, CalibrationTarget))
                             for err in e.errors()]) from None


def target_max_seqs(t: CalibrationTarget) -> int:
    """The target's max_seqs, or the engine's default for its GPU."""
    return max_seqs_of(Scenario(hardware=t.hardware, max_seqs=t.max_seqs))


def target_setup(t: CalibrationTarget) -> Setup:
    """The deployment (SetupError if it cannot run)."""
    d = Scenario()
    serving = ServingSettings(d.gpu_memory_utilization, d.block_size, t.token_budget or 2048, target_max_seqs(t))
    return resolve_setup(t.hardware, t.model, t.quantization, t.tp, serving)


# ---------------------------------------------------------------------------------------------------------
# Bounded coordinates: each constant is lo + (hi - lo) * sigmoid(x), so any x is a physical value.
# ---------------------------------------------------------------------------------------------------------
def to_coord(name: str, value: float) -> float:
    lo, hi = CONSTANT_BOUNDS[name]
    f = min(max((value - lo) / (hi - lo), 1e-9), 1 - 1e-9)
    return math.log(f / (1 - f))


def from_coord(name: str, x: float) -> float:
    lo, hi = CONSTANT_BOUNDS[name]
    return lo + (hi - lo) / (1.0 + math.exp(-min(max(x, -700.0), 700.0)))


def with_coords(base: Constants, names: tuple[str, ...], x: np.ndarray) -> Constants:
    return replace(base, **{n: from_coord(n, float(v)) for n, v in zip(names, x, strict=True)})


# ---------------------------------------------------------------------------------------------------------
# Fitting measured steps
# ---------------------------------------------------------------------------------------------------------
def predict_steps(setup: Setup, constants: Constants | None, shapes: np.ndarray) -> np.ndarray:
    """Seconds the cost model predicts for each (prefill_tokens, context_tokens, decode_seqs, decode_context)."""
    p = cost_params(setup, constants)
    return np.array([step_cost(p, *step_aggregates(*(int(v) for v in row)))[0] for row in shapes])


def levenberg_marquardt(residuals: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, max_iter: int = 200
                        ) -> np.ndarray:
    """Minimise |residuals(x)|^2 from x0: Gauss-Newton steps damped toward gradient descent when they fail
    (Marquardt's scaling by the diagonal), forward-difference Jacobian."""
    x = np.array(x0, float)
    r = residuals(x)
    cost = float(r @ r)
    lam = 1e-3
    for _ in range(max_iter):
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            h = 1e-6 * max(1.0, abs(x[j]))
            dx = x.copy()
            dx[j] += h
            jac[:, j] = (residuals(dx) - r) / h
        a, g = jac.T @ jac, jac.T @ r
        scale = np.diag(a) + 1e-9 * max(float(np.max(np.diag(a))), 1e-12)
        while lam < 1e12:
            step = np.linalg.solve(a + lam * np.diag(scale), -g)
            r_new = residuals(x + step)
            new_cost = float(r_new @ r_new)
            if np.isfinite(new_cost) and new_cost < cost:
                break
            lam *= 4.0
        else:
            return x  # no step lowers the cost: a minimum
        x, r, improvement, cost = x + step, r_new, cost - new_cost, new_cost
        lam = max(lam / 3.0, 1e-12)
        if improvement <= 1e-14 * max(cost, 1e-300) or float(np.max(np.abs(step))) < 1e-10:
            break
    return x


@dataclass(frozen=True)
class Fit:
    constants: Constants
    fitted: tuple[str, ...]
    doc: dict  # the profile's "fit" section: method, observations, residuals


def abs_pct_errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(predicted / measured - 1.0) * 100.0


def residual_summary(errors: np.ndarray, labels: list[str]) -> dict:
    worst = int(np.argmax(errors))
    return {"median_abs_pct_error": float(np.median(errors)), "max_abs_pct_error": float(errors[worst]),
            "worst": labels[worst]}


def fit_steps(setup: Setup, steps: Steps) -> Fit:
    """All five constants by least squares on log(predicted / measured) step time."""
    base = default_constants(setup)
    names = CONSTANT_NAMES
    x0 = np.array([to_coord(n, getattr(base, n)) for n in names])
    log_measured = np.log(steps.seconds)

    def residuals(x: np.ndarray) -> np.ndarray:
        predicted = predict_steps(setup, with_coords(base, names, x), steps.shapes)
        return np.concatenate([np.log(predicted) - log_measured, PRIOR_WEIGHT * (x - x0)])

    constants = with_coords(base, names, levenberg_marquardt(residuals, x0))
    labels = [f"line {n}" for n in steps.lines]
    doc = {
        "weakly_determined": weakly_determined(setup, constants, steps.shapes),
        "method": "least squares on log(predicted / measured) step time (Levenberg-Marquardt, constants bounded "
                  "to their physical ranges, weak pull toward the catalog's)",
        "observations": int(len(steps.seconds)),
        "residuals": residual_summary(abs_pct_errors(predict_steps(setup, constants, steps.shapes), steps.seconds),
                                      labels),
        "catalog_residuals": residual_summary(
            abs_pct_errors(predict_steps(setup, None, steps.shapes), steps.seconds), labels),
    }
    return Fit(constants, names, doc)


# A constant whose 10% change moves no row's predicted time by more than this is one the rows barely see: its
# fitted value is mostly the catalog's (the pull toward it) and says little about the hardware.
WEAK_EFFECT = 0.01


def weakly_determined(setup: Setup, constants: Constants, shapes: np.ndarray) -> list[str]:
    """The constants the measured batch shapes hardly depend on (a sweep without long prefills cannot see the
    attention efficiency): the profile carries them, but the user should know they were not measured."""
    at = predict_steps(setup, constants, shapes)
    out = []
    for name in CONSTANT_NAMES:
        value = getattr(constants, name)
        moved = replace(constants, **{name: value * 1.1 if value * 1.1 <= CONSTANT_BOUNDS[name][1] else value * 0.9})
        if np.max(np.abs(predict_steps(setup, moved, shapes) / at - 1.0)) < WEAK_EFFECT:
            out.append(name)
    return out


# ---------------------------------------------------------------------------------------------------------
# Replaying a vllm bench serve result
# ---------------------------------------------------------------------------------------------------------
def bench_statistics(ttft_s: np.ndarray, tpot_s: np.ndarray, with_ttft: bool) -> dict[str, float]:
    """The statistics a replay is compared on, computed the same way for the benchmark and the simulation."""
    out = {}
    tpot = tpot_s[np.isfinite(tpot_s)]
    series = ({"ttft": ttft_s} if with_ttft else {}) | {"tpot": tpot}
    for name, xs in series.items():
        out[f"mean_{name}_ms"] = float(np.mean(xs)) * 1e3
        for q in BENCH_QUANTILES:
            out[f"p{q}_{name}_ms"] = float(np.percentile(xs, q)) * 1e3
    return out


def bench_arrivals(bench: Bench, seed: int = 0) -> np.ndarray:
    """Arrival times as vllm bench serve draws them: the first at 0, then gamma-distributed gaps with mean
    1 / rate and shape `burstiness` (1: Poisson); all at 0 for rate inf."""
    n = len(bench.input_lens)
    if not math.isfinite(bench.request_rate):
        return np.zeros(n)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(bench.burstiness, 1.0 / (bench.request_rate * bench.burstiness), size=max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


class Replay:
    """Runs a benchmark's requests through the simulator with given constants."""

    def __init__(self, target: CalibrationTarget, bench: Bench):
        setup = target_setup(target)
        longest = int((bench.input_lens + bench.output_lens).max())
        if longest > setup.model.max_context:
            raise CalibrationError(f"a request of {longest:,} tokens exceeds {setup.model.key}'s context of "
                                   f"{setup.model.max_context:,}: was the benchmark run on this model?")
        engine_seqs = target_max_seqs(target)
        max_seqs = min(engine_seqs, bench.max_concurrency) if bench.closed_loop else engine_seqs
        self.scenario = Scenario(scheduler="chunked", hardware=target.hardware, model=setup.model.key,
                                 quantization=target.quantization, tp=target.tp, token_budget=target.token_budget,
                                 max_seqs=max_seqs, max_model_len=max(longest, min(setup.model.max_context, 8192)),
                                 num_requests=len(bench.input_lens))
        self.resolved = resolve(self.scenario)
        self.setup = self.resolved.setup
        n = len(bench.input_lens)
        self.requests = Requests(bench_arrivals(bench), bench.input_lens.copy(), bench.output_lens.copy(),
                                 np.zeros(n, np.int64), ("benchmark",))

    def statistics(self, constants: Constants, with_ttft: bool) -> dict[str, float]:
        profile = Profile(self.setup.gpu.key, self.setup.model.key, self.setup.quantization, self.scenario.tp,
                          constants)
        sc = self.scenario.model_copy(update={"hardware_profile": profile.compact()})
        res = simulate_requests(sc, self.resolved, self.requests)
        if not res.finished.all():
            raise CalibrationError(f"{int((~res.finished).sum())} of the benchmark's requests could not be served "
                                   f"on {self.setup.gpu.key} at tp={self.scenario.tp} (KV cache too small?)")
        out = self.requests.output_tokens
        tpot = np.full(len(out), np.nan)
        multi = out > 1
        tpot[multi] = (res.finish_s - res.first_token_s)[multi] / (out[multi] - 1)
        return bench_statistics(res.first_token_s - self.requests.arrival_s, tpot, with_ttft)


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.5, max_evals: int = 400,
                tol: float = 1e-7) -> np.ndarray:
    """Minimise f from x0 with the simplex method (reflection 1, expansion 2, contraction 1/2, shrink 1/2)."""
    n = x0.size
    simplex = [np.array(x0, float)] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] <= tol * (abs(values[0]) + 1e-12) and \
                max(float(np.max(np.abs(s - simplex[0]))) for s in simplex[1:]) < 1e-4:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        evals += 1
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - simplex[-1])
            fe = f(expanded)
            evals += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            # Contract toward the centroid: on the reflected side if that point beat the worst, else inside.
            far = reflected if fr < values[-1] else simplex[-1]
            contracted = centroid + 0.5 * (far - centroid)
            fc = f(contracted)
            evals += 1
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = contracted, fc
            else:
                for i in range(1, n + 1):
                    simplex[i] = simplex[0] + 0.5 * (simplex[i] - simplex[0])
                    values[i] = f(simplex[i])
                evals += n
    return simplex[int(np.argmin(values))]


def fit_bench(target: CalibrationTarget, bench: Bench) -> Fit:
    """BENCH_FITTED by replaying the benchmark (module docstring)."""
    replay = Replay(target, bench)
    with_ttft = not bench.closed_loop
    measured = bench_statistics(bench.ttft_s, bench.tpot_s, with_ttft)
    keys = list(measured)
    log_measured = np.log([max(measured[k], 1e-9) for k in keys])
    base = default_constants(replay.setup)
    names = BENCH_FITTED
    x0 = np.array([to_coord(n, getattr(base, n)) for n in names])

    def objective(x: np.ndarray) -> float:
        sim = replay.statistics(with_coords(base, names, x), with_ttft)
        r = np.log([max(sim[k], 1e-9) for k in keys]) - log_measured
        return float(r @ r) + PRIOR_WEIGHT ** 2 * float((x - x0) @ (x - x0))

    constants = with_coords(base, names, nelder_mead(objective, x0))

    def errors(c: Constants | None) -> dict:
        sim = replay.statistics(c or base, with_ttft)
        e = np.array([abs(sim[k] / measured[k] - 1.0) * 100.0 for k in keys])
        return residual_summary(e, keys) | {"predicted": {k: sim[k] for k in keys}}

    doc = {
        "method": "replay of the benchmark's requests in the simulator (chunked prefill), Nelder-Mead on the "
                  "squared log-ratios of " + ", ".join(keys) + "; fitted " + ", ".join(names),
        "observations": len(keys),
        "requests": int(len(bench.input_lens)), "failed_requests": bench.failed,
        "request_rate": "inf" if not math.isfinite(bench.request_rate) else bench.request_rate,
        "max_concurrency": bench.max_concurrency,
        "measured": measured,
        "residuals": errors(constants),
        "catalog_residuals": errors(None),
    }
    if bench.closed_loop:
        doc["note"] = (f"max_concurrency {bench.max_concurrency} < {len(bench.input_lens)} requests: TTFT is not "
                       f"fitted (the benchmark queued requests in the client)")
    return Fit(constants, names, doc)


# ---------------------------------------------------------------------------------------------------------
# The command's entry
# ---------------------------------------------------------------------------------------------------------
def calibrate(target: CalibrationTarget, text: str, source: str) -> dict:
    """Fit a profile from a steps CSV or a vllm bench JSON (told apart by their first character) and return the
    profile document `--out` writes. CalibrationError / SetupError on input that cannot be used."""
    setup = target_setup(target)
    is_json = text.lstrip().removeprefix("\ufeff")[:1] in ("{", "[")
    fit = fit_bench(target, read_vllm_bench(text)) if is_json else fit_steps(setup, read_steps_csv(text))
    profile = Profile(setup.gpu.key, setup.model.key, setup.quantization, target.tp, fit.constants)
    catalog = default_constants(setup)
    info = {"source": Path(source).name, "kind": "vllm_bench_serve" if is_json else "steps_csv",
            "fitted": list(fit.fitted), "catalog_constants": asdict(catalog)} | fit.doc
    return profile_document(profile, info)
