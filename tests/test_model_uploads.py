"""Issue #22 on the web: every model's badges (one definition, in sim_core) in `sched-sim list`, the API's catalogue and
the dashboard's picker, and a Hugging Face config.json uploaded to the dashboard or the API, kept by content hash
and run by its id (`model_file=<id>`) like an uploaded trace."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from app.web import model_uploads, service
from app.web.store import BlobStore
from sim_core import MODELS
from sim_core.hf_config import model_from_config

CONFIGS = Path(__file__).resolve().parent.parent / "sim_core" / "data" / "hf_configs"
QWEN3_8B = (CONFIGS / "qwen3-8b.json").read_bytes()
SMALL = "schedulers=chunked&hardware=h100&workload=chat&duration=5"


def kinds(key: str) -> set[str]:
    return {b.kind for b in MODELS[key].badges}


# ----- badges -----
def test_each_badge_follows_the_architecture():
    for key, m in MODELS.items():
        k = kinds(key)
        assert ("moe" in k) == (m.experts > 1), key
        assert ("mla" in k) == m.is_mla, key
        assert ("sliding" in k or "chunked" in k) == (m.window_layers > 0), key
        assert ("hybrid" in k) == (m.linear_layers > 0), key
    # What each config says, read by hand: DeepSeek's block-scaled FP8 and gpt-oss's MXFP4 experts.
    assert kinds("deepseek-r1") == {"moe", "mla", "fp8"}
    assert kinds("gpt-oss-120b") == {"moe", "sliding", "mxfp4"}
    assert kinds("llama-4-scout") == {"moe", "chunked"}
    assert kinds("qwen3-next-80b-a3b") == {"moe", "hybrid"}
    assert kinds("gemma-3-27b") == {"sliding"}
    assert kinds("llama-3-8b") == kinds("qwen3-8b") == set()
    moe = next(b for b in MODELS["deepseek-r1"].badges if b.kind == "moe")
    assert moe.label == "MoE 8 of 256" and "3 layers dense" in moe.title


@pytest.mark.parametrize("qc, expected", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"), ({"quant_method": "mxfp4"}, "mxfp4"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"), ({"quant_method": "awq"}, ""),
    ({"quant_method": 7}, ""), ("fp8", ""), (None, ""),
])
def test_the_checkpoint_format_is_read_from_quantization_config_and_never_refuses_one(qc, expected):
    doc = json.loads(QWEN3_8B)
    doc["quantization_config"] = qc
    assert model_from_config(doc).checkpoint_format == expected


@pytest.mark.parametrize("qc, block", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 128), ({"quant_method": "fp8"}, 0),
    ({"quant_method": "fp8", "weight_block_size": [0, 128]}, 0), ({"quant_method": "fp8", "weight_block_size": "128"}, 0),
    ({"quant_method": "fp8", "weight_block_size": [True, True]}, 0), ("fp8", 0), (None, 0),
])
def test_the_fp8_scale_block_is_read_from_quantization_config_and_never_refuses_one(qc, block):
    doc = json.loads(QWEN3_8B)
    doc["quantization_config"] = qc
    assert model_from_config(doc).fp8_weight_block == block


def test_sched_sim_list_shows_the_badges(capsys):
    assert main(["list", "--json"]) == 0
    models = {m["key"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert models["deepseek-r1"]["badges"] == [b.label for b in MODELS["deepseek-r1"].badges]
    assert models["llama-3-8b"]["badges"] == []
    assert main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("gpt-oss-20b"))
    assert all(b.label in line for b in MODELS["gpt-oss-20b"].badges), line


# ----- uploads -----
def upload(client, data: bytes, name: str = "Qwen3-8B.json"):
    return client.post("/api/model-config", files={"config": (name, data, "application/json")})


def test_an_uploaded_config_runs_as_its_bundled_model(client):
    r = upload(client, QWEN3_8B)
    assert r.status_code == 200, r.text
    doc = r.json()
    uid = doc["model_file"]
    assert re.fullmatch(r"[0-9a-f]{16}", uid) and doc["model"] == "Qwen3-8B" and doc["layers"] == 36
    by_file = client.get(f"/api/run?{SMALL}&model_file={uid}").json()
    by_name = client.get(f"/api/run?{SMALL}&model=qwen3-8b").json()
    assert json.dumps(by_file["schedulers"]["chunked"]["metrics"]) == \
        json.dumps(by_name["schedulers"]["chunked"]["metrics"])
    assert by_file["schedulers"]["chunked"]["resolved"]["model"] == "Qwen3-8B"
    # The id, never the server's copy of the file, in what the answer shows and links.
    assert by_file["scenario"]["model_file"] == uid and f"model_file={uid}" in by_file["query"]
    assert Path(model_uploads.get(uid).path).parent.parent.name not in json.dumps(by_file)
    assert upload(client, QWEN3_8B).json()["model_file"] == uid  # the same file, the same id


def test_a_raw_json_body_is_a_config_too(client):
    r = client.post("/api/model-config", content=(CONFIGS / "deepseek-r1.json").read_bytes(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert [b["kind"] for b in r.json()["badges"]] == ["moe", "mla", "fp8"]


def _without(key: str) -> bytes:
    doc = json.loads(QWEN3_8B)
    del doc[key]
    return json.dumps(doc).encode()


@pytest.mark.parametrize("data, needle", [
    (b"not json {", "not valid JSON"),
    (json.dumps({**json.loads(QWEN3_8B), "model_type": "mamba"}).encode(), "model_type: unsupported architecture"),
    (_without("num_attention_heads"), "num_attention_heads: missing"),
    (b"[1, 2]", "expected a JSON object"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b" " * (model_uploads.MAX_CONFIG_BYTES + 1), "larger than"),
])
def test_a_bad_config_gets_a_422_naming_what_is_wrong(client, data, needle):
    r = upload(client, data, "bad.json")
    assert r.status_code == 422, r.text
    assert needle in r.json()["detail"][0]["msg"]
    page = client.post("/upload-model", files={"config": ("bad.json", data, "application/json")},
                       headers={"HX-Request": "true"})
    assert page.status_code == 422 and needle in page.text and 'name="model_file"' not in page.text


def test_an_oversized_body_is_refused_unread(client):
    r = client.post("/api/model-config", content=b"{" * (model_uploads.MAX_CONFIG_BYTES + 1),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("value, needle", [("/etc/hostname", "path on the server"),
                                           ("0123456789abcdef", "not on the server")])
def test_model_file_on_the_web_is_an_upload_id(client, value, needle):
    r = client.get(f"/api/run?{SMALL}&model_file={value}")
    assert r.status_code == 422
    (problem,) = r.json()["detail"]
    assert problem["loc"][-1] == "model_file" and needle in problem["msg"]
    page = client.get(f"/?{SMALL}&model_file={value}")
    assert page.status_code == 422 and needle in page.text


def test_the_page_shows_the_uploaded_model(client):
    uid = upload(client, QWEN3_8B).json()["model_file"]
    status = client.post("/upload-model", files={"config": ("Qwen3-8B.json", QWEN3_8B, "application/json")},
                         headers={"HX-Request": "true"})
    assert status.status_code == 200 and f'name="model_file" value="{uid}"' in status.text
    page = client.get(f"/?{SMALL}&model_file={uid}")
    assert page.status_code == 200
    assert "Simulating <strong>Qwen3-8B</strong>" in page.text and "Qwen3-8B (uploaded config.json)" in page.text
    copies = Path(model_uploads.get(uid).path).parent.parent.name  # the folder of the server's copies
    assert copies not in page.text
    embed = client.get(f"/embed/cdf?{SMALL}&model_file={uid}&caption=1")  # every page parses model_file alike
    assert embed.status_code == 200 and "Qwen3-8B" in embed.text and copies not in embed.text
    picker = client.get(f"/?{SMALL}&model=deepseek-r1").text
    assert 'id="model-badges"><span class="badge badge-moe"' in picker and "deepseek-r1 (671B) · MoE 8 of 256" in picker


def test_a_shared_link_survives_a_restart(client, tmp_path):
    before = service._store
    try:
        service.use_store(BlobStore(tmp_path / "store", 1 << 20))
        uid = upload(client, QWEN3_8B, "my-model.json").json()["model_file"]
        service.use_store(BlobStore(tmp_path / "store", 1 << 20))  # what a restarted server finds: only the disk
        up = model_uploads.get(uid)
        assert up is not None and up.model == replace(MODELS["qwen3-8b"], key="my-model", hf_name="",
                                                      published_params_b=0.0)
    finally:
        service.use_store(before)


@pytest.mark.parametrize("filename, doc, name", [
    ("Qwen3-8B.json", {}, "Qwen3-8B"), ("config.json", {"_name_or_path": "Qwen/Qwen3-8B"}, "Qwen3-8B"),
    ("config.json", {}, model_uploads.FALLBACK_NAME), ("../../etc/pass wd.json", {}, "pass-wd"),
    ("config.json", {"_name_or_path": "a/config"}, model_uploads.FALLBACK_NAME),
])
def test_an_upload_is_named_safely(filename, doc, name):
    assert model_uploads.model_name(filename, doc) == name


def test_the_catalogue_lists_the_badges(client):
    models = {m["key"]: m for m in client.get("/api/catalog").json()["models"]}
    assert models["gpt-oss-20b"]["badges"] == [b.label for b in MODELS["gpt-oss-20b"].badges]


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=st.dictionaries(st.sampled_from(sorted(json.loads(QWEN3_8B)) + ["text_config", "layer_types"]),
                             JSON_VALUES, max_size=3),
       raw=st.binary(max_size=64), name=st.text(max_size=40))
def test_no_upload_makes_the_dashboard_fail(client, edits, raw, name):
    """The page's upload route (outside the API schema the API fuzz reads): any config, any bytes, any file name
    get the model's status or a 422 naming what is wrong, never a server error."""
    doc = {**json.loads(QWEN3_8B), **edits}
    for data in (json.dumps(doc).encode(), raw):
        r = client.post("/upload-model", files={"config": (name or "c.json", data, "application/json")},
                        headers={"HX-Request": "true"})
        assert r.status_code in (200, 422), (r.status_code, r.text[:300])
        assert ('name="model_file"' in r.text) == (r.status_code == 200)


def test_the_cli_says_a_dashboard_link_names_an_uploaded_config(capsys):
    code = main(["run", "--scenario", f"http://localhost:8000/?{SMALL}&model_file=7800c331b7eb0800"])
    err = capsys.readouterr().err
    assert code == 2 and "uploaded to a dashboard" in err and "--model-config FILE" in err, err
