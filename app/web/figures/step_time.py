"""The "Step time" figure: the cost model's step time against the tokens a step batches, for a prefill-only, a
decode-only and a mixed (chunked-prefill) step on the run's deployment, each a stack of the step's components
(sim_core.step_time.step_time_curves), with the GEMMs' ridge point marked. Built as plotly JSON like every figure; it
depends on the deployment only, not on the schedulers compared."""

from __future__ import annotations

from sim_core import lora
from sim_core.catalog import SetupError
from sim_core.runner import resolve
from sim_core.spec_decode import decode_step_parts_ms, spec_tokens
from sim_core.step_time import CURVE_KINDS, StepShape, step_time_curves
from sim_core.views import COST_COMPONENTS as COMPONENTS

from ..charts import SERIES, _ax, _axis, _columns, _layout, _log10, _ref
from . import Figure, Results

# component -> (label, colour): the GPU's kernels in colours no scheduler has (charts.SERIES), the CPU's time grey.
COMPONENT_STYLE = {
    "linear": ("GEMMs", SERIES["gemm"]),
    "attention": ("attention", SERIES["attention"]),
    "elementwise": ("norms, rotary, activation", SERIES["elementwise"]),
    "lm_head": ("lm head + sampler", SERIES["lm_head"]),
    "communication": ("TP all-reduce", SERIES["communication"]),
    "overhead": ("CPU overhead", SERIES["overhead"]),
}
assert tuple(COMPONENT_STYLE) == COMPONENTS
# The mechanisms' bands on the decode panel (mechanism_parts_ms), stacked on the kernels'.
EXTRA_STYLE = {
    "verify": ("verifying drafts", "#0b7285"),
    "draft": ("proposer (drafting)", "#7048e8"),
    "lora": ("LoRA kernels", "#d9480f"),
}
PANEL_TITLES = {"prefill": "prefill only", "decode": "decode only", "mixed": "mixed (chunked prefill)"}
assert tuple(PANEL_TITLES) == tuple(CURVE_KINDS)


def typical_decode_context(metrics: dict) -> int:
    """A decoding sequence's context in this run: the mean prompt plus half the mean output."""
    n = metrics.get("num_requests") or 0
    if not n:
        return 1
    prompt = ((metrics.get("prefill_tokens") or 0) + (metrics.get("prefill_tokens_saved") or 0)) / n
    return max(1, round(prompt + (metrics.get("decode_tokens") or 0) / n / 2))


def steptime_context(scenario, view) -> dict | None:
    """The figure and its caption for a run's deployment (`view`: the first scheduler's RunView, for the token
    budget and the typical context); None for a deployment the step model cannot set up on its own (the run's
    larger budget or batch left less room than the panel's defaults would: nothing to draw then)."""
    ctx = typical_decode_context(view.metrics)
    shape = StepShape(hardware=scenario.hardware, model=scenario.model, quantization=scenario.quantization,
                      tp=scenario.tp, kv_cache_dtype=scenario.kv_cache_dtype,
                      hardware_profile=scenario.hardware_profile, async_scheduling=scenario.async_scheduling,
                      ep=scenario.ep, attention_dp=scenario.attention_dp, moe_imbalance=scenario.moe_imbalance,
                      engine=scenario.engine,
                      decode_seqs=1, decode_context=ctx)
    try:
        curves = step_time_curves(shape, max(64, int(view.setup["token_budget"])))
    except SetupError:
        return None
    curves["decode_extras_ms"] = mechanism_parts_ms(scenario, curves["tokens"], ctx)
    return {"figure": steptime_figure(curves), "decode_context": ctx, "ridge_tokens": curves["ridge_tokens"]}


def mechanism_parts_ms(scenario, tokens: list[int], context: int) -> dict[str, list[float]]:
    """The decode panel's extra bands for the run's mechanisms, per batch size: speculative decoding's
    verification (the drafts' extra query tokens) and proposer, and the LoRA kernels; {} when neither is on."""
    if spec_tokens(scenario) == 0 and scenario.lora_adapters == 0:
        return {}
    try:
        resolved = resolve(scenario)
    except (SetupError, ValueError):
        return {}
    parts = decode_step_parts_ms(scenario, resolved, tokens, context)
    adapters = lora.decode_kernel_ms(scenario, resolved, tokens)
    return {**parts, **({"lora": adapters} if adapters else {})}


def steptime_figure(curves: dict) -> dict:
    """Three panels side by side (prefill, decode, mixed) sharing a log axis of batch tokens; in each, the
    components stacked (their top is the step time) and a dashed line at the ridge point."""
    layout = _layout(360, hovermode="x unified", margin={"l": 60, "r": 20, "t": 64, "b": 56})
    tokens = curves["tokens"]
    data, shapes, notes = [], [], []
    for k, (domain, kind) in enumerate(zip(_columns(3, 0.07), CURVE_KINDS, strict=True)):
        # Decades only (1, 10, 100, ...): plotly's 2s and 5s between them run into each other at a slide's size.
        layout[_ax("x", k)] = _axis(f"batch tokens: {PANEL_TITLES[kind]}", domain=domain, anchor=_ref("y", k),
                                    type="log", range=[0, _log10(max(tokens))], dtick=1,
                                    minor={"showgrid": True, "gridcolor": "#f3f4f6", "dtick": "D1"})
        layout[_ax("y", k)] = _axis("step time (ms)" if k == 0 else "", anchor=_ref("x", k), rangemode="tozero")
        parts = curves["kinds"][kind]["components_ms"]
        # Batches whose KV would not fit are left out (a stack would drop to zero at a gap), and the edge named.
        drawn = [i for i, y in enumerate(curves["kinds"][kind]["step_ms"]) if y is not None]
        if drawn and len(drawn) < len(tokens):
            notes.append({"xref": _ref("x", k), "yref": f"{_ref('y', k)} domain", "x": _log10(tokens[drawn[-1]]),
                          "y": 0.5, "xanchor": "left", "showarrow": False, "textangle": -90,
                          "text": "KV pool full beyond", "font": {"size": 10, "color": SERIES["reference"]}})
        for name, (label, fill) in COMPONENT_STYLE.items():
            data.append({"type": "scatter", "mode": "lines", "stackgroup": f"s{k}", "x": [tokens[i] for i in drawn],
                         "y": [round(parts[name][i], 4) for i in drawn],
                         "name": label, "legendgroup": name, "showlegend": k == 0,
                         "line": {"color": fill, "width": 0.5}, "fillcolor": fill,
                         "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                         "hovertemplate": f"{label}: %{{y:.2f}} ms<extra></extra>"})
        extras = curves.get("decode_extras_ms", {}) if kind == "decode" else {}
        for name, (label, fill) in EXTRA_STYLE.items():
            if name in extras:
                data.append({"type": "scatter", "mode": "lines", "stackgroup": f"s{k}",
                             "x": [tokens[i] for i in drawn], "y": [round(extras[name][i], 4) for i in drawn],
                             "name": label, "legendgroup": name, "line": {"color": fill, "width": 0.5},
                             "fillcolor": fill, "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                             "hovertemplate": f"{label}: %{{y:.2f}} ms<extra></extra>"})
        ridge = curves["ridge_tokens"]
        if 1 <= ridge <= max(tokens):
            shapes.append({"type": "line", "xref": _ref("x", k), "yref": f"{_ref('y', k)} domain", "x0": ridge,
                           "x1": ridge, "y0": 0, "y1": 1, "line": {"color": SERIES["reference"], "width": 1, "dash": "dash"}})
            notes.append({"xref": _ref("x", k), "yref": f"{_ref('y', k)} domain", "x": _log10(ridge), "y": 1,
                          "xanchor": "right", "yanchor": "top", "showarrow": False,
                          "text": f"ridge ≈ {ridge:,.0f}", "font": {"size": 10, "color": SERIES["reference"]}})
    layout["legend"].update(font={"size": 11})
    layout.update(shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}


def _build(results: Results) -> dict | None:
    """The deployment's figure, whichever schedulers (the first one's run gives the token budget and the typical
    context); None where the step model cannot set the deployment up."""
    ctx = steptime_context(results.req.scenario, results.views[0]) if results.views else None
    return ctx["figure"] if ctx else None


def _explain(results: Results, figure: dict) -> str:
    context = typical_decode_context(results.views[0].metrics) if results.views else 1
    return ("What the cost model charges one engine step on this deployment, against the tokens it batches: a "
            f"prefill chunk alone, decoding sequences alone (each with {context:,} tokens of context, this run's "
            "mean prompt plus half its mean output), and a chunked-prefill step of both, half and half. Each band "
            "is a kernel group; their top is the step time. Left of the dashed ridge point the GEMMs wait on "
            "reading the weights, right of it on arithmetic. Decode batches whose KV would not fit the pool are "
            "not drawn." + _mechanisms_explained(results))


def _mechanisms_explained(results: Results) -> str:
    s = results.req.scenario
    k = spec_tokens(s)
    parts = ([f"verifying {k} draft tokens per sequence and the {s.spec_method} proposer's passes"] if k else []) + \
        ([f"the LoRA kernels (up to {s.max_loras} adapters a step)"] if s.lora_adapters else [])
    return (" On the decode panel, stacked on top: " + " and ".join(parts) + ", as the engine charges them "
            "(adapter loads are not drawn: they depend on the run).") if parts else ""


FIGURE = Figure(name="step-time", title="Step time", order=60, build=_build, explain=_explain)
