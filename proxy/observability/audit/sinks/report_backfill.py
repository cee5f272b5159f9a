"""Filling the report columns (`report_columns`) of records written before them.

The migration that adds the columns only adds them (instant on both stores: no row is
rewritten under its lock). The records already stored are filled afterwards, a batch per
short transaction, by the same `report_values` the sinks use, from each record's stored
`fields`: other writers go on between batches, and a run cut short resumes where it
stopped. Readers are exact all along: a record not filled yet is read from its JSON.

`curator audit migrate` fills them all; the writer fills a bounded number per retention
pass (`SqliteSink.prune`, `PostgresSink.prune`), so a store is filled without anyone
asking, without stalling the writer for long.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from proxy.observability.audit.sinks.report_columns import (
    MONEY,
    REPORT_COLUMNS,
    UNFILLED,
    Values,
    report_values,
)
from proxy.observability.audit.sinks.sqlite_schema import transaction

if TYPE_CHECKING:
    import psycopg

BATCH = 5000
"""Records a transaction fills: ~0.1 s of holding the write lock."""
_SET = ", ".join(f"{c} = ?" for c in REPORT_COLUMNS)
_SQLITE_UPDATE = f"UPDATE records SET {_SET} WHERE seq = ?"
NEXT_UNFILLED = (
    "SELECT seq, time, fields FROM records WHERE rep_day IS NULL "
    "AND (time, seq) > (?, ?) ORDER BY time, seq LIMIT ?"
)
"""The next unfilled records after (time, seq), through `records_unreported`."""
_PG_TYPES = tuple("float8" if c in MONEY else "bigint" for c in REPORT_COLUMNS)
_PG_UPDATE = (
    f"UPDATE audit_records AS r SET ({', '.join(REPORT_COLUMNS)}) = "
    f"({', '.join('v.' + c for c in REPORT_COLUMNS)}) FROM unnest(%b::bytea[], "
    + ", ".join(f"%b::{t}[]" for t in _PG_TYPES)
    + f") AS v (uid, {', '.join(REPORT_COLUMNS)}) WHERE r.uid = v.uid"
)


def stored_values(time: float, fields: bytes | memoryview) -> Values:
    """`report_values` of a stored record (its fields as stored, JSON)."""
    try:
        data = orjson.loads(bytes(fields))
    except orjson.JSONDecodeError:
        return UNFILLED  # the report reads it (and fails on it) as it always did
    return report_values(time, data) if isinstance(data, dict) else UNFILLED


def backfill_sqlite(conn: sqlite3.Connection, limit: int | None = None) -> int:
    """Fill up to `limit` (else all) unfilled records, oldest first; how many were filled.
    They are found through `records_unreported` (only they are in it), so a pass over a
    filled store reads nothing; one left unfilled on purpose (`UNFILLED`) is stepped over."""
    done = 0
    after: tuple[float, int] = (-math.inf, -1)
    while limit is None or done < limit:
        size = BATCH if limit is None else min(BATCH, limit - done)
        with transaction(conn):
            rows = conn.execute(NEXT_UNFILLED, (*after, size)).fetchall()
            conn.executemany(_SQLITE_UPDATE, [(*stored_values(t, f), seq) for seq, t, f in rows])
        done += len(rows)
        if len(rows) < size:
            break
        after = (rows[-1][1], rows[-1][0])
    return done


def backfill_postgres(
    conn: psycopg.Connection[Any], limit: int | None = None, after: bytes = b""
) -> tuple[int, bytes | None]:
    """`backfill_sqlite` on PostgreSQL, in `uid` order from `after`, row locks only: how
    many were filled, and where to go on from (None: the end was reached). No index finds
    the unfilled records (building one would block writers), so the writer remembers where
    it stopped and, once at the end, looks no more (`PostgresSink.prune`)."""
    done = 0
    while limit is None or done < limit:
        size = BATCH if limit is None else min(BATCH, limit - done)
        with conn.transaction():
            rows = conn.execute(
                "SELECT uid, time, fields FROM audit_records WHERE rep_day IS NULL "
                "AND uid > %s ORDER BY uid LIMIT %s",
                (after, size),
            ).fetchall()
            if rows:
                conn.execute(_PG_UPDATE, _columns(rows))
        done += len(rows)
        if len(rows) < size:
            return done, None
        after = bytes(rows[-1][0])
    return done, after


def _columns(rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    values = [(bytes(uid), *stored_values(t, f)) for uid, t, f in rows]
    return [list(column) for column in zip(*values, strict=True)]
