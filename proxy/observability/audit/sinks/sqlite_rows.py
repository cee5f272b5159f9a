"""Multi-row INSERTs for the SQLite audit store, letting the event loop in between them.

Python's sqlite3 lets the GIL go around each SQLite step, but binding a statement's
parameters, and the sink's own Python between statements, hold it: ~0.8 ms in pieces for
a batch of ~30 small records. A request arriving meanwhile waited for each piece, or for
the switch interval: measured at concurrency 1 (5,000 sequential small requests), 41-43 of
the 50 slowest overlapped a batch being written. So the sink hands the GIL over before
each statement and before the commit when a batch holds only small records
(`proxy.priority.let_the_loop_in`: the loop, waiting for it, takes it at once). Three alternating
runs of that harness: p99 added over direct +1.40-1.61 -> +0.98-1.08 ms; p90 +0.06-0.09 ms
worse (the writer's time spread over more requests); flat-out small throughput within the
noise (eighteen alternating rounds). Not for a batch with an agent's turn in it (16
messages or more, `sqlite_refs.CHAIN_MIN_REFS`): its write is in a turn the curation
thread may be waiting for (`proxy.priority.Turns`), and each hand-over stretched it: the
warm 127k-token row +0.08-0.21 ms in four alternating pairs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from proxy.priority import let_the_loop_in

ROWS_PER_STATEMENT = 256
"""Rows a multi-row INSERT takes at most (well under SQLite's 32,766 parameters); a power
of two (`chunk_sizes`)."""


def insert_rows(
    conn: sqlite3.Connection,
    statement: str,
    rows: Sequence[tuple[Any, ...]],
    *,
    hand_over: bool = False,
) -> list[Any]:
    """`statement` (an INSERT with one `VALUES (...)` row) for every row, as multi-row
    INSERTs; the rows it returns (`RETURNING`). The same as `executemany`, but in a few
    steps instead of one a row: Python's sqlite3 lets the GIL go around every step, and
    each time the event loop waits for it back, so one step a row slowed every request.

    The rows go in chunks of a power of two (`chunk_sizes`), so a statement has at most
    9 shapes the connection's statement cache keeps compiled. One shape per batch size
    kept up to 128 compiled statements of up to 256 rows: ~23 MB of a worker's memory
    after a burst of varied batches (measured). With `hand_over`, the GIL is let go
    before each statement (`let_the_loop_in`).
    """
    head, _, tail = statement.partition(" VALUES ")
    one, _, rest = tail.partition(")")
    one += ")"
    returned: list[Any] = []
    start = 0
    for size in chunk_sizes(len(rows)):
        chunk = rows[start : start + size]
        start += size
        values = ", ".join([one] * size)
        sql = f"{head} VALUES {values}{rest}"
        if hand_over:
            let_the_loop_in()
        returned += conn.execute(sql, [v for row in chunk for v in row]).fetchall()
    return returned


def chunk_sizes(total: int) -> list[int]:
    """`total` as chunks of `ROWS_PER_STATEMENT`, then the powers of two of the rest's
    binary form, largest first (300 -> 256, 32, 8, 4)."""
    sizes = [ROWS_PER_STATEMENT] * (total // ROWS_PER_STATEMENT)
    rest = total % ROWS_PER_STATEMENT
    return sizes + [1 << bit for bit in reversed(range(rest.bit_length())) if rest >> bit & 1]
