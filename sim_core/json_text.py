"""JSON text for many records of one shape at once, made column by column in numpy (no Python object per value).

Formatting ~35 numbers for each of 10k requests through dicts and json.dumps takes longer than the two runs an
A/B compares (bench/bench_diff.py); here each column becomes a block of characters in a few array operations, the
blocks and the literal text between them are laid side by side, one row per record, and the padding is dropped:

    text = records([b'{"id":', number_chars(ids, 0), b',"x":', number_chars(x, 9), b"}"], sep=b",")

Numbers are written in fixed point, rounded to `decimals` places with trailing zeros dropped (at least one
fractional digit stays, so a float reads back as a float): `12.5`, `-0.25`, `3.0`; non-finite values as `null`, as
the JSON the rest of the project writes has them. Byte 0 is padding, dropped at the end: JSON text never holds a
raw NUL. A number is made of 4-byte words, one per three digits, each looked up in a table of the 1000 groups
(with a sign, a point or trailing zeros dropped as its place in the number needs): a handful of whole-array
operations per column, where formatting one value at a time costs ~0.3-1 us each.
"""

from __future__ import annotations

import json

import numpy as np

_LARGEST = 9e15  # integer parts below this are exact in a double


def _table(texts) -> np.ndarray:
    """1000 texts of up to 4 ASCII characters -> uint32 words (their bytes in order, 0-padded)."""
    raw = np.zeros((len(texts), 4), np.uint8)
    for i, s in enumerate(texts):
        raw[i, :len(s)] = np.frombuffer(s.encode("ascii"), np.uint8)
    return raw.view(np.uint32).ravel()


_DIGITS = [f"{g:03d}" for g in range(1000)]
# Every way a 3-digit group g is written, kind * 1000 + g in one table: BLANK, a group before a number's first
# (nothing); FULL, one after it (all three digits); LEAD, its first (no leading zeros), with a sign (LEAD + 1);
# TRAIL, the last fractional group (no trailing zeros); POINT, the first fractional group after its point (and
# POINT + 1 when it is the last as well).
BLANK, FULL, LEAD, TRAIL, POINT = 0, 1, 2, 4, 5
_WORDS = _table([""] * 1000 + _DIGITS + [str(g) for g in range(1000)] + ["-" + str(g) for g in range(1000)]
                + [d.rstrip("0") for d in _DIGITS] + ["." + d for d in _DIGITS]
                + ["." + (d.rstrip("0") or "0") for d in _DIGITS])
NULL = _table(["null"])[0]


def _groups(v: np.ndarray, count: int) -> list[np.ndarray]:
    """Non-negative integers -> their `count` 3-digit groups, most significant first (the first takes what is
    left: it is below 1000 where count is enough)."""
    out = []
    for _ in range(count - 1):
        q = v // 1000
        out.append(v - q * 1000)  # cheaper than v % 1000
        v = q
    return [v, *out[::-1]]


def _split(x: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(integer part, fractional part in units of 10**-decimals, whether written with a minus) of each |x|: |x|
    rounded once to a whole number of units, then split (integer division by a constant is cheap in numpy)."""
    mag = np.abs(x)
    scale = 10 ** decimals
    top = mag.max() if len(x) else 0.0
    if top >= _LARGEST:
        raise ValueError(f"a value is too large to write in fixed point: {x[np.argmax(mag)]:g}")
    if top * scale < 9e18:  # the units fit 64 bits
        units = np.rint(mag * scale).astype(np.int64)
        whole = units // scale
        frac = units - whole * scale
    else:  # the integer part apart (exact in a double below _LARGEST), the fraction rounded on its own
        whole = np.floor(mag)
        frac = np.rint((mag - whole) * scale).astype(np.int64)
        carry = frac >= scale  # 0.9999999999 rounds up into the integer part
        whole = whole.astype(np.int64) + carry
        frac[carry] = 0
        units = whole + frac
    if not len(x) or whole.max() < 2 ** 31:  # 32-bit where wide enough: twice the values per vector instruction
        whole, frac = whole.astype(np.int32), frac.astype(np.int32)
    return whole, frac, (x < 0) & (units > 0)  # -0.0, and what rounds to 0, are written 0


def number_chars(x, decimals: int) -> np.ndarray:
    """Numbers (any shape, flattened) -> [value, word] uint32 text (4 ASCII bytes a word, 0 = padding).
    `decimals` = 0 writes integers (no point)."""
    if not 0 <= decimals <= 9:
        raise ValueError(f"decimals: must be from 0 to 9 (got {decimals})")
    x = np.asarray(x, np.float64).ravel()
    finite = np.isfinite(x)
    every = bool(finite.all())
    whole, frac, neg = _split(x if every else np.where(finite, x, 0.0), decimals)
    count = -(-len(str(int(whole.max()))) // 3) if len(x) else 1
    groups = -(-decimals // 3)
    out = np.empty((len(x), count + groups), np.uint32)
    ints = _groups(whole, count)
    lead = np.full(len(x), count - 1, np.int32)  # index of the most significant non-zero group (the last for 0)
    for j in range(count - 2, -1, -1):
        lead[ints[j] > 0] = j
    lead_kind = np.int32(LEAD) + neg
    for j, g in enumerate(ints):
        out[:, j] = _WORDS[np.where(j == lead, lead_kind, (j > lead) * FULL) * 1000 + g]
    if decimals:
        fracs = _groups(frac * 10 ** (3 * groups - decimals) if decimals % 3 else frac, groups)
        last = np.zeros(len(x), np.int32)  # index of the least significant non-zero group (0 for none)
        for j in range(1, groups):
            last[fracs[j] > 0] = j
        out[:, count] = _WORDS[(POINT + (last == 0)) * 1000 + fracs[0]]
        for j in range(1, groups):
            out[:, count + j] = _WORDS[np.where(j == last, TRAIL, (j < last) * FULL) * 1000 + fracs[j]]
    if not every:
        bad = np.flatnonzero(~finite)
        out[bad] = 0
        out[bad, 0] = NULL
    return out


def _words(raw: bytes) -> np.ndarray:
    """Bytes -> uint32 words, 0-padded to a whole word."""
    return np.frombuffer(raw + b"\0" * (-len(raw) % 4), np.uint32)


def string_chars(values) -> np.ndarray:
    """Strings -> [value, word] uint32 text of each as a JSON string (quoted, escaped), 0 = padding."""
    uniq, inverse = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    encoded = [_words(json.dumps(str(u)).encode()) for u in uniq]
    table = np.zeros((max(1, len(uniq)), max([len(e) for e in encoded], default=1)), np.uint32)
    for i, e in enumerate(encoded):
        table[i, :len(e)] = e
    return table[inverse.ravel()]


def records(parts: list, sep: bytes = b",") -> str:
    """Records side by side, joined by `sep`. `parts`, in order, are literal bytes (the same in every record),
    [record, word] blocks (number_chars, string_chars), or (block, j): column j of a [record, column, word] block
    (number_chars of a [record, column] matrix, reshaped), all with one entry per record.

    Every block's words (and the literals, cut into pieces as wide) become rows of one table; each record is then
    a list of rows of it, gathered in one np.take and squeezed of its padding. (Copying each column into a
    [record, character] table instead costs a short numpy loop per record and column: three times as long.)"""
    merged: list = []  # adjacent literals as one: fewer, fuller pieces
    for p in [*parts, sep]:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        else:
            merged.append(p)
    specs = [(p, None) if isinstance(p, bytes) else p if isinstance(p, tuple) else (p[:, None, :], 0)
             for p in merged]
    blocks = {id(b): b for b, j in specs if j is not None}
    n = len(next(iter(blocks.values()))) if blocks else 0
    if any(b.ndim != 3 or len(b) != n for b in blocks.values()):
        raise ValueError("records: every column must have one entry per record")
    if n == 0:
        return ""
    width = max(b.shape[2] for b in blocks.values())
    rows, starts, offset = [], {}, 0  # the table's pieces; where each block starts in it; the next row
    for key, b in blocks.items():
        padded = b.reshape(-1, b.shape[2])
        if b.shape[2] < width:
            padded = np.zeros((len(padded), width), np.uint32)
            padded[:, :b.shape[2]] = b.reshape(-1, b.shape[2])
        starts[key], offset = offset, offset + len(padded)
        rows.append(padded)
    columns = []  # each record's rows of the table, in order: a number (a literal's piece) or an array
    for b, j in specs:
        if j is None:
            words = _words(b)
            lit = np.zeros((-(-len(words) // width), width), np.uint32)
            lit.ravel()[:len(words)] = words
            columns += range(offset, offset + len(lit))
            rows.append(lit)
            offset += len(lit)
        else:
            columns.append(starts[id(b)] + np.arange(n) * b.shape[1] + j)
    index = np.empty((n, len(columns)), np.int64)
    for c, rows_of in enumerate(columns):
        index[:, c] = rows_of
    index = index.ravel()
    text = bytearray(len(index) * width * 4)  # gathered straight into a buffer that can drop its padding
    np.take(np.concatenate(rows), index, axis=0, out=np.frombuffer(text, np.uint32).reshape(len(index), width))
    # bytearray.translate drops the padding faster than a boolean mask over the table
    text = text.translate(None, b"\0")
    del text[len(text) - len(sep):]  # the last record's separator
    return text.decode("ascii")
