"""The code stays one people can read and extend: in sim_core/ and app/, functions of at most 60 lines and 8
parameters and files of at most 500 lines (each exception listed below with its reason), the engine's step in one
file, and no web or plotting imports in the simulator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "sim_core"
CHECKED = (ROOT / "sim_core", ROOT / "app")
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8
MAX_FILE_LINES = 500
WEB_PACKAGES = ("fastapi", "jinja2", "plotly", "uvicorn", "starlette", "app")

# "path:function" -> why it may take more parameters than MAX_PARAMETERS.
MANY_PARAMETERS = {
    "sim_core/runner.py:simulate_requests": "the engine on requests the caller made: run's keyword-only options "
                                            "(KV frames, event log and its bounds, debug checks), each defaulted and "
                                            "named one by one by callers, plus the cancel flag the web sets from "
                                            "another thread",
}
# "path:function" -> why it may run longer than MAX_FUNCTION_LINES.
LONG_FUNCTIONS: dict[str, str] = {}
# "path" -> why it may run longer than MAX_FILE_LINES.
LONG_FILES: dict[str, str] = {
    "sim_core/scenario.py": "the Scenario model: every scenario field's one definition (bounds, default, help) in the "
                            "order the flags, the form and the JSON show them, and the checks between fields; "
                            "splitting fields into base classes reorders them (pydantic lists a base's first)",
}


def _checked_files() -> list[Path]:
    return sorted(p for root in CHECKED for p in root.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _functions(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _parameters(fn) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)


def violations(path: Path, name: str) -> list[str]:
    """What in the file breaks a limit without a listed reason (`name`: its path from the repository root)."""
    found = []
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines > MAX_FILE_LINES and name not in LONG_FILES:
        found.append(f"{name} has {lines} lines (at most {MAX_FILE_LINES})")
    for fn in _functions(path):
        key = f"{name}:{fn.name}"
        length = fn.end_lineno - fn.lineno + 1
        if length > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS:
            found.append(f"{key} has {length} lines (at most {MAX_FUNCTION_LINES})")
        if _parameters(fn) > MAX_PARAMETERS and key not in MANY_PARAMETERS:
            found.append(f"{key} takes {_parameters(fn)} parameters (at most {MAX_PARAMETERS})")
    return found


@pytest.mark.parametrize("path", _checked_files(), ids=_name)
def test_functions_and_files_stay_small(path):
    found = violations(path, _name(path))
    assert not found, "; ".join(found) + ": split it, or list it with its reason in tests/test_structure.py"


def test_every_listed_exception_is_still_needed():
    """An exception whose function shrank, or went away, is taken off the list."""
    functions = {f"{_name(p)}:{fn.name}": fn for p in _checked_files() for fn in _functions(p)}
    for key in MANY_PARAMETERS:
        assert key in functions and _parameters(functions[key]) > MAX_PARAMETERS, key
    for key in LONG_FUNCTIONS:
        fn = functions.get(key)
        assert fn is not None and fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES, key
    for name in LONG_FILES:
        assert len((ROOT / name).read_text(encoding="utf-8").splitlines()) > MAX_FILE_LINES, name


def test_the_engine_step_fits_in_one_file():
    assert len((CORE / "kernel" / "engine.py").read_text(encoding="utf-8").splitlines()) < MAX_FILE_LINES


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=_name)
def test_the_core_imports_nothing_from_the_web(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in WEB_PACKAGES, f"{path.name} imports {name}"


def test_the_checks_would_catch_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FILE_LINES))
    bad.write_text(f"import fastapi\n\ndef f(a, b, c, d, e, f, g, h, i):\n{body}\n", encoding="utf-8")
    found = violations(bad, "sim_core/bad.py")
    assert len(found) == 3 and "503 lines" in found[0] and "sim_core/bad.py:f has" in found[1]
    assert "takes 9 parameters" in found[2]
    with pytest.raises(AssertionError):
        test_the_core_imports_nothing_from_the_web(bad)
