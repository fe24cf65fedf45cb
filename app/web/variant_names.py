"""The names of a comparison's variants (/vs: scenario A and scenario B, vs_page.py): what its tags, tables and
curves call each side. A and B unless the URL names them; one definition for the page, its curve cards
(vs_curves.py) and their polls."""

from __future__ import annotations

from sim_core.quoting import quote

SIDES = ("a", "b")
# The variants' names (what the figures, captions and tags call each side): A and B unless the URL names them,
# a_name=spec off&b_name=spec on.
NAME_PARAMS = {"a": "a_name", "b": "b_name"}
DEFAULT_NAMES = {"a": "A", "b": "B"}
MAX_NAME_CHARS = 24


def parse_names(pairs: list[tuple[str, str]], problems: list) -> tuple[str, str]:
    """The variants' names from a_name and b_name (blank: A, B); a name too long, of characters that do not
    print, or the same as the other's, is a problem naming its parameter."""
    names = []
    for side in SIDES:
        given = [v.strip() for k, v in pairs if k == NAME_PARAMS[side]]
        name = (given[-1] if given else "") or DEFAULT_NAMES[side]
        if len(given) > 1 or len(name) > MAX_NAME_CHARS or not name.isprintable():
            problems.append((NAME_PARAMS[side], f"must be one name of 1 to {MAX_NAME_CHARS} printable characters "
                                                f"(got {quote(name[:40])})"))
        names.append(name)
    if names[0] == names[1]:
        problems.append(("b_name", f"must differ from A's name, {quote(names[0])}: the plots tell the two apart by "
                                   f"their names"))
    return names[0], names[1]
