"""The metrics table: every metric of the catalogue (sim_core.metric_catalog) per scheduler, the best value per
row in bold, means and 95% intervals over several seeds. A table, not a plotly figure: its own card template."""

from __future__ import annotations

from .. import present
from . import Figure, Results


def table(results: Results) -> list:
    seeds = results.req.scenario.seeds > 1
    return present.metrics_table(results.means, results.ci95 if seeds else None, results.model_ci or None)


def _explain(results: Results, rows: list) -> str:
    slo = present.slo_text(results.views[0].metrics) if results.views else "the SLO"
    return ("Tap or click a metric's name to see what it measures. Goodput counts completed requests per second "
            f"that met {slo}; SLO attainment is their share of all requests. Best value per row in bold; on latency "
            "rows only among schedulers that served every request (a latency counts only the requests served), and "
            "a scheduler that rejected or shed some is flagged with its share not served where its value would "
            "have won." + (" Under each value, the step-time model's own error: the 90% range of the metric over an "
                           "ensemble of models spread as the model's validation errors." if results.model_ci else ""))


FIGURE = Figure(name="metrics", title="Metrics", explain=_explain, order=40, build=table,
                template="_figure_metrics.html")
