"""The model's own error bars on the web (`model_uncertainty=1`): each scheduler's run replayed under the
ensemble of step-time models (sim_core.studies.model_error), its `model_ci`, and a warning for each pair of
schedulers whose order a metric cannot settle within the model's error. Cached like the runs themselves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_core.studies import model_error

from .cache import ENSEMBLE_CACHE_BYTES
from .inputs import WebRequest
from .service import SIM_SLOTS, SIM_WAIT_S, SingleFlightLRU, slots_busy, upload_text

_ensembles = SingleFlightLRU(max_bytes=ENSEMBLE_CACHE_BYTES, maxsize=16)


@dataclass(frozen=True)
class ModelIntervals:
    intervals: dict[str, dict]  # scheduler -> model_ci ([low, high] beside each numeric metric)
    factors: list[float]  # the members' step-time factors
    level: float
    flips: list[str]  # "a and b swap places on <metric> within the model's error (...)"

    def warnings_for(self, scheduler: str) -> list[str]:
        return model_error.flips_about(self.flips, scheduler)


def model_intervals(req: WebRequest, cancel: np.ndarray | None = None) -> ModelIntervals:
    """Every scheduler's ensemble over the request's first seed (the requests made once per scheduler)."""
    ensembles = {name: _ensembles.get_or_compute(f"{req.run_key(name)}&model_ensemble=1",
                                                 lambda name=name: _ensemble(req, name, cancel))
                 for name in req.schedulers}
    first = next(iter(ensembles.values()))
    return ModelIntervals({n: e.interval for n, e in ensembles.items()}, [float(f) for f in first.factors],
                          first.level, model_error.order_flips(ensembles) if len(ensembles) > 1 else [])


def _ensemble(req: WebRequest, name: str, cancel: np.ndarray | None) -> model_error.Ensemble:
    if not SIM_SLOTS.acquire(timeout=SIM_WAIT_S):
        raise slots_busy()
    try:
        return model_error.ensemble(req.for_scheduler(name), trace_text=upload_text(req), cancel=cancel)
    finally:
        SIM_SLOTS.release()
