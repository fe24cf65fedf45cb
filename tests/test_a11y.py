"""Accessibility without a browser (issue 26, point 6): text contrast of the scheduler palette's text shades and of
app.css's text colours, computed by WCAG's formula; the figures' text summaries (figure_text) read the numbers of
the plotly JSON they describe; the vendored axe-core is a test tool the server never serves. The browser side
(axe-core on the pages, Tab order, skip link) is tests/test_browser_a11y.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.web import charts
from app.web.figure_text import MAX_POINTS, MAX_SERIES, figure_summary
from sim_core import SCHEDULER_NAMES

ROOT = Path(__file__).resolve().parent.parent
CSS = (ROOT / "static" / "css" / "app.css").read_text(encoding="utf-8")
AA = 4.5


def test_contrast_follows_wcag():
    assert charts.contrast("#000000", "#ffffff") == pytest.approx(21)
    assert charts.contrast("#ffffff", "#ffffff") == pytest.approx(1)
    assert charts.contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # the classic just-too-light grey


@pytest.mark.parametrize("name", sorted(set(charts.PALETTE) | set(SCHEDULER_NAMES)))
def test_each_schedulers_text_shade_reads_at_aa_where_its_text_sits(name):
    c = charts.color(name)
    light, dark = charts.text_colors(name)
    for bg in charts.LIGHT_TEXT_BACKGROUNDS:
        for ground in (bg, charts._mix(bg, c, charts.CHIP_TINT)):  # a card, or a ticked chip's tint of c
            assert charts.contrast(light, ground) >= AA, (name, light, ground)
    for bg in charts.DARK_TEXT_BACKGROUNDS:
        for ground in (bg, charts._mix(bg, c, charts.CHIP_TINT)):
            assert charts.contrast(dark, ground) >= AA, (name, dark, ground)
    # the least change: a colour that already reads is its own text shade
    if all(charts.contrast(c, g) >= AA for bg in charts.LIGHT_TEXT_BACKGROUNDS
           for g in (bg, charts._mix(bg, c, charts.CHIP_TINT))):
        assert light == c
    assert f"--c: {c};" in charts.text_style(name)  # the plot lines, swatches and borders keep the plot colour
    assert f"--c-text: {light};" in charts.text_style(name) and charts.text_style(name).endswith(dark)


def test_fcfs_needed_a_darker_text_shade_and_its_plot_colour_is_kept():
    # the case: fcfs text in its plot colour read at 3.6:1 on white
    assert charts.contrast(charts.PALETTE["fcfs"], "#ffffff") < AA
    assert charts.color("fcfs") == charts.PALETTE["fcfs"]
    assert charts.text_colors("fcfs")[0] != charts.PALETTE["fcfs"]


def _tokens(block: str) -> dict[str, str]:
    return dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{6})\b", block))


def _themes() -> tuple[dict[str, str], dict[str, str]]:
    light = _tokens(re.search(r":root\s*\{(.*?)\}", CSS, re.S).group(1))
    dark_block = re.search(r"prefers-color-scheme:\s*dark\)\s*\{\s*:root\s*\{(.*?)\}", CSS, re.S).group(1)
    return light, {**light, **_tokens(dark_block)}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_app_css_text_colours_read_at_aa_on_cards_and_the_page(theme):
    tokens = _themes()[theme == "dark"]
    # --faint is the units' (11 px) and hints' colour: it too must read at 4.5:1
    for text in ("--ink", "--ink-2", "--muted", "--faint", "--accent", "--danger"):
        for ground in ("--card", "--bg", "--field"):
            ratio = charts.contrast(tokens[text], tokens[ground])
            assert ratio >= AA, (theme, text, ground, round(ratio, 2))
    assert charts.contrast(tokens["--danger"], tokens["--danger-bg"]) >= AA
    # the palette's backgrounds for text shades are app.css's cards and page
    expected = (tokens["--card"], tokens["--bg"])
    grounds = charts.DARK_TEXT_BACKGROUNDS if theme == "dark" else charts.LIGHT_TEXT_BACKGROUNDS
    assert set(grounds) == {g.lower() for g in expected}


def test_a_summary_reads_each_panels_series_from_the_figure_json():
    fig = {"data": [
        {"type": "scatter", "name": "fcfs", "x": list(range(50)), "y": [v * 2.5 for v in range(50)]},
        {"type": "scatter", "name": "chunked", "x": [0, 1, 2, 3], "y": [5, None, 7, 1200.4], "xaxis": "x2",
         "yaxis": "y2"},
        {"type": "scatter", "name": "SLO line", "x": [0, 1], "y": [3, 3], "hoverinfo": "skip"},
        {"type": "scatter", "x": [0, 1], "y": [9, 9]},  # unnamed: decoration
        {"type": "bar", "orientation": "h", "name": "queueing", "y": ["fcfs", "chunked"], "x": [512.3, 1511]},
        {"type": "scatter", "name": "dominated", "x": [], "y": []},
    ], "layout": {"xaxis": {"title": {"text": "time (s)"}}, "yaxis": {"title": {"text": "<b>TTFT</b> (ms)"}},
                  "xaxis2": {"title": "rate"}, "yaxis2": {"title": {"text": "goodput"}}}}
    text = figure_summary(fig)
    assert "TTFT (ms) against time (s): fcfs: 0 to 122 over 0 to 49" in text
    assert "goodput against rate: chunked: 5 at 0, 7 at 2, 1,200 at 3." in text  # few points: each one, gaps skipped
    assert "queueing: fcfs 512, chunked 1,511" in text
    assert "dominated: none" in text
    assert "SLO line" not in text and "9" not in text.replace("49", "")


def test_a_summary_of_many_series_says_how_many_more():
    fig = {"data": [{"name": f"s{i}", "x": [0, 1], "y": [i, i]} for i in range(MAX_SERIES + 3)], "layout": {}}
    text = figure_summary(fig)
    assert f"s{MAX_SERIES - 1}:" in text and f"s{MAX_SERIES}:" not in text and text.endswith("And 3 more series.")
    long = {"data": [{"name": "a", "x": list(range(MAX_POINTS + 1)), "y": list(range(MAX_POINTS + 1))}], "layout": {}}
    assert figure_summary(long) == f"a: 0 to {MAX_POINTS} over 0 to {MAX_POINTS}."
    assert figure_summary(None) == "" and figure_summary({"grid": {}}) == ""


def test_axe_core_is_vendored_with_its_licence_but_never_served_or_loaded():
    from fastapi.testclient import TestClient

    from app.web import app
    from app.web.templating import TEST_ONLY_STATIC

    axe = TEST_ONLY_STATIC / "axe.min.js"
    assert axe.read_text(encoding="utf-8")[:200].startswith("/*! axe v")
    assert "Mozilla Public License" in (TEST_ONLY_STATIC / "LICENSE").read_text(encoding="utf-8")
    version = re.search(r"axe v([\d.]+)", axe.read_text(encoding="utf-8")[:100]).group(1)
    assert f"axe-core {version}" in (TEST_ONLY_STATIC / "README.md").read_text(encoding="utf-8")
    client = TestClient(app)  # no lifespan: static files need no kernels
    assert client.get("/static/vendor/axe-core/axe.min.js").status_code == 404
    assert client.get("/static/vendor/axe-core/LICENSE").status_code == 404
    assert client.get("/static/vendor/htmx.min.js").status_code == 200
    for path in [*(ROOT / "templates").glob("*.html"), *(ROOT / "static" / "js").glob("*.js")]:
        text = path.read_text(encoding="utf-8").lower()
        assert not re.search(r"axe[-.]|axe\b\.run|/axe\b", text), path  # "axes" of a plot is fine
