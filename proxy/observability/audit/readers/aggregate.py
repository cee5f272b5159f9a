"""`curator report`'s totals, added up by the database: one SQL `GROUP BY` over the records'
columns and their `fields` JSON, no message read, no record brought back to Python.

Before, the report read every record whole (its messages resolved) and added them up in
Python: a 420-record, 200-turn agent store took over a minute. Each group's sums here follow
`proxy.cli.report.Row.add` (a test compares the two on one store): tokens, usage and cost
count only where they are numbers; `actual_usd` and `uncurated_usd` are NULL for a group with
no `cost` at all; summarizer records are left out.

SQLite only for now; other stores are added up in Python (`report.grouped`).

A group is `(route, policy, model, day)` with a missing name as "-" and the day in UTC, the
tuple `GroupRow`'s fields in order.
"""

from __future__ import annotations

import sqlite3
from typing import Any, LiteralString

GroupRow = tuple[
    str, str, str, str, int, int, int, int, int, int, float | None, float | None, int, int
]
"""route, policy, model, day, requests, tokens_before, tokens_after, input_tokens,
cached_tokens, output_tokens, actual_usd, uncurated_usd, rescues, skips."""

_SQLITE: LiteralString = """
SELECT coalesce(route, '-'), coalesce(policy, '-'), coalesce(model, '-'),
  date(time, 'unixepoch'), count(*),
  sum(CASE WHEN json_type(f, '$.tokens_before') = 'integer'
      THEN json_extract(f, '$.tokens_before') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.tokens_after') = 'integer'
      THEN json_extract(f, '$.tokens_after')
      WHEN json_type(f, '$.tokens_after') IS NULL
       AND json_type(f, '$.tokens_before') = 'integer'
      THEN json_extract(f, '$.tokens_before') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.usage.input') = 'integer'
      THEN json_extract(f, '$.usage.input') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.usage.cached') = 'integer'
      THEN json_extract(f, '$.usage.cached') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.usage.output') = 'integer'
      THEN json_extract(f, '$.usage.output') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN json_type(f, '$.cost.actual_usd') IN ('integer', 'real')
      THEN json_extract(f, '$.cost.actual_usd') ELSE 0.0 END END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN json_type(f, '$.cost.uncurated_usd') IN ('integer', 'real')
      THEN json_extract(f, '$.cost.uncurated_usd') ELSE 0.0 END END),
  sum(coalesce(json_type(f, '$.rescued') NOT IN ('null', 'false'), 0)
      AND coalesce(json_extract(f, '$.rescued') NOT IN (0, ''), 1)),
  sum(coalesce(json_type(f, '$.skip_reason') != 'null', 0))
FROM (SELECT time, route, policy, model, CAST(fields AS TEXT) AS f FROM records
      WHERE time >= ? AND time < ? AND kind != 'summarizer')
GROUP BY 1, 2, 3, 4
"""


def sqlite_groups(conn: sqlite3.Connection, since: float, until: float | None) -> list[GroupRow]:
    end = float("inf") if until is None else until
    return [_row(r) for r in conn.execute(_SQLITE, (since, end))]


def _row(row: tuple[Any, ...]) -> GroupRow:
    names = tuple(str(v) for v in row[:4])
    counts = tuple(int(v or 0) for v in row[4:10])
    money = tuple(None if v is None else float(v) for v in row[10:12])
    flags = tuple(int(v or 0) for v in row[12:14])
    out: GroupRow = (*names, *counts, *money, *flags)  # type: ignore[assignment]
    return out
