"""The web dashboard and JSON API. `app.web:app` is the FastAPI application (built in server.py) that
`sched-sim serve` runs under uvicorn.

The application is built on first use of `app.web.app`, not when any module of the package is imported: the
package's modules (inputs, service, figures, ...) are usable on their own without building every route.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name in ("app", "create_app"):
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
