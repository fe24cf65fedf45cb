"""`sched-sim serve`: the web dashboard (app.web) under uvicorn."""

from __future__ import annotations

import argparse

from ..flags import port
from ..report import EXIT_INTERNAL, error

NAME = "serve"
HELP = "start the web dashboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8000, help="port (default: 8000)")


def _web_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("app.web") is not None
    except ImportError:
        return False


def handle(args: argparse.Namespace) -> int:
    if not _web_available():
        return error("the dashboard (app.web) is not installed in this copy of sched-sim", EXIT_INTERNAL)
    import uvicorn  # imported here: the other commands do not need the web stack

    uvicorn.run("app.web:app", host=args.host, port=args.port)
    return 0
