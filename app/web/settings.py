"""The server's deployment settings, each defined once: its `sched-sim serve` flag, the environment variable that
sets the same thing (for `uvicorn app.web:app`, containers and tests), its default and its parser.

`sched-sim serve` takes each flag's default from its variable and exports the value it settled on, so the
application (`app.web:app`, built when uvicorn imports it) reads every setting from the environment.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _host_list(text: str) -> tuple[str, ...]:
    names = tuple(h.strip().lower().rstrip(".") for h in text.split(",") if h.strip())
    for name in names:
        if name != "*" and ("/" in name or " " in name or "*" in name.lstrip("*.")):
            raise ValueError(f"{name!r} is not a host name (give names like sim.example.org, *.example.org or *)")
    return names


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"must be a whole number (got {text!r})") from None
    if value < 1:
        raise ValueError(f"must be at least 1 (got {value})")
    return value


def _default_store_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory to be found (a bare service account)
            base = tempfile.gettempdir()
    return str(Path(base) / "sched-sim" / "store")


@dataclass(frozen=True)
class Option:
    field: str
    flag: str
    env: str
    default: Callable[[], str]
    parse: Callable[[str], Any]
    help: str


OPTIONS = (
    Option("allowed_hosts", "--allowed-hosts", "SCHED_SIM_ALLOWED_HOSTS", lambda: "", _host_list,
           "comma-separated host names the server answers to besides localhost names and IP addresses "
           "(*.example.org for subdomains, * for any); a request for any other Host gets 400. Set it to the "
           "public name behind a reverse proxy"),
    Option("store_dir", "--store-dir", "SCHED_SIM_STORE_DIR", _default_store_dir, str,
           "folder that keeps uploaded traces (by content hash), so shared links to them survive a restart "
           "(default: ~/.cache/sched-sim/store)"),
    Option("store_max_mb", "--store-max-mb", "SCHED_SIM_STORE_MAX_MB", lambda: "256", _positive_int,
           "the upload store's size limit in MB; past it the least recently used uploads are removed"),
    Option("max_connections", "--max-connections", "SCHED_SIM_MAX_CONNECTIONS", lambda: "1000", _positive_int,
           "open connections at most; past it the oldest connection still sending its request headers is "
           "dropped (what a flood of half-open connections holds)"),
)


@dataclass(frozen=True)
class Settings:
    allowed_hosts: tuple[str, ...]
    store_dir: str
    store_max_mb: int
    max_connections: int

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """The settings from the environment (defaults where unset); ValueError naming the variable if one is
        invalid."""
        env = os.environ if environ is None else environ
        values = {}
        for o in OPTIONS:
            text = env.get(o.env) or o.default()
            try:
                values[o.field] = o.parse(text)
            except ValueError as e:
                raise ValueError(f"{o.env}: {e}") from None
        return cls(**values)
