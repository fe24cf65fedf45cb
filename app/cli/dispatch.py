"""The `sched-sim` parser and `main`: one subparser per command app.cli.commands lists (its module's NAME,
add_arguments, handle; its line of help from COMMANDS), and the mapping of what a command raises to one line on
stderr and an exit status."""

from __future__ import annotations

import argparse
import os
import sys

import sim_core  # its names load on first use: the error classes below only once an error reaches main

from . import commands, worker
from .usage import EXIT_INTERNAL, EXIT_INTERRUPTED, Parser, UsageError, error

PROG = "sched-sim"


class _VersionAction(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata parses package metadata)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only` (the command a command line names, or "" for none), the module and
    flags of that command only: a command's module imports what it runs on (the engine, the planner, the web
    stack), which `sched-sim --help`, `sched-sim list` or another command's parse need not load. (argparse reads
    only the named command's subparser, so the others' flags and handlers are never consulted.)"""
    parser = Parser(prog=PROG, allow_abbrev=False,
                    description="Simulate LLM-serving schedulers: latency, throughput and goodput of a policy on "
                                "a GPU, model and workload. 'sched-sim list' shows the valid names and what each "
                                "metric measures.")
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    parser.add_argument(worker.NO_WORKER_FLAG, action="store_true",
                        help=f"run the command in this process even when a 'sched-sim worker' is running (as does "
                             f"{worker.OPT_OUT_ENV}=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in commands.COMMANDS.items():
        command = name.replace("_", "-")
        p = sub.add_parser(command, help=summary, description=summary, allow_abbrev=False)
        if only is None or only == command:
            module = commands.load(name)
            module.add_arguments(p)
            p.set_defaults(func=module.handle)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("sched-sim")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def _write_any_text(*streams) -> None:
    """A terminal or pipe whose locale is ASCII (LC_ALL=C, a bare container) cannot encode the ± of a CI column or
    the → of a replica's name: print a stand-in there instead of dying on the first such character."""
    for stream in streams:
        encoding = getattr(stream, "encoding", None) or "ascii"
        if hasattr(stream, "reconfigure") and "±→…".encode(encoding, errors="ignore") != "±→…".encode():
            stream.reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    args = None
    _write_any_text(sys.stdout, sys.stderr)
    try:
        words = sys.argv[1:] if argv is None else [str(a) for a in argv]
        args = build_parser(only=next((w for w in words if not w.startswith("-")), "")).parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handlers below, not at exit
        return code
    except SystemExit as e:  # --help / --version; first, so that answering them reads none of the errors below
        return e.code if isinstance(e.code, int) else (0 if e.code is None else error(str(e.code)))
    except UsageError as e:
        return error(str(e))
    except sim_core.ScenarioError as e:
        return error(_flags().scenario_error_text(e))
    except sim_core.SetupError as e:
        return error(_flags().setup_error_text(e))
    except sim_core.TraceError as e:
        path = getattr(args, "scenario__trace", None) if args is not None else None
        return error(_flags().trace_error_text(e, path))
    except BrokenPipeError:  # e.g. `sched-sim list | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INTERNAL
    except OSError as e:  # a file the scenario names could not be read
        trace = getattr(args, "scenario__trace", None) if args is not None else None
        if trace is not None and e.filename is not None and str(e.filename) == str(trace):
            return error(f"--trace {trace}: cannot read it: {e.strerror}")
        return error(f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}", EXIT_INTERNAL)
    except MemoryError:  # past check_memory's estimate (sim_core.run_cost): one line, never a traceback
        return error("out of memory: this run needs more memory than the machine could give it; simulate fewer "
                     "requests or a smaller deployment (KV blocks, offload tiers, replicas)", EXIT_INTERNAL)
    except sim_core.SimulationError as e:
        return error(f"internal error in the simulator (please report it with the command line): {e}", EXIT_INTERNAL)
    except KeyboardInterrupt:
        print(("\n" if sys.stderr.isatty() else "") + "interrupted", file=sys.stderr)  # after a progress bar
        return EXIT_INTERRUPTED


def _flags():
    """app.cli.flags, whose error texts name each field's flag from the Scenario model: imported when an error is
    reported, not with the parser (`sched-sim --help` reads no model)."""
    from . import flags

    return flags
