"""The scenario form, built from the Scenario model (so a new scenario field appears in its mechanism's section of
"Advanced" without touching a template): its groups, labels, placeholders and help texts. Advanced is laid out by
sim_core.field_groups' MECHANISMS: a section per mechanism, with its switch, explanation and docs link."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES, Scenario
from sim_core.catalog import weight_format
from sim_core.engines import DEFAULT_ENGINE, ENGINES, SCENARIO_FIELDS, scenario_defaults
from sim_core.field_groups import MECHANISMS, Mechanism
from sim_core.fields import field_info, range_text
from sim_core.gpu import GPU
from sim_core.policies import BY_NAME
from sim_core.scenario import DEFAULT_MAX_REPLICAS

from .inputs import MAX_DURATION_S, web_range_text

# Form layout: (group title, fields). Scenario fields not named here (bar NOT_IN_FORM's) go to "advanced", in the
# section of their mechanism (sim_core.field_groups).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Deployment", ("hardware", "model", "quantization", "tp")),
    ("Workload", ("workload", "rate", "duration", "burstiness", "num_requests", "seed", "seeds")),
    ("Service-level objectives", ("slo_ttft_ms", "slo_tpot_ms")),
)
ADVANCED_FIRST = ("token_budget", "max_seqs", "block_size", "gpu_memory_utilization", "preemption", "kv_blocks",
                  "max_model_len", "swap_space_gb")
NOT_IN_FORM = ("scheduler", "trace", "model_file")
LABELS = {
    "hardware": ("GPU", ""), "model": ("Model", ""), "quantization": ("Weights", ""),
    "tp": ("Tensor parallel", "GPUs"), "workload": ("Workload preset", ""), "rate": ("Arrival rate", "req/s"),
    "duration": ("Duration", "s"), "burstiness": ("Burstiness (CV)", ""), "num_requests": ("Requests", ""),
    "seed": ("Seed", ""), "seeds": ("Seeds", ""), "slo_ttft_ms": ("TTFT target", "ms"), "slo_tpot_ms": ("TPOT target", "ms"),
    "token_budget": ("Token budget", "tokens/step"), "max_seqs": ("Max sequences", "per step"),
    "block_size": ("Block size", "tokens"), "hybrid_blocks": ("Hybrid-model blocks (vLLM's rule)", ""),
    "replay": ("Trace replay", ""), "gpu_memory_utilization": ("Memory utilisation", "fraction"),
    "preemption": ("Preemption", ""), "kv_blocks": ("KV blocks", "blocks"),
    "max_model_len": ("Max model length", "tokens"), "swap_space_gb": ("Swap space", "GB / GPU"),
    "transport_overhead_ms": ("Transport overhead", "ms"), "controller_headroom": ("Controller headroom", ""),
    "aging_rate": ("Aging rate", ""), "degrade_factor": ("Degrade factor", "x"), "admission": ("Admission", ""),
    "adaptive_budget": ("Adaptive budget", ""),
    "kv_cache_dtype": ("KV cache format", ""),
    "ep": ("Expert parallel", "GPUs"), "attention_dp": ("Attention data-parallel", ""),
    "moe_imbalance": ("Expert load imbalance", "x mean"),
    "kv_offload_cpu_gb": ("KV offload: host memory", "GB / GPU"), "kv_offload_disk_gb": ("KV offload: disk", "GB / GPU"),
    "kv_offload_policy": ("KV offload policy", ""), "kv_offload_overlap": ("KV offload: layer overlap", ""),
    "kv_offload_host_gbs": ("KV offload: host link", "GB/s"), "kv_offload_disk_read_gbs": ("KV offload: disk read", "GB/s"),
    "kv_offload_disk_write_gbs": ("KV offload: disk write", "GB/s"),
    "rate_schedule": ("Rate schedule", ""), "autoscaler": ("Autoscaler", ""),
    "min_replicas": ("Min replicas", ""), "max_replicas": ("Max replicas", ""),
    "provision_delay_s": ("Provisioning delay", "s"), "autoscale_interval_s": ("Autoscaler interval", "s"),
    "autoscale_metric": ("Autoscaler metric", ""), "autoscale_target": ("Autoscaler target", "per replica"),
    "autoscale_cooldown_s": ("Scale-down cooldown", "s"), "autoscale_replica_rate": ("Replica rate", "req/s"),
    "spec_method": ("Speculative decoding", ""), "spec_tokens": ("Draft tokens", "per step"),
    "spec_acceptance": ("Draft acceptance rate", "per position"), "spec_draft_model": ("Draft model", ""),
    "spec_disable_above": ("No drafts above", "running requests"), "spec_k_policy": ("Draft count policy", ""),
    "lora_adapters": ("LoRA adapters", ""), "lora_rank": ("LoRA rank", ""), "lora_targets": ("LoRA targets", ""),
    "lora_zipf": ("Adapter popularity (Zipf)", ""), "max_loras": ("Adapters per batch", "max_loras"),
    "max_cpu_loras": ("Adapters in host memory", "max_cpu_loras"), "lora_order": ("Adapter order", ""),
    "lora_aging_s": ("Adapter-order aging", "s"), "lora_disk_load_s": ("Adapter load from disk", "s"),
    "energy": ("Energy and power", ""), "node_power_w": ("Host power", "W / GPU"), "pue": ("PUE", ""),
    "power_cap_w": ("Power cap", "W / GPU"), "energy_price_per_kwh": ("Electricity price", "$/kWh"),
    "grid_gco2_per_kwh": ("Grid carbon intensity", "gCO2/kWh"), "hardware_profile": ("Calibrated profile", ""),
    "replicas": ("Replicas", ""), "router": ("Router", ""), "router_staleness_ms": ("Router staleness", "ms"),
    "router_cache_weight": ("Router cache weight", ""), "prefill_replicas": ("Prefill engines", ""),
    "decode_replicas": ("Decode engines", ""), "prefill_hardware": ("Prefill GPU", ""),
    "decode_hardware": ("Decode GPU", ""), "prefill_tp": ("Prefill tensor parallel", "GPUs"),
    "decode_tp": ("Decode tensor parallel", "GPUs"), "prefill_ep": ("Prefill expert parallel", "GPUs"),
    "decode_ep": ("Decode expert parallel", "GPUs"), "kv_link": ("KV transfer link", ""),
    "scale_out_link": ("Link between nodes", ""), "trace_format": ("Trace format", ""),
    "trace_block_tokens": ("Trace block size", "tokens"), "concurrency": ("Concurrent users", ""),
    "think_time_s": ("Think time", "s"), "concurrency_mode": ("Closed-loop mode", ""),
    "isl": ("Input length", "tokens"), "osl": ("Output length", "tokens"), "length_range": ("Length range", "ratio"),
    "length_range_mode": ("Length range mode", ""), "model_uncertainty": ("Model interval", ""),
    "watermark": ("KV watermark", "fraction"), "async_scheduling": ("Async scheduling", ""),
    "engine": ("Engine", ""), "prefix_cache": ("Prefix cache", ""),
    "system_prompt_tokens": ("System prompt", "tokens"), "mlfq_quantum": ("MLFQ quantum", "iterations"),
    "mlfq_levels": ("MLFQ levels", ""),
}


@dataclass
class FormField:
    name: str
    label: str
    unit: str
    kind: str  # "select" | "text"
    value: str = ""
    placeholder: str = ""
    options: list[tuple[str, str]] = field(default_factory=list)
    help: str = ""
    error: str = ""
    inputmode: str = "decimal"
    option_badges: dict[str, tuple] = field(default_factory=dict)  # the model picker's: value -> its Badges


@dataclass
class Section:
    """One mechanism's part of Advanced: its fields shown while it is on (or, without a switch, while open)."""

    key: str
    title: str
    explanation: str
    doc_href: str
    fields: list[FormField]
    switch: str | None  # the field that turns the mechanism on; None: always on (the section only folds)
    on_value: str | None  # what switching it on sets `switch` to (None: the user types it)
    on: bool  # a field of it is set (or refused): it is on and shown


@dataclass
class Form:
    groups: list[tuple[str, list[FormField]]]
    advanced: list[FormField]
    advanced_open: bool
    sections: list[Section]
    schedulers: list[dict]
    errors: dict[str, str]
    other_errors: list[tuple[str, str]]


def _field_help(name: str) -> str:
    """A field's tooltip: its description and what it accepts (on the web)."""
    allowed = web_range_text(name) or range_text(name)
    return field_info(name).description + (f": {allowed}" if allowed else "")


def build_form(values: dict[str, Any], errors: dict[str, str], *, page_defaults: dict[str, str]) -> Form:
    """The scenario form showing `values` (raw strings as the user gave them; blank = default)."""
    workload = str(values.get("workload") or page_defaults.get("workload") or "chat")
    preset = PRESETS.get(workload) or PRESETS["chat"]
    selected = _selected_schedulers(values)
    placeholders = _placeholders(values, page_defaults, preset, selected)
    fields = {name: _form_field(name, values, errors, page_defaults, preset, placeholders)
              for name in Scenario.model_fields if name not in NOT_IN_FORM}
    groups = [(title, [fields[n] for n in names if n in fields]) for title, names in GROUPS]
    placed = {n for _, names in GROUPS for n in names}
    sections = [_section(m, fields, placed, values, page_defaults) for m in MECHANISMS]
    sections = [s for s in sections if s.fields]
    advanced = [f for s in sections for f in s.fields]
    form_names = set(fields) | {"schedulers", "upload", "rate_min", "rate_max", "rate_step", "trace", "model_file"}
    return Form(
        groups=groups, advanced=advanced, sections=sections, advanced_open=any(s.on for s in sections),
        schedulers=[{"name": s, "checked": s in selected, "summary": BY_NAME[s].summary if s in BY_NAME else ""}
                    for s in SCHEDULER_NAMES],
        errors=errors,
        other_errors=[(k, v) for k, v in errors.items() if k not in form_names],
    )


def _section(m: Mechanism, fields: dict[str, FormField], placed: set[str], values: dict[str, Any],
             page_defaults: dict[str, str]) -> Section:
    """A mechanism's section: its fields the main groups do not show (the engine's first ADVANCED_FIRST)."""
    names = [n for n in m.fields if n in fields and n not in placed]
    names = [n for n in ADVANCED_FIRST if n in names] + [n for n in names if n not in ADVANCED_FIRST]
    shown = [fields[n] for n in names]
    on = any(_set_by_user(values, f.name, page_defaults) or f.error for f in shown)
    doc_file, _, anchor = m.doc.partition("#")
    return Section(m.key, m.title, m.explanation, f"/guide/{doc_file}#{anchor}", shown, m.switch, m.on_value, on)


def _set_by_user(values: dict[str, Any], name: str, page_defaults: dict[str, str]) -> bool:
    """Whether a field holds a value other than the page's own default (the landing page's max_model_len)."""
    value = values.get(name)
    return value not in (None, "") and _fmt(value) != _fmt(page_defaults.get(name, ""))


def _budget_text(scheduler: str, engine: str, gpu: GPU | None) -> str:
    """A scheduler's token budget left blank: the engine's for the GPU, the scheduler's own, or max_model_len."""
    sched = BY_NAME[scheduler]
    profile = ENGINES.get(engine, ENGINES[DEFAULT_ENGINE])
    budget = profile.budgets(gpu, sched.chunked_prefill)[0] if gpu else profile.token_budget
    if budget:
        return f"{budget} ({engine} default)"
    return str(sched.default_token_budget) if sched.default_token_budget else "max model length"


def _budgets_text(selected: list[str], engine: str, gpu: GPU | None) -> str:
    """The token budget left blank: one value when every selected scheduler takes the same, else each one's, the
    engine's number first (a narrow box shows the start of it), those taking max_model_len last."""
    texts = {s: _budget_text(s, engine, gpu) for s in selected if s in BY_NAME}
    if not texts:
        return _budget_text("chunked", engine, gpu)
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    ordered = sorted(texts.items(), key=lambda item: not item[1][0].isdigit())
    return " · ".join(f"{s}: {t}" for s, t in ordered)


def _placeholders(values: dict[str, Any], page_defaults: dict[str, str], preset, selected: list[str]) -> dict:
    """What an empty field shows: the default it stands for (the preset's, the GPU's, the scheduler's)."""
    hardware = str(values.get("hardware") or page_defaults.get("hardware") or "a100")
    gpu = GPUS.get(hardware)
    engine = str(values.get("engine") or page_defaults.get("engine") or DEFAULT_ENGINE)
    own = scenario_defaults(engine)  # what an engine field left blank takes
    profile = ENGINES.get(engine, ENGINES[DEFAULT_ENGINE])
    seqs = profile.budgets(gpu)[1] if gpu else profile.max_seqs
    model = None if values.get("model_file") else MODELS.get(str(values.get("model") or (gpu and gpu.default_model)))
    return {
        "quantization:auto": _auto_weights_text(model, gpu),
        **{f"engine:{k}": f"{engine}: {_fmt(v)}" for k, v in own.items()},
        "max_seqs": f"{seqs} ({engine} default)",
        "model": f"GPU default ({gpu.default_model})" if gpu else "GPU default",
        "rate": f"{preset.rate:g} ({preset.name} default)",
        "burstiness": f"{preset.burstiness:g} ({preset.name} default)",
        "slo_ttft_ms": f"{preset.slo_ttft_ms:g} ({preset.name} default)",
        "slo_tpot_ms": f"{preset.slo_tpot_ms:g} ({preset.name} default)",
        "num_requests": "rate × duration",
        "token_budget": _budgets_text(selected, engine, gpu),
        "kv_blocks": "all that fit in memory",
        "max_model_len": f"{model.max_context} (model context)" if model else "the model's context",
        "hardware_profile": "the catalog's constants (paste a profile's scenario_field)",
        "duration": f"at most {MAX_DURATION_S:g} on the web",
        "rate_schedule": "e.g. 0:2,120:12 (from 0 s 2 req/s, from 120 s 12)",
        "max_replicas": f"{DEFAULT_MAX_REPLICAS}, or replicas if more",
        "provision_delay_s": "weight load + engine start-up",
    }


def _auto_weights_text(model, gpu: GPU | None) -> str:
    """quantization's "auto" as the form lists it ("Weights: checkpoint default"): the format it runs (the
    checkpoint's, as the GPU takes it)."""
    if model is None or gpu is None:
        return "checkpoint default"
    ckpt, run = model.checkpoint_format, weight_format("auto", model, gpu).quantization
    return f"checkpoint default: {run}" if ckpt in ("", run) else f"checkpoint default: {ckpt} as {run}"


def _form_field(name: str, values: dict[str, Any], errors: dict[str, str], page_defaults: dict[str, str], preset,
                placeholders: dict) -> FormField:
    """One scenario field's input: a select for the catalogue and the choices, else a text box."""
    info = field_info(name)
    label, unit = LABELS.get(name, (name.replace("_", " ").capitalize(), ""))
    raw = values.get(name)
    value = "" if raw is None else str(raw)
    choices = [str(c) for c in info.choices] if info.choices else (["false", "true"] if info.is_bool else [])
    f = FormField(name, label, unit, "text", value, help=_field_help(name), error=errors.get(name, ""))
    default = page_defaults.get(name, info.default)
    if name == "hardware":
        f.kind, f.options = "select", [(k, f"{g.name} · {g.mem_gib:g} GB") for k, g in GPUS.items()]
    elif name == "model":
        f.kind = "select"
        f.options = [("", placeholders["model"])] + [(k, model_label(k)) for k in MODELS]
        f.option_badges = {k: m.badges for k, m in MODELS.items() if m.badges}
    elif name == "workload":
        f.kind, f.options = "select", [(k, k) for k in PRESETS]
        f.help = preset.summary
    elif choices:
        f.kind = "select"
        f.options = [(c, placeholders.get(f"{name}:{c}", c)) for c in choices]
        if info.optional:
            f.options.insert(0, ("", "default"))
        elif name in SCENARIO_FIELDS:  # left blank, the engine's default applies (sim_core/engines.py)
            f.options.insert(0, ("", placeholders.get(f"engine:{name}", "engine default")))
    else:
        # Bounded fields are numbers; the others (the hardware profile's string) take any text.
        numeric = info.lo is not None or info.hi is not None
        f.inputmode = "numeric" if info.is_int else ("decimal" if numeric else "text")
        f.placeholder = placeholders.get(name, "" if default is None else _fmt(default))
    if f.kind == "select" and not f.value and default is not None and name not in SCENARIO_FIELDS:
        f.value = _fmt(default)
    return f


def model_label(key: str) -> str:
    """A catalogue model as the picker lists it: its name, size and badges (the closed select shows them too)."""
    m = MODELS[key]
    text = f"{key} ({m.published_params_b:g}B)" if m.published_params_b else key
    return " · ".join([text, *(b.label for b in m.badges)])


def _selected_schedulers(values: dict[str, Any]) -> list[str]:
    raw = values.get("schedulers") or values.get("scheduler") or []
    items = raw if isinstance(raw, list | tuple) else [raw]
    return [n.strip() for item in items for n in str(item).split(",") if n.strip()]


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
