"""The dashboard's form under issue #35's defaults: what a blank field stands for, and the landing page's own
max_model_len (the seed's 8192) shown in its field without unfolding "Advanced"."""

from __future__ import annotations

from app.web.page_scenario import PAGE_DEFAULTS, form_defaults
from app.web.present import build_form


def _fields(form) -> dict:
    return {f.name: f for _, group in form.groups for f in group} | {f.name: f for f in form.advanced}


def test_the_landing_pages_own_max_model_len_leaves_advanced_folded():
    """The landing page's form holds max_model_len 8192 (its canonical URL carries it, as the GPU is named there);
    that is the page's default, not a setting of the user's, so "Advanced" stays folded. Anywhere else a
    max_model_len given, or a setting on the page's GPU with another model, unfolds it."""
    landing = {**PAGE_DEFAULTS, "max_model_len": "8192", "schedulers": ["fcfs", "chunked"]}
    form = build_form(landing, {}, page_defaults=form_defaults(landing))
    assert _fields(form)["max_model_len"].value == "8192" and not form.advanced_open
    for other in ({**landing, "hardware": "h100"}, {**landing, "model": "qwen2.5-0.5b"},
                  {**landing, "max_model_len": "4096"}):
        assert build_form(other, {}, page_defaults=form_defaults(other)).advanced_open, other


def test_blank_fields_name_the_engines_defaults_for_the_gpu_and_model():
    """quantization auto lists the format it runs (the checkpoint's, as the GPU takes it); max_model_len's
    placeholder names the model's context; token budget and max sequences name vLLM's for the GPU."""
    fields = _fields(build_form({"hardware": "rtx3050", "schedulers": ["chunked"]}, {}, page_defaults={}))
    assert fields["quantization"].value == "auto" and ("auto", "checkpoint default: fp16") in fields["quantization"].options
    assert fields["max_model_len"].placeholder == "131072 (model context)"  # llama-3.2-1b, the rtx3050's model
    assert fields["token_budget"].placeholder == "2048 (vllm default)"
    assert fields["max_seqs"].placeholder == "256 (vllm default)"
    mixed = _fields(build_form({"hardware": "rtx3050", "schedulers": ["fcfs", "chunked"]}, {}, page_defaults={}))
    # the engine's number first: the box is narrow, and fcfs's budget is max_model_len, not vLLM's
    assert mixed["token_budget"].placeholder == "chunked: 2048 (vllm default) · fcfs: max model length"
    fields = _fields(build_form({"hardware": "h100", "model": "gpt-oss-120b", "schedulers": ["chunked"]}, {},
                                page_defaults={}))
    assert ("auto", "checkpoint default: mxfp4 as int4") in fields["quantization"].options  # Marlin's weight-only path
    assert fields["token_budget"].placeholder == "8192 (vllm default)"
    assert fields["max_seqs"].placeholder == "1024 (vllm default)"
    fields = _fields(build_form({"hardware": "b200", "model": "gpt-oss-120b"}, {}, page_defaults={}))
    assert ("auto", "checkpoint default: mxfp4 as fp4") in fields["quantization"].options
