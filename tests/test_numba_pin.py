"""numba is pinned to the minor release that is installed and tested (pyproject.toml): sim_core subclasses numba's
classes and uses its internals, which any minor release may change. sim_core/kernel/RULES.md lists those internals; here
the pin must admit the installed numba's minor and no other, every listed name must exist in the installed numba,
and every numba.core import in sim_core and every private attribute jit.py, record_type.py and warm.py touch must
be listed, so the list cannot go stale either way. (scripts/check_numba.sh runs the goldens against another
release before the pin moves.)"""

from __future__ import annotations

import ast
import importlib
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # pytest's own dependency, so always here with it
from packaging.specifiers import SpecifierSet
from packaging.version import Version

try:
    import tomllib
except ImportError:  # Python 3.10, where pytest depends on tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "sim_core"
RULES = CORE / "kernel" / "RULES.md"
SECTION = "## numba internals we rely on"
ENTRY = re.compile(r"`(numba(?:\.\w+)*):(\w+(?:\.\w+)*)`")
# The files whose private attribute accesses must all be listed (those that reach into numba).
INTERNAL_USERS = ("jit.py", "link_only.py", "record_type.py", "warm.py")
# Private attributes jit.py's _LoadedLibrary keeps for itself (numba's libraries have neither; checked below).
OWN_ATTRIBUTES = {"_object_code", "_shared_bitcode"}


def _probe():
    return 0


def _numba_pin() -> SpecifierSet:
    with open(ROOT / "pyproject.toml", "rb") as f:
        deps = [Requirement(d) for d in tomllib.load(f)["project"]["dependencies"]]
    pins = [d for d in deps if d.name == "numba"]
    assert len(pins) == 1, f"pyproject.toml's dependencies name numba {len(pins)} times"
    return pins[0].specifier


def _pin_problems(pin: SpecifierSet, installed: Version) -> list[str]:
    """What is wrong with `pin` as a pin to `installed`'s minor release."""
    major, minor = installed.major, installed.minor
    problems = []
    for v in (installed, Version(f"{major}.{minor}.0"), Version(f"{major}.{minor}.99")):
        if not pin.contains(v):
            problems.append(f"does not admit {v}, a patch release of the installed {installed}")
    outside = [Version(f"{major}.{minor + 1}.0"), Version(f"{major}.{minor + 1}.0rc1"), Version(f"{major + 1}.0")]
    if minor > 0:
        outside.append(Version(f"{major}.{minor - 1}.0"))
    problems += [f"admits {v}, another minor release than the tested {installed}"
                 for v in outside if pin.contains(v, prereleases=True)]
    return problems


def test_the_pin_admits_the_installed_numbas_minor_release_and_no_other():
    pin, installed = _numba_pin(), Version(version("numba"))
    assert not _pin_problems(pin, installed), f"numba{pin} in pyproject.toml: {_pin_problems(pin, installed)}"


def test_the_pin_check_would_catch_a_loose_or_wrong_pin():
    installed = Version("0.68.1")
    assert not _pin_problems(SpecifierSet(">=0.68,<0.69"), installed)
    assert _pin_problems(SpecifierSet(">=0.60"), installed)  # admits the next minor
    assert _pin_problems(SpecifierSet(">=0.60,<0.69"), installed)  # admits the previous
    assert _pin_problems(SpecifierSet(">=0.69,<0.70"), installed)  # not the installed one
    assert _pin_problems(SpecifierSet("==0.68.0"), installed)  # not the installed patch


def _listed(text: str) -> list[tuple[str, str]]:
    """(module, attribute path) of every name in the first column of RULES.md's internals table."""
    assert SECTION in text, f"sim_core/kernel/RULES.md has no section {SECTION!r}"
    names = []
    for line in text.split(SECTION, 1)[1].splitlines():
        if line.startswith("| `"):
            names += ENTRY.findall(line.split("|")[1])
    return names


LISTED = _listed(RULES.read_text(encoding="utf-8"))


def _instances() -> dict:
    """How to get an instance of the classes whose listed attributes are set per instance."""
    from numba.core.caching import FunctionCache
    from numba.core.compiler import Compiler, Flags
    from numba.core.registry import CPUDispatcher, cpu_target

    ctx = cpu_target.target_context
    return {
        "numba.core.registry:CPUDispatcher": lambda: CPUDispatcher(_probe),
        "numba.core.caching:FunctionCache": lambda: FunctionCache(_probe),
        "numba.core.codegen:JITCPUCodegen": lambda: ctx.codegen(),
        "numba.core.codegen:JitEngine": lambda: ctx.codegen()._engine,
        "numba.core.codegen:JITCodeLibrary": lambda: ctx.codegen().create_library("numba_pin_probe"),
        "numba.core.compiler:Compiler": lambda: Compiler(cpu_target.typing_context, ctx, None, (), None, Flags(), {}),
    }


def _resolve(module: str, path: str):
    """The object `module:path` names; an attribute a class lacks is looked up on an instance of it."""
    obj = importlib.import_module(module)
    parts = path.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            owner = f"{module}:{'.'.join(parts[:i])}"
            make = _instances().get(owner) if isinstance(obj, type) else None
            if make is None:
                raise AttributeError(f"{module}:{path}: {owner} has no attribute {part!r}")
            instance = make()
            assert isinstance(instance, obj), f"{owner}'s probe instance is a {type(instance)}"
            obj = instance
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("module,path", LISTED, ids=[f"{m}:{p}" for m, p in LISTED])
def test_every_listed_numba_internal_exists_in_the_installed_numba(module, path):
    _resolve(module, path)


def test_a_name_numba_lacks_is_caught():
    assert len(LISTED) > 20  # the table was found and read
    with pytest.raises(AttributeError, match="no attribute '_no_such_thing'"):
        _resolve("numba.core.codegen", "JITCodeLibrary._no_such_thing")
    with pytest.raises(AttributeError):
        _resolve("numba.core.compiler", "Compiler.state.no_such_key")
    assert _listed(f"{SECTION}\n| `numba.core.x:A._b`, `numba.y:c` | jit.py | why |\n") == [
        ("numba.core.x", "A._b"), ("numba.y", "c")]


def _numba_imports(tree: ast.AST) -> list[str]:
    """`module:name` of each name imported from a numba submodule (not numba's top level, its public API)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numba."):
            out += [f"{node.module}:{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [f"{a.name}:" for a in node.names if a.name.startswith("numba.")]
    return out


def _private_names(tree: ast.AST) -> set[str]:
    """Single-underscore attribute names a file reads, writes, overrides or passes: `x._y`, getattr(x, "_y"),
    x.__dict__["_y"], `def _y` in a class body, f(_y=...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
        elif isinstance(node, ast.keyword) and node.arg:  # njit(_nrt=False)
            names.add(node.arg)
        elif isinstance(node, ast.ClassDef):
            names |= {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _covered(imported: str) -> bool:
    """Some listed name is reached through this import (`from numba.core import cgutils`: `numba.core.cgutils:...`)."""
    module, name = imported.split(":")
    reached = f"{module}.{name}" if name else module
    return any((m == module and p.split(".")[0] == name) or m == reached or m.startswith(f"{reached}.")
               for m, p in LISTED)


def test_every_numba_internal_sim_core_touches_is_listed():
    unlisted_imports = set()
    for f in sorted(CORE.rglob("*.py")):
        unlisted_imports |= {f"{f.relative_to(CORE)}: {i}" for i in _numba_imports(ast.parse(f.read_text(encoding="utf-8")))
                             if not _covered(i)}
    assert not unlisted_imports, f"numba imports missing from sim_core/kernel/RULES.md's table: {sorted(unlisted_imports)}"

    listed_attributes = {p.split(".")[-1] for _, p in LISTED}
    own_module_names = set()  # sim_core's own functions, classes and constants, e.g. the kernels warm.py names
    for f in CORE.rglob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        own_module_names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        own_module_names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                             if isinstance(t, ast.Name)}
    private = {}
    for name in INTERNAL_USERS:
        for attr in _private_names(ast.parse((CORE / "kernel" / name).read_text(encoding="utf-8"))):
            private.setdefault(attr, name)
    documented_stdlib = {"_exit"}  # os._exit: the standard library's documented exit without clean-up, not numba's
    unlisted = {f"{private[a]}: {a}" for a in private
                if a not in listed_attributes | OWN_ATTRIBUTES | own_module_names | documented_stdlib}
    assert not unlisted, f"private numba attributes missing from sim_core/kernel/RULES.md's table: {sorted(unlisted)}"


def test_the_attributes_kept_as_sim_cores_own_are_not_numbas():
    library = _instances()["numba.core.codegen:JITCodeLibrary"]()
    assert not [a for a in OWN_ATTRIBUTES if hasattr(library, a)]
