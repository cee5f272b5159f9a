"""`curator report`'s totals on SQLite from the report columns (`sinks.report_columns`).

The records' JSON took ~15 s to parse for a million records. The columns are summed from
one covering index (`records_report`, in the GROUP BY's order: no sort, no table row
read); the records not filled yet (written before the columns, until `report_backfill`
reaches them) are added up from their JSON as before (`aggregate.SQLITE_UNFILLED`, through
their own small index), and the two merged by group.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable

from proxy.observability.audit.readers.aggregate import SQLITE_UNFILLED, GroupRow, typed_row

_DAY = 86400
_FAR = 2**62
_FILLED = """
SELECT coalesce(nullif(route, ''), '-'), coalesce(nullif(policy, ''), '-'),
  coalesce(nullif(model, ''), '-'), date(rep_day * 86400, 'unixepoch'), count(*),
  sum(rep_before), sum(rep_after), sum(rep_input), sum(rep_cached), sum(rep_cache_write),
  sum(rep_output), sum(rep_actual_usd), sum(rep_uncurated_usd), sum(rep_rescued),
  sum(rep_skipped), sum(rep_estimated), sum(rep_low_usd), sum(rep_high_usd)
FROM records
WHERE rep_day IS NOT NULL AND kind != 'summarizer'
  AND rep_day >= ? AND rep_day <= ? AND time >= ? AND time < ?
GROUP BY rep_day, route, policy, model
"""
GROUPS = _FILLED + "UNION ALL" + SQLITE_UNFILLED
"""The filled records' sums from their columns (the `WHERE` repeats `records_report`'s, so
SQLite reads only that index), then the others' from their JSON (`records_unreported`), in
one statement, so one snapshot: a record filled meanwhile is counted once. A group may come
in two rows (a name NULL in one and '' in another, or filled and not): `merged`."""


def column_groups(conn: sqlite3.Connection, since: float, until: float | None) -> list[GroupRow]:
    """The report's totals: filled records from their columns, the others from JSON."""
    end = float("inf") if until is None else until
    days = (_day(since, -_FAR), _day(end, _FAR))
    return merged(typed_row(r) for r in conn.execute(GROUPS, (*days, since, end, since, end)))


def _day(when: float, far: int) -> int:
    return math.floor(when / _DAY) if math.isfinite(when) else far


def merged(rows: Iterable[GroupRow]) -> list[GroupRow]:
    """Rows of one group (route, policy, model, day) added together: counts add, and money
    adds where either has any (None is "no cost at all", as in `report.Row`)."""
    groups: dict[GroupRow, list[object]] = {}
    for row in rows:
        found = groups.get(row[:4])
        if found is None:
            groups[row[:4]] = list(row)
            continue
        for i, value in enumerate(row[4:], start=4):
            if value is not None:
                previous = found[i]
                found[i] = value if previous is None else previous + value
    return [tuple(row) for row in groups.values()]
