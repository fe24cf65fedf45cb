"""The `sched-sim` command line: the documented command forms, JSON output, determinism, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sim_core
from app.cli import main, report, simulate
from app.cli.commands import COMMANDS, serve
from app.cli.flags import flag_name
from app.cli.results import trace_path_for
from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES, Scenario
from sim_core.fields import bounds_text

# The seed lesson's command forms (the sweep and compare shortened to 10 s of arrivals to stay quick).
RUN = ["run", "--scheduler", "chunked", "--workload", "rag", "--hardware", "a100"]
COMPARE = ["compare", "--schedulers", "fcfs,chunked", "--workload", "rag", "--hardware", "rtx3050", "--max-model-len", "8192", "--duration", "10"]
# In process the sweep runs serially (forking a test process that other tests may have filled with threads is
# asking for trouble); the console-script test runs it over worker processes and checks the documents agree.
SWEEP = ["sweep", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--min-rate", "2", "--max-rate", "18",
         "--step", "4", "--duration", "10", "--workers", "1"]

METRIC_KEYS = {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "request_throughput", "output_throughput", "goodput",
               "slo_attainment", "mbu", "mfu", "preemptions", "completed", "rejected"}


def cli_run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys, argv: list[str]) -> dict:
    code, out, err = cli_run(capsys, argv + ["--json"])
    assert code == 0, err
    return json.loads(out)  # exactly one JSON document: json.loads rejects anything after it


def check_metrics(metrics: dict) -> None:
    assert METRIC_KEYS <= set(metrics)
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert {"mean", "p50", "p90", "p99"} <= set(metrics[key])
    assert 0.0 <= metrics["slo_attainment"] <= 1.0
    assert metrics["completed"] + metrics["rejected"] == metrics["num_requests"]


def console_script() -> str:
    path = Path(sys.executable).with_name("sched-sim")
    found = str(path) if path.exists() else shutil.which("sched-sim")
    assert found, "the sched-sim console script is not installed (pip install -e .)"
    return found


REPO = Path(__file__).resolve().parent.parent


def run_script(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH puts this checkout ahead of wherever the package was installed from in editable mode (another
    # worktree, say), so the script runs the code under test.
    return subprocess.run([console_script(), *argv], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


# ---------------------------------------------------------------------------------------------------------
# The command forms
# ---------------------------------------------------------------------------------------------------------
def test_run_json(capsys):
    doc = cli_json(capsys, RUN)
    assert set(doc) >= {"scenario", "schedulers"}
    assert doc["scenario"]["scheduler"] == "chunked" and doc["scenario"]["hardware"] == "a100"
    assert list(doc["schedulers"]) == ["chunked"]
    check_metrics(doc["schedulers"]["chunked"]["metrics"])
    # The scenario dict is canonical: it parses back into the same Scenario.
    assert Scenario(**doc["scenario"]) == Scenario(scheduler="chunked", workload="rag", hardware="a100")


def test_compare_json_same_requests_for_every_scheduler(capsys):
    doc = cli_json(capsys, COMPARE)
    assert list(doc["schedulers"]) == ["fcfs", "chunked"]
    assert "scheduler" not in doc["scenario"] and doc["scenario"]["duration"] == 10
    for entry in doc["schedulers"].values():
        check_metrics(entry["metrics"])
    fcfs, chunked = (doc["schedulers"][s]["metrics"] for s in ("fcfs", "chunked"))
    assert fcfs["num_requests"] == chunked["num_requests"] > 0
    # vLLM's budget on this GPU for the chunked scheduler (engines.json); fcfs prefills whole prompts: max_model_len.
    assert doc["schedulers"]["chunked"]["resolved"]["token_budget"] == 2048
    assert doc["schedulers"]["fcfs"]["resolved"]["token_budget"] == doc["schedulers"]["fcfs"]["resolved"]["max_model_len"]


def test_sweep_json_has_every_rate_and_a_knee(capsys):
    doc = cli_json(capsys, SWEEP)
    assert doc["slo_target"] == 0.9 and doc["rates"] == [2, 6, 10, 14, 18]
    assert "scheduler" not in doc["scenario"] and "rate" not in doc["scenario"]
    assert list(doc["schedulers"]) == ["fcfs", "chunked"]
    for entry in doc["schedulers"].values():
        assert [p["rate"] for p in entry["points"]] == [2, 6, 10, 14, 18]
        for p in entry["points"]:
            check_metrics(p["metrics"])
        assert "knee_rate" in entry
        # The knee: highest rate with attainment >= target at it and every lower rate.
        expected = None
        for p in entry["points"]:
            if p["metrics"]["slo_attainment"] < 0.9:
                break
            expected = p["rate"]
        assert entry["knee_rate"] == expected


def test_human_tables(capsys):
    code, out, err = cli_run(capsys, COMPARE)
    assert code == 0, err
    for text in ("Setup", "NVIDIA RTX 3050", "llama-3.2-1b", "fp16", "tp=1", "KV cache", "Token budget",
                 "Workload", "rag", "6 req/s", "SLOs", "TTFT <= 1000 ms", "TPOT <= 100 ms",
                 "Mean TTFT (ms)", "Median TTFT (ms)", "P90 TTFT (ms)", "P99 TTFT (ms)", "Mean TPOT (ms)",
                 "P99 TPOT (ms)", "P99 ITL (ms)", "P99 E2EL (ms)", "Request throughput (req/s)",
                 "Output throughput (tok/s)", "Goodput (req/s, TTFT<=1000ms & TPOT<=100ms)", "SLO attainment (%)",
                 "MBU (%)", "MFU (%)", "KV cache use, mean (%)", "KV cache use, peak (%)", "Preemptions",
                 "Completed", "Rejected"):
        assert text in out, text
    # rag mixes two request classes: each gets its own rows.
    assert "retrieval: P99 TTFT (ms)" in out and "chat: SLO attainment (%)" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("fcfs"))
    assert header.split() == ["fcfs", "chunked"]

    code, out, err = cli_run(capsys, ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "30"])
    assert code == 0 and "P99 ITL (ms)" in out and "chunked" in out

    code, out, err = cli_run(capsys, SWEEP)
    assert code == 0, err
    assert "Saturation knee" in out and "P99 TTFT (ms)" in out and "P99 ITL (ms)" in out and "Goodput (req/s)" in out
    assert err == ""  # no progress bar when stderr is not a terminal


def test_json_is_deterministic_in_process(capsys):
    first = cli_run(capsys, COMPARE + ["--json"])[1]
    second = cli_run(capsys, COMPARE + ["--json"])[1]
    assert first == second


def test_console_script_deterministic_across_processes(capsys, tmp_path):
    argv = COMPARE + ["--json"]
    a, b = run_script(argv, tmp_path), run_script(argv, tmp_path)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    assert a.stdout == cli_run(capsys, argv)[1]  # and the same as in this process
    json.loads(a.stdout)


def test_console_script_parallel_sweep_matches_serial(capsys, tmp_path):
    assert SWEEP[-2:] == ["--workers", "1"]
    proc = run_script(SWEEP[:-1] + ["2", "--json"], tmp_path)  # two worker processes
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal
    assert proc.stdout == cli_run(capsys, SWEEP + ["--json"])[1]


def test_console_script_user_error(tmp_path):
    proc = run_script(["run", "--tp", "12"], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: --tp: ") and "8" in proc.stderr and "12" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------------------
# User errors: exit 2, one line naming the flag, never a traceback
# ---------------------------------------------------------------------------------------------------------
BAD_INPUTS = [
    (["run", "--tp", "12"], "--tp", "between 1 and 8 (one node), or 16, 32 or 64"),
    (["run", "--tp", "two"], "--tp", ">= 1, <= 64"),
    (["run", "--tp", "3"], "--tp", "pick one of 1, 2, 4, 8"),
    (["run", "--hardware", "tpu-v9"], "--hardware", "rtx3050"),
    (["compare", "--schedulers", "fcfs,nope"], "--schedulers", "nope"),
    (["sweep", "--schedulers", "fcfs,nope", "--min-rate", "1", "--max-rate", "2"], "--schedulers", "chunked"),
    (["run", "--rate", "-1"], "--rate", "between 1e-06 and 10000"),
    (["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--model", "llama-3-70b"], "--model", "rtx3050"),
    (["run", "--trace", "{tmp}/missing.csv"], "--trace", "no such file"),
    (["run", "--trace", "{tmp}/malformed.csv"], "--trace", "line 3"),
    (["sweep", "--min-rate", "18", "--max-rate", "2", "--step", "4"], "--min-rate", "--max-rate"),
    (["sweep", "--min-rate", "2", "--max-rate", "20000"], "--max-rate", "10000"),
    (["sweep", "--min-rate", "1", "--max-rate", "2", "--step", "0"], "--step", "greater than 0"),
    (["sweep", "--min-rate", "1", "--max-rate", "2", "--step", "1e-6"], "--step", "at most"),
    (["sweep", "--min-rate", "1", "--max-rate", "2", "--slo-target", "90"], "--slo-target", "between 0 and 1"),
    (["run", "--num-requests", "5", "--trace-out", "{tmp}/no-such-dir/t.json"], "--trace-out", "does not exist"),
    (["run", "--block-size", "7"], "--block-size", "16"),
    (["run", "--duration", "604800", "--rate", "10000"], "--duration", "10,000,000"),
    (["sweep", "--min-rate", "1", "--max-rate", "9000", "--step", "8999", "--duration", "100000"], "--duration",
     "10,000,000"),
    (["run", "--kv-blocks", "99999999"], "--kv-blocks", "50000000"),
    (["run", "--max-model-len", "100000"], "--max-model-len", "8192"),
    (["run", "--preemption", "sometimes"], "--preemption", "recompute"),
    (["run", "--no-such-flag"], "--no-such-flag", "unrecognized"),
    (["compare", "--scheduler", "fcfs", "--rate"], "--rate", "expected one argument"),
    (["sweep", "--rate", "3", "--min-rate", "1", "--max-rate", "2"], "--rate", "unrecognized"),
    (["frobnicate"], "frobnicate", "invalid choice"),
    (["serve", "--port", "99999"], "--port", "65535"),
]


@pytest.mark.parametrize(("argv", "flag", "hint"), BAD_INPUTS, ids=[" ".join(a) for a, _, _ in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, argv, flag, hint):
    (tmp_path / "malformed.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,20\n0.5,lots,20\n", encoding="utf-8")
    code, out, err = cli_run(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("error: ") and flag in err and hint in err, err
    assert "Traceback" not in err


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, expected in ((Terminal(), "\r[" + "#" * 21 + "." * 9 + "] 7/10"), (io.StringIO(), "")):
        monkeypatch.setattr(sys, "stderr", stream)
        bar = report.Progress(10)
        bar.update(7, 10)
        assert stream.getvalue().endswith(expected) if expected else stream.getvalue() == ""
    bar.update(10, 10)


def test_interrupt_exits_130(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate, "run", interrupted)
    code, out, err = cli_run(capsys, ["run", "--num-requests", "5"])
    assert code == 130 and err == "interrupted\n" and "Traceback" not in err


def test_help_lists_generated_scenario_flags(capsys):
    code, out, _ = cli_run(capsys, ["run", "--help"])
    assert code == 0
    for field in Scenario.model_fields:
        assert flag_name(field) in out
    for flag in ("--scheduler", "--hardware", "--model", "--tp", "--workload", "--trace", "--rate", "--duration",
                 "--num-requests", "--seed", "--token-budget", "--max-seqs", "--preemption", "--slo-ttft-ms",
                 "--slo-tpot-ms", "--trace-out", "--json"):
        assert flag in out
    assert "{recompute,swap,none}" in out and "tensor-parallel degree" in out

    code, out, _ = cli_run(capsys, ["sweep", "--help"])
    assert code == 0 and "--rate " not in out and "--rate\n" not in out and "--min-rate" in out
    assert "--schedulers" in out and "--workers" in out and "--slo-target" in out


def test_list_shows_every_name(capsys):
    code, out, _ = cli_run(capsys, ["list"])
    assert code == 0
    for name in [*GPUS, *MODELS, *PRESETS, *SCHEDULER_NAMES]:
        assert name in out, name
    assert "NVIDIA A100 80GB SXM" in out and "2039 GB/s" in out
    doc = cli_json(capsys, ["list"])
    assert [g["key"] for g in doc["gpus"]] == list(GPUS)
    assert [s["name"] for s in doc["schedulers"]] == list(SCHEDULER_NAMES)


def test_scenario_flags_reach_the_scenario(capsys):
    doc = cli_json(capsys, ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "20", "--block-size", "32",
                            "--token-budget", "256", "--max-seqs", "8", "--preemption", "swap", "--seed", "7",
                            "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--rate", "3.5"])
    s = doc["scenario"]
    assert (s["block_size"], s["token_budget"], s["max_seqs"], s["preemption"], s["seed"]) == (32, 256, 8, "swap", 7)
    slo = doc["schedulers"]["chunked"]["metrics"]["slo"]
    assert (slo["ttft_ms"], slo["tpot_ms"]) == (500, 50)
    assert doc["schedulers"]["chunked"]["metrics"]["num_requests"] == 20


@pytest.mark.skipif(not any(info.annotation is bool for info in Scenario.model_fields.values()),
                    reason="no boolean scenario field")
def test_boolean_fields_are_switches(capsys):
    # attention_dp needs ep > 1 beside it (test_expert_parallel.py): the first switch that stands alone.
    name = next(f for f, info in Scenario.model_fields.items() if info.annotation is bool and f != "attention_dp")
    flag = flag_name(name)
    base = ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "10"]
    assert cli_json(capsys, base + [flag])["scenario"][name] is True  # bare switch
    assert cli_json(capsys, base + [flag, "false"])["scenario"][name] is False
    code, _, err = cli_run(capsys, base + [flag, "perhaps"])
    assert code == 2 and flag in err


def test_trace_file_replay(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{k * 0.2},{100 + k},{10 + k}\n"
                                                                       for k in range(12)), encoding="utf-8")
    doc = cli_json(capsys, ["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--trace", trace])
    assert all(e["metrics"]["completed"] == 12 for e in doc["schedulers"].values())


# ---------------------------------------------------------------------------------------------------------
# Trace export through the CLI
# ---------------------------------------------------------------------------------------------------------
def test_run_trace_out(capsys, tmp_path):
    path = tmp_path / "run.json"
    code, out, err = cli_run(capsys, ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "rag", "--num-requests", "30",
                                      "--trace-out", path])
    assert code == 0, err
    assert str(path) in out and "ui.perfetto.dev" in out
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert trace["traceEvents"] and trace["metadata"]["requests_shown"] == 30


def test_run_trace_out_with_json_keeps_stdout_one_document(capsys, tmp_path):
    path = tmp_path / "run.json"
    code, out, err = cli_run(capsys, ["run", "--num-requests", "10", "--trace-out", path, "--json"])
    assert code == 0 and json.loads(out)["schedulers"]["chunked"] and str(path) in err


def test_compare_trace_out_writes_one_file_per_scheduler(capsys, tmp_path):
    code, out, err = cli_run(capsys, ["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192",
                                      "--num-requests", "20", "--trace-out", tmp_path / "cmp.json"])
    assert code == 0, err
    for s in ("fcfs", "chunked"):
        path = tmp_path / f"cmp-{s}.json"
        assert str(path) in out
        assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["scheduler"] == s
    assert not (tmp_path / "cmp.json").exists()


def test_sampled_step_log_warns_and_still_writes(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(simulate, "run", lambda sc, **kw: sim_core.run(sc, max_step_records=32, **kw))
    path = tmp_path / "big.json"
    code, out, err = cli_run(capsys, ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--num-requests", "30", "--trace-out", path])
    assert code == 0 and "sampled" in err and err.startswith("note: ")
    assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["requests_shown"] == 0


def test_trace_path_for():
    assert trace_path_for("trace.json", "fcfs") == "trace-fcfs.json"
    assert trace_path_for("out/run.trace.json", "spf") == str(Path("out/run-spf.trace.json"))
    assert trace_path_for("trace", "chunked") == "trace-chunked"


def test_serve_runs_uvicorn_on_the_web_app(capsys, monkeypatch):
    from app.web import serving

    calls = []
    monkeypatch.setattr(serving, "serve", lambda host, port, settings: calls.append((host, port, settings)))
    monkeypatch.setattr(serve, "_web_available", lambda: True)
    for var in ("SCHED_SIM_ALLOWED_HOSTS", "SCHED_SIM_MAX_CONNECTIONS"):  # restored afterwards: serve exports them
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setenv("SCHED_SIM_STORE_MAX_MB", "64")  # a flag's default comes from its environment variable
    assert cli_run(capsys, ["serve", "--host", "0.0.0.0", "--port", "8123", "--allowed-hosts", "Sim.Example.org,x.io",
                            "--max-connections", "50"])[0] == 0
    [(host, port, settings)] = calls
    assert (host, port) == ("0.0.0.0", 8123)
    assert settings.allowed_hosts == ("sim.example.org", "x.io")
    assert (settings.max_connections, settings.store_max_mb) == (50, 64)
    # the application (uvicorn imports app.web:app) reads the flags from the environment
    assert os.environ["SCHED_SIM_ALLOWED_HOSTS"] == "sim.example.org,x.io"
    assert os.environ["SCHED_SIM_MAX_CONNECTIONS"] == "50"


def test_help_shows_each_fields_bounds_from_the_model(capsys):
    code, out, _ = cli_run(capsys, ["run", "--help"])
    text = " ".join(out.split())
    bounded = [name for name in Scenario.model_fields if bounds_text(name)]
    assert "tp" in bounded and "rate" in bounded
    for name in bounded:
        assert bounds_text(name) in text, name


def test_run_and_list_load_neither_the_web_stack_nor_a_process_pool():
    """`sched-sim run` starts faster for not importing what only `serve` and `sweep` need."""
    code = ("import sys\n"
            "from app.cli import main\n"
            "assert main(['run', '--num-requests', '5', '--hardware', 'rtx3050', '--max-model-len', '8192', '--json']) == 0\n"
            "assert main(['list']) == 0\n"
            "heavy = ('fastapi', 'starlette', 'uvicorn', 'jinja2', 'plotly', 'multiprocessing', 'concurrent.futures.process')\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_compare_with_seeds_reports_means_and_intervals(capsys):
    doc = cli_json(capsys, ["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "rag",
                            "--duration", "5", "--seeds", "3", "--json"])
    for name in ("fcfs", "chunked"):
        entry = doc["schedulers"][name]
        assert entry["seeds"] == [0, 1, 2]
        low, high = entry["ci95"]["ttft_ms"]["p99"]
        assert low <= entry["metrics"]["ttft_ms"]["p99"] <= high
        assert set(entry["ci95"]) <= set(entry["metrics"])
    code, out, _ = cli_run(capsys, ["run", "--hardware", "rtx3050", "--max-model-len", "8192", "--duration", "5", "--seeds", "2"])
    assert code == 0 and "mean ± 95% CI over 2 seeds" in out and " ± " in out


def test_trace_that_is_not_a_regular_file_and_escaped_errors(capsys, tmp_path, monkeypatch):
    code, _, err = cli_run(capsys, ["run", "--trace", "/dev/zero"])
    assert code == 2 and "is a character device, not a regular file" in err and "no such file" not in err
    # A short relative path: the error shortens a long one with an ellipsis, which could cut the escape it shows.
    monkeypatch.chdir(tmp_path)
    code, _, err = cli_run(capsys, ["run", "--trace", "no\x1b[31mred.csv"])
    assert code == 2 and "\x1b" not in err and "\\x1b" in err


def test_serve_answers_at_once_and_stops_within_5_s_of_sigterm(tmp_path):
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([console_script(), "serve", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the server did not come up"
                time.sleep(0.2)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - start < 5.0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_large_run_is_announced_with_its_step_estimate(capsys, monkeypatch):
    """The CLI runs anything, but says first when a run is long: its lower bound on engine steps, which is
    (prompt + output tokens) / token budget summed over the schedulers."""
    argv = ["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "chat",
            "--num-requests", "40", "--token-budget", "64"]
    code, _, err = cli_run(capsys, argv)
    assert code == 0 and "note:" not in err
    monkeypatch.setattr(simulate, "NOTE_REQUESTS", 10)
    monkeypatch.setattr(simulate, "NOTE_STEPS", 100)
    code, _, err = cli_run(capsys, argv)
    s = Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=40, token_budget=64)
    reqs = sim_core.runner.make_requests(s, sim_core.resolve(s))
    steps = 2 * -(-int(reqs.prompt_tokens.sum() + reqs.output_tokens.sum()) // 64)
    assert code == 0 and f"note: 40 requests, at least {steps:,} engine steps over 2 runs" in err, err


# ----- step-time -----
STEP = ["step-time", "--hardware", "a100", "--model", "llama-3-8b", "--prefill-tokens", "412", "--context-tokens",
        "300", "--decode-seqs", "100", "--decode-context", "800"]


def test_step_time_json_components_sum_to_the_step(capsys):
    doc = cli_json(capsys, STEP)
    assert set(doc["components_ms"]) == {"linear", "attention", "elementwise", "lm_head", "communication",
                                         "overhead"}
    assert sum(doc["components_ms"].values()) == pytest.approx(doc["step_ms"])
    assert doc["bound"] in ("memory", "compute") and 0 < doc["mbu"] < 1 and 0 < doc["mfu"] < 1
    assert doc["components_ms"]["communication"] == 0  # tp=1
    tp4 = cli_json(capsys, ["step-time", "--hardware", "h100", "--model", "llama-3-70b", "--tp", "4",
                            "--prefill-tokens", "2048"])
    assert tp4["components_ms"]["communication"] > 0 and tp4["bound"] == "compute"
    decode = cli_json(capsys, ["step-time", "--decode-seqs", "1", "--decode-context", "512"])
    assert decode["bound"] == "memory" and decode["model"] == "llama-3-8b"  # the GPU's default model


def test_step_time_table_and_errors(capsys):
    code, out, _ = cli_run(capsys, STEP)
    assert code == 0 and "step time" in out and "linear" in out and "overhead" in out
    code, _, err = cli_run(capsys, ["step-time", "--tp", "9", "--decode-seqs", "x"])
    assert code == 2
    assert "--tp: must be between 1 and 8" in err and "--decode-seqs: must be an integer between 0 and 4096" in err
    code, _, err = cli_run(capsys, ["step-time"])
    assert code == 2 and "prefill_tokens or decode_seqs" in err
    code, _, err = cli_run(capsys, ["step-time", "--model", "llama-3-70b", "--decode-seqs", "1"])
    assert code == 2 and err.startswith("error: --model: llama-3-70b needs")
    code, out, _ = cli_run(capsys, ["step-time", "--help"])
    text = " ".join(out.split())
    assert "--decode-context" in text and ">= 0, <= 4096" in text


# Issue 12: "with an empty numba cache, `/` answers 200 within 15 s of server start".
COLD_START_LIMIT_S = 15.0


@pytest.mark.slow
def test_with_an_empty_numba_cache_the_page_answers_within_15_s(tmp_path):
    """A fresh clone's first `sched-sim serve`: the kernels compile in the background (about a minute on two
    cores) while the page answers at once with the form and a card saying so. The server is killed as soon as it
    has answered, so the compilation costs the suite nothing more."""
    import socket
    import time
    import urllib.request

    cache = tmp_path / "numba-cache"
    cache.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    proc = subprocess.Popen([console_script(), "serve", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(cache)})
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    status, page = r.status, r.read().decode()
                    break
            except OSError:
                assert time.monotonic() - start < COLD_START_LIMIT_S and proc.poll() is None, \
                    f"no answer from / within {COLD_START_LIMIT_S:g} s of start"
                time.sleep(0.1)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert status == 200 and elapsed < COLD_START_LIMIT_S, elapsed
    assert 'id="scenario-form"' in page and "Compiling the simulator" in page


def test_a_run_parses_its_flags_without_importing_the_planner_step_time_or_calibration_models():
    """Start-up (issue 8): only the named command's parser reads those modules' pydantic fields."""
    code = ("import contextlib, io, sys\nfrom app.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['run', '--num-requests', '5']) == 0\n"
            "print(sorted(m for m in ('sim_core.studies.planner', 'sim_core.step_time', 'sim_core.studies.calibration') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_version_prints_on_stdout(capsys):
    assert main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("sched-sim ") and not err


def test_console_script_exits_at_once_only_with_everything_written(tmp_path):
    """entry() skips the interpreter's teardown: the file a command writes and its output must be whole."""
    path = tmp_path / "t.json"
    proc = run_script(["run", "--num-requests", "40", "--trace-out", str(path), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schedulers"] and json.loads(path.read_text(encoding="utf-8"))["traceEvents"]


def test_a_command_that_left_a_thread_running_exits_the_normal_way():
    import threading

    from app.cli import _nothing_left_running

    assert _nothing_left_running() == (threading.active_count() == 1 and "ray" not in sys.modules)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not _nothing_left_running()
    finally:
        stop.set()
        t.join()


# ----- one module per subcommand -----
def test_every_command_module_is_registered_in_order():
    """app/cli/commands/ holds one module per subcommand and COMMANDS lists them: a module left out of the list
    (or a name without its module) fails here, and the parser offers exactly the listed commands, in that order."""
    import argparse
    import pkgutil

    from app.cli import commands, dispatch

    on_disk = {m.name for m in pkgutil.iter_modules(commands.__path__)}
    assert on_disk == set(commands.COMMANDS) and len(commands.COMMANDS) == len(on_disk)
    modules = commands.load_all()
    for (name, summary), module in zip(commands.COMMANDS.items(), modules, strict=True):
        assert module.NAME == name.replace("_", "-"), module.__name__
        assert summary and callable(module.add_arguments) and callable(module.handle), module.__name__
    sub = next(a for a in dispatch.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [m.NAME for m in modules]


@pytest.mark.parametrize("name", [n.replace("_", "-") for n in COMMANDS])
def test_each_command_has_its_help(capsys, name):
    import re

    from app.cli import commands

    summary = commands.COMMANDS[name.replace("-", "_")]
    code, out, err = cli_run(capsys, [name, "--help"])
    assert code == 0 and not err
    assert out.startswith(f"usage: sched-sim {name} ") and " ".join(summary.split()) in " ".join(out.split())
    code, out, _ = cli_run(capsys, ["--help"])
    assert code == 0 and re.search(rf"^    {re.escape(name)}(\s|$)", out, re.M), out


def test_nothing_outside_the_cli_imports_it():
    """The web and shared modules do not reach into app.cli (what both faces need lives in app/, e.g.
    app/plan_report.py); only the console script (pyproject.toml) and the tests import it."""
    import ast

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for path in sorted((root / "app").rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[:2] == ("app", "cli"):
            continue
        package = list(rel.with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                names = [".".join(base + ([node.module] if node.module else []))]
                if names == ["app"]:  # `from . import cli`
                    names = [f"app.{a.name}" for a in node.names]
            else:
                continue
            offenders += [f"{rel}: {n}" for n in names if n == "app.cli" or n.startswith("app.cli.")]
    assert not offenders, offenders


def test_an_ascii_locale_prints_stand_ins_instead_of_dying(tmp_path):
    # A bare container or CI runner (LC_ALL=C, no UTF-8 coercion) encodes stdout as ASCII: the ± of a seed CI
    # and the bundled CSVs' non-ASCII source notes must not crash the command.
    ascii_env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    for argv, shown in ((["run", "--rate", "2", "--num-requests", "20", "--seeds", "2"], b"? "),  # the CI's +-
                        (["validate", "--quick"], b"serving")):
        proc = subprocess.run([console_script(), *argv], capture_output=True, cwd=tmp_path, timeout=300, env=ascii_env)
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])
        assert shown in proc.stdout, argv
