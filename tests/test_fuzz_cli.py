"""Fuzzing the command line: any subcommand with any flags and any values either works (exit 0) or prints one
`error:` line and exits 2 — never a traceback, never a hang.

The flags are read from the parser itself (so a new flag is fuzzed without touching this file). What a run
simulates is cut to a few requests (a fuzzed `--duration 1e6 --rate 1e3` is a legitimate, merely long, run; the
point here is the parsing and checking, not the simulation), and files are only written under a temporary
directory. The long campaign: FUZZ_CLI_EXAMPLES=10000 pytest tests/test_fuzz_cli.py -s
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim_core.studies.capacity
import sim_core.studies.executor
import sim_core.studies.frontier
import sim_core.studies.planner
import sim_core.studies.sweep
import sim_core.studies.validation
from app.cli import dispatch, main, simulate
from app.cli.commands import sweep as sweep_command

EXAMPLES = int(os.environ.get("FUZZ_CLI_EXAMPLES", "150"))
# `serve` starts a server; tests/test_cli.py covers its flags
COMMANDS = ("run", "compare", "diff", "sweep", "capacity", "plan", "frontier", "list", "calibrate", "step-time",
            "validate")


def _flags_of(command: str) -> list[str]:
    parser = dispatch.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [s for a in sub.choices[command]._actions for s in a.option_strings if s.startswith("--")]


FLAGS = {c: _flags_of(c) for c in COMMANDS}
ODD_VALUES = ["", " ", "-1", "0", "1", "2", "1e-320", "1e-300", "1e400", "-0", "nan", "inf", "-inf", "abc", "1,2",
              "fcfs,fcfs", "fcfs,chunked", "h100", "a100", "rtx3050", "rag", "chat", "agent", "true", "false",
              "9" * 400, "\x1b[31mred", "\x00", "é", "--json", "/dev/zero", "/dev/null", "/nonexistent/x.csv", ".",
              # diff's --a / --b QUERY: a scenario, one with a bad value, one over other requests
              "scheduler=fcfs&workload=chat", "workload=chat&rate=-1", "seed=9&num_requests=5", "schedulers=x,y",
              # issue #26's hostile inputs: files bounded_cli writes, links that name local files, non-queries
              "deep.json", "huge-int.json", "one-line.csv", "http://x/?trace=/etc/passwd", "hardware=a100&trace=x.csv",
              "not a url", "http://x/", "0.00001",
              # a FIFO (opening it blocks: a hang), a link naming a local model config, a validation dir without tables
              "pipe", "http://x/?model_file=/etc/passwd", "model_file=deep.json&hardware=h100", "empty-dir"]
HOSTILE_FILES = {"deep.json": "[" * 100_000 + "]" * 100_000, "huge-int.json": '{"tp": 1' + "0" * 5000 + "}",
                 "one-line.csv": "arrival_s," + "9" * (1 << 21)}
VALUES = st.one_of(st.sampled_from(ODD_VALUES), st.text(max_size=12), st.integers().map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
# Files the CLI may write go under the test's temporary directory, whatever the fuzzer names them.
SAFE_NAME = st.text(alphabet="abcxyz._-\x1b é", min_size=0, max_size=12).map(lambda s: "out-" + s.replace("..", "_"))


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(COMMANDS))
    argv = [command]
    for flag in draw(st.lists(st.sampled_from(FLAGS[command]), max_size=6)):
        argv.append(flag)
        if flag in ("--trace-out", "--out", "--metrics-out"):
            argv.append(draw(SAFE_NAME))
        elif draw(st.integers(0, 9)):  # now and then a flag without its value
            argv.append(draw(VALUES))
    if draw(st.booleans()):
        argv.insert(draw(st.integers(0, len(argv))), draw(VALUES))  # a stray word anywhere
    return argv


def _small(scenario):
    """The same scenario cut to a few requests and seeds: the parsing was what mattered."""
    return scenario.model_copy(update={"num_requests": 6, "seeds": min(scenario.seeds, 2)})


@pytest.fixture
def bounded_cli(monkeypatch, tmp_path):
    real_run, real_run_seeds, real_sweep = simulate.run, simulate.run_seeds, sim_core.studies.sweep.sweep
    monkeypatch.setattr(simulate, "run", lambda sc, **kw: real_run(_small(sc), **kw))
    monkeypatch.setattr(simulate, "run_seeds", lambda sc, **kw: real_run_seeds(_small(sc), **kw))
    monkeypatch.setattr(sim_core.studies.capacity, "run", lambda sc, **kw: real_run(_small(sc), **kw))
    monkeypatch.setattr(sim_core.studies.planner, "run", lambda sc, **kw: real_run(_small(sc), **kw))
    monkeypatch.setattr(sim_core.studies.frontier, "run", lambda sc, **kw: real_run(_small(sc), **kw))
    monkeypatch.setattr(sweep_command, "sweep", lambda sc, names, rates, **kw: real_sweep(  # the name the command calls
        _small(sc), names, list(rates)[:3], **{**kw, "workers": 1}))
    monkeypatch.setattr(simulate, "NOTE_REQUESTS", float("inf"))  # the note generates the whole workload
    # Any --executor runs here, in this process: the fuzzing is about the flags (tests/test_executor.py runs Ray).
    monkeypatch.setattr(sim_core.studies.executor, "make_executor", lambda kind, **kw: sim_core.studies.executor.LocalExecutor(1))
    # validate's simulated rows take minutes: its tables' other rows, once per directory, are what it is fuzzed on
    quick_checks = functools.cache(functools.partial(sim_core.studies.validation.checks, simulate=False))
    monkeypatch.setattr(sim_core.studies.validation, "checks", lambda directory, simulate=True: quick_checks(directory))
    monkeypatch.chdir(tmp_path)
    for name, text in HOSTILE_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "empty-dir").mkdir()


def test_any_command_line_works_or_says_why_in_one_line(bounded_cli):
    seen: list[list[str]] = []
    codes: dict[int, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(argv=argvs())
    def works_or_refuses(argv):
        seen.append(argv)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        codes[code] = codes.get(code, 0) + 1
        text = err.getvalue()
        assert "Traceback" not in text and "Traceback" not in out.getvalue(), (argv, text)
        assert "root:" not in text + out.getvalue(), (argv, text)  # /etc/passwd's first line: no local file leaks
        if code == 0:
            return
        assert code == 2, (argv, code, text)
        lines = [line for line in text.splitlines() if line and not line.startswith("note:")]
        # argparse prints its usage block before its one error line; ours print the error line alone.
        assert lines and lines[-1].startswith(("error:", "sched-sim")) and "error:" in lines[-1], (argv, text)
        assert lines[-1].isprintable(), (argv, text)

    works_or_refuses()
    print(f"{len(seen)} fuzzed command lines; exit codes {dict(sorted(codes.items()))}")
