"""`curator report --cache`'s sums, added up by the database: one SQL `GROUP BY` per route and
conversation over the records' `fields` JSON (`usage`, `cache`), no message read.

Read whole and added up in Python, a store of 100,000 records took minutes (every record's
messages resolved for a few numbers). Each group's sums follow `proxy.cli.report_cache.
CacheRow.add` (a test compares both on one store): usage counts only where it is an
integer, a cause's re-billed tokens and dollars where they are numbers (a cause no record
of the group names is NULL, so absent from the row); summarizer records are left out.

The conversation is the record's `conversation` field. A record naming none (written before
records named it) is given back whole, for its key to be derived from its first messages as
the viewer derives it (`CacheSums.unnamed`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString, Protocol, runtime_checkable

from proxy.observability.usage.attribution import SPLIT

CacheGroup = tuple[Any, ...]
"""route, conversation, first time (epoch s), requests, input, cached and written tokens,
then re-billed tokens by cause in `SPLIT` order (None: no record names the cause), then
re-billed dollars likewise."""


@dataclass(frozen=True, slots=True)
class CacheSums:
    """The groups the database added up, and the records naming no conversation."""

    groups: list[CacheGroup]
    unnamed: Iterator[dict[str, Any]]


@runtime_checkable
class CacheSummed(Protocol):
    """A store that adds `curator report --cache`'s figures up itself."""

    def cache_sums(self, since: float, until: float | None) -> CacheSums:
        """The sums per route and conversation of the records since <= time < until."""
        ...


def _sqlite_sums() -> str:
    def whole(path: str) -> str:
        integer = f"json_type(f, '{path}') = 'integer'"
        return f"CASE WHEN {integer} THEN json_extract(f, '{path}') ELSE 0 END"

    def cause(path: str, cast: str) -> str:
        number = f"json_type(f, '{path}') IN ('integer', 'real')"
        return f"sum(CASE WHEN {number} THEN CAST(json_extract(f, '{path}') AS {cast}) END)"

    return ", ".join(
        [
            f"sum({whole('$.usage.input')})",
            f"sum({whole('$.usage.cached')})",
            f"sum({whole('$.usage.cache_write')} + {whole('$.usage.cache_write_1h')})",
            *(cause(f"$.cache.rebilled.{c}", "INTEGER") for c in SPLIT),
            *(cause(f"$.cache.rebilled_usd.{c}", "REAL") for c in SPLIT),
        ]
    )


_NAMED_SQLITE = (
    "CASE WHEN json_type(f, '$.conversation') = 'text' AND json_extract(f, '$.conversation') != ''"
    " THEN json_extract(f, '$.conversation') END"
)
_SQLITE_GROUPS = f"""
SELECT coalesce(nullif(route, ''), '-'), conversation, min(time), count(*), {_sqlite_sums()}
FROM (SELECT time, route, f, {_NAMED_SQLITE} AS conversation
      FROM (SELECT time, route, CAST(fields AS TEXT) AS f FROM records
            WHERE time >= ? AND time < ? AND kind != 'summarizer'))
WHERE conversation IS NOT NULL
GROUP BY 1, 2
"""
_SQLITE_UNNAMED = f"""
SELECT fields, original, curated FROM (
  SELECT seq, time, fields, original, curated, CAST(fields AS TEXT) AS f FROM records
  WHERE time >= ? AND time < ? AND kind != 'summarizer')
WHERE {_NAMED_SQLITE} IS NULL ORDER BY time, seq
"""

Full = Callable[[Any, Any, Any], dict[str, Any]]
"""A reader's (fields, original, curated) -> the full record."""


def sqlite_cache_sums(
    conn: sqlite3.Connection, since: float, until: float | None, full: Full
) -> CacheSums:
    end = float("inf") if until is None else until
    groups = [typed(row) for row in conn.execute(_SQLITE_GROUPS, (since, end))]
    unnamed = (full(*row) for row in conn.execute(_SQLITE_UNNAMED, (since, end)))
    return CacheSums(groups, unnamed)


def _pg_int(path: str) -> str:
    """An integer (a JSON number without a fraction) at `path`, else 0: `CacheRow`'s `_int`."""
    at = f"j #> '{{{path}}}'"
    integer = f"jsonb_typeof({at}) = 'number' AND scale(({at})::numeric) = 0"
    return f"CASE WHEN {integer} THEN ({at})::numeric ELSE 0 END"


def _pg_cause(path: str, tokens: bool) -> str:
    at = f"j #> '{{{path}}}'"
    value = f"trunc(({at})::numeric)" if tokens else f"({at})::float8"
    return f"sum(CASE WHEN jsonb_typeof({at}) = 'number' THEN {value} END)"


_PG_SUMS = ", ".join(
    [
        f"sum({_pg_int('usage,input')})",
        f"sum({_pg_int('usage,cached')})",
        f"sum({_pg_int('usage,cache_write')} + {_pg_int('usage,cache_write_1h')})",
        *(_pg_cause(f"cache,rebilled,{c}", True) for c in SPLIT),
        *(_pg_cause(f"cache,rebilled_usd,{c}", False) for c in SPLIT),
    ]
)
_PG_NAMED = (
    "CASE WHEN jsonb_typeof(j -> 'conversation') = 'string' AND j ->> 'conversation' <> ''"
    " THEN j ->> 'conversation' END"
)
# Each record's fields are parsed once (OFFSET 0 keeps the planner from parsing per use);
# jsonb refuses the escape \u0000, which becomes \ufffd first (six characters for six).
_PG_PARSED = (
    "SELECT time, uid, route, fields, original, curated, "
    "replace(convert_from(fields, 'UTF8'), '\\u0000', '\\ufffd')::jsonb AS j "
    "FROM audit_records WHERE time >= %s AND time < %s AND kind <> 'summarizer' OFFSET 0"
)
POSTGRES_CACHE_GROUPS: LiteralString = f"""
SELECT coalesce(nullif(route, ''), '-'), {_PG_NAMED}, min(time), count(*), {_PG_SUMS}
FROM ({_PG_PARSED}) AS r WHERE {_PG_NAMED} IS NOT NULL
GROUP BY 1, 2
"""
POSTGRES_CACHE_UNNAMED: LiteralString = f"""
SELECT fields, original, curated FROM ({_PG_PARSED}) AS r WHERE {_PG_NAMED} IS NULL
ORDER BY time, uid
"""

Rows = Callable[[LiteralString, Sequence[Any]], list[tuple[Any, ...]]]


def postgres_cache_sums(rows: Rows, since: float, until: float | None, full: Full) -> CacheSums:
    end = float("inf") if until is None else until
    groups = [typed(row) for row in rows(POSTGRES_CACHE_GROUPS, (since, end))]
    unnamed = (full(*row) for row in rows(POSTGRES_CACHE_UNNAMED, (since, end)))
    return CacheSums(groups, unnamed)


def typed(row: Sequence[Any]) -> CacheGroup:
    """A group's values as Python's: names as text, counts as int, dollars as float."""
    n = len(SPLIT)
    names = (str(row[0]), str(row[1]), float(row[2]))
    counts = tuple(int(v or 0) for v in row[3:7])
    tokens = tuple(None if v is None else int(v) for v in row[7 : 7 + n])
    dollars = tuple(None if v is None else float(v) for v in row[7 + n : 7 + 2 * n])
    return (*names, *counts, *tokens, *dollars)
