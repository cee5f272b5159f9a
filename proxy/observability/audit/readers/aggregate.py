"""`curator report`'s totals, added up by the database: one SQL `GROUP BY` over the records'
columns and their `fields` JSON, no message read, no record brought back to Python. Since
the report columns (schema 5), this reads only the records not filled yet; the others are
added up from their columns (`aggregate_columns`).

Before, the report read every record whole (its messages resolved) and added them up in
Python: a 420-record, 200-turn agent store took over a minute. Each group's sums here follow
`proxy.cli.report.Row.add` (a test compares the two on one store): tokens, usage and cost
count only where they are numbers; `actual_usd` and `uncurated_usd` are NULL for a group with
no `cost` at all; summarizer records are left out.

SQLite here; PostgreSQL's statement, the same sums, is `readers.aggregate_postgres`. A JSONL
file is added up in Python (`report.grouped`).

A group is `(route, policy, model, day)` with a missing name as "-" and the day in UTC, the
tuple `GroupRow`'s fields in order.
"""

from __future__ import annotations

import sqlite3
from typing import Any

GroupRow = tuple[Any, ...]
"""route, policy, model, day, requests, tokens_before, tokens_after, input_tokens,
cached_tokens, cache_write_tokens, output_tokens, actual_usd, uncurated_usd, rescues, skips,
estimated, uncurated_low_usd, uncurated_high_usd: `report.Row`'s fields in order."""

_RANGED = (
    "json_type(f, '$.cost.uncurated_estimate.usd_range') = 'array' "
    "AND json_array_length(f, '$.cost.uncurated_estimate.usd_range') = 2"
)
_END = (
    "CASE WHEN json_type(f, '$.cost.uncurated_estimate.usd_range[{i}]') IN ('integer', 'real') "
    "THEN json_extract(f, '$.cost.uncurated_estimate.usd_range[{i}]') ELSE 0.0 END"
)
_FIGURE = (
    "CASE WHEN json_type(f, '$.cost.uncurated_usd') IN ('integer', 'real') "
    "THEN json_extract(f, '$.cost.uncurated_usd') ELSE 0.0 END"
)
_TEMPLATE = """
SELECT coalesce(nullif(route, ''), '-'), coalesce(nullif(policy, ''), '-'),
  coalesce(nullif(model, ''), '-'),
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
  sum(CASE WHEN json_type(f, '$.usage.cache_write') = 'integer'
      THEN json_extract(f, '$.usage.cache_write') ELSE 0 END
    + CASE WHEN json_type(f, '$.usage.cache_write_1h') = 'integer'
      THEN json_extract(f, '$.usage.cache_write_1h') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.usage.output') = 'integer'
      THEN json_extract(f, '$.usage.output') ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN json_type(f, '$.cost.actual_usd') IN ('integer', 'real')
      THEN json_extract(f, '$.cost.actual_usd') ELSE 0.0 END END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN json_type(f, '$.cost.uncurated_usd') IN ('integer', 'real')
      THEN json_extract(f, '$.cost.uncurated_usd') ELSE 0.0 END END),
  sum(CASE json_type(f, '$.rescued') WHEN 'true' THEN 1
      WHEN 'integer' THEN json_extract(f, '$.rescued') != 0
      WHEN 'real' THEN json_extract(f, '$.rescued') != 0
      WHEN 'text' THEN json_extract(f, '$.rescued') != ''
      WHEN 'array' THEN json_array_length(f, '$.rescued') > 0
      WHEN 'object' THEN json_extract(f, '$.rescued') != '{{}}' ELSE 0 END),
  sum(coalesce(json_type(f, '$.skip_reason') != 'null', 0)),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' AND {ranged} THEN 1 ELSE 0 END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN {ranged} THEN {low} ELSE {figure} END END),
  sum(CASE WHEN json_type(f, '$.cost') = 'object' THEN
      CASE WHEN {ranged} THEN {high} ELSE {figure} END END)
FROM (SELECT time, route, policy, model, CAST(fields AS TEXT) AS f FROM records
      WHERE time >= ? AND time < ? AND kind != 'summarizer'{unfilled})
GROUP BY 1, 2, 3, 4
"""
_ENDS = {"ranged": _RANGED, "low": _END.format(i=0), "high": _END.format(i=1), "figure": _FIGURE}
_SQLITE = _TEMPLATE.format(**_ENDS, unfilled="")
SQLITE_UNFILLED = _TEMPLATE.format(**_ENDS, unfilled=" AND rep_day IS NULL")
"""Only the records whose report columns are not filled (`aggregate_columns`)."""


def sqlite_groups(conn: sqlite3.Connection, since: float, until: float | None) -> list[GroupRow]:
    end = float("inf") if until is None else until
    return [typed_row(r) for r in conn.execute(_SQLITE, (since, end))]


def typed_row(row: tuple[Any, ...]) -> GroupRow:
    """A group's row as the database gave it, typed as `GroupRow` says."""
    names = tuple(str(v) for v in row[:4])
    counts = tuple(int(v or 0) for v in row[4:11])
    money = tuple(None if v is None else float(v) for v in row[11:13])
    flags = tuple(int(v or 0) for v in row[13:16])
    ends = tuple(None if v is None else float(v) for v in row[16:18])
    return (*names, *counts, *money, *flags, *ends)
