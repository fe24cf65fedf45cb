"""The core stays a codebase people can read and extend: small functions with few parameters, an engine loop
that fits in one file, and no web or plotting imports in the simulator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "sim_core"
MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 10
MAX_ENGINE_LINES = 500
WEB_PACKAGES = ("fastapi", "jinja2", "plotly", "uvicorn", "starlette", "app")


def _core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _functions(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(CORE)))
def test_functions_are_short_and_take_few_parameters(path):
    too_long, too_many = [], []
    for fn in _functions(path):
        lines = fn.end_lineno - fn.lineno + 1
        a = fn.args
        params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
        if lines > MAX_FUNCTION_LINES:
            too_long.append(f"{fn.name} ({lines} lines)")
        if params > MAX_PARAMETERS:
            too_many.append(f"{fn.name} ({params} parameters)")
    assert not too_long, f"longer than {MAX_FUNCTION_LINES} lines: {too_long}"
    assert not too_many, f"more than {MAX_PARAMETERS} parameters: {too_many}"


def test_the_engine_loop_fits_in_one_file():
    assert len((CORE / "kernel" / "engine.py").read_text().splitlines()) < MAX_ENGINE_LINES


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(CORE)))
def test_the_core_imports_nothing_from_the_web(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in WEB_PACKAGES, f"{path.name} imports {name}"


def test_the_checks_would_catch_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    bad.write_text(f"import fastapi\n\ndef f(a, b, c, d, e, f, g, h, i, j, k):\n{body}\n")
    fn = next(_functions(bad))
    assert fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES and len(fn.args.args) > MAX_PARAMETERS
    with pytest.raises(AssertionError):
        test_the_core_imports_nothing_from_the_web(bad)
