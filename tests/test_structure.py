"""The code stays one people can read and extend: in sim_core/ and app/, functions of at most 60 lines and 8
parameters and files of at most 500 lines (each exception listed below with its reason), the engine's step in one
file, and no web or plotting imports in the simulator. The dashboard's JavaScript (static/, less the vendored
static/vendor/) keeps the same limits on lines, measured by a small JS lexer (_js_functions)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "sim_core"
CHECKED = (ROOT / "sim_core", ROOT / "app")
STATIC = ROOT / "static"
VENDORED = STATIC / "vendor"  # third-party builds (htmx, plotly.js, axe-core): not ours to split
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8
MAX_FILE_LINES = 500
WEB_PACKAGES = ("fastapi", "jinja2", "plotly", "uvicorn", "starlette", "app")

# "path:function" -> why it may take more parameters than MAX_PARAMETERS.
MANY_PARAMETERS: dict[str, str] = {}
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


# ----- the dashboard's JavaScript: the same limits on lines -----
# A function is measured from its first line (`function`, `async`, a method's name, an arrow's parameters)
# to the line of its closing brace. The lexer skips strings, template literals' text (not their ${...} code),
# comments and regex literals, so a brace inside one of them opens or closes nothing. A `/` starts a regex
# literal where a value cannot end (after an operator, `(`, `,`, `{`, `}`, `;`, a keyword such as `return`),
# else it divides: right for this code, though `x++ / 2` or `if (a) /re/` would fool it.
JS_CONTROL_WORDS = {"if", "for", "while", "switch", "catch", "with"}  # `word (...) {`: a block, no method
JS_WORDS_BEFORE_A_VALUE = {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw",
                           "case", "do", "else", "yield", "await"}
JS_PUNCTUATION_BEFORE_A_VALUE = set("(,=:[!&|?{};+-*%<>~^")


def _js_files() -> list[Path]:
    return sorted(p for p in STATIC.rglob("*.js") if not p.is_relative_to(VENDORED))


def _skip_quoted(text: str, i: int, quote: str) -> int:
    """The index after the string literal opening at text[i]."""
    i += 1
    while i < len(text) and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _skip_regex(text: str, i: int) -> int:
    """The index after the regex literal opening at text[i], flags included (a `/` in a [...] is text)."""
    i, in_class = i + 1, False
    while i < len(text) and (in_class or text[i] != "/"):
        if text[i] == "\\":
            i += 1
        elif text[i] in "[]":
            in_class = text[i] == "["
        i += 1
    i += 1
    while i < len(text) and (text[i].isalnum()):
        i += 1
    return i


def _skip_template_text(text: str, i: int) -> tuple[int, bool]:
    """From inside a template literal at text[i]: the index after its closing backtick (False), or after the
    `${` opening a placeholder (True)."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i + 1, False
        elif text.startswith("${", i):
            return i + 2, True
        else:
            i += 1
    return i, False


def _skip_comment(text: str, i: int) -> int:
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    end = text.find("*/", i + 2)
    return len(text) if end < 0 else end + 2


def _js_tokens(text: str) -> list[tuple[str, int]]:
    """The code's words and punctuation (`=>` one token), each with its line; what is no code is skipped."""
    tokens: list[tuple[str, int]] = []
    braces: list[str] = []  # "{" a brace, "${" a template literal's placeholder
    i = 0
    while i < len(text):
        c, start = text[i], i
        before = tokens[-1][0] if tokens else None
        value_may_start = before is None or before in JS_PUNCTUATION_BEFORE_A_VALUE | JS_WORDS_BEFORE_A_VALUE
        if c.isspace():
            i += 1
        elif text.startswith("//", i) or text.startswith("/*", i):
            i = _skip_comment(text, i)
        elif c in "'\"":
            i = _skip_quoted(text, i, c)
        elif c == "`" or (c == "}" and braces and braces[-1] == "${"):
            if c == "}":
                braces.pop()
            i, placeholder = _skip_template_text(text, i + 1)
            if placeholder:
                braces.append("${")
            else:
                tokens.append(("`", text.count("\n", 0, i) + 1))  # a value: a `/` after it divides
        elif c == "/" and value_may_start:
            i = _skip_regex(text, i)
        elif c.isalnum() or c in "_$":
            while i < len(text) and (text[i].isalnum() or text[i] in "_$"):
                i += 1
            tokens.append((text[start:i], text.count("\n", 0, start) + 1))
        else:
            i += 2 if text.startswith("=>", i) else 1
            if c == "{":
                braces.append("{")
            elif c == "}" and braces:
                braces.pop()
            tokens.append((text[start:i], text.count("\n", 0, start) + 1))
    return tokens


def _matching(words: list[str], opening: str, closing: str) -> dict[int, int]:
    """Each bracket's index -> its partner's index, both ways."""
    pairs, stack = {}, []
    for k, value in enumerate(words):
        if value == opening:
            stack.append(k)
        elif value == closing and stack:
            pairs[k] = stack.pop()
            pairs[pairs[k]] = k
    return pairs


def _js_function_start(words: list[str], parens: dict[int, int], k: int):
    """(The index of the word where the function whose body opens at word k starts, its name), or None if that
    bracket opens no function's body (a block, an object, a class)."""
    if k > 0 and words[k - 1] == "=>":
        start = parens.get(k - 2, k - 2) if words[k - 2] == ")" else k - 2  # (params) => or param =>
    elif k > 0 and words[k - 1] == ")" and k - 1 in parens and parens[k - 1] > 0:
        start = parens[k - 1] - 1  # the word before the parameters: `function`, a name, or a control word
        if words[start] in JS_CONTROL_WORDS or not re.fullmatch(r"[\w$]+", words[start]):
            return None
        if words[start] != "function" and start > 0 and words[start - 1] == "function":
            return start - 1, words[start]  # function name(...) {
        if words[start] != "function":
            return start, words[start]  # a method: name(...) {
    else:
        return None
    if start > 0 and words[start - 1] == "async":
        start -= 1
    named = start > 1 and words[start - 1] in ("=", ":") and re.fullmatch(r"[\w$]+", words[start - 2])
    return start, words[start - 2] if named else "(anonymous)"


def _js_functions(text: str) -> list[tuple[str, int, int]]:
    """Every function in JS `text` (declarations, expressions, methods, arrows): (name, first line, lines)."""
    tokens = _js_tokens(text)
    words = [value for value, _ in tokens]
    parens, braces = _matching(words, "(", ")"), _matching(words, "{", "}")
    found = []
    for k, value in enumerate(words):
        if value == "(" and k in parens and k > 0 and words[k - 1] == "=>":
            start, end = _js_function_start(words, parens, k), parens[k]  # an arrow's (expression)
        elif value == "{" and k in braces:
            start, end = _js_function_start(words, parens, k), braces[k]
        else:
            continue
        if start is not None:
            found.append((start[1], tokens[start[0]][1], tokens[end][1] - tokens[start[0]][1] + 1))
    return found


def js_violations(path: Path, name: str) -> list[str]:
    """What in the JS file breaks a limit (`name`: its path from the repository root)."""
    text = path.read_text(encoding="utf-8")
    found = []
    lines = len(text.splitlines())
    if lines > MAX_FILE_LINES:
        found.append(f"{name} has {lines} lines (at most {MAX_FILE_LINES})")
    for function, line, length in _js_functions(text):
        if length > MAX_FUNCTION_LINES:
            found.append(f"{name}:{function} (line {line}) has {length} lines (at most {MAX_FUNCTION_LINES})")
    return found


@pytest.mark.parametrize("path", _js_files(), ids=_name)
def test_javascript_functions_and_files_stay_small(path):
    found = js_violations(path, _name(path))
    assert not found, "; ".join(found) + ": split it"


def test_the_javascript_is_checked():
    assert ROOT / "static" / "js" / "app.js" in _js_files()
    assert not any(p.is_relative_to(VENDORED) for p in _js_files())


# Braces in strings, template literals (their text, and code in their placeholders), comments and regex
# literals, and a `/` that divides: a lexer taking any of them for code would measure these functions wrong.
TRICKY_JS = r"""const open = "{ not a brace", close = '} nor this \' }';
// a comment with } and {
/* a block comment: function () { */
function tricky(a) {
  var re = /[}{]\/*/g, half = a / 2 / 1;
  var t = `template ${ a ? `nested ${ "}" }` : { b: 1 }.b } text } {`;
  return [re, t, half, "\"}"];
}
var arrow = (x) => {
  return x;
};
class Box {
  method(y) {
    if (y) { return { y: y }; }
    return function () { return `}`; };
  }
}
const later = async (z) => (
  z + 1
);
"""


def test_the_javascript_lexer_measures_functions_past_strings_comments_and_regexes():
    assert _js_functions(TRICKY_JS) == [("tricky", 4, 5), ("arrow", 9, 3), ("method", 13, 4),
                                        ("(anonymous)", 15, 1), ("later", 18, 3)]


def test_the_javascript_checks_would_catch_a_violation(tmp_path):
    bad = tmp_path / "bad.js"
    body = "\n".join(f"  x{i} = {i}; // }}" for i in range(MAX_FUNCTION_LINES - 1))
    short = "\n".join(f"const y{i} = '{{';" for i in range(MAX_FILE_LINES - MAX_FUNCTION_LINES))
    bad.write_text(f"export class A {{\n  long(x) {{\n{body}\n  }}\n}}\n{short}\n", encoding="utf-8")
    found = js_violations(bad, "static/js/bad.js")
    assert found == [
        f"static/js/bad.js has {MAX_FILE_LINES + 3} lines (at most {MAX_FILE_LINES})",
        f"static/js/bad.js:long (line 2) has {MAX_FUNCTION_LINES + 1} lines (at most {MAX_FUNCTION_LINES})",
    ]
