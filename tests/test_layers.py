"""The faces' layers hold: nothing in app/ reads the engine's internals (sim_core.kernel.state's column numbers and codes,
the engine's modules), only sim_core's public surface and sim_core.views; the web (app/web/) does not import the
CLI (what both faces show lives in app/ outside both, as app/plan_report.py); and every figure in the registry
(app/web/figures/) is served alone at /embed/<name>."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.web import figures
from app.web.templating import TEMPLATES_DIR

APP = Path(__file__).resolve().parent.parent / "app"
# sim_core's engine and its records (sim_core/kernel/): faces read a Result through sim_core.views instead.
KERNEL = "sim_core.kernel"
SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3"


def imported_modules(path: Path, root: Path = APP) -> list[str]:
    """Every module a file imports, absolute (relative imports resolved against the file's package under `root`,
    the `app` package); `from package import name` counts package.name too, as name may be a module."""
    package = ["app", *path.relative_to(root).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append(module)
            found += [f"{module}.{a.name}" for a in node.names]
    return found


def engine_internals(path: Path, root: Path = APP) -> list[str]:
    return [m for m in imported_modules(path, root)
            if m == KERNEL or m.startswith(KERNEL + ".")]


def cli_imports(path: Path, root: Path = APP) -> list[str]:
    return [m for m in imported_modules(path, root) if m == "app.cli" or m.startswith("app.cli.")]


APP_FILES = sorted(APP.rglob("*.py"))
WEB_FILES = sorted((APP / "web").rglob("*.py"))


@pytest.mark.parametrize("path", APP_FILES, ids=lambda p: str(p.relative_to(APP)))
def test_no_face_imports_the_engines_internals(path):
    assert not engine_internals(path), f"{path.relative_to(APP)} imports {engine_internals(path)}: read sim_core.views"


@pytest.mark.parametrize("path", WEB_FILES, ids=lambda p: str(p.relative_to(APP)))
def test_the_web_does_not_import_the_cli(path):
    assert not cli_imports(path), f"{path.relative_to(APP)} imports {cli_imports(path)}"


def test_the_checks_would_catch_a_violation(tmp_path):
    root = tmp_path / "app"
    (root / "web" / "figures").mkdir(parents=True)
    bad = root / "web" / "figures" / "bad.py"
    bad.write_text("from sim_core.kernel import state as E\nimport sim_core.kernel.kv_pool\n"
                   "from sim_core.views import step_columns\nfrom ...cli import commands\nfrom app.cli import main\n", encoding="utf-8")
    assert engine_internals(bad, root) == ["sim_core.kernel", "sim_core.kernel.state", "sim_core.kernel.kv_pool"]
    assert cli_imports(bad, root) == ["app.cli", "app.cli.commands", "app.cli", "app.cli.main"]
    # the shared module is no import of the CLI
    page = root / "web" / "plan_page.py"
    page.write_text("from ..plan_report import deployment_text\nfrom ..cli.flags import UsageError\n", encoding="utf-8")
    assert cli_imports(page, root) == ["app.cli.flags", "app.cli.flags.UsageError"]


def test_the_registry_finds_every_figure_module():
    registered = figures.all_figures()
    modules = sorted(p.stem for p in (APP / "web" / "figures").glob("*.py") if p.stem != "__init__")
    assert len(registered) == len(modules)  # one figure a module, each found
    assert [f.order for f in registered] == sorted(f.order for f in registered)
    for f in registered:
        assert f.title and f.explain and (TEMPLATES_DIR / f.template).is_file(), f.name
        assert figures.get(f.name) is f


@pytest.mark.parametrize("name", figures.embeddable())
def test_every_registered_figure_is_served_alone_at_its_embed(client, name):
    r = client.get(f"/embed/{name}?{SMALL}")
    assert r.status_code == 200, r.text[:300]
    assert f'id="card-{name}' in r.text and "cannot be simulated" not in r.text
    assert 'id="scenario-form"' not in r.text  # the figure alone
