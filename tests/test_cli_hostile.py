"""Hostile command lines (issue #26): every search ends, every file is read within a bounded memory, and every
refusal is one `error:` line naming the flag it is about, never a traceback, a hang or another flag's name.
(The 1 GB trace's peak memory: bench/bench_big_trace.py; the full cache disk: tests/test_full_cache.py.)"""

from __future__ import annotations

import argparse
import errno
import json
import os
import time

import pytest

import sim_core.studies.rate_search as search_module
from app.cli import main
from app.cli.commands import run as run_command
from sim_core import Scenario
from sim_core.studies.capacity import MAX_BISECTIONS, MAX_DOUBLINGS, MAX_RATE, max_rate
from sim_core.traces import MAX_LINE_CHARS, TraceError, read_trace, read_trace_file

DEEP = "[" * 100_000 + "]" * 100_000
PROFILE = {"sched_sim_hardware_profile": 1, "hardware": "h100", "model": "llama-3-8b", "quantization": "fp16",
           "tp": 1, "constants": {"compute_efficiency": 0.5, "bandwidth_efficiency": 0.8, "attention_efficiency": 0.5,
                                  "step_overhead_ms": 2, "overhead_per_seq_us": 10}}


def cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err


def one_error(capsys, flag: str, *argv) -> str:
    """Run argv; assert it is refused with one error line about `flag`; that line."""
    code, err = cli(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {flag}"), err
    return err


# ---------------------------------------------------------------------------------------------------------
# capacity: every search ends
# ---------------------------------------------------------------------------------------------------------
def knee_at(knee: float, calls: list):
    def attainment(scenario, rate):
        calls.append(rate)
        return 1.0 if rate <= knee else 0.0
    return attainment


@pytest.mark.parametrize("tolerance", ["0", "1e-300", "-0.1", "0.00009", "1.5"])
def test_a_tolerance_out_of_bounds_is_refused_at_once(capsys, tolerance):
    start = time.perf_counter()
    err = one_error(capsys, "--tolerance:", "capacity", "--hardware", "rtx3050", "--max-model-len", "8192", "--tolerance", tolerance)
    assert "between 0.0001 and 1" in err and time.perf_counter() - start < 30


@pytest.mark.parametrize("tolerance", [0.0, 1e-300])
def test_the_bisection_ends_whatever_tolerance_a_library_caller_passes(monkeypatch, tolerance):
    calls = []
    rate, runs = max_rate(Scenario(rate=5.0), 0.9, tolerance, knee_at(7.3, calls))
    assert 7.3 * (1 - 2e-4) <= rate <= 7.3 and runs == len(calls) < 30  # the floor, MIN_TOLERANCE
    # Without the floor, the iteration cap (or the bracket reaching adjacent floats) still ends it.
    monkeypatch.setattr(search_module, "MIN_TOLERANCE", 0.0)  # what the search reads
    calls.clear()
    rate, runs = max_rate(Scenario(rate=5.0), 0.9, tolerance, knee_at(7.3, calls))
    assert rate <= 7.3 and rate == pytest.approx(7.3, rel=1e-12) and runs <= 2 + MAX_BISECTIONS
    monkeypatch.setattr(search_module, "MAX_BISECTIONS", 5)
    calls.clear()
    _, runs = max_rate(Scenario(rate=5.0), 0.9, tolerance, knee_at(7.3, calls))
    assert runs == 2 + 5  # the start, one doubling, five bisections


def test_the_flags_bounds_are_the_search_models(capsys):
    from app.cli.commands.capacity import slo_target, tolerance
    from sim_core.fields import field_info
    from sim_core.studies.capacity import MIN_TOLERANCE, CapacitySearch

    assert field_info("tolerance", CapacitySearch).lo == MIN_TOLERANCE
    assert tolerance(repr(MIN_TOLERANCE)) == MIN_TOLERANCE and slo_target("1") == 1
    for parse, text in ((tolerance, repr(MIN_TOLERANCE * 0.99)), (tolerance, "1.01"), (slo_target, "0"),
                        (slo_target, "1.01"), (tolerance, "inf")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    assert main(["capacity", "--help"]) == 0
    assert f">= {MIN_TOLERANCE:g}, <= 1" in " ".join(capsys.readouterr().out.split())


def test_a_target_of_zero_is_refused_and_the_search_never_passes_the_highest_rate(capsys):
    err = one_error(capsys, "--target:", "capacity", "--hardware", "rtx3050", "--max-model-len", "8192", "--target", "0")
    assert "greater than 0" in err
    calls = []
    rate, runs = max_rate(Scenario(rate=1.0), 0.0, 0.03, knee_at(float("inf"), calls))  # every rate meets it
    assert rate == MAX_RATE == max(calls) and runs == len(calls) <= 1 + MAX_DOUBLINGS
    calls.clear()
    assert max_rate(Scenario(rate=MAX_RATE), 0.5, 0.03, knee_at(float("inf"), calls))[0] == MAX_RATE
    assert calls == [MAX_RATE]


# ---------------------------------------------------------------------------------------------------------
# traces: streamed, a line at a time
# ---------------------------------------------------------------------------------------------------------
TRACES = {
    "ours.csv": "arrival_s,prompt_tokens,output_tokens\n0.5,10,4\n0.1,20,5\r\n\n0.3,30,6\n",
    "mooncake.jsonl": "\ufeff" + "\n".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 3,
                                                       "hash_ids": [1, 2]}) for t in (5, 1, 3)) + "\n",
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,100,10\n"
                 "2023-11-16 18:15:47.0,200,20\n",
}


@pytest.mark.parametrize("name", TRACES)
def test_a_trace_file_is_read_as_its_text_is(tmp_path, name):
    path = tmp_path / name
    path.write_text(TRACES[name], newline="", encoding="utf-8")
    streamed, whole = read_trace_file(str(path), 100), read_trace(TRACES[name], 100)
    for field in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert getattr(streamed, field).tolist() == getattr(whole, field).tolist()


def test_a_trace_over_the_row_limit_is_refused_before_any_row_is_parsed(tmp_path, capsys, monkeypatch):
    import sim_core.runner
    import sim_core.traces

    path = tmp_path / "long.csv"
    # Blank and short lines are no rows: 40 requests among them pass a limit of 40.
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{k},10,4\n\n \r\n" for k in range(40)),
                    encoding="utf-8")
    assert len(read_trace_file(str(path), 40).arrival_s) == 40
    parsed = []
    monkeypatch.setattr(sim_core.traces, "read_trace", lambda *a: parsed.append(a))
    for chunk in (1 << 23, 7):  # one chunk, and rows split across chunks
        monkeypatch.setattr(sim_core.traces, "COUNT_CHUNK_BYTES", chunk)
        with pytest.raises(TraceError, match="more than 39 requests .*counted 40"):
            read_trace_file(str(path), 39)
    assert not parsed
    monkeypatch.undo()
    monkeypatch.setattr(sim_core.runner, "MAX_TRACE_ROWS", 39)
    err = one_error(capsys, f"--trace {path}:", "run", "--trace", path, "--hardware", "rtx3050", "--max-model-len", "8192")
    assert "more than 39 requests (the limit)" in err


def test_a_trace_without_newlines_is_refused_after_one_line_not_read_whole(tmp_path, capsys):
    path = tmp_path / "one-line.csv"
    path.write_text("arrival_s," + "9" * (MAX_LINE_CHARS + 10), encoding="utf-8")
    with pytest.raises(TraceError, match=r"line 1: longer than 1,048,576 characters"):
        read_trace_file(str(path), 100)
    err = one_error(capsys, f"--trace {path}:", "run", "--trace", path, "--hardware", "rtx3050", "--max-model-len", "8192")
    assert "line 1: longer than" in err
    with open("/dev/zero", encoding="utf-8", errors="replace") as zeros:  # endless, no newline
        with pytest.raises(TraceError, match="line 1: longer than"):
            read_trace(zeros, 100)


# ---------------------------------------------------------------------------------------------------------
# JSON files: deep nesting, huge numbers
# ---------------------------------------------------------------------------------------------------------
def test_hostile_profiles_are_one_error_line_naming_the_flag(tmp_path, capsys):
    files = {"deep.json": DEEP,
             "deep-inside.json": json.dumps({**PROFILE, "hardware": "@"}).replace('"@"', DEEP),
             "huge-int.json": json.dumps(PROFILE).replace('"tp": 1', '"tp": 1' + "0" * 400),
             "huge-constant.json": json.dumps(PROFILE).replace('"step_overhead_ms": 2',
                                                               '"step_overhead_ms": 1' + "0" * 5000),
             "huge-float.json": json.dumps(PROFILE).replace('"step_overhead_ms": 2', '"step_overhead_ms": 1e400')}
    words = {"deep.json": "not JSON (arrays or objects nested too deeply)", "deep-inside.json": "nested too deeply",
             "huge-int.json": "tp must be an integer between 1 and 8", "huge-constant.json": "step_overhead_ms must be a number",
             "huge-float.json": "step_overhead_ms must be between"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        err = one_error(capsys, f"--hardware-profile {tmp_path / name}:", "step-time", "--hardware", "h100",
                        "--decode-seqs", "4", "--hardware-profile", tmp_path / name)
        assert words[name] in err and len(err) < 400, err


def test_hostile_benchmark_results_are_one_error_line_naming_the_flag(tmp_path, capsys):
    bench = {"input_lens": [100, 200], "output_lens": [10, 20], "ttfts": [0.1, 0.2], "itls": [[0.01] * 9, [0.01] * 19]}
    files = {"deep.json": DEEP,
             "huge-int.json": json.dumps(bench).replace("[100, 200]", "[100, 2" + "0" * 400 + "]"),
             "int-past-int64.json": json.dumps(bench).replace("[100, 200]", "[100, 2" + "0" * 30 + "]"),
             "huge-concurrency.json": json.dumps({**bench, "max_concurrency": 1}).replace(
                 '"max_concurrency": 1', '"max_concurrency": 1' + "0" * 4400)}
    words = {"deep.json": "not JSON (arrays or objects nested too deeply)",
             "huge-int.json": "input_lens[1]: must be a whole number of tokens",
             "int-past-int64.json": "input_lens[1]: must be a whole number of tokens",
             "huge-concurrency.json": "max_concurrency"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        err = one_error(capsys, f"--from {tmp_path / name}:", "calibrate", "--from", tmp_path / name,
                        "--hardware", "h100", "--out", tmp_path / "p.json")
        assert words[name] in err and len(err) < 400, err
    assert not (tmp_path / "p.json").exists()


# ---------------------------------------------------------------------------------------------------------
# which file a flag names
# ---------------------------------------------------------------------------------------------------------
INPUT_FLAGS = [  # (the flag as its error names it, a command line with FILE where the input goes)
    ("--hardware-profile:", ["run", "--hardware", "h100", "--hardware-profile", "FILE"]),
    ("--from:", ["calibrate", "--from", "FILE", "--hardware", "h100", "--out", "p.json"]),
    ("--model-config:", ["run", "--hardware", "h100", "--model-config", "FILE"]),
    ("--trace FILE:", ["run", "--hardware", "h100", "--trace", "FILE"]),
]


@pytest.mark.parametrize(("flag", "argv"), INPUT_FLAGS)
def test_a_device_is_not_reported_as_missing(capsys, tmp_path, monkeypatch, flag, argv):
    monkeypatch.chdir(tmp_path)
    err = one_error(capsys, flag.replace("FILE", "/dev/zero"), *[a.replace("FILE", "/dev/zero") for a in argv])
    assert "no such file" not in err and "is a character device, not a regular file" in err


@pytest.mark.parametrize(("flag", "argv"), INPUT_FLAGS)
def test_a_fifo_is_refused_before_it_is_opened(capsys, tmp_path, monkeypatch, flag, argv):
    """Opening a FIFO for reading blocks until a writer comes: the command would hang; an alarm fails it instead."""
    import signal

    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe")

    def hung(*_):
        raise TimeoutError("the command opened the FIFO and waited for a writer")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        err = one_error(capsys, flag.replace("FILE", "pipe"), *[a.replace("FILE", "pipe") for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert "is a FIFO (named pipe), not a regular file" in err


def test_a_directory_is_named_as_one(capsys, tmp_path):
    err = one_error(capsys, "--from:", "calibrate", "--from", tmp_path, "--hardware", "h100", "--out", "p.json")
    assert "is a directory" in err
    err = one_error(capsys, "--dir:", "validate", "--quick", "--dir", "/dev/zero")
    assert "is not a directory" in err and "no such" not in err


def test_calibrate_out_problems_name_out_not_trace_out(capsys, tmp_path, monkeypatch):
    steps = tmp_path / "steps.csv"
    steps.write_text("prefill_tokens,context_tokens,decode_seqs,decode_context,step_ms\n", encoding="utf-8")
    argv = ["calibrate", "--from", steps, "--hardware", "h100"]
    err = one_error(capsys, "--out:", *argv, "--out", tmp_path / "no-such-dir" / "p.json")
    assert "does not exist" in err
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    real_access = os.access  # as root a chmod stops no write: the check asks os.access, as the kernel would
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if str(p).startswith(str(read_only))
                        else real_access(p, mode, *a, **k))
    err = one_error(capsys, "--out:", *argv, "--out", read_only / "p.json")
    assert "permission denied" in err and "--trace-out" not in err


def test_a_write_that_fails_late_names_out(capsys, tmp_path, monkeypatch):
    from app.cli.commands import calibrate as calibrate_command

    monkeypatch.setattr(calibrate_command, "calibrate", lambda target, text, source: {"fit": {}})

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "steps.csv").write_text("x\n", encoding="utf-8")
    monkeypatch.setattr(calibrate_command.Path, "write_text", full)
    err = one_error(capsys, "--out:", "calibrate", "--from", tmp_path / "steps.csv", "--hardware", "h100",
                    "--out", tmp_path / "p.json")
    assert "No space left on device" in err


def test_an_os_error_without_a_file_is_not_printed_with_an_empty_name(capsys, monkeypatch):
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_command, "handle", full)  # the parser looks it up when it is built, in main
    code = main(["run", "--hardware", "rtx3050", "--max-model-len", "8192"])
    err = capsys.readouterr().err
    assert code != 0 and err == "error: No space left on device\n", err


# ---------------------------------------------------------------------------------------------------------
# --scenario: a shared link reads no local file, and a query that is none is not silently the default
# ---------------------------------------------------------------------------------------------------------
def test_a_shared_scenario_cannot_make_the_cli_read_a_file(capsys, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("TOP-SECRET-LINE\n", encoding="utf-8")
    for command in ("run", "capacity", "sweep --min-rate 1 --max-rate 2", "plan"):
        err = one_error(capsys, "--scenario:", *command.split(), "--scenario",
                        f"http://x/?hardware=rtx3050&max_model_len=8192&trace={secret}")
        assert "TOP-SECRET" not in err and "--trace FILE" in err


def test_a_shared_scenario_cannot_make_the_cli_read_a_model_config(capsys, tmp_path):
    from app.cli.flags import query_scenario

    secret = tmp_path / "config.json"
    secret.write_text('{"model_type": "TOP-SECRET"}', encoding="utf-8")
    err = one_error(capsys, "--scenario:", "run", "--scenario", f"http://x/?hardware=h100&model_file={secret}")
    assert "TOP-SECRET" not in err and "--model-config FILE" in err
    err = one_error(capsys, "--a:", "diff", "--a", f"model_file={secret}", "--b", "scheduler=chunked")
    assert "TOP-SECRET" not in err and "may not make this command read" in err
    # --model-config beside it wins, as --trace does: the query's path is dropped, never read
    assert query_scenario(f"rate=2&model_file={secret}", files_given=("model_file",))[0] == {"rate": "2"}


def test_diff_queries_cannot_make_the_cli_read_a_file(capsys, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("TOP-SECRET-LINE\n", encoding="utf-8")
    err = one_error(capsys, "--a:", "diff", "--a", f"scheduler=fcfs&trace={secret}", "--b", "scheduler=chunked")
    assert "TOP-SECRET" not in err and "names a trace file" in err and "--trace FILE" not in err


def test_a_scenario_naming_a_trace_runs_with_trace_given_beside_it(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,4\n0.5,20,5\n", encoding="utf-8")
    code, err = cli(capsys, "run", "--scenario", "hardware=rtx3050&max_model_len=8192&trace=/etc/passwd", "--trace", trace,
                    "--scheduler", "fcfs")
    assert code == 0, err


@pytest.mark.parametrize("query", ["not a url", "http://x/", "https://x/page?hardware", "hardware=a100&rate"])
def test_a_scenario_that_is_not_a_query_is_refused(capsys, query):
    err = one_error(capsys, "--scenario:", "run", "--scenario", query)
    assert "query string" in err
