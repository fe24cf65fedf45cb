"""The prefix cache's hash table (content hash -> id), shared by the GPU block pool (kv_pool.py) and the lower KV
tiers (kv_tiers.py)."""

from __future__ import annotations

from .jit import kernel

NO_HASH = 0  # block hashes are never 0 (see content_hash.block_hashes)


# ----- content hash -> block ids: open addressing, linear probing, backward-shift deletion. A hash may have several
# entries (copies of the same content in different blocks); a lookup finds the one inserted first. -----
@kernel
def _table_find(table, h):
    mask = table.shape[1] - 1
    i = h & mask
    while table[0, i] != NO_HASH:
        if table[0, i] == h:
            return table[1, i]
        i = (i + 1) & mask
    return -1


@kernel
def _table_slot(table, h, b):
    """Where block b's entry under hash h is, or -1."""
    mask = table.shape[1] - 1
    i = h & mask
    while table[0, i] != NO_HASH:
        if table[0, i] == h and table[1, i] == b:
            return i
        i = (i + 1) & mask
    return -1


@kernel
def _table_insert(table, h, b):
    mask = table.shape[1] - 1
    i = h & mask
    while table[0, i] != NO_HASH:
        i = (i + 1) & mask
    table[0, i] = h
    table[1, i] = b


@kernel
def _table_delete(table, h, b):
    """Remove block b's entry under hash h, if there is one (True if there was)."""
    i = _table_slot(table, h, b)
    if i < 0:
        return False
    mask = table.shape[1] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if table[0, j] == NO_HASH:
            break
        home = table[0, j] & mask
        # Move j back into the hole at i unless its home slot lies cyclically in (i, j].
        if (i < j and (home <= i or home > j)) or (i > j and home <= i and home > j):
            table[0, i] = table[0, j]
            table[1, i] = table[1, j]
            i = j
    table[0, i] = NO_HASH
    return True
