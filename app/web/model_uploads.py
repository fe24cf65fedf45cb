"""Uploaded Hugging Face config.json files: any model on the web, shared by link like an uploaded trace.

An upload is checked by the same reader as `sched-sim run --model-config` (sim_core.hf_config), kept in the
upload store by content hash (store.BlobStore, kind "model_config"), and named on the web by that id: the scenario
field `model_file` takes it (`?model_file=<id>`), where the CLI takes a path. The simulator reads a model config
from a file, so each upload in use is also written to this process's own folder as `<id>/<name>.json` and the
scenario the web runs names that file; `web_value` turns such a path back into the id wherever a scenario is shown
or linked (the canonical query, the API's answer), so no server path ever reaches a page or a URL.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from sim_core.architecture import Model
from sim_core.hf_config import ModelConfigError, model_from_text
from sim_core.run_cost import tiny_kv_problem

from .cache import SingleFlightLRU
from .store import ID_LENGTH, BlobStore, content_id

log = logging.getLogger("sched_sim.web")

KIND = "model_config"
# A Hugging Face config.json is a few KB (DeepSeek-V3's, among the longest, is 1.7 KB); anything near this limit is
# not one.
MAX_CONFIG_BYTES = 256 * 1024
_ID = re.compile(rf"^[0-9a-f]{{{ID_LENGTH}}}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
FALLBACK_NAME = "uploaded-config"


class ModelUploadError(ValueError):
    """An uploaded config the simulator cannot use; the message names the key (as sched-sim run's does)."""


@dataclass(frozen=True)
class ModelUpload:
    id: str
    filename: str
    model: Model  # its key is the model's name in reports
    path: str  # the file the simulator reads


_items = SingleFlightLRU(maxsize=64, max_bytes=8 * 1024 * 1024, sizeof=lambda up: 4096)
_store: BlobStore | None = None
_folder: Path | None = None
_folder_lock = threading.Lock()


def use_store(store: BlobStore | None) -> None:
    """Keep uploaded configs in `store` from now on (service.use_store passes the server's store on)."""
    global _store
    _store = store
    _items.clear()


def model_name(filename: str, doc: object) -> str:
    """The model's name in reports: the file's own name, or for a file called config.json (the Hub's name for
    every model's) the name its `_name_or_path` records; never "config", which the reader would replace by the
    folder's name (the id)."""
    stem = Path(filename or "").stem
    if stem.lower() in ("", "config") and isinstance(doc, dict) and isinstance(doc.get("_name_or_path"), str):
        stem = doc["_name_or_path"].rstrip("/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("-", stem).strip(".-")[:64]
    return FALLBACK_NAME if name.lower() in ("", "config") else name


def check(data: bytes, filename: str) -> tuple[str, Model]:
    """(its name, the model) of an uploaded config.json, or ModelUploadError saying what is wrong with it."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ModelUploadError(f"config.json: the file is larger than {MAX_CONFIG_BYTES // 1024} KB; a Hugging Face "
                               f"config.json is a few KB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ModelUploadError("config.json: not UTF-8 text; expected a Hugging Face config.json") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        doc = None  # model_from_text says why
    name = model_name(filename, doc)
    try:
        model = model_from_text(text, name)
    except ModelConfigError as e:
        raise ModelUploadError(str(e)) from None
    degenerate = tiny_kv_problem(model)  # no run could hold its KV pool: refused now, not at every run
    if degenerate:
        raise ModelUploadError(f"{degenerate[0]}: {degenerate[1]}")
    return name, model


def _materialize(uid: str, name: str, data: bytes) -> str:
    """The file the simulator reads for upload `uid`, written once into this process's folder."""
    global _folder
    with _folder_lock:
        if _folder is None:
            _folder = Path(tempfile.mkdtemp(prefix="sched-sim-model-configs-"))
            atexit.register(shutil.rmtree, _folder, True)
        path = _folder / uid / f"{name}.json"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)  # whole or not at all: a run reading it meanwhile never sees half a file
    return str(path)


def _upload(data: bytes, filename: str) -> ModelUpload:
    name, model = check(data, filename)
    uid = content_id(data, filename)
    return ModelUpload(uid, filename, model, _materialize(uid, name, data))


def add(data: bytes, filename: str) -> ModelUpload:
    """Check and keep an uploaded config (ModelUploadError if the simulator cannot use it); its id is a hash of
    its content and its name, and the store keeps it on disk, so a link naming it works after a restart."""
    filename = (filename or "config.json")[:120]
    up = _upload(data, filename)
    if _store is not None:
        try:
            _store.put(KIND, data, {"filename": filename}, filename)
        except ValueError as e:
            raise ModelUploadError(f"config.json: {e}") from None
        except OSError as e:  # a full or read-only disk: the upload still works until this server stops
            log.warning("model config %s kept in memory only: %s", up.id, e)
    return _items.get_or_compute(up.id, lambda: up)


def get(uid: str) -> ModelUpload | None:
    """The upload with this id, from memory or else from the store (checked again); None if there is none."""
    if not isinstance(uid, str) or not _ID.match(uid):
        return None
    up = _items.get(uid)
    if up is not None or _store is None:
        return up
    item = _store.get(KIND, uid)
    if item is None:
        return None
    try:
        up = _upload(item.data, str(item.meta.get("filename", "")))
    except (ModelUploadError, OSError):
        return None
    return _items.get_or_compute(uid, lambda: up) if up.id == uid else None


def missing_text(value: str) -> str:
    """Why `model_file=value` names no model on the web."""
    if _ID.match(value):
        return ("this uploaded config.json is not on the server (it keeps the most recently used uploads); upload "
                "it again")
    return ("takes the id of an uploaded config.json (the dashboard's Model upload, or POST /api/model-config); a "
            "config file path on the server cannot be given over the web (sched-sim run --model-config FILE reads "
            "one)")


def web_value(path: str) -> str:
    """What the web shows for a scenario's model_file: the upload's id for a file of ours, else the value as is."""
    p = Path(path)
    folder = _folder
    if folder is not None and p.parent.parent == folder and _ID.match(p.parent.name):
        return p.parent.name
    return path


def describe(up: ModelUpload) -> dict:
    """What the API answers about an upload: its id, name, architecture in a few words and badges."""
    m = up.model
    return {"model_file": up.id, "filename": up.filename, "model": m.key, "layers": m.layers,
            "attention": m.attention_summary, "experts": m.experts,
            "badges": [{"kind": b.kind, "label": b.label, "title": b.title} for b in m.badges]}
