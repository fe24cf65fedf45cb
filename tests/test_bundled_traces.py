"""The bundled samples of public traces (sim_core/data/traces/): byte for byte what their README says they are,
read by name, varying over time as their source describes, and runnable; and the BurstGPT reader they need."""

from __future__ import annotations

import csv
import hashlib
import json
import re

import numpy as np
import pytest

from app.cli import main
from sim_core.traces import (
    BUNDLED_TRACE_DIR,
    BUNDLED_TRACES,
    TraceError,
    read_burstgpt_trace,
    read_trace,
    read_trace_file,
    trace_path,
)

README = (BUNDLED_TRACE_DIR / "README.md").read_text(encoding="utf-8")
BURSTGPT = "burstgpt-1-first400"


def _section(name: str) -> str:
    """The README's section on one bundled trace."""
    return README.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]


def _raw_rows(name: str) -> list[dict]:
    with open(BUNDLED_TRACE_DIR / BUNDLED_TRACES[name], encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", BUNDLED_TRACES)
def test_each_bundled_trace_is_the_file_its_readme_pins(name):
    section = _section(name)
    assert BUNDLED_TRACES[name] in section and "Licence" in section and "Source" in section
    data = (BUNDLED_TRACE_DIR / BUNDLED_TRACES[name]).read_bytes()
    pinned = re.findall(r"sha256,?\s+`([0-9a-f]{64})`", section)[-1]  # the copy's own, after the source's
    assert hashlib.sha256(data).hexdigest() == pinned
    assert len(data) < 4 << 20  # a sample, not the trace


def test_the_burstgpt_sample_keeps_the_published_columns_and_reads_by_name():
    rows = _raw_rows(BURSTGPT)
    assert list(rows[0]) == ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]
    served = [r for r in rows if int(r["Request tokens"]) > 0 and int(r["Response tokens"]) > 0]
    assert 0 < len(served) < len(rows)  # the sample holds failed requests, which replay leaves out
    reqs = read_trace_file(BURSTGPT, 10_000)
    t = np.array([float(r["Timestamp"]) for r in served])
    assert len(reqs) == len(served)
    assert reqs.arrival_s.tolist() == pytest.approx((t - t.min()).tolist())
    assert sorted(reqs.prompt_tokens.tolist()) == sorted(int(r["Request tokens"]) for r in served)
    assert sorted(reqs.output_tokens.tolist()) == sorted(int(r["Response tokens"]) for r in served)


def test_the_burstgpt_sample_varies_over_the_day_as_its_readme_says():
    """BurstGPT's README shows a daily periodicity; the sample, 00:00 to 10:21 of a day, holds its night lull and
    morning rise. The counts the README quotes are the file's, and they are far from steady arrivals."""
    served = [r for r in _raw_rows(BURSTGPT) if int(r["Request tokens"]) > 0 and int(r["Response tokens"]) > 0]
    seconds = np.array([float(r["Timestamp"]) for r in served])  # seconds from 0:00 of the day
    whole_hours = int(seconds.max() // 3600)
    per_hour = np.bincount((seconds // 3600).astype(int), minlength=whole_hours + 1)[:whole_hours]
    quoted = re.search(r"00-01 to \d\d-\d\d: ([\d, ]+)", " ".join(_section(BURSTGPT).split())).group(1)
    assert per_hour.tolist() == [int(n) for n in quoted.split(", ")]
    # Poisson arrivals at a steady rate give hourly counts whose variance is about their mean; here it is tens
    # of times that, the busiest hour several times the mean, and a lull of over an hour with no request at all.
    assert per_hour.var() / per_hour.mean() > 10
    assert per_hour.max() > 3 * per_hour.mean() and per_hour.min() == 0
    assert np.diff(np.sort(seconds)).max() > 3600
    assert per_hour[-3:].sum() > 2 * per_hour[:3].sum()  # the morning busier than the small hours


def test_a_short_run_replays_the_burstgpt_sample(capsys):
    assert main(["run", "--trace", BURSTGPT, "--hardware", "a100", "--rate", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (metrics,) = [s["metrics"] for s in doc["schedulers"].values()]
    assert metrics["num_requests"] == len(read_trace_file(BURSTGPT, 10_000))
    assert metrics["arrival_rate"] == pytest.approx(2.0)


def test_a_file_of_a_bundled_traces_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert trace_path(BURSTGPT) == str(BUNDLED_TRACE_DIR / BUNDLED_TRACES[BURSTGPT])
    (tmp_path / BURSTGPT).write_text("arrival_s,prompt_tokens,output_tokens\n0,5,5\n", encoding="utf-8")
    assert trace_path(BURSTGPT) == BURSTGPT and len(read_trace_file(BURSTGPT, 10)) == 1
    assert trace_path("other.csv") == "other.csv"


def test_a_missing_trace_names_the_bundled_samples(capsys, tmp_path):
    assert main(["run", "--trace", str(tmp_path / "nope.csv")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and BURSTGPT in err
    with pytest.raises(TraceError, match=BURSTGPT):
        read_trace_file(str(tmp_path / "nope.csv"), 10)


# ----- the BurstGPT reader -----
HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def test_burstgpt_rows_are_read_by_column_name_whatever_the_columns_around_them():
    v1 = HEADER + "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,230,1317,API log\n"
    # Its later files put Session ID and Elapsed time second and third: a positional reader would misread them.
    v3 = ("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "5,abc,2.5,ChatGPT,472,18,490,Conversation log\n45,,1.0,GPT-4,1087,230,1317,API log\n")
    for text in (v1, v3):
        for reqs in (read_trace(text, 10), read_burstgpt_trace(text, 10)):
            assert reqs.arrival_s.tolist() == [0.0, 40.0]
            assert reqs.prompt_tokens.tolist() == [472, 1087] and reqs.output_tokens.tolist() == [18, 230]


def test_failed_burstgpt_requests_are_left_out_and_a_trace_of_only_those_is_refused():
    text = HEADER + "1,ChatGPT,0,0,0,Conversation log\n3,ChatGPT,10,0,10,API log\n4,GPT-4,7,9,16,API log\n"
    reqs = read_trace(text, 10)
    assert len(reqs) == 1 and reqs.prompt_tokens.tolist() == [7]
    with pytest.raises(TraceError, match=r"2 row\(s\) are all failed requests"):
        read_trace(HEADER + "1,ChatGPT,0,0,0,Conversation log\n3,ChatGPT,10,0,10,API log\n", 10)


@pytest.mark.parametrize("row, words", [
    ("x,ChatGPT,5,5,10,API log", ["line 2", "Timestamp", "'x'"]),
    ("1,ChatGPT,-3,5,2,API log", ["line 2", "Request tokens", "'-3'"]),
    ("1,ChatGPT,0,abc,2,API log", ["line 2", "Response tokens", "'abc'"]),  # a 0 beside it does not hide it
    ("1,ChatGPT,5", ["line 2", "expected 6 columns, got 3"]),
])
def test_bad_burstgpt_cells_name_line_and_field(row, words):
    with pytest.raises(TraceError) as caught:
        read_burstgpt_trace(HEADER + row + "\n", 10)
    for w in words:
        assert w in str(caught.value), str(caught.value)


def test_a_burstgpt_header_without_its_columns_says_which():
    with pytest.raises(TraceError, match="lacks column.*Response tokens"):
        read_burstgpt_trace("Timestamp,Model,Request tokens\n1,ChatGPT,5\n", 10)
