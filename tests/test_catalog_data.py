"""The catalogue's entries are data (sim_core/data/*.json): every entry loads into the same dataclasses with the
same values the Python catalogue had, and a bad entry is refused with the file, the entry and the key named."""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import json
from pathlib import Path

import pytest

from sim_core import catalog, links, prices
from sim_core import gpu as gpu_module
from sim_core.data import CatalogDataError, read

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "sim_core" / "data"
# Every GPU, model, price and KV link's dataclass fields as main's Python catalogue defined them (f3637f1), taken
# before the entries moved to JSON: the loaded catalogue must reproduce it byte for byte.
SNAPSHOT = Path(__file__).resolve().parent / "fixtures" / "catalog_snapshot.json"


def fields_of(obj):
    return None if obj is None else {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _snapshot_models() -> dict[str, dict]:
    return dict(json.loads(SNAPSHOT.read_text(encoding="utf-8"))["models"])


def _snapshot_links() -> dict[str, dict]:
    return dict(json.loads(SNAPSHOT.read_text(encoding="utf-8"))["kv_links"])


def _snapshot_gpus() -> dict[str, dict]:
    return dict(json.loads(SNAPSHOT.read_text(encoding="utf-8"))["gpus"])


# The fields added since the snapshot that a snapshot entry may set away from their default: the B200's dense FP4
# rate (issue #22; checked against its published figure in tests/test_hardware_2026.py), the AMD parts' measured
# GEMM and fused-MoE kernel figures (AMD's aiter tables) and the NVIDIA parts' fused-MoE, Hopper decode-attention and
# Hopper W4A16 expert ones (published benchmarks; their effect is tested in tests/test_cost_model_measured_kernels.py).
_MOE = ("moe_layer_fixed_us", "moe_bw_efficiency", "moe_layer_fixed_us_fp8", "moe_bw_efficiency_fp8",
        "moe_layer_fixed_us_fp4", "moe_bw_efficiency_fp4")
_GFX942 = ("gemm_bw_efficiency_fp8_block", "gemm_compute_efficiency_fp8_block") + _MOE[:4]
CHANGED_SINCE_SNAPSHOT = (
    {("b200", "fp4_tflops")}
    # every GPU's power figures (issue #40; each cited in gpus.json's power_source, checked in tests/test_energy.py)
    | {(gpu, f) for gpu in catalog.GPUS for f in ("board_power_w", "idle_power_w")}
    | {(gpu, f) for gpu in ("h100", "h200")
       for f in ("moe_layer_fixed_us", "decode_attention_floor_us", "decode_attention_floor_us_xqa",
                 "moe_compute_efficiency_w4a16")}
    | {(gpu, field) for gpu in ("b200", "b300", "gb200", "gb300") for field in _MOE if field != "moe_bw_efficiency"}
    | {(gpu, field) for gpu in ("mi300x", "mi325x") for field in _GFX942}
    | {("mi355x", field) for field in _MOE + ("decode_attention_floor_us", "gemm_bw_efficiency_bf16",
                                              "gemm_bw_efficiency_fp8", "gemm_bw_efficiency_fp8_block",
                                              "gemm_bw_efficiency_fp4", "gemm_compute_efficiency_fp8",
                                              "gemm_compute_efficiency_fp8_block", "gemm_compute_efficiency_fp4")})


def _as_snapshot(key: str, model, old: dict | None = None) -> dict:
    """A model's (or GPU's) fields that the snapshot has; the fields added since (issue #22's architecture fields,
    the GPUs' fp4_tflops) must hold their defaults for the entries the snapshot lists, so each of those entries is
    exactly what it was."""
    fields = fields_of(model)
    old = _snapshot_models()[key] if old is None else old
    added = {f.name: f.default for f in dataclasses.fields(model)
             if f.name not in old and (key, f.name) not in CHANGED_SINCE_SNAPSHOT}
    assert {k: fields[k] for k in added} == added, key
    return {k: v for k, v in fields.items() if k in old}


def test_the_loaded_catalogue_equals_the_python_catalogue_it_replaced():
    now = {
        "gpus": [[k, _as_snapshot(k, v, _snapshot_gpus()[k])] for k, v in catalog.GPUS.items()],
        # The models the snapshot has, in its order, as they were; the models read from bundled Hugging Face
        # configs since are checked in tests/test_hf_config.py.
        "models": [[k, _as_snapshot(k, catalog.MODELS[k])] for k in _snapshot_models()],
        "prices": [[k, fields_of(v)] for k, v in prices.GPU_PRICES.items()],
        # The links the snapshot has, as they were; ib800 (ConnectX-8) was added since (test_tensor_parallel_nodes).
        "kv_links": [[k, fields_of(v)] for k, v in links.KV_LINKS.items() if k in _snapshot_links()],
        "kv_link_names": [k for k in links.KV_LINK_NAMES if k in _snapshot_links()],
    }
    # As text: an int that became a float (8 -> 8.0) or a float off in its last digit shows.
    assert json.dumps(now, indent=1) + "\n" == SNAPSHOT.read_text(encoding="utf-8")


@pytest.mark.parametrize("filename, loaded, key", [
    ("gpus.json", catalog.GPUS, "key"), ("models.json", catalog.MODELS, "key"),
    ("prices.json", prices.GPU_PRICES, "gpu"), ("kv_links.json", links.KV_LINKS, "key"),
])
def test_every_entry_loads_in_the_files_order(filename, loaded, key):
    assert [e[key] for e in read(filename)["entries"]] == list(loaded)


def test_named_constants_resolve_to_the_constants_in_code():
    numeric = {f.name for f in dataclasses.fields(catalog.GPU) if f.type == "float"}
    named = [(e["key"], k, v) for e in read("gpus.json")["entries"] for k, v in e.items()
             if k in numeric and isinstance(v, str)]
    assert named  # the A100s', H100's and H200's shared measured values
    for gpu, k, name in named:
        assert name in catalog.GPU_CONSTANTS
        assert getattr(catalog.GPUS[gpu], k) == getattr(gpu_module, name), (gpu, k)
    for e in read("kv_links.json")["entries"]:
        assert links.KV_LINKS[e["key"]].latency_s == getattr(links, e["latency_s"]), e["key"]


def test_the_data_files_are_package_data():
    """A non-editable install has the JSON only if pyproject.toml declares it (checked by building a wheel when
    the declaration was added: without it the wheel has no sim_core/data/*.json)."""
    tomllib = pytest.importorskip("tomllib")
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    files = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.json"))
    assert [f for f in files if "/" not in f] == ["engines.json", "gpus.json", "kv_links.json", "kv_tiers.json", "lora.json",
                                                    "model_error.json", "models.json", "prices.json", "spec_decode.json",
                                                    "startup.json", "validation_rows.json"]
    bundled = [f for f in files if "/" in f]  # the bundled Hugging Face configs and trace samples
    assert any(f.startswith("hf_configs/") for f in bundled)
    assert all(f.startswith(("hf_configs/", "traces/")) for f in bundled)
    assert all(any(fnmatch.fnmatch(f, g) for g in globs["sim_core.data"]) for f in files)


def entry(doc: dict, name: str, key: str = "key") -> dict:
    return next(e for e in doc["entries"] if e[key] == name)


def gpus(edit):
    doc = copy.deepcopy(read("gpus.json"))
    edit(doc)
    return catalog.gpus_from(doc, catalog.MODELS)


def models(edit):
    doc = copy.deepcopy(read("models.json"))
    edit(doc)
    return catalog.models_from(doc)


def price_rows(edit):
    doc = copy.deepcopy(read("prices.json"))
    edit(doc)
    return prices.prices_from(doc, catalog.GPUS)


def kv_links(edit):
    doc = copy.deepcopy(read("kv_links.json"))
    edit(doc)
    return links.kv_links_from(doc)


BAD = [
    # (loader, edit, what the message must name: file, entry, key)
    (gpus, lambda d: entry(d, "h100").pop("mem_gib"), ["gpus.json", "'h100'", "missing key 'mem_gib'"]),
    (gpus, lambda d: entry(d, "h100").update(mem_gb=80), ["gpus.json", "'h100'", "unknown key 'mem_gb'"]),
    (gpus, lambda d: entry(d, "l4").update(mem_gib=True), ["gpus.json", "'l4'", "'mem_gib'", "expected float"]),
    (gpus, lambda d: entry(d, "l4").update(tp_link_is_nvlink=0), ["gpus.json", "'l4'", "'tp_link_is_nvlink'"]),
    (gpus, lambda d: entry(d, "l4").update(name=None), ["gpus.json", "'l4'", "'name'", "expected str"]),
    (gpus, lambda d: entry(d, "a100").update(compute_efficiency="MEASURED_GEMM_EFFICENCY"),
     ["gpus.json", "'a100'", "'compute_efficiency'", "'MEASURED_GEMM_EFFICENCY'"]),
    (gpus, lambda d: entry(d, "b200").update(default_model="llama-4"),
     ["gpus.json", "'b200'", "'default_model'", "'llama-4'"]),
    (gpus, lambda d: entry(d, "h200").update(source=""), ["gpus.json", "'h200'", "'source'"]),
    (gpus, lambda d: d["entries"].append(dict(entry(d, "h100"))), ["gpus.json", "'h100'", "appears twice"]),
    (gpus, lambda d: entry(d, "h100").pop("key"), ["gpus.json", "entry #8", "missing key 'key'"]),
    (gpus, lambda d: d["entries"].append("h300"), ["gpus.json", f"entry #{len(catalog.GPUS) + 1}",
                                                   "expected an object"]),
    (gpus, lambda d: d.pop("entries"), ["gpus.json", "missing key 'entries'"]),
    (gpus, lambda d: d.update(gpus=[]), ["gpus.json", "unknown key 'gpus'"]),
    (models, lambda d: entry(d, "llama-3-8b").pop("layers"), ["models.json", "'llama-3-8b'", "missing key 'layers'"]),
    (models, lambda d: entry(d, "mixtral-8x7b").update(experts=8.0),
     ["models.json", "'mixtral-8x7b'", "'experts'", "expected int"]),
    (models, lambda d: entry(d, "mixtral-8x7b").update(moe=True), ["models.json", "'mixtral-8x7b'", "'moe'"]),
    (price_rows, lambda d: entry(d, "h100", "gpu").pop("source"), ["prices.json", "'h100'", "missing key 'source'"]),
    (price_rows, lambda d: entry(d, "h100", "gpu").update(usd_per_gpu_hour="6.88"),
     ["prices.json", "'h100'", "'usd_per_gpu_hour'", "expected float"]),
    (price_rows, lambda d: entry(d, "h100", "gpu").update(gpu="h300"), ["prices.json", "'h300'", "'gpu'"]),
    (price_rows, lambda d: d["entries"].remove(entry(d, "l4", "gpu")), ["prices.json", "'l4'"]),
    (price_rows, lambda d: entry(d, "rtx3050", "gpu").pop("note"), ["prices.json", "'rtx3050'", "'note'"]),
    (price_rows, lambda d: entry(d, "rtx3050", "gpu").update(provider="eBay"),
     ["prices.json", "'rtx3050'", "unknown key 'provider'"]),
    (kv_links, lambda d: entry(d, "ib400").update(latency_s="RDMA_SETUP_S"),
     ["kv_links.json", "'ib400'", "'latency_s'", "'RDMA_SETUP_S'"]),
    (kv_links, lambda d: entry(d, "ib400").pop("efficiency"),
     ["kv_links.json", "'ib400'", "missing key 'efficiency'"]),
]


@pytest.mark.parametrize("load, edit, named", BAD, ids=lambda x: "" if callable(x) else "/".join(x))
def test_a_bad_entry_is_refused_naming_file_entry_and_key(load, edit, named):
    with pytest.raises(CatalogDataError) as e:
        load(edit)
    message = str(e.value)
    assert message.startswith("sim_core/data/"), message
    for part in named:
        assert part in message, message


def test_the_unedited_documents_load():
    """The loaders the bad cases call accept the real files: each failure above is the edit's."""
    assert list(gpus(lambda d: None)) == list(catalog.GPUS)
    assert list(models(lambda d: None)) == list(catalog.MODELS)
    assert price_rows(lambda d: None) == prices.GPU_PRICES
    assert kv_links(lambda d: None) == links.KV_LINKS
