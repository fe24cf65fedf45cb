"""The Accuracy page and the validated error on plans and frontiers (app/web/accuracy.py, accuracy_page.py;
issue #41 item 6), checked against sim_core/data/validation_rows.json, whose rows tests/test_validation.py checks
against `sched-sim validate --json` (test_validation_page_is_the_generated_one: validate runs once in the suite,
there): every row the page lists is a row of the file with the same error; each model x GPU x engine's median is
the median of the file's rows placed there; DeepSeek-R1 on the MI300X (validated only under SGLang, at about +80%)
is "not validated" for vllm with the optimistic badge, on the H200 under SGLang validated within a few percent; a
plan's row says the same as the page; bad filters are named with the values they take; the page simulates
nothing."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import time
from html import unescape

import pytest

from app.web import accuracy
from app.web.accuracy_page import MAX_ROWS_SHOWN
from sim_core import GPUS
from sim_core.data import CatalogDataError
from sim_core.studies import validation, validation_rows
from sim_core.studies.check_rows import Check

FRONTIER = ("/frontier?hardware=rtx3050&max_model_len=8192&workload=rag&duration=10&frontier_gpus=rtx3050"
            "&frontier_isl=256&frontier_osl=32&frontier_max_concurrency=2")


@pytest.fixture(scope="module")
def file_rows() -> list[dict]:
    """The data file's rows as dicts, read apart from the app's loader."""
    doc = json.loads(validation_rows.PATH.read_text(encoding="utf-8"))
    return [dict(zip(doc["columns"], r, strict=True)) for r in doc["rows"]]


@pytest.fixture(scope="module")
def acc(client) -> validation_rows.Accuracy:
    return accuracy.known()


def _throughput(row: dict) -> bool:
    return row["error"] is not None and ("tok/s" in row["unit"] or "req/s" in row["unit"])


def test_every_row_is_the_files_with_its_error(acc, file_rows):
    assert len(acc.rows) == len(file_rows) > 1000
    assert [dataclasses.asdict(r) for r in acc.rows] == file_rows


def test_each_combinations_error_is_the_median_of_the_files_rows(acc, file_rows):
    placed = [r for r in file_rows if _throughput(r) and r["model"] and r["gpu"]]
    typical = statistics.median(abs(r["error"]) for r in placed)
    assert acc.optimistic_above == pytest.approx(typical)
    assert set(acc.combos) == {(r["model"], r["gpu"], r["engine"]) for r in placed}
    for (model, gpu, engine), combo in acc.combos.items():
        errors = [r["error"] for r in placed if (r["model"], r["gpu"], r["engine"]) == (model, gpu, engine)]
        assert combo.rows == len(errors) and combo.median_error == pytest.approx(statistics.median(errors))
        assert combo.optimistic == (statistics.median(errors) > typical)


def test_the_known_cases(acc):
    mi300x = accuracy.verdict("deepseek-r1", "mi300x", "vllm")
    assert mi300x["text"].startswith("not validated on vllm (sglang +") and mi300x["optimistic"]
    h200 = acc.combos[("deepseek-r1", "h200", "sglang")]
    assert abs(h200.median_error) < 0.04 and not h200.optimistic
    own = accuracy.verdict("deepseek-r1", "h200", "sglang")
    assert own["text"] == f"validated {h200.median_error:+.0%} ({h200.rows} rows)" and not own["optimistic"]
    assert accuracy.verdict("llama-3-8b", "rtx3050", "vllm")["text"] == "not validated"


def test_the_page_lists_a_filter_of_the_rows_and_its_combinations(client, file_rows):
    r = client.get("/accuracy?model=deepseek-r1&gpu=mi300x")
    assert r.status_code == 200
    expected = [row for row in file_rows if (row["model"], row["gpu"]) == ("deepseek-r1", "mi300x")]
    shown = [float(e) for e in re.findall(r'data-error="([^"]+)"', r.text)]
    assert shown and shown == pytest.approx([row["error"] for row in expected if row["error"] is not None])
    assert re.search(r'data-combo="deepseek-r1\|mi300x\|sglang">.*?badge-optimistic', r.text, re.S)
    everything = client.get("/accuracy").text
    assert len(re.findall(r"<tr data-row>", everything)) == min(MAX_ROWS_SHOWN, len(file_rows))
    assert f"{len(file_rows)} rows" in everything


def test_bad_filters_are_named_with_what_they_take(client, acc):
    r = client.get("/accuracy?gpu=x100&colour=red&engine=" + "e" * 300)
    assert r.status_code == 422
    errors = [unescape(re.sub(r"<[^>]+>", "", e)) for e in re.findall(r'class="field-error" id="[^"]+">(.*?)</p>', r.text)]
    assert any(e.startswith("gpu: 'x100' is in no row; one of: a100, ") for e in errors), errors
    assert "colour: not a filter of this page; it filters by model, gpu, engine, source" in errors
    assert "engine: at most 200 characters" in errors


def test_a_plans_rows_carry_their_validated_error(client, acc, file_rows):
    combo = acc.combos[("llama-3-8b", "h100", "vllm")]
    errors = [r["error"] for r in file_rows
              if (r["model"], r["gpu"], r["engine"]) == ("llama-3-8b", "h100", "vllm") and _throughput(r)]
    assert (combo.rows, combo.median_error) == (len(errors), pytest.approx(statistics.median(errors)))
    url = "/plan?model=llama-3-8b&workload=chat&rate=4&duration=10&gpus=h100&tp=1&schedulers=chunked"
    r = client.get(url)
    job = re.search(r'hx-get="(/plan/job/[^"]+)"', r.text)
    deadline = time.monotonic() + 600
    while job and time.monotonic() < deadline and 'data-accuracy' not in r.text:
        time.sleep(0.5)
        r = client.get(job.group(1))
    cell = re.search(r'<td class="plan-accuracy"><span class="accuracy-verdict" data-accuracy[^>]*><a href="([^"]+)">'
                     r'([^<]+)</a>(.*?)</td>', r.text)
    assert cell, r.text[-2000:]
    assert unescape(cell.group(1)) == "/accuracy?model=llama-3-8b&gpu=h100"
    assert "hx-get" not in cell.group(0)  # known from the start: the cell never asks again
    assert cell.group(2) == f"validated {combo.median_error:+.0%} ({combo.rows} rows)"
    assert ("badge-optimistic" in cell.group(3)) == combo.optimistic
    api = client.get("/api/plan?" + url.split("?", 1)[1])  # its JSON says the same
    while api.status_code == 202 and time.monotonic() < deadline:
        time.sleep(0.5)
        api = client.get(api.json()["poll"])
    doc = api.json()
    assert doc["plans"][0]["validation"] == {"text": cell.group(2), "optimistic": combo.optimistic,
                                             "pending": False, "link": "/accuracy?model=llama-3-8b&gpu=h100"}


def test_a_frontiers_gpus_carry_their_validated_error(client, file_rows):
    model = GPUS["rtx3050"].default_model
    assert not [r for r in file_rows if (r["model"], r["gpu"]) == (model, "rtx3050") and _throughput(r)]
    deadline = time.monotonic() + 600
    r = client.get(FRONTIER)
    while 'id="frontier-accuracy"' not in r.text and time.monotonic() < deadline:
        time.sleep(0.5)
        r = client.get(FRONTIER)
    line = re.search(r'id="frontier-accuracy">(.*?)</p>', r.text, re.S)
    assert line, r.text[-1500:]
    # llama-3.2-1b (the RTX 3050's model) was measured on no GPU of the validation set
    assert re.sub(r"<[^>]+>", "", line.group(1)) == "Model error (Accuracy): rtx3050 not validated"


def test_the_page_simulates_nothing(client, file_rows, monkeypatch):
    """The page and the verdicts read the file: with the validation checks unable to run, and the file read
    afresh, /accuracy still lists every row; the route that polled while they ran is gone."""
    def no_checks(*args, **kwargs):
        raise AssertionError("the Accuracy page ran the validation checks")

    monkeypatch.setattr(validation, "checks", no_checks)
    accuracy.known.cache_clear()
    r = client.get("/accuracy")
    assert r.status_code == 200 and f"{len(file_rows)} rows" in r.text
    assert "hx-trigger" not in r.text
    assert accuracy.verdict("deepseek-r1", "h200", "sglang")["text"].startswith("validated ")
    assert client.get("/accuracy/verdict?model=deepseek-r1&gpu=h200&engine=sglang").status_code == 404


def _check(what: str, reference: float, predicted: float | None, unit: str = "tok/s", note: str = "",
           engine: str = "") -> Check:
    return Check(group="serving", source="src", what=what, reference=reference, unit=unit, predicted=predicted,
                 note=note, engine=engine)


def test_placed_rows_go_through_the_file_as_they_were_placed(tmp_path):
    """document() then load(): each row keeps validate --json's fields and its place (model and GPU read from the
    row's text, the engine it ran as, else the one its note names, else vllm's); the combinations are the medians
    of their throughput rows, optimistic above the set's median |error|; a file of another shape is refused,
    naming it and the command that rewrites it."""
    checks = [_check("Llama-3-8B on H100: output tok/s", 100.0, 150.0),
              _check("Llama-3-8B on H100: output tok/s", 100.0, 130.0, engine="trtllm"),
              _check("Llama-3-8B on H100: output tok/s", 100.0, 99.0, note="measured with TensorRT-LLM"),
              _check("Llama-3-8B on H100: TTFT", 10.0, 12.0, unit="ms"),
              _check("Llama-3-8B on A100: output tok/s", 100.0, None, note="skipped: why")]
    path = tmp_path / "rows.json"
    path.write_text(validation_rows.document(checks), encoding="utf-8")
    acc = validation_rows.load(path)
    assert [dataclasses.astuple(r) for r in acc.rows] == [
        (c.group, c.source, c.what, c.reference, c.predicted, c.unit, c.error, c.note, "llama-3-8b", gpu, engine)
        for c, gpu, engine in zip(checks, ("h100", "h100", "h100", "h100", "a100"),
                                  ("vllm", "trtllm", "trtllm", "vllm", "vllm"), strict=True)]
    assert acc.optimistic_above == pytest.approx(0.30)  # |+50%|, |+30%|, |-1%|: the time row is not throughput
    assert {k: (c.rows, round(c.median_error, 6), c.optimistic) for k, c in acc.combos.items()} == {
        ("llama-3-8b", "h100", "trtllm"): (2, 0.145, False), ("llama-3-8b", "h100", "vllm"): (1, 0.5, True)}
    assert tuple(f.name for f in dataclasses.fields(validation_rows.Row)) == validation_rows.COLUMNS
    doc = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**doc, "columns": doc["columns"][::-1]}), encoding="utf-8")
    with pytest.raises(CatalogDataError, match=r"rows.json: not a file of placed validation rows .*its columns are "
                                               r".*run python scripts/gen_validation_md.py"):
        validation_rows.load(path)
