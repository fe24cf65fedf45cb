"""Command-line flags: the scenario flags generated from `sim_core.Scenario`'s fields, the parsers of the other
flags, the flags several commands share (schedulers, executor), and the one-line texts of user errors, each
naming the flag it is about. A command's own flags are in its module (app/cli/commands/).

A scenario flag is parsed as a string and validated by `sim_core.parse_scenario`, so the command line, the
dashboard's URLs and the JSON API accept exactly the same things; its help, and the bounds in its error messages,
come from `sim_core.fields`, which the dashboard's form reads too.
"""

from __future__ import annotations

import argparse
import math
import os
import re

from pydantic import BaseModel

from sim_core import SCHEDULER_NAMES, Scenario, ScenarioError, SetupError, TraceError, parse_scenario
from sim_core.fields import bounds_text, field_info
from sim_core.hardware_profile import ProfileError, read_profile_document
from sim_core.input_files import input_file_problem
from sim_core.quoting import quote

from .usage import UsageError

# ---------------------------------------------------------------------------------------------------------
# Scenario flags, generated from the pydantic model
# ---------------------------------------------------------------------------------------------------------
# Fields whose flag is not their name with dashes: model_file takes a Hugging Face config.json, --model-config
# as issue #22 names it (pydantic reserves the field name model_config); power_cap_w takes watts, --power-cap.
FLAG_NAMES = {"model_file": "--model-config", "power_cap_w": "--power-cap"}  # issue #40 names --power-cap W


def flag_name(field: str) -> str:
    return FLAG_NAMES.get(field) or "--" + field.replace("_", "-")


def _flag_help(name: str, model: type[BaseModel] = Scenario) -> str:
    info = field_info(name, model)
    parts = [info.description]
    if info.choices:
        parts.append("one of: " + ", ".join(str(c) for c in info.choices))
    bounds = bounds_text(name, model)
    if bounds:
        parts.append(bounds)
    if info.default is not None:
        parts.append(f"default: {info.default}")
    return "; ".join(parts).replace("%", "%%")  # argparse formats help with %


def add_scenario_flags(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    add_model_flags(parser, Scenario, "scenario", "every scenario field; unset ones take the workload's or GPU's "
                                                  "default", exclude)
    parser.add_argument("--scenario", dest="scenario_query", metavar="QUERY",
                        help="a scenario as a query string or a whole dashboard URL (what a share link or a plan "
                             "carries); flags given as well override its fields")


# Keys a dashboard URL carries that are not scenario fields: the playback time and a sweep's rate range (the CLI's
# sweep takes its range from --min-rate/--max-rate/--step).
PAGE_ONLY_KEYS = ("t", "rate_min", "rate_max", "rate_step")


# Scenario fields whose value is a path on this machine: a query (a shared link, a plan's scenario) may name one
# only when its flag is given beside it, which wins, so a link from elsewhere never makes a command read a file
# of this machine (and quote its first line in an error). hardware_profile's value is the profile itself.
LOCAL_FILE_FIELDS = ("trace", "model_file")


def query_scenario(text: str, trace_given: bool = False, has_trace_flag: bool = True,
                   files_given: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str] | None]:
    """--scenario QUERY: (its scenario fields, its schedulers if it names several). A whole URL is cut at '?'.
    A query that names a trace file (a plan's scenario does) needs --trace beside it (`trace_given`), which wins:
    a link from elsewhere must not make this command read a file of this machine (and quote it in an error);
    so does any other LOCAL_FILE_FIELDS field, with its flag (`files_given`: the fields whose flags were given).
    `has_trace_flag`: whether the command has those flags to suggest (diff's --a and --b have none)."""
    from urllib.parse import parse_qsl

    fields: dict[str, str] = {}
    schedulers = None
    query = text.partition("?")[2].partition("#")[0] if "?" in text else text
    for part in query.split("&"):
        if part and "=" not in part:  # 'not a url', a URL without its query, a field without a value
            raise UsageError(f"--scenario: expected a query string such as hardware=a100&rate=4 or a dashboard "
                             f"URL with one after '?' (got {quote(text)})")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "schedulers":
            schedulers = [s for s in value.split(",") if s]
        elif key == "upload":
            raise UsageError("--scenario: its trace was uploaded to a dashboard and lives there; give the file "
                             "with --trace FILE instead")
        elif key == "model_file" and key not in files_given and re.fullmatch(r"[0-9a-f]{16}", value) and not os.path.exists(value):
            raise UsageError("--scenario: its model's config.json was uploaded to a dashboard and lives there "
                             "(model_file names it by its id); give the file with --model-config FILE instead")
        elif key == "trace":
            if not trace_given:
                raise UsageError("--scenario: it names a trace file, which this command reads only from --trace: "
                                 "give the file with --trace FILE" if has_trace_flag else
                                 "--scenario: it names a trace file, which a query may not make this command read "
                                 "(a shared link must not read this machine's files)")
        elif key in LOCAL_FILE_FIELDS:
            if key not in files_given:
                flag = flag_name(key)
                raise UsageError(f"--scenario: it names a file ({key}), which this command reads only from {flag}: "
                                 f"give the file with {flag} FILE" if has_trace_flag else
                                 f"--scenario: it names a file ({key}), which a query may not make this command "
                                 "read (a shared link must not read this machine's files)")
        elif key in fields:
            raise UsageError(f"--scenario: {key} is given more than once")
        elif key not in PAGE_ONLY_KEYS and value != "":
            fields[key] = value
    return fields, schedulers


def add_model_flags(parser: argparse.ArgumentParser, model: type[BaseModel], title: str, description: str,
                    exclude: tuple[str, ...] = ()) -> None:
    """One flag per field of `model` (Scenario, or another input model such as StepShape)."""
    group = parser.add_argument_group(title, description)
    for name in model.model_fields:
        if name in exclude:
            continue
        info = field_info(name, model)
        extra = {}
        if info.is_bool:
            # `--adaptive-budget` alone means true; `--adaptive-budget false` is accepted too.
            metavar, extra = "{true,false}", {"nargs": "?", "const": "true"}
        elif name in ("trace", "hardware_profile", "model_file"):
            metavar = "FILE"
        elif info.choices and len(info.choices) <= 5:
            metavar = "{" + ",".join(str(c) for c in info.choices) + "}"
        else:
            metavar = name.upper()
        group.add_argument(flag_name(name), dest=f"scenario__{name}", metavar=metavar, default=None,
                           help=_flag_help(name, model), **extra)


def scenario_input(args: argparse.Namespace, model: type[BaseModel] = Scenario) -> dict[str, str | int]:
    """The fields of `model` given on the command line, as strings: --scenario's, then the flags'."""
    out: dict[str, str | int] = {}
    if getattr(args, "scenario_query", None):
        fields, schedulers = query_scenario(args.scenario_query, getattr(args, "scenario__trace", None) is not None,
                                            files_given=tuple(f for f in LOCAL_FILE_FIELDS
                                                              if getattr(args, f"scenario__{f}", None) is not None))
        if schedulers and "scheduler" not in fields and "scheduler" in model.model_fields:
            fields["scheduler"] = schedulers[0]
        out.update(fields)
    for key, value in vars(args).items():
        if key.startswith("scenario__") and value is not None:
            field = key[len("scenario__"):]
            choices = field_info(field, model).choices
            # Literal[8, 16, ...] fields only match ints (pydantic does not coerce "16" into a Literal int).
            if choices and all(isinstance(c, int) for c in choices) and re.fullmatch(r"[+-]?\d+", value.strip()):
                value = int(value)
            if field == "hardware_profile":
                value = read_hardware_profile(value)
            out[field] = value
    return out


MAX_PROFILE_BYTES = 1 << 20  # a profile is a few hundred bytes


def read_text_file(path: str, flag: str, max_bytes: int, what: str) -> str:
    """A file a flag names, as text, read no further than `max_bytes`: a UsageError naming the flag if it is
    missing, a directory, a device or a FIFO (never opened: a FIFO blocks, /dev/zero never ends), unreadable or
    larger."""
    problem = input_file_problem(path, what)
    if problem == "no such file":
        raise UsageError(f"{flag}: no such file {path!r}")
    if problem:
        raise UsageError(f"{flag}: {path!r} {problem}")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read it: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UsageError(f"{flag} {path}: larger than {max_bytes:,} bytes, too large for {what}")
    return data.decode("utf-8", errors="replace")


def read_hardware_profile(path: str) -> str:
    """--hardware-profile FILE: the profile `sched-sim calibrate --out` wrote, as the scenario field's string.
    (A string already in that form passes as it is, so a URL's value can be pasted.)"""
    import os

    if not os.path.exists(path):
        if ":" in path and "=" in path:
            return path
        raise UsageError(f"--hardware-profile: no such file {path!r} (write one with `sched-sim calibrate --out`)")
    text = read_text_file(path, "--hardware-profile", MAX_PROFILE_BYTES, "a hardware profile")
    try:
        return read_profile_document(text).compact()
    except ProfileError as e:
        raise UsageError(f"--hardware-profile {path}: {e}") from None


def build_scenario(args: argparse.Namespace, **fixed) -> Scenario:
    data = scenario_input(args)
    data.update(fixed)
    return parse_scenario(data)


# ---------------------------------------------------------------------------------------------------------
# Small parsers for the non-scenario flags
# ---------------------------------------------------------------------------------------------------------
def _number(text: str, kind=float) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a{'n integer' if kind is int else ' number'} (got {text!r})") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text!r})")
    return value


def positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0 (got {text})")
    return value


# The latest Unix time a flag takes: 2100-01-01 (a later timestamp is no run anyone compares with today's metrics).
LATEST_UNIX_S = 4_102_444_800


def unix_seconds(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= LATEST_UNIX_S:
        raise argparse.ArgumentTypeError(f"must be a Unix time between 0 and {LATEST_UNIX_S} (2100-01-01) (got {text})")
    return value


def fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, a fraction of requests (got {text})")
    return value


def workers(text: str) -> int:
    value = int(_number(text, int))
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1024 (got {text})")
    return value


def port(text: str) -> int:
    value = int(_number(text, int))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535 (got {text})")
    return value


def scheduler_list(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"give a comma-separated list of: {', '.join(SCHEDULER_NAMES)}")
    for name in names:
        if name not in SCHEDULER_NAMES:
            raise argparse.ArgumentTypeError(
                f"unknown scheduler {name!r}; choose from {', '.join(SCHEDULER_NAMES)}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise argparse.ArgumentTypeError(f"{', '.join(dup)} given more than once")
    return names


# ---------------------------------------------------------------------------------------------------------
# Flags several commands share: the schedulers (compare, sweep), where simulations run (sweep, capacity, plan)
# ---------------------------------------------------------------------------------------------------------
DEFAULT_SLO_TARGET = 0.9  # the SLO attainment a sweep's knee and a capacity search keep


def add_schedulers_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schedulers", "--scheduler", type=scheduler_list, default=None,
                   metavar="A,B,...", help=f"comma-separated schedulers (default: those --scenario names, else all: {','.join(SCHEDULER_NAMES)})")


def chosen_schedulers(args: argparse.Namespace) -> list[str]:
    """--schedulers, else the ones --scenario names (its schedulers, or its scheduler), else every scheduler."""
    if args.schedulers:
        return args.schedulers
    if getattr(args, "scenario_query", None):
        fields, schedulers = query_scenario(args.scenario_query, trace_given=True,  # scenario_input checks it
                                            files_given=LOCAL_FILE_FIELDS)
        if schedulers or "scheduler" in fields:
            try:
                return scheduler_list(",".join(schedulers or [fields["scheduler"]]))
            except argparse.ArgumentTypeError as e:
                raise UsageError(f"--scenario: schedulers {e}") from None
    return list(SCHEDULER_NAMES)


def add_executor_flags(p: argparse.ArgumentParser) -> None:
    from sim_core.studies.executor import EXECUTORS

    g = p.add_argument_group("executor", "where the simulations run")
    g.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: this machine's processes (default); ray: a Ray cluster (pip install 'sched-sim[ray]')")
    g.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="with --executor ray: the cluster to join ('auto' for the one `ray start` made on this node, "
                        "ray://HOST:10001 for a remote head); default: start a local one")
    g.add_argument("--workers", type=workers, default=None, metavar="N",
                   help="worker processes (local), or CPUs of the local Ray cluster (default: one per CPU core)")


def executor(args: argparse.Namespace):
    """The executor the executor flags name (sim_core.studies.executor), as a context manager."""
    from sim_core.studies.executor import ExecutorError, make_executor

    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address: only with --executor ray")
    try:
        return make_executor(args.executor, workers=args.workers, address=args.ray_address)
    except ExecutorError as e:
        raise UsageError(str(e)) from None


# ---------------------------------------------------------------------------------------------------------
# User errors as one line, naming the flag
# ---------------------------------------------------------------------------------------------------------
def _unquote_numbers(message: str) -> str:
    return re.sub(r"\(got '([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)'\)", r"(got \1)", message)


_TYPE_ERRORS = (("Input should be a valid integer", "an integer"), ("Input should be a valid number", "a number"))


def scenario_error_text(err: ScenarioError, rename: dict[str, str] | None = None,
                        model: type[BaseModel] = Scenario) -> str:
    """Each problem as `--flag: message`; `rename` maps names that are not fields of `model` (the rate grid's
    rate_min, ...) to their flags, in the field and in the message."""
    rename = rename or {}
    parts = []
    for field, message in err.problems:
        is_field = field in model.model_fields
        flag = rename.get(field) or (flag_name(field) if is_field else field)
        for prefix, kind in _TYPE_ERRORS:
            if is_field and message.startswith(prefix):
                got = re.search(r"\(got .*\)$", message)
                bounds = bounds_text(field, model)
                message = f"must be {kind}" + (f" ({bounds})" if bounds else "") + (f" {got.group(0)}" if got else "")
        for name, other in rename.items():
            message = re.sub(rf"\b{name}\b", other, message)
        parts.append(f"{flag}: {_unquote_numbers(message)}")
    return "; ".join(parts)


_FIELD_WORDS = re.compile(r"\b(" + "|".join(sorted((f for f in Scenario.model_fields if "_" in f or f in ("tp", "ep")),
                                                    key=len, reverse=True)) + r")\b")


def setup_error_text(err: SetupError) -> str:
    """Name the flag a SetupError is about, and spell field names as flags."""
    msg = str(err)
    for prefix in (f"{err.field}=", f"{err.field} "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return f"{flag_name(err.field)}: {_FIELD_WORDS.sub(lambda m: flag_name(m.group(1)), msg)}"


def trace_error_text(err: TraceError, path: str | None) -> str:
    msg = re.sub(r"^trace: ", "", str(err))
    return f"--trace {path}: {msg}" if path and "no such file" not in msg else f"--trace: {msg}"
