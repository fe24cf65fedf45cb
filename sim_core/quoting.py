"""How error messages quote what they were given: escaped and short, so a 5 MB field or a terminal escape
sequence in a trace comes back as a readable snippet, never as itself."""

from __future__ import annotations

QUOTE_CHARS = 80


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` (which escapes every non-printable character of a string) cut to about `limit` characters
    with an ellipsis; a JSON array or object is named rather than printed (it may be huge or deeply nested)."""
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
