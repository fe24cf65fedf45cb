"""Where the templates and static files are (beside the package, at the repository root: the project is
installed in place with `pip install -e .`), and the Jinja2 environment the pages render with."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fastapi.templating import Jinja2Templates

from sim_core.studies.experiments import EXPERIMENTS

from . import charts
from .figure_text import figure_summary

REPO_ROOT = Path(__file__).resolve().parents[2]  # app/web/templating.py -> the repository
TEMPLATES_DIR = REPO_ROOT / "templates"
STATIC_DIR = REPO_ROOT / "static"
# Vendored for the browser tests only (tests/test_browser_a11y.py injects axe-core into the page): the server
# neither serves it nor counts it in the asset version.
TEST_ONLY_STATIC = STATIC_DIR / "vendor" / "axe-core"


def asset_version() -> str:
    """Changes whenever any static file does (our CSS/JS, the vendored htmx and plotly.js): URLs carry it as
    `?v=`, so browsers may cache them for good and never run a stale copy."""
    h = hashlib.sha1()
    for p in sorted(STATIC_DIR.rglob("*")):
        if p.is_file() and not p.is_relative_to(TEST_ONLY_STATIC):
            h.update(p.read_bytes())
    return h.hexdigest()[:10]


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescapes .html
    templates.env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}
    templates.env.globals.update(color=charts.color, asset_version=asset_version(), experiments=EXPERIMENTS)
    # Accessibility: text in a scheduler's colour at 4.5:1 (charts.text_style); each plot's numbers as text.
    templates.env.globals.update(text_style=charts.text_style, figure_summary=figure_summary)
    return templates


templates = make_templates()
