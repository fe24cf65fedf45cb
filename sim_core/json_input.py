"""Reading a JSON document a user hands over (a hardware profile, a benchmark result) so that its shape alone
cannot crash the reader: json.loads raises RecursionError on arrays nested ~1000 deep, ValueError (not a
JSONDecodeError) on an integer of 4,300+ digits, and an integer such as 10**400 passes, to raise OverflowError
wherever it meets a float. Here all three are a JSONInputError (a ValueError) or a value no check accepts."""

from __future__ import annotations

import json

# A number written with more characters than this is out of every field's range (as in traces.py).
MAX_NUMBER_CHARS = 100


class JSONInputError(ValueError):
    """Not a JSON document this reader can take: `msg` says why, `lineno` where (None when it cannot say)."""

    def __init__(self, msg: str, lineno: int | None = None):
        super().__init__(msg if lineno is None else f"{msg} at line {lineno}")
        self.msg, self.lineno = msg, lineno


class Unreadable:
    """An integer too long to be in any field's range, kept as its text (which `repr` and error messages show):
    not an int or a float, so every field's check refuses it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _int(text: str) -> int | Unreadable:
    return int(text) if len(text) <= MAX_NUMBER_CHARS else Unreadable(text)


_DECODER = json.JSONDecoder(parse_int=_int)


def loads(text: str) -> object:
    """The document, or JSONInputError: json's own message and line, or nested too deeply."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise JSONInputError(e.msg, e.lineno) from None
    except RecursionError:
        raise JSONInputError("arrays or objects nested too deeply") from None
