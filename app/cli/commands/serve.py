"""`sched-sim serve`: the web dashboard (app.web) under uvicorn."""

from __future__ import annotations

import argparse
import os

from ..flags import port
from ..report import EXIT_INTERNAL, error

NAME = "serve"


def _settings_options():
    """app.web.settings.OPTIONS (each setting's flag and environment variable, defined there once), or () where
    the dashboard is not installed (handle says so)."""
    try:
        from app.web.settings import OPTIONS
    except ImportError:
        return ()
    return OPTIONS


def _flag_type(option):
    def parse(text: str):
        try:
            return option.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = option.field  # argparse names the type in some messages
    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8000, help="port (default: 8000)")
    for o in _settings_options():
        p.add_argument(o.flag, dest=o.field, metavar=o.env.removeprefix("SCHED_SIM_"), type=_flag_type(o),
                       default=None, help=f"{o.help} [env {o.env}]")


def _web_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("app.web") is not None
    except ImportError:
        return False


def handle(args: argparse.Namespace) -> int:
    if not _web_available():
        return error("the dashboard (app.web) is not installed in this copy of sched-sim", EXIT_INTERNAL)
    from app.web.serving import serve  # imported here: the other commands do not need the web stack
    from app.web.settings import Settings

    # A flag overrides its environment variable; the application reads the settings from the environment.
    for o in _settings_options():
        value = getattr(args, o.field, None)
        if value is not None:
            os.environ[o.env] = ",".join(value) if isinstance(value, tuple) else str(value)
    try:
        settings = Settings.from_env()
    except ValueError as e:
        return error(str(e))
    serve(args.host, args.port, settings)
    return 0
