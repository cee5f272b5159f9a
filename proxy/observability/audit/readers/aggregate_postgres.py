"""`curator report`'s totals on PostgreSQL, added up by the database: the GROUP BY of
`readers.aggregate` (SQLite's) in PostgreSQL's JSON terms, the same sums under the same
rules (`proxy.cli.report.Row.add`; a test compares all three on one store).

Each record's `fields` are parsed once, as `jsonb` (`OFFSET 0` keeps the planner from
pasting the parse into each of its ~40 uses: that took 255 s for a million records).
jsonb refuses the escape `\\u0000` (a NUL a client sent may sit in a response text): it
becomes `\\ufffd` first, a swap of six characters for six that keeps the JSON valid wherever
it occurs (after an escaped backslash too), and touches no number the sums read.
"""

from __future__ import annotations

from typing import LiteralString

_J = "j"


def _at(*path: str) -> str:
    return f"{_J} #> '{{{','.join(path)}}}'"


def _text(*path: str) -> str:
    return f"{_J} #>> '{{{','.join(path)}}}'"


def _int(*path: str) -> str:
    """A JSON integer (not a float, not a bool) at `path`, else 0: `report._int` (jsonb
    keeps a number's scale: `3.0` has one digit after the point, so it is no integer)."""
    number = f"jsonb_typeof({_at(*path)}) = 'number'"
    return (
        f"CASE WHEN {number} AND scale(({_at(*path)})::numeric) = 0 "
        f"THEN ({_at(*path)})::numeric ELSE 0 END"
    )


def _num(*path: str) -> str:
    """A JSON number at `path`, else 0.0: `report._float`."""
    number = f"jsonb_typeof({_at(*path)}) = 'number'"
    return f"CASE WHEN {number} THEN ({_at(*path)})::float8 ELSE 0.0 END"


_COST = f"jsonb_typeof({_at('cost')}) = 'object'"
_RANGE = ("cost", "uncurated_estimate", "usd_range")
_RANGED = f"jsonb_typeof({_at(*_RANGE)}) = 'array' AND jsonb_array_length({_at(*_RANGE)}) = 2"
_TRUTHY = f"""CASE jsonb_typeof({_at("rescued")})
      WHEN 'boolean' THEN {_text("rescued")} = 'true'
      WHEN 'number' THEN ({_text("rescued")})::numeric <> 0
      WHEN 'string' THEN {_text("rescued")} <> ''
      WHEN 'array' THEN jsonb_array_length({_at("rescued")}) > 0
      WHEN 'object' THEN {_at("rescued")} <> '{{}}'::jsonb
      ELSE false END"""
_TOKENS_AFTER = (
    f"CASE WHEN {_J} ? 'tokens_after' THEN {_int('tokens_after')} ELSE {_int('tokens_before')} END"
)
_SKIPPED = f"coalesce(jsonb_typeof({_at('skip_reason')}) <> 'null', false)"
_SUMS = (
    (_int("tokens_before"), "rep_before"),
    (_TOKENS_AFTER, "rep_after"),
    (_int("usage", "input"), "rep_input"),
    (_int("usage", "cached"), "rep_cached"),
    (f"{_int('usage', 'cache_write')} + {_int('usage', 'cache_write_1h')}", "rep_cache_write"),
    (_int("usage", "output"), "rep_output"),
    (f"CASE WHEN {_COST} THEN {_num('cost', 'actual_usd')} END", "rep_actual_usd"),
    (f"CASE WHEN {_COST} THEN {_num('cost', 'uncurated_usd')} END", "rep_uncurated_usd"),
    (f"CASE WHEN ({_TRUTHY}) THEN 1 ELSE 0 END", "rep_rescued"),
    (f"CASE WHEN {_SKIPPED} THEN 1 ELSE 0 END", "rep_skipped"),
    (f"CASE WHEN {_COST} AND {_RANGED} THEN 1 ELSE 0 END", "rep_estimated"),
    (
        f"CASE WHEN {_COST} THEN CASE WHEN {_RANGED} THEN {_num(*_RANGE, '0')} "
        f"ELSE {_num('cost', 'uncurated_usd')} END END",
        "rep_low_usd",
    ),
    (
        f"CASE WHEN {_COST} THEN CASE WHEN {_RANGED} THEN {_num(*_RANGE, '1')} "
        f"ELSE {_num('cost', 'uncurated_usd')} END END",
        "rep_high_usd",
    ),
)
"""Each of `aggregate.GroupRow`'s sums after the count: from the JSON, and its column."""
_PARSED = "replace(convert_from(fields, 'UTF8'), '\\u0000', '\\ufffd')::jsonb"
_STATEMENT = """
SELECT coalesce(nullif(route, ''), '-'), coalesce(nullif(policy, ''), '-'),
  coalesce(nullif(model, ''), '-'),
  to_char(to_timestamp(floor(time / 86400) * 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
  count(*), {sums}
FROM (SELECT time, route, policy, model, {parsed} AS {j}
      FROM audit_records WHERE time >= %s AND time < %s AND kind <> 'summarizer'{unfilled}
      OFFSET 0) AS r
GROUP BY 1, 2, 3, floor(time / 86400)
"""
_JSON_SUMS = ", ".join(f"sum({json})" for json, _ in _SUMS)
POSTGRES_GROUPS: LiteralString = _STATEMENT.format(
    sums=_JSON_SUMS, parsed=_PARSED, j=_J, unfilled=""
)
"""The statement for a store before the report columns (schema 1): parameters since and
until (epoch seconds); rows as `aggregate.GroupRow` once `aggregate.typed_row` has typed them."""
_FILLED = f"""
SELECT coalesce(nullif(route, ''), '-'), coalesce(nullif(policy, ''), '-'),
  coalesce(nullif(model, ''), '-'),
  to_char(to_timestamp(rep_day * 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
  count(*), {", ".join(f"sum({column})" for _, column in _SUMS)}
FROM audit_records
WHERE rep_day IS NOT NULL AND time >= %s AND time < %s AND kind <> 'summarizer'
GROUP BY rep_day, route, policy, model
"""
POSTGRES_COLUMN_GROUPS: LiteralString = (
    _FILLED
    + "UNION ALL"
    + _STATEMENT.format(sums=_JSON_SUMS, parsed=_PARSED, j=_J, unfilled=" AND rep_day IS NULL")
)
"""`POSTGRES_GROUPS` from the report columns (`sinks.report_columns`), grouped by their
columns (so the planner, knowing how few groups, hashes them in a parallel scan: ~1 s a
million), and the records not filled yet (NULL `rep_day`) from their JSON, as before; in
one statement, so one snapshot (a record filled meanwhile is counted once). Parameters
since and until, twice; a group may come in two rows (`aggregate_columns.merged`)."""
