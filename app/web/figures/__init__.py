"""The dashboard's figures, one module each in this package, found by themselves: a module that defines
`FIGURE = Figure(...)` is registered. The results page lists their cards in `order`, `/embed/<name>` shows one
alone, the cards carry their export buttons, and tests loop over `all_figures()`; so a new figure is its module
(and its test), nothing else.

A figure's `build(results)` gets the runs a page shows (`Results`: the request, one RunView per scheduler, the
comparison's time span) and returns what its card draws: a plotly figure (a dict of data and layout), drawn by the
generic card (templates/_figure_card.html, element ids card-<name> and plot-<name>), or, for a figure with its own
`template`, whatever that template reads as `card.data`. None: nothing to draw for these runs (no card).

What a figure needs of a run beyond what the RunView keeps, it takes with `keep(result)`: called on each run as it
is simulated (a Result holds tens of MB and is not kept), its answer is cached with the run's view as
`view.kept[name]`. Faces read results through sim_core.views, never the engine's own columns.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import present
from ..inputs import WebRequest
from ..runview import RunView


@dataclass
class Results:
    """The runs a results page (or an embed) shows, which every figure builds from."""

    req: WebRequest
    views: list[RunView] = field(default_factory=list)  # the first seed's run per scheduler shown
    means: list[RunView] = field(default_factory=list)  # the same, their metrics averaged over the seeds
    ci95: list[dict] = field(default_factory=list)  # per scheduler, the metrics' 95% intervals (one seed: empty)
    span: list[float] | None = None  # [0, end] of the whole comparison: every time axis spans it
    # With model_uncertainty: per scheduler, the metrics' model intervals (model_ci: [low, high] beside each metric,
    # the ensemble's 90% range; app/web/model_interval.py); empty otherwise.
    model_ci: list[dict] = field(default_factory=list)

    @property
    def query(self) -> str:
        return self.req.query()

    @property
    def cluster(self) -> bool:
        """Runs of several engines (replicas or prefill/decode pools)."""
        return bool(self.views) and self.views[0].cluster is not None


def always(results: Results) -> bool:
    return True


@dataclass(frozen=True)
class Figure:
    name: str  # in URLs and ids: /embed/<name>, card-<name>, plot-<name>
    title: str  # the card's heading
    # The card's one-line explanation under its title; a function (results, data) -> text where it depends on them.
    explain: str | Callable[[Results, Any], str]
    build: Callable[[Results], Any]  # results -> what the card draws (see the module's doc); None: no card
    order: int  # place on the results page, top to bottom
    embeds: bool = True  # /embed/<name> shows it alone, and its card links there
    cursor: bool = False  # a time axis the KV player's cursor moves over
    template: str = "_figure_card.html"  # its card; the generic one draws the plotly figure `build` returns
    shown: Callable[[Results], bool] = always  # whether the results page has its card for these runs
    keep: Callable[[Any], Any] | None = None  # Result -> what it keeps of each run (view.kept[name])
    simulates: bool = True  # False: built from the request alone (its embed simulates nothing)
    # The request an embed of it draws, from the embed's (None: the same); may raise ScenarioError.
    embed_request: Callable[[WebRequest], WebRequest] | None = None

    def card(self, results: Results) -> Card:
        data = self.build(results)
        text = self.explain(results, data) if callable(self.explain) else self.explain
        if data is not None and results.views:
            attach_export(data, export_info(results, self.title), results)
        return Card(self, data, text)


@dataclass(frozen=True)
class Card:
    """One figure drawn for one set of results."""

    figure: Figure
    data: Any
    explain: str


def export_info(results: Results, title: str, only: str | None = None) -> dict:
    """What an exported PNG or SVG of a figure carries beside the plot (static/js/export.js draws it in): its title,
    the scenario's caption with its seeds and settings, and the runs' warnings (saturated, extrapolated); with
    `only`, one scheduler's panel: its caption names that scheduler and its footer has that run's warnings alone."""
    views = [v for v in results.views if only is None or v.scheduler == only] or results.views
    shown = replace(results.req, schedulers=tuple(v.scheduler for v in views) or results.req.schedulers)
    return {"title": title, "caption": present.export_caption(shown),
            "warnings": [present.short_warning(w) for w in present.warnings_text(views)]}


def attach_export(data: Any, info: dict, results: Results | None = None) -> None:
    """Put `info` as "export" into every drawing in a card's data: a plotly figure (data and layout) or the KV view's
    spec (grid and states), wherever it sits (a Gantt's per-scheduler panels: titled with their scheduler, and
    with `results`, captioned and warned for that scheduler's run alone)."""
    if isinstance(data, list):
        for item in data:
            attach_export(item, info, results)
    elif isinstance(data, dict):
        if ("data" in data and "layout" in data) or ("grid" in data and "states" in data):
            data["export"] = info
            return
        for key, value in data.items():
            panel = key == "figure" and isinstance(data.get("name"), str)
            if panel and results is not None and any(v.scheduler == data["name"] for v in results.views):
                attach_export(value, export_info(results, f"{info['title']} — {data['name']}", data["name"]))
            else:
                attach_export(value, {**info, "title": f"{info['title']} — {data['name']}"} if panel else info,
                              results)


@functools.cache
def _registry() -> dict[str, Figure]:
    found: list[Figure] = []
    for module in pkgutil.iter_modules(__path__):
        figure = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FIGURE", None)
        if isinstance(figure, Figure):
            found.append(figure)
    names = [f.name for f in found]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise RuntimeError(f"two figure modules declare the figure name(s) {', '.join(duplicated)}")
    return {f.name: f for f in sorted(found, key=lambda f: (f.order, f.name))}


def all_figures() -> tuple[Figure, ...]:
    """Every registered figure, in page order."""
    return tuple(_registry().values())


def get(name: str) -> Figure | None:
    return _registry().get(name)


def embeddable() -> tuple[str, ...]:
    return tuple(f.name for f in all_figures() if f.embeds)


def cards(results: Results) -> list[Card]:
    """The results page's cards for these runs, in order."""
    out = []
    for figure in all_figures():
        if figure.shown(results):
            card = figure.card(results)
            if card.data is not None:
                out.append(card)
    return out


def keep(result) -> dict[str, Any]:
    """What each figure keeps of a run (Figure.keep), by figure name: cached with the run's view."""
    return {f.name: f.keep(result) for f in all_figures() if f.keep is not None}
